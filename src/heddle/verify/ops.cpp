// Leaf ops of the kernel IR in the simulator: what each thread reads and writes, with the thread
// mapping of the device runtime headers (codegen/device/*.cuh):
//
//   TileLoad       the ROWS x COLS tile is cut into VEC-element chunks in row-major order; chunk
//                  i belongs to thread i % THREADS (heddle_copy.cuh for_each_chunk). Elements past
//                  rowsBound / colsBound are zero-filled. cp.async chunks are issued into the
//                  thread's open group and land later; plain chunks are written at once.
//   MmaStep        warp w = tid / 32 owns rows [wm*WM, +WM) and cols [wn*WN, +WN) of the CTA tile,
//                  wm = w / warpsN, wn = w % warpsN (heddle_mma_sm80.cuh). ldmatrix and mma.sync
//                  are warp-collective, so every lane is modelled as reading the warp's whole A
//                  rows and B columns of the slab; each lane accumulates the elements it owns in
//                  the m16n8 C fragment (row = fm*16 + lane/4 + 8*(r/2), col = fn*8 + 2*(lane%4) + r%2).
//   EpilogueStore  each lane applies the epilogue program to its owned elements and stores those
//                  with row < M && col < N.
//   SmemAccess     (hand-built kernels) element e of the stage belongs to thread (e*K + m) % THREADS
//                  for the m-th of K distinct mapping names: equal names = same thread per element,
//                  different names = different threads. A name ending in "@LO:HI" spreads the
//                  elements over threads LO..HI-1 only (LO + (e*K + m) % (HI - LO)): a role of the
//                  block (e.g. the producer waves) touching the whole stage. Writes store a token naming (node,
//                  iteration); reads compare with the token program order predicts (until a
//                  thread-dependent branch runs: then threads no longer share one program order).
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "heddle/verify/cta.h"
#include "heddle/verify/numeric.h"

