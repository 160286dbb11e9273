// Hopper leaf ops in the simulator, with the thread mapping of heddle_sm90.cuh:
//   TMA load       one thread issues the tile (values read at the issue, zero outside the tensor);
//                  it lands later as writes of the mbarrier's agent and complete_tx(tile bytes)
//   wgmma          each thread of the MMA role reads what its accumulator fragment depends on --
//                  the A rows and B columns of its elements, row = wg_row0 + 64*fm + 16*(w%4) +
//                  lane/4 + 8*(r/2), col = 8*fn + 2*(lane%4) + r%2 (w: warp within the role) --
//                  asynchronously (retired by wgmma.wait_group); it must follow a wgmma.fence
//   epilogue       registers -> global D, registers -> sC (raw), or sC -> epilogue -> sD, with the
//                  same fragment mapping (warpShift: the epilogue role reads the MMA role's)
//   TMA store      one thread reads sD (async proxy, retired by bulk wait_group.read) and writes
//                  the in-bounds part of the tile to D (sD1, ...: a further output D1, ...: its buffer's role)
//   let            binds a variable for the rest of the thread's block
//   promote        (block scales) acc[i] = (first ? 0 : acc[i]) + tmp[i] * sSA[stage][m - m0] * scale_b[n / 128, kb]
//                  with the fragment's (m, n) and the stage and kb the kernel IR names, then tmp = 0: scale_a is
//                  a checked shared-memory read of the ring slot the TMA filled (a read before the slot's full
//                  wait, or after its release let the next fill land, is a race), scale_b a global read; it must
//                  follow the wgmma.wait_group(0) that retires the interval's wgmma (docs/fp8.md "Block scales
//                  and promotion")
#include <cmath>
#include <sstream>

#include "heddle/verify/cta.h"
#include "heddle/verify/numeric.h"

