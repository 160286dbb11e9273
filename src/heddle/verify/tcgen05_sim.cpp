// tcgen05 (sm_100a) in the simulator: tensor memory as cells of the accumulator buffer (accStages x 128
// lanes x bn columns) under the same happens-before shadow as shared memory, with the tcgen05 ordering
// rules of the PTX memory model (docs/blackwell.md, docs/verification.md), the rules the interpreter's
// hrt_tmem_shadow.cpp models too: PTX ISA 9.7.16.6.1 (alloc / dealloc / commit / fences synchronous, mma /
// ld asynchronous), 9.7.16.6.3 and 9.7.16.11.1 (a thread sync orders asynchronous tcgen05 ops across
// threads only with fence::before_thread_sync on the earlier side and fence::after_thread_sync on the
// later), 9.7.16.6.4.2 / .4.4 (commit -> mbarrier wait -> fence::after -> ld; commit is an implicit
// fence::before); checked against public sm100 kernels (DeepGEMM, FlashMLA) that follow them:
//   tcgen05.alloc      warp-collective (lane 0 acts), synchronous: the CTA's allocation; it writes the
//                      address to tmem_slot and defines every column (a NaN: fresh columns hold no value),
//                      ordinary writes at the thread's clock.
//   tcgen05.dealloc    the allocating warp, the same column count, synchronous: writes every column at the
//                      thread's clock (a later use, or an access not ordered before it, is reported); an
//                      allocation still live when the CTA ends is misuse.
//   tcgen05.mma        one thread: reads its sA / sB slots (ordinary reads at the issue, ordered by the
//                      full wait), writes the 128 x bn accumulator stage (read too unless enable-input-d
//                      is 0) in tensor memory, checked against the thread's tcgen05 view. The write is the
//                      thread's MMA engine's (agent tcAgent) at the ordinal of its next tcgen05.commit:
//                      only that commit's arrival publishes it (the engine's earlier writes are its own:
//                      mma -> mma on one accumulator is a pipelined pair, 9.7.16.6.2).
//   tcgen05.commit     publishes the thread's pending tcgen05.ld reads (implicit fence::before), then one
//                      arrival on the mbarrier carrying the thread's clock and its MMA engine's ordinal
//   tcgen05.ld (the epilogue from tensor memory): thread (warp w, lane l) reads row 32*(w%4) + l of the
//                      stage, checked against its tcgen05 view; the reads are published only by its next
//                      fence::before_thread_sync. A TMA-loaded bias / residual is an ordinary checked
//                      shared-memory read of its ring slot (operandStage) per stored element.
//   fence::after_thread_sync   the thread's tcgen05 view becomes its current clock
//   fence::before_thread_sync  publishes the thread's pending tcgen05.ld reads at its current clock
// So a missing after-fence leaves tcgen05 accesses unordered with what the preceding wait acquired,
// and a missing before-fence leaves them unordered with what the following arrive or barrier releases.
#include <cmath>
#include <limits>
#include <map>

#include "heddle/verify/cta.h"
#include "heddle/verify/numeric.h"

