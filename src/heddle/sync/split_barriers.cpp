// split_barriers: a block barrier placed by insert_syncs, on a target with split barriers (GFX12),
// becomes a signal as early and a wait as late as the hazard intervals allow.
//
// Before (3-stage ring, prefetch 1: the planner's barrier between the copies and the MMA):
//   main { copy -> sA[(kt+1)%3]; copy -> sB[(kt+1)%3]; block_sync; mma sA[kt%3] x sB[kt%3] }
// After:
//   main { copy -> sA[(kt+1)%3]; copy -> sB[(kt+1)%3]; s_barrier_signal; mma sA[kt%3] x sB[kt%3];
//          s_barrier_wait }
// The MMA of this iteration reads a stage the previous iteration's barrier published, so it may
// run while the other waves arrive: the wait moves below it. The signal releases this thread's
// earlier LDS accesses (a workgroup release fence precedes it in heddle_hip_copy.cuh); the wait
// acquires every other thread's.
//
// Soundness: a move is kept only when afterwards every cross-thread hazard interval of the walked
// traces (the planner's hazard analysis, sync/hazards.h) still contains a block barrier or a
// signal instance followed by its own wait instance (unorderedInterval); otherwise it is undone and
// that end of the pair stays. The check is over dynamic instances, so a statement that consumes
// what an earlier iteration's barrier published may sit between this iteration's signal and wait.
// A sync op, a loop or a branch stops either move, so a vmcnt wait placed with the barrier stays
// before the signal (nothing moves between them: they are inserted adjacent) and the block's barrier
// ops keep their order: signal, wait, signal, ... An LDS DMA the wait moves above is issued after the
// signal, so the barrier orders nothing of it: the interval check counts it that way.
#include "heddle/sync/split_barriers.h"

#include <algorithm>
#include <vector>

namespace heddle::sync {

namespace {

bool movable(const kir::Node& n) {
  switch (n.kind) {
    case kir::NodeKind::For:
    case kir::NodeKind::If:
    case kir::NodeKind::Block:
    case kir::NodeKind::Sync: return false;
    default: return true;
  }
}

struct Pair {
  kir::Block* block;
  const kir::Node *signal, *wait;
};

void splitIn(kir::Block& b, const std::set<const kir::Sync*>& planned, std::vector<Pair>& pairs) {
  for (auto& s : b.stmts) {
    if (s->kind == kir::NodeKind::For) splitIn(static_cast<kir::ForLoop&>(*s).body, planned, pairs);
    if (s->kind == kir::NodeKind::If) {
      splitIn(static_cast<kir::IfThenElse&>(*s).thenBody, planned, pairs);
      splitIn(static_cast<kir::IfThenElse&>(*s).elseBody, planned, pairs);
    }
  }
  for (size_t i = 0; i < b.stmts.size(); ++i) {
    if (b.stmts[i]->kind != kir::NodeKind::Sync) continue;
    auto* bar = static_cast<kir::Sync*>(b.stmts[i].get());
    if (bar->sync != kir::SyncKind::BlockSync || !planned.count(bar)) continue;
    auto sig = std::make_unique<kir::Sync>(kir::SyncKind::BarrierSignal, kir::kWorkgroupBarrier);
    auto wait = std::make_unique<kir::Sync>(kir::SyncKind::BarrierWait, kir::kWorkgroupBarrier);
    sig->reason = wait->reason = bar->reason;
    pairs.push_back({&b, sig.get(), wait.get()});
    b.stmts[i] = std::move(sig);
    b.stmts.insert(b.stmts.begin() + (long)i + 1, std::move(wait));
    ++i;
  }
}

size_t indexOf(const kir::Block& b, const kir::Node* n) {
  for (size_t i = 0; i < b.stmts.size(); ++i)
    if (b.stmts[i].get() == n) return i;
  return b.stmts.size();
}

}  // namespace

void splitBarriers(kir::Kernel& k, const std::set<const kir::Sync*>& planned, const std::function<bool()>& ordered) {
  std::vector<Pair> pairs;
  splitIn(k.body, planned, pairs);
  for (auto& p : pairs) {
    auto& st = p.block->stmts;
    for (size_t w = indexOf(*p.block, p.wait); w + 1 < st.size() && movable(*st[w + 1]); ++w) {
      std::swap(st[w], st[w + 1]);  // the wait goes below the next statement
      if (!ordered()) {
        std::swap(st[w], st[w + 1]);
        break;
      }
    }
    for (size_t s = indexOf(*p.block, p.signal); s > 0 && movable(*st[s - 1]); --s) {
      std::swap(st[s], st[s - 1]);  // the signal goes above the previous statement
      if (!ordered()) {
        std::swap(st[s], st[s - 1]);
        break;
      }
    }
  }
  for (auto& e : k.syncPlan.entries)
    if (e.mechanism.rfind("block barrier", 0) == 0) {
      e.origin.builder += " + split barriers";
      e.mechanism =
          "split barrier (s_barrier_signal as early and s_barrier_wait as late as every hazard interval of "
          "the walked traces allows): " +
          e.mechanism;
    }
}

}  // namespace heddle::sync