namespace heddle::verify {

namespace {

int64_t scalarOf(const SimInputs& in, const std::string& name) {
  if (name.empty()) return 0;
  auto it = in.scalars.find(name);
  if (it == in.scalars.end()) fail<HeddleError>("simulate: no value for kernel parameter '", name, "'");
  return it->second;
}

float token(const kir::Node& n, int64_t iter) { return (float)((n.id + 1) * 4096 + ((iter % 4096) + 4096) % 4096); }

}  // namespace

static void execTileLoad(Cta& c, Thread& t, const kir::TileLoad& L, const kir::TileLoad::Part* part = nullptr);

// A stage filled in parts (matmul group): each part a copy of its box, in order (heddle_copy.cuh copy_part_*).
static void execTileLoadParts(Cta& c, Thread& t, const kir::TileLoad& L) {
  if (L.parts.empty()) return execTileLoad(c, t, L);
  for (auto& p : L.parts) execTileLoad(c, t, L, &p);
}

static void execTileLoad(Cta& c, Thread& t, const kir::TileLoad& L, const kir::TileLoad::Part* part) {
  const int64_t stage = evalStage(L.stage, t), iter = L.iter.eval(t.env);
  const int rows = L.boxRows(), cols = L.boxCols(), vec = L.vec;
  const bool alongRows = part && L.partAxis == 0;
  const int dr0 = alongRows ? part->dstOffset : 0, dc0 = part && !alongRows ? part->dstOffset : 0;
  if (vec <= 0 || vec > 64 || cols % vec)
    fail<HeddleError>("simulate: ", kir::describe(L), ": vec ", vec, " does not divide ", cols);
  const int64_t perRow = cols / vec, nChunks = (int64_t)rows * perRow;
  const int64_t row0 = L.row0.eval(t.env) + (alongRows ? part->srcOffset : 0),
                col0 = L.col0.eval(t.env) + (part && !alongRows ? part->srcOffset : 0);
  const int64_t nrows = L.rowsBound.eval(t.env), ncols = L.colsBound.eval(t.env);
  const std::string& srcName = part ? part->src : L.src;
  const int64_t ld = scalarOf(c.in, part ? part->ld : L.ld),
                off = L.batchStride.empty() ? 0 : c.bz * scalarOf(c.in, L.batchStride);
  auto src = c.in.tensors.find(srcName);
  if (src == c.in.tensors.end()) fail<HeddleError>("simulate: no data for kernel input '", srcName, "'");
  const auto& g = src->second;
  const uint32_t inst = c.newInst(L, t, iter, stage);
  const uint32_t base = c.cellOf(L.dst, stage, 0, 0, L);
  const bool async = L.kind == LoadKind::CpAsync || L.kind == LoadKind::AsyncLds;
  const bool vmcnt = L.kind == LoadKind::AsyncLds;  // each chunk one LDS DMA, its own vmcnt entry
  float vals[64];
  for (int64_t i = t.tid; i < nChunks; i += c.T) {
    const int64_t r = i / perRow, col = (i % perRow) * vec, gr = row0 + r, gc = col0 + col;
    int64_t valid = gr < nrows ? ncols - gc : 0;
    valid = valid < 0 ? 0 : (valid > vec ? vec : valid);
    for (int e = 0; e < vec; ++e) {
      vals[e] = 0.0f;
      if (e >= valid) continue;
      int64_t gi = off + gr * ld + gc + e;
      if (gi < 0 || gi >= (int64_t)g.size()) {
        c.rep.add(Finding::Mismatch, "oob|" + std::to_string(L.id), [&] {
          std::ostringstream os;
          os << "out-of-bounds global read: " << c.describeInst(inst) << " reads " << srcName << "[" << gi << "] of "
             << g.size() << " elements (row " << gr << ", col " << gc + e << ")";
          return os.str();
        });
        vals[e] = std::nanf("");
      } else {
        vals[e] = g[gi];
      }
    }
    const uint32_t cell = base + (uint32_t)((dr0 + r) * L.dst->cols + dc0 + col);
    if (async) {
      for (int e = 0; e < vec; ++e) c.writeCell(cell + e, t, inst, t.openGroup);
      uint32_t idx = (uint32_t)c.chunks.size();
      c.chunks.push_back({cell, (uint32_t)vec, (uint32_t)c.chunkVals.size(), t.tid, t.openGroup, false});
      c.chunkVals.insert(c.chunkVals.end(), vals, vals + vec);
      t.groupChunks[t.openGroup].push_back(idx);
      c.unlanded.push_back(idx);
      if (vmcnt) c.commit(t);
    } else {
      for (int e = 0; e < vec; ++e) {
        c.writeCell(cell + e, t, inst, -1);
        c.smem[cell + e] = vals[e];
      }
    }
  }
}

// The lane's owned accumulator slots, in (fm, fn, r) order: warp-tile-local (row, col).
static void ownedSlot(const kir::Kernel::Tile& tl, int frag, int lane, int idx, int& row, int& col) {
  if (frag) return amdOwnedSlot(tl, frag, lane, idx, row, col);  // verify/amdgcn_sim.cpp
  const int FN = tl.bn / tl.warpsN / 8;
  const int r = idx % 4, fn = (idx / 4) % FN, fm = idx / 4 / FN;
  row = fm * 16 + lane / 4 + 8 * (r / 2);
  col = fn * 8 + 2 * (lane % 4) + r % 2;
}

static int ownedCount(const kir::Kernel::Tile& tl, int frag) {
  if (frag) return amdOwnedCount(tl, frag);
  return (tl.bm / tl.warpsM / 16) * (tl.bn / tl.warpsN / 8) * 4;
}

static void execMma(Cta& c, Thread& t, const kir::MmaStep& m) {
  const auto& tl = c.k.tile;
  if (tl.warpsM <= 0 || tl.warpsN <= 0 || tl.bm <= 0 || tl.bn <= 0 || tl.bk <= 0)
    fail<HeddleError>("simulate: ", kir::describe(m), " in a kernel without matmul tile parameters");
  const int WM = tl.bm / tl.warpsM, WN = tl.bn / tl.warpsN, BK = tl.bk;
  if (t.warp >= tl.warpsM * tl.warpsN) return;  // not an MMA warp
  const int wm = t.warp / tl.warpsN, wn = t.warp % tl.warpsN;
  const int64_t sa = evalStage(m.stageA, t), sb = evalStage(m.stageB, t), iter = m.iter.eval(t.env);
  if (m.a->rows * m.a->cols != tl.bm * BK || m.b->rows * m.b->cols != tl.bn * BK)
    fail<HeddleError>("simulate: ", kir::describe(m), ": operand tiles do not match the ", tl.bm, "x", tl.bn, "x", BK,
                      " tile");
  const uint32_t inst = c.newInst(m, t, iter, sa);
  const uint32_t baseA = c.cellOf(m.a, sa, 0, 0, m), baseB = c.cellOf(m.b, sb, 0, 0, m);
  std::vector<float> av((size_t)WM * BK), bv((size_t)WN * BK);
  for (int i = 0; i < WM; ++i) {
    const int row = wm * WM + i;
    for (int kk = 0; kk < BK; ++kk)
      av[(size_t)i * BK + kk] = c.readCell(baseA + (tl.aKMajor ? row * m.a->cols + kk : kk * m.a->cols + row), t, inst);
  }
  for (int j = 0; j < WN; ++j) {
    const int col = wn * WN + j;
    for (int kk = 0; kk < BK; ++kk)
      bv[(size_t)j * BK + kk] = c.readCell(baseB + (tl.bKMajor ? col * m.b->cols + kk : kk * m.b->cols + col), t, inst);
  }
  const int n = ownedCount(tl, c.opt.mmaFragment);
  if ((int)t.acc.size() != n) t.acc.assign(n, 0.0f);
  for (int s = 0; s < n; ++s) {
    int row, col;
    ownedSlot(tl, c.opt.mmaFragment, t.lane, s, row, col);
    float sum = t.acc[s];
    for (int kk = 0; kk < BK; ++kk) sum += av[(size_t)row * BK + kk] * bv[(size_t)col * BK + kk];
    t.acc[s] = sum;
  }
}

static void execEpilogue(Cta& c, Thread& t, const kir::EpilogueStore& e) {
  const auto& tl = c.k.tile;
  if (t.warp >= tl.warpsM * tl.warpsN) return;
  const int WM = tl.bm / tl.warpsM, WN = tl.bn / tl.warpsN;
  const int wm = t.warp / tl.warpsN, wn = t.warp % tl.warpsN;
  const int64_t M = scalarOf(c.in, "M"), N = scalarOf(c.in, "N"), ldd = scalarOf(c.in, "ldd");
  const int64_t bsd = c.in.scalars.count("batch_stride_d") ? c.in.scalars.at("batch_stride_d") : 0;
  const int n = ownedCount(tl, c.opt.mmaFragment);
  if ((int)t.acc.size() != n) t.acc.assign(n, 0.0f);
  const uint32_t inst = c.newInst(e, t, 0, 0);
  // a matmul group of P members: slots of the warp's first slice (fragment fn < FN / P) are the output
  // elements; member p's value of slot s is slot s + p * (FN / P) * 4 (heddle_mma_sm80.cuh part_col_of)
  const int P = std::max(1, tl.parts), partSlots = (WN / 8 / P) * 4;
  std::vector<float> parts(P);
  for (int s = 0; s < n; ++s) {
    int lr, lc;
    ownedSlot(tl, c.opt.mmaFragment, t.lane, s, lr, lc);
    if (P > 1 && (s / 4) % (WN / 8) >= WN / 8 / P) continue;  // a further member's slot
    // a stream-K segment rebinds m0 / n0
    const int64_t row = t.env.at("m0") + wm * WM + lr, col = t.env.at("n0") + wn * (WN / P) + lc;
    if (row >= M || col >= N) continue;
    for (int p = 0; p < P; ++p) parts[p] = t.acc[s + p * partSlots];
    std::string oob;
    std::vector<float> extras;  // further outputs (D1, ...) at D's index
    float v = epilogueValue(c.k, c.in, t.acc[s], c.batch(), row, col, &oob, nullptr, parts.data(), &extras);
    if (!oob.empty())
      c.rep.add(Finding::Mismatch, "oob|" + oob, [&] {
        return "out-of-bounds global read of epilogue input " + oob + " at output (" + std::to_string(row) + ", " +
               std::to_string(col) + ")";
      });
    const int64_t di = c.batch() * bsd + row * ldd + col, size = c.outElems();
    if (di < 0 || di >= size) {
      c.rep.add(Finding::Mismatch, "oobD", [&] { return "out-of-bounds store to D at element " + std::to_string(di); });
      continue;
    }
    for (int o = 0; o <= (int)extras.size(); ++o) {  // D, then D1, ... at the same index
      WriteRec& w = c.outW[o * size + di];
      if (w.thread >= 0 && (w.group != c.ctaIndex || (w.thread != t.tid && w.clock > t.vc[w.thread])))
        c.rep.add(Finding::Race, c.outName(o) + "|" + std::to_string(e.id), [&] {
          std::ostringstream os;
          os << "WAW race on " << c.outName(o) << "(" << row << ", " << col << "): written by "
             << threadName(w.thread, c.W) << " of CTA #" << w.group << " and by " << threadName(t.tid, c.W)
             << " of CTA #" << c.ctaIndex;
          return os.str();
        });
      w = WriteRec{t.tid, c.ctaIndex, t.vc[t.tid], inst};
      c.out[o * size + di] = o ? extras[o - 1] : v;
    }
  }
}

static void execSmemAccess(Cta& c, Thread& t, const kir::SmemAccess& a) {
  const int64_t stage = evalStage(a.stage, t), iter = a.iter.eval(t.env);
  const uint32_t inst = c.newInst(a, t, iter, stage);
  const uint32_t base = c.cellOf(a.buf, stage, 0, 0, a);
  const int64_t elems = (int64_t)a.buf->rows * a.buf->cols;
  const int64_t K = (int64_t)c.mappings.size(), mi = c.mappings.at(a.mapping);
  int64_t lo = 0, span = c.T;  // "name@LO:HI": the role's threads
  if (auto at = a.mapping.rfind('@'); at != std::string::npos) {
    const auto colon = a.mapping.find(':', at);
    try {
      lo = std::stoll(a.mapping.substr(at + 1, colon - at - 1));
      span = std::stoll(a.mapping.substr(colon + 1)) - lo;
    } catch (const std::exception&) { span = 0; }
    if (colon == std::string::npos || lo < 0 || span <= 0 || lo + span > c.T)
      fail<HeddleError>("simulate: mapping '", a.mapping, "' of ", kir::describe(a),
                        ": the suffix must be @LO:HI with "
                        "0 <= LO < HI <= ",
                        c.T);
  }
  const float tok = token(a, iter);
  auto key = std::make_pair((const kir::Buffer*)a.buf, stage);
  for (int64_t e = 0; e < elems; ++e) {
    if (lo + (e * K + mi) % span != t.tid) continue;
    const uint32_t cell = base + (uint32_t)e;
    if (!a.write) {
      float v = c.readCell(cell, t, inst);
      auto ex = t.expected.find(key);
      if (ex == t.expected.end() || std::isnan(v) || v == ex->second || c.divergent) continue;
      const float want = ex->second;
      c.rep.add(Finding::Mismatch, "tok|" + std::to_string(a.id), [&] {
        auto name = [&](float tk) {
          int id = (int)tk / 4096 - 1, it = (int)tk % 4096;
          auto n = c.byId.find(id);
          return "'" + (n == c.byId.end() ? std::string("?") : kir::describe(*n->second)) + "' of iteration " +
                 std::to_string(it);
        };
        return "wrong data: " + c.describeInst(inst) + " read " + c.describeCell(cell) + " written by " + name(v) +
               ", but program order says it holds the write of " + name(want);
      });
      if (c.opt.stopAtFirstError) c.stopped = true;
    } else if (a.async) {
      c.writeCell(cell, t, inst, t.openGroup);
      uint32_t idx = (uint32_t)c.chunks.size();
      c.chunks.push_back({cell, 1, (uint32_t)c.chunkVals.size(), t.tid, t.openGroup, false});
      c.chunkVals.push_back(tok);
      t.groupChunks[t.openGroup].push_back(idx);
      c.unlanded.push_back(idx);
    } else {
      c.writeCell(cell, t, inst, -1);
      c.smem[cell] = tok;
    }
  }
  if (a.write && a.async && a.vmcnt) c.commit(t);  // an LDS DMA: its own vmcnt entry
  if (a.write) t.expected[key] = tok;
}

void Cta::execLeaf(Thread& t, const kir::Node& n) {
  if (n.kind == kir::NodeKind::EpilogueStore && execPartial(t, static_cast<const kir::EpilogueStore&>(n))) return;
  if (mbar.active && execTmaWgmmaLeaf(t, n)) return;  // Hopper leaves (tma_wgmma_ops.cpp)
  switch (n.kind) {
    case kir::NodeKind::TileLoad: execTileLoadParts(*this, t, static_cast<const kir::TileLoad&>(n)); return;
    case kir::NodeKind::MmaStep: execMma(*this, t, static_cast<const kir::MmaStep&>(n)); return;
    case kir::NodeKind::EpilogueStore: execEpilogue(*this, t, static_cast<const kir::EpilogueStore&>(n)); return;
    case kir::NodeKind::SmemAccess: execSmemAccess(*this, t, static_cast<const kir::SmemAccess&>(n)); return;
    case kir::NodeKind::Alloc: {
      auto& b = *static_cast<const kir::Alloc&>(n).buf;
      if (b.memory == MemoryType::Local && k.tile.warpsM > 0 && k.tile.warpsN > 0)
        t.acc.assign(ownedCount(k.tile, opt.mmaFragment), 0.0f);
      return;
    }
    case kir::NodeKind::Comment: return;
    case kir::NodeKind::Let: {
      auto& l = static_cast<const kir::Let&>(n);
      t.env[l.var] = l.value.eval(t.env);
      return;
    }
    default: fail<HeddleError>("simulate: node '", kir::describe(n), "' is not modelled");
  }
}

}  // namespace heddle::verify