namespace heddle::verify {

namespace {

struct Frag {
  bool ok = false;
  int FM = 0, FN = 0, rowBase = 0, wq = 0;
  int count() const { return FM * FN * 4; }
  int row(int lane, int idx) const {
    int r = idx % 4, fm = idx / 4 / FN;
    return rowBase + 64 * fm + 16 * wq + lane / 4 + 8 * (r / 2);
  }
  int col(int lane, int idx) const {
    int r = idx % 4, fn = (idx / 4) % FN;
    return 8 * fn + 2 * (lane % 4) + r % 2;
  }
};

Frag fragOf(const kir::Kernel& k, const Thread& t, int warpShift) {
  const auto& tl = k.tile;
  Frag f;
  const int wgRows = tl.coop ? tl.bm / std::max(1, tl.mmaWarpgroups) : tl.bm;
  const int w = t.warp - warpShift - tl.mmaWarpBase, warps = tl.coop ? 4 * tl.mmaWarpgroups : 8;
  if (w < 0 || w >= warps) return f;
  f.ok = true;
  f.FM = wgRows / 64;
  f.FN = tl.bn / 8;
  f.wq = w % 4;
  f.rowBase = tl.coop ? (w / 4) * wgRows : 0;
  return f;
}

int64_t scalar(const SimInputs& in, const std::string& n) {
  auto it = in.scalars.find(n);
  if (it == in.scalars.end()) fail<HeddleError>("simulate: no value for kernel parameter '", n, "'");
  return it->second;
}

}  // namespace

float Cta::asyncRead(Thread& t, uint32_t cell, uint32_t inst, AsyncReadGroup& g, const char* reader) {
  const float v = readCell(cell, t, inst);
  const WriteRec& w = smemW[cell];
  if (w.thread >= 0 && w.thread < T && w.group < 0 &&
      (mbar.fencedAt[cell] == kNever || mbar.fencedAt[cell] > t.vc[w.thread])) {
    rep.add(Finding::AsyncMisuse,
            "proxy|" + std::to_string(insts[w.inst].node->id) + "|" + std::to_string(insts[inst].node->id), [&] {
              return std::string("missing proxy fence: ") + reader + " " + describeInst(inst) + " reads " +
                     describeCell(cell) + " through the async proxy, but " + describeInst(w.inst) +
                     " wrote it through the generic proxy and no fence.proxy.async of that thread, after the "
                     "write, is ordered before the read";
            });
    if (opt.stopAtFirstError) stopped = true;
  }
  mbar.inflight[cell]++;
  mbar.inflightInst[cell] = inst;
  g.cells.push_back(cell);
  g.insts.push_back(inst);
  return v;
}

// One TMA copy into CTA rank `rank` (the issuer's own, or a multicast target): the tile's rows [r0, r1).
static void issueTma(Cta& c, Thread& t, const kir::TileLoad& L, int rank, int r0, int r1) {
  c.curRank = rank;
  const int id = c.mbarId(L.mbar, L.mbarIndex.eval(t.env), L);
  if (rank == t.rank && c.mbarVisible(t, c.mbar.bars[id], L)) c.asyncProxyInitCheck(t, c.mbar.bars[id], L);
  const int64_t stage = evalStage(L.stage, t), iter = L.iter.eval(t.env);
  const int64_t row0 = L.row0.eval(t.env), col0 = L.col0.eval(t.env);
  const int64_t nrows = L.rowsBound.eval(t.env), ncols = L.colsBound.eval(t.env);
  const int64_t bz = t.env.count("batch_idx") ? t.env.at("batch_idx") : c.bz;  // a batch walk: the tile's
  const int64_t ld = scalar(c.in, L.ld), off = L.batchStride.empty() ? 0 : bz * scalar(c.in, L.batchStride);
  auto src = c.in.tensors.find(L.src);
  if (src == c.in.tensors.end()) fail<HeddleError>("simulate: no data for kernel input '", L.src, "'");
  const auto& g = src->second;
  TmaOp op;
  op.bar = id;
  op.inst = c.newInst(L, t, iter, stage);
  op.thread = t.tid;
  op.issuerVc = t.vc;
  op.phase = c.mbar.bars[id].phase;
  const uint32_t base = c.cellOf(L.dst, stage, 0, 0, L);
  c.curRank = t.rank;
  for (int r = r0; r < r1; ++r)
    for (int col = 0; col < L.dst->cols; ++col) {
      const int64_t gr = row0 + r, gc = col0 + col;
      float v = 0.0f;
      if (gr < nrows && gc < ncols) {
        int64_t gi = off + gr * ld + gc;
        v = gi >= 0 && gi < (int64_t)g.size() ? g[gi] : std::nanf("");
      }
      op.cells.push_back(base + (uint32_t)(r * L.dst->cols + col));
      op.vals.push_back(v);
    }
  op.bytes = (int64_t)(r1 - r0) * L.dst->cols * dtypeBytes(L.dst->dtype);
  c.mbar.tma.push_back(std::move(op));
  c.mbar.pending.push_back((int)c.mbar.tma.size() - 1);
}

// A TMA tile load; multicast (kir::TileLoad::multicast): this CTA's rows of the shared tile (rank crank's
// 1/multicast part) land in every CTA of the cluster, completing bytes on each CTA's barrier.
static void issueTma(Cta& c, Thread& t, const kir::TileLoad& L) {
  if (L.multicast <= 1) return issueTma(c, t, L, t.rank, 0, L.dst->rows);
  if (L.multicast > c.ranks)
    fail<HeddleError>("simulate: '", kir::describe(L), "' multicasts to ", L.multicast, " CTAs of a cluster of ",
                      c.ranks);
  const int part = L.dst->rows / L.multicast, me = (int)t.env.at("crank");
  for (int r = 0; r < L.multicast; ++r) issueTma(c, t, L, r, me * part, (me + 1) * part);
}

static void execWgmma(Cta& c, Thread& t, const kir::MmaStep& m) {
  const auto& tl = c.k.tile;
  Frag f = fragOf(c.k, t, 0);
  if (!f.ok) return;
  if (t.h.accTouched) {
    c.rep.add(Finding::AsyncMisuse, "fence|" + std::to_string(m.id), [&] {
      return "wgmma without wgmma.fence: '" + kir::describe(m) + "' (" + threadName(t.tid, c.W) +
             ") accumulates into registers last accessed by " + t.h.accTouchedBy;
    });
    if (c.opt.stopAtFirstError) c.stopped = true;
  }
  const int64_t sa = evalStage(m.stageA, t), sb = evalStage(m.stageB, t), iter = m.iter.eval(t.env);
  const uint32_t inst = c.newInst(m, t, iter, sa);
  const int BK = tl.bk, n = f.count();
  auto& acc = m.acc && m.acc->role == "acctmp" ? t.tmp : t.acc;  // a block-scaled kernel's interval accumulators
  if ((int)acc.size() != n) acc.assign(n, 0.0f);
  std::map<int, std::vector<float>> rowsA, colsB;
  for (int i = 0; i < n; ++i) {
    int r = f.row(t.lane, i), col = f.col(t.lane, i);
    if (!rowsA.count(r)) {
      auto& v = rowsA[r];
      for (int kk = 0; kk < BK; ++kk)
        v.push_back(
            c.asyncRead(t, c.cellOf(m.a, sa, tl.aKMajor ? r : kk, tl.aKMajor ? kk : r, m), inst, t.h.wgOpen, "wgmma"));
    }
    if (!colsB.count(col)) {
      auto& v = colsB[col];
      for (int kk = 0; kk < BK; ++kk)
        v.push_back(c.asyncRead(t, c.cellOf(m.b, sb, tl.bKMajor ? col : kk, tl.bKMajor ? kk : col, m), inst, t.h.wgOpen,
                                "wgmma"));
    }
    const auto& a = rowsA[r];
    const auto& b = colsB[col];
    float s = acc[i];
    for (int kk = 0; kk < BK; ++kk) s += a[kk] * b[kk];
    acc[i] = s;
  }
}

// The scale tensor behind kernel parameter `param` at flat index i (NaN outside it: wrong numbers, reported)
static float scaleAt(Cta& c, const std::string& param, int64_t i, const kir::Node& n) {
  auto it = c.in.tensors.find(param);
  if (it == c.in.tensors.end()) fail<HeddleError>("simulate: no data for scale input '", param, "'");
  if (i < 0 || i >= (int64_t)it->second.size()) {
    c.rep.add(Finding::Mismatch, "oob|" + param, [&] {
      return "out-of-bounds read of " + param + " at element " + std::to_string(i) + " ('" + kir::describe(n) + "')";
    });
    return std::nanf("");
  }
  return it->second[i];
}

static void execPromote(Cta& c, Thread& t, const kir::MmaPromote& p) {
  Frag f = fragOf(c.k, t, 0);
  if (!f.ok) return;
  if (!t.h.wgOpen.cells.empty() || !t.h.wgGroups.empty()) {
    c.rep.add(Finding::AsyncMisuse, "promote|" + std::to_string(p.id), [&] {
      return "'" + kir::describe(p) + "' (" + threadName(t.tid, c.W) +
             ") reads tmp while wgmma groups are in flight (no wgmma.wait_group(0) before it)";
    });
    if (c.opt.stopAtFirstError) c.stopped = true;
  }
  const int n = f.count();
  if ((int)t.acc.size() != n) t.acc.assign(n, 0.0f);
  if ((int)t.tmp.size() != n) t.tmp.assign(n, 0.0f);
  const int64_t M = scalar(c.in, "M"), N = scalar(c.in, "N");
  const int64_t m0 = t.env.at("m0"), n0 = t.env.at("n0");
  const int64_t kb = p.kBlock.eval(t.env), kbs = p.kBlocks.eval(t.env);
  const bool first = p.first.eval(t.env) != 0;
  if (!p.scaleSmem) fail<HeddleError>("simulate: '", kir::describe(p), "' has no scale_a ring slot");
  const int64_t stage = evalStage(p.scaleStage, t);
  const uint32_t inst = c.newInst(p, t, 0, stage);
  for (int i = 0; i < n; ++i) {
    const int lr = f.row(t.lane, i);
    const int64_t row = m0 + lr, col = n0 + f.col(t.lane, i);
    float add = 0.0f;  // rows >= M, columns >= N: tmp holds zeros there and no scale is read (never stored)
    if (row < M && col < N)
      add = t.tmp[i] * c.readCell(c.cellOf(p.scaleSmem, stage, 0, lr, p), t, inst) *
            scaleAt(c, p.scaleB, (col / kScaleBlock) * kbs + kb, p);
    t.acc[i] = (first ? 0.0f : t.acc[i]) + add;
    t.tmp[i] = 0.0f;  // tmp.zero(): the next interval's first wgmma starts from zero (scale-d = 0)
  }
  t.h.accTouched = true;  // the next wgmma into tmp needs its wgmma.fence
  t.h.accTouchedBy = "'" + kir::describe(p) + "'";
}

void Cta::writeGeneric(Thread& t, uint32_t cell, uint32_t inst, float v) {
  writeCell(cell, t, inst, -1);
  smem[cell] = v;
  mbar.fencedAt[cell] = kNever;
  t.h.unfenced.push_back(cell);
}

// Output o (0: D; o >= 1: Kernel::extraOutputs[o-1], at D's index) at (row, col) of the tile's batch.
static void storeD(Cta& c, Thread& t, const kir::Node& e, uint32_t inst, int64_t row, int64_t col, float v, int o = 0) {
  const int64_t ldd = scalar(c.in, "ldd"), bz = t.env.count("batch_idx") ? t.env.at("batch_idx") : c.bz;
  const int64_t bsd = c.in.scalars.count("batch_stride_d") ? c.in.scalars.at("batch_stride_d") : 0;
  const int64_t di = bz * bsd + row * ldd + col, size = c.outElems();
  if (di < 0 || di >= size) {
    c.rep.add(Finding::Mismatch, "oob" + c.outName(o),
              [&] { return "out-of-bounds store to " + c.outName(o) + " at element " + std::to_string(di); });
    return;
  }
  WriteRec& w = c.outW[o * size + di];
  if (w.thread >= 0)
    c.rep.add(Finding::Race, c.outName(o) + "|" + std::to_string(e.id), [&] {
      std::ostringstream os;
      os << "output " << c.outName(o) << "(" << row << ", " << col << ") is written twice: by "
         << threadName(w.thread, c.W) << " of CTA #" << w.group << " and by " << threadName(t.tid, c.W) << " of CTA #"
         << c.ctaIndex << " ('" << kir::describe(e) << "')";
      return os.str();
    });
  w = WriteRec{t.tid, c.ctaIndex, t.vc[t.tid], inst};
  c.out[o * size + di] = v;
}

static void execEpilogue(Cta& c, Thread& t, const kir::EpilogueStore& e) {
  Frag f = fragOf(c.k, t, e.warpShift);
  if (!f.ok) return;
  if (!e.from && (!t.h.wgOpen.cells.empty() || !t.h.wgGroups.empty())) {
    c.rep.add(Finding::AsyncMisuse, "accread|" + std::to_string(e.id), [&] {
      return "'" + kir::describe(e) + "' (" + threadName(t.tid, c.W) +
             ") reads the accumulators while wgmma groups are in flight (no wgmma.wait_group(0) before it)";
    });
    if (c.opt.stopAtFirstError) c.stopped = true;
  }
  const int64_t M = scalar(c.in, "M"), N = scalar(c.in, "N");
  const int64_t m0 = t.env.at("m0"), n0 = t.env.at("n0");
  const int64_t bz = t.env.count("batch_idx") ? t.env.at("batch_idx") : c.bz;
  const int n = f.count();
  if ((int)t.acc.size() != n) t.acc.assign(n, 0.0f);
  const uint32_t inst = c.newInst(e, t, 0, 0);
  for (int i = 0; i < n; ++i) {
    const int lr = f.row(t.lane, i), lc = f.col(t.lane, i);
    const bool chunk = e.colEnd > e.colBegin;  // a column chunk of the tile into `to` at lc - colBegin
    if (chunk && (lc < e.colBegin || lc >= e.colEnd)) continue;
    if (e.raw) {
      c.writeGeneric(t, c.cellOf(e.to, evalStage(e.toStage, t), lr, lc, e), inst, t.acc[i]);
      continue;
    }
    const int64_t row = m0 + lr, col = n0 + lc;
    if (row >= M || col >= N) continue;
    float a = e.from ? c.readCell(c.cellOf(e.from, evalStage(e.fromStage, t), lr, lc, e), t, inst) : t.acc[i];
    std::map<std::string, float> fromSmem;  // TMA-loaded operands: the ring slot's cell, a checked read
    for (auto& op : c.k.epilogue)
      if (op.smem && !fromSmem.count(op.tensorParam))
        fromSmem[op.tensorParam] =
            c.readCell(c.cellOf(op.smem, evalStage(e.operandStage, t), op.smem->rows > 1 ? lr : 0, lc, e), t, inst);
    std::string oob;
    std::vector<float> extras;  // D1, ...: staged into e.toExtra, or stored at D's index
    float v = epilogueValue(c.k, c.in, a, bz, row, col, &oob, &fromSmem, nullptr, &extras);
    if (!oob.empty())
      c.rep.add(Finding::Mismatch, "oob|" + oob, [&] { return "out-of-bounds global read of epilogue input " + oob; });
    if (e.to) {
      if (!e.toExtra.empty() && e.toExtra.size() != extras.size())
        fail<HeddleError>("simulate: '", kir::describe(e), "' stages ", e.toExtra.size(), " further output(s) of ",
                          extras.size());
      const int64_t st = evalStage(e.toStage, t), sc = lc - (chunk ? e.colBegin : 0);
      c.writeGeneric(t, c.cellOf(e.to, st, lr, sc, e), inst, v);
      for (size_t x = 0; x < e.toExtra.size(); ++x)
        c.writeGeneric(t, c.cellOf(e.toExtra[x], st, lr, sc, e), inst, extras[x]);
    } else {
      storeD(c, t, e, inst, row, col, v);
      for (size_t x = 0; x < extras.size(); ++x) storeD(c, t, e, inst, row, col, extras[x], (int)x + 1);
    }
  }
  if (!e.from) {
    t.h.accTouched = true;
    t.h.accTouchedBy = "'" + kir::describe(e) + "'";
  }
}

static void execTmaStore(Cta& c, Thread& t, const kir::TmaStore& s) {
  const int64_t M = scalar(c.in, "M"), N = scalar(c.in, "N");
  // the output the staged buffer holds: role "D", or "D1", ... (passes/tma_store_epilogue.cpp)
  int o = 0;
  for (size_t x = 0; x < c.k.extraOutputs.size(); ++x)
    if (s.src->role == c.k.extraOutputs[x].param) o = (int)x + 1;
  const int64_t row0 = s.row0.eval(t.env), col0 = s.col0.eval(t.env), stage = evalStage(s.stage, t);
  const uint32_t inst = c.newInst(s, t, s.iter.eval(t.env), stage);
  for (int r = 0; r < s.src->rows; ++r)
    for (int col = 0; col < s.src->cols; ++col) {
      if (row0 + r >= M || col0 + col >= N) continue;  // outside D: the store skips it
      float v = c.asyncRead(t, c.cellOf(s.src, stage, r, col, s), inst, t.h.bulkOpen, "tma_store");
      storeD(c, t, s, inst, row0 + r, col0 + col, v, o);
    }
}

bool Cta::execTmaWgmmaLeaf(Thread& t, const kir::Node& n) {
  if (k.tile.mma == MmaKind::Tcgen05 && execTcgen05Leaf(t, n)) return true;  // tcgen05_sim.cpp
  switch (n.kind) {
    case kir::NodeKind::Let: {
      auto& l = static_cast<const kir::Let&>(n);
      t.env[l.var] = l.value.eval(t.env);
      return true;
    }
    case kir::NodeKind::TileLoad:
      if (static_cast<const kir::TileLoad&>(n).kind != LoadKind::TmaLoad) return false;
      issueTma(*this, t, static_cast<const kir::TileLoad&>(n));
      return true;
    case kir::NodeKind::MmaStep:
      if (static_cast<const kir::MmaStep&>(n).kind != MmaKind::Wgmma) return false;
      execWgmma(*this, t, static_cast<const kir::MmaStep&>(n));
      return true;
    case kir::NodeKind::EpilogueStore:
      if (k.tile.mma != MmaKind::Wgmma) return false;
      execEpilogue(*this, t, static_cast<const kir::EpilogueStore&>(n));
      return true;
    case kir::NodeKind::TmaStore: execTmaStore(*this, t, static_cast<const kir::TmaStore&>(n)); return true;
    case kir::NodeKind::MmaPromote: execPromote(*this, t, static_cast<const kir::MmaPromote&>(n)); return true;
    case kir::NodeKind::Alloc: {
      auto& b = *static_cast<const kir::Alloc&>(n).buf;
      if (b.memory != MemoryType::Local || k.tile.mma != MmaKind::Wgmma) return false;
      Frag f = fragOf(k, t, 0);
      (b.role == "acctmp" ? t.tmp : t.acc).assign(f.ok ? f.count() : 0, 0.0f);
      t.h.accTouched = true;
      t.h.accTouchedBy = "zero()";
      return true;
    }
    default: return false;
  }
}

}  // namespace heddle::verify