namespace heddle::verify {

namespace {

constexpr uint32_t kUnpublished = 0xFFFFFFF0u;  // the clock of a tcgen05 access no fence has published yet

const kir::Buffer* tmemAcc(const kir::Kernel& k) {
  for (auto& b : k.buffers)
    if (b->role == "acc") return b.get();
  return nullptr;
}

const kir::Buffer* tmemSlotBuf(const kir::Kernel& k) {
  for (auto& b : k.buffers)
    if (b->role == "tmem") return b.get();
  return nullptr;
}

// Runs f with the thread's clock replaced by its tcgen05 view (own entry current).
template <typename F>
void underTcView(Thread& t, F f) {
  if (t.h.tcView.size() != t.vc.size()) t.h.tcView.assign(t.vc.size(), 0);
  t.h.tcView[t.tid] = t.vc[t.tid];
  std::swap(t.vc, t.h.tcView);
  f();
  std::swap(t.vc, t.h.tcView);
}

}  // namespace

void Cta::publishTcReads(Thread& t) {
  const uint32_t now = t.vc[t.tid];
  for (auto& [cell, inst] : t.h.tcReads) {
    uint64_t& rec = smemR[(size_t)cell * T + t.tid];
    if (rec == (((uint64_t)kUnpublished << 32) | (uint64_t)(inst + 1)))
      rec = ((uint64_t)now << 32) | (uint64_t)(inst + 1);
  }
  t.h.tcReads.clear();
}

bool Cta::execTcgen05Sync(Thread& t, const kir::Sync& s) {
  using K = kir::SyncKind;
  auto misuse = [&](const std::string& key, const std::string& what) {
    rep.add(Finding::AsyncMisuse, key,
            [&] { return "'" + kir::describe(s) + "' (" + threadName(t.tid, W) + "): " + what; });
    if (opt.stopAtFirstError) stopped = true;
  };
  switch (s.sync) {
    case K::TmemAlloc: {
      if (t.lane != 0) return true;  // a warp collective: lane 0 stands for the warp
      if (mbar.tmemLive) misuse("realloc", "allocates tensor memory a second time before the dealloc");
      if (mbar.relinquished) misuse("relinquished", "allocates after tcgen05.relinquish_alloc_permit");
      mbar.tmemLive = mbar.tmemEverAllocated = true;
      mbar.tmemCols = s.arg;
      const kir::Buffer* acc = tmemAcc(k);
      if (acc && (s.arg & (s.arg - 1)) == 0 && s.arg >= 32 && s.arg < k.tile.bn * k.tile.accStages)
        misuse("cols", std::to_string(s.arg) + " columns hold fewer than the " + std::to_string(k.tile.accStages) +
                           " x " + std::to_string(k.tile.bn) + " accumulator columns");
      const uint32_t inst = newInst(s, t, 0, 0);
      const uint32_t slot = cellOf(tmemSlotBuf(k), 0, 0, 0, s);
      writeCell(slot, t, inst, -1);
      smem[slot] = 0.0f;
      if (!acc) return true;
      for (int st = 0; st < k.tile.accStages; ++st)
        for (int r = 0; r < 128; ++r)
          for (int c = 0; c < k.tile.bn; ++c) {
            const uint32_t cell = cellOf(acc, st, r, c, s);
            writeCell(cell, t, inst, -1);
            smem[cell] = std::numeric_limits<float>::quiet_NaN();
          }
      return true;
    }
    case K::TmemRelinquish:
      if (t.lane == 0) mbar.relinquished = true;
      return true;
    case K::TmemDealloc: {
      if (t.lane != 0) return true;
      if (!mbar.tmemLive) {
        misuse("dealloc", "frees tensor memory that is not allocated");
        return true;
      }
      if (s.arg != mbar.tmemCols)
        misuse("dealloccols",
               "frees " + std::to_string(s.arg) + " columns of an allocation of " + std::to_string(mbar.tmemCols));
      const uint32_t inst = newInst(s, t, 0, 0);
      const kir::Buffer* acc = tmemAcc(k);
      readCell(cellOf(tmemSlotBuf(k), 0, 0, 0, s), t, inst);
      if (acc)
        for (int st = 0; st < k.tile.accStages; ++st)
          for (int r = 0; r < 128; ++r)
            for (int c = 0; c < k.tile.bn; ++c) writeCell(cellOf(acc, st, r, c, s), t, inst, -1);
      mbar.tmemLive = false;
      return true;
    }
    case K::TcgenCommit: {
      const int id = mbarId(s.buf, s.index.eval(t.env), s);
      if (!mbarVisible(t, mbar.bars[id], s)) return true;
      asyncProxyInitCheck(t, mbar.bars[id], s);
      publishTcReads(t);  // the implicit fence::before_thread_sync of tcgen05.commit
      std::vector<uint32_t> vc = t.vc;
      vc[tcAgent(t.tid)] = ++t.h.tcCommits;  // what this commit's arrival publishes: the thread's MMAs so far
      mbarArrive(id, vc, &s, t.tid);
      t.vc[t.tid]++;
      return true;
    }
    case K::TcgenFenceAfter: t.h.tcView = t.vc; return true;
    case K::TcgenFenceBefore: publishTcReads(t); return true;
    default: return false;
  }
}

bool Cta::execTcgen05Leaf(Thread& t, const kir::Node& n) {
  const auto& tl = k.tile;
  if (n.kind == kir::NodeKind::MmaStep) {
    auto& m = static_cast<const kir::MmaStep&>(n);
    if (m.kind != MmaKind::Tcgen05) return false;
    const int64_t sa = evalStage(m.stageA, t), sb = evalStage(m.stageB, t), iter = m.iter.eval(t.env);
    const int64_t st = m.accStage.eval(t.env);
    const bool accumulate = m.accumulate.eval(t.env) != 0;
    const uint32_t inst = newInst(m, t, iter, sa);
    if (!mbar.tmemLive) {
      rep.add(Finding::AsyncMisuse, "mmanotmem|" + std::to_string(m.id), [&] {
        return "'" + kir::describe(m) + "' (" + threadName(t.tid, W) + ") writes tensor memory that is not allocated";
      });
      if (opt.stopAtFirstError) stopped = true;
      return true;
    }
    std::vector<float> A((size_t)tl.bm * tl.bk), B((size_t)tl.bk * tl.bn);
    for (int r = 0; r < tl.bm; ++r)
      for (int kk = 0; kk < tl.bk; ++kk)
        A[(size_t)r * tl.bk + kk] = readCell(cellOf(m.a, sa, tl.aKMajor ? r : kk, tl.aKMajor ? kk : r, m), t, inst);
    for (int kk = 0; kk < tl.bk; ++kk)
      for (int c = 0; c < tl.bn; ++c)
        B[(size_t)kk * tl.bn + c] = readCell(cellOf(m.b, sb, tl.bKMajor ? c : kk, tl.bKMajor ? kk : c, m), t, inst);
    const int engine = tcAgent(t.tid);
    const uint32_t ordinal = t.h.tcCommits + 1;  // the thread's next commit publishes this MMA
    underTcView(t, [&] {
      readCell(cellOf(tmemSlotBuf(k), 0, 0, 0, m), t, inst);
      const uint32_t seen = t.vc[engine];
      t.vc[engine] = ordinal;  // its engine's earlier MMAs: a pipelined pair, in issue order
      for (int r = 0; r < tl.bm; ++r)
        for (int c = 0; c < tl.bn; ++c) {
          const uint32_t cell = cellOf(m.acc, st, r, c, m);
          float s = accumulate ? readCell(cell, t, inst) : 0.0f;
          for (int kk = 0; kk < tl.bk; ++kk) s += A[(size_t)r * tl.bk + kk] * B[(size_t)kk * tl.bn + c];
          writeCell(cell, t, inst, -1);
          smemW[cell] = WriteRec{engine, -1, ordinal, inst};
          smem[cell] = s;
        }
      t.vc[engine] = seen;
    });
    return true;
  }
  if (n.kind == kir::NodeKind::EpilogueStore) {
    auto& e = static_cast<const kir::EpilogueStore&>(n);
    if (!e.tmem) return false;
    const int64_t M = in.scalars.at("M"), N = in.scalars.at("N");
    const int64_t m0 = t.env.at("m0"), n0 = t.env.at("n0"), st = evalStage(e.fromStage, t);
    const int lr = 32 * (t.warp % 4) + t.lane;
    const uint32_t inst = newInst(e, t, 0, st);
    // the TMA-store epilogue's chunk (lower/build/staged_store.h): columns [colBegin, colEnd) into slot toStage of
    // e.to at column c - colBegin, every row and column (the TMA store skips those past M and N)
    const bool chunk = e.colEnd > e.colBegin;
    const int c0 = chunk ? e.colBegin : 0, c1 = chunk ? e.colEnd : tl.bn;
    std::vector<std::pair<int, float>> vals;
    underTcView(t, [&] {
      readCell(cellOf(tmemSlotBuf(k), 0, 0, 0, e), t, inst);
      for (int c = c0; c < c1; ++c) {  // tcgen05.ld of the row's columns (out-of-range columns too)
        const uint32_t cell = cellOf(e.acc, st, lr, c, e);
        vals.push_back({c, readCell(cell, t, inst)});
        t.h.tcReads.push_back({cell, inst});
      }
    });
    for (auto& [cell, i] : t.h.tcReads)
      smemR[(size_t)cell * T + t.tid] = ((uint64_t)kUnpublished << 32) | (uint64_t)(i + 1);
    const int64_t row = m0 + lr;
    if (e.to) {
      if (!e.toExtra.empty()) fail<HeddleError>("simulate: '", kir::describe(e), "' stages further outputs");
      const int64_t slot = evalStage(e.toStage, t);
      for (auto& [c, a] : vals)
        if (row >= M || n0 + c >= N) writeGeneric(t, cellOf(e.to, slot, lr, c - c0, e), inst, 0.0f);
    }
    if (row >= M) return true;
    for (auto& [c, a] : vals) {
      const int64_t col = n0 + c;
      if (col >= N) continue;
      std::map<std::string, float> fromSmem;  // a TMA-loaded bias / residual: its ring slot's cell, a checked read
      for (auto& op : k.epilogue)
        if (op.smem && !fromSmem.count(op.tensorParam))
          fromSmem[op.tensorParam] =
              readCell(cellOf(op.smem, evalStage(e.operandStage, t), op.smem->rows > 1 ? lr : 0, (int)c, e), t, inst);
      std::string oob;
      std::vector<float> extras;  // further outputs (D1, ...) at D's index
      const float v = epilogueValue(k, in, a, 0, row, col, &oob, &fromSmem, nullptr, &extras);
      if (!oob.empty())
        rep.add(Finding::Mismatch, "oob|" + oob, [&] { return "out-of-bounds global read of epilogue input " + oob; });
      if (e.to) {
        writeGeneric(t, cellOf(e.to, evalStage(e.toStage, t), lr, c - c0, e), inst, v);
        continue;
      }
      const int64_t di = row * in.scalars.at("ldd") + col, size = outElems();
      if (di < 0 || di >= size) continue;
      for (int o = 0; o <= (int)extras.size(); ++o) {  // D, then D1, ... at the same index
        WriteRec& w = outW[o * size + di];
        if (w.thread >= 0)
          rep.add(Finding::Race, outName(o) + "|" + std::to_string(e.id), [&] {
            return "output " + outName(o) + "(" + std::to_string(row) + ", " + std::to_string(col) +
                   ") is written twice ('" + kir::describe(e) + "')";
          });
        w = WriteRec{t.tid, ctaIndex, t.vc[t.tid], inst};
        out[o * size + di] = o ? extras[o - 1] : v;
      }
    }
    return true;
  }
  return false;
}

void Cta::tcgen05Finish() {
  if (!mbar.tmemLive) return;
  rep.add(Finding::AsyncMisuse, "tmemleak", [&] {
    return "the CTA ends with " + std::to_string(mbar.tmemCols) +
           " tensor-memory columns allocated (no tcgen05.dealloc)";
  });
}

}  // namespace heddle::verify
