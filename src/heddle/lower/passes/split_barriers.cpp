// split_barriers: a block barrier placed by insert_syncs, on a target with split barriers (GFX12),
// becomes a signal as early and a wait as late as the hazards it serves allow.
//
// Before (the planner's barrier sits at the earliest point of the hazard interval):
//   write X[0] (copy); block_sync; read Y[0] (mma); read X[0] (mma)       # sync 0: RAW X
// After:
//   write X[0]; s_barrier_signal; read Y[0]; s_barrier_wait; read X[0]
// The signal releases this thread's earlier LDS writes (a workgroup release fence precedes it in
// heddle_hip_sync.cuh); the wait acquires every other thread's. Statements touching none of the
// barrier's buffers may run in between, overlapping the barrier's latency.
//
// Soundness: the barrier instance served hazard (P, C) with P before and C after it in the same
// trace. The signal only moves above statements of its own block that touch none of the served
// buffers (so P, which does, stays above it), the wait only below such statements (so C stays
// below). A sync op, a loop or a branch stops either move, so a vmcnt wait placed with the barrier
// stays before the signal and the block's barrier ops keep their order: signal, wait, signal, ...
#include "heddle/lower/passes/split_barriers.h"

#include <functional>

namespace heddle::passes {

namespace {

bool movable(const kir::Node& n, const std::set<std::string>& bufs) {
  switch (n.kind) {
    case kir::NodeKind::For:
    case kir::NodeKind::If:
    case kir::NodeKind::Block:
    case kir::NodeKind::Sync: return false;
    default: break;
  }
  for (auto& a : kir::accessesOf(n))
    if (bufs.count(a.buf->name)) return false;
  return true;
}

void splitIn(kir::Block& b, const std::map<const kir::Sync*, std::set<std::string>>& served) {
  for (size_t i = 0; i < b.stmts.size(); ++i) {
    auto& n = *b.stmts[i];
    if (n.kind == kir::NodeKind::For) splitIn(static_cast<kir::ForLoop&>(n).body, served);
    if (n.kind == kir::NodeKind::If) {
      splitIn(static_cast<kir::IfThenElse&>(n).thenBody, served);
      splitIn(static_cast<kir::IfThenElse&>(n).elseBody, served);
    }
  }
  for (size_t i = 0; i < b.stmts.size(); ++i) {
    if (b.stmts[i]->kind != kir::NodeKind::Sync) continue;
    auto* bar = static_cast<kir::Sync*>(b.stmts[i].get());
    auto it = served.find(bar);
    if (bar->sync != kir::SyncKind::BlockSync || it == served.end()) continue;
    size_t s = i, w = i;
    while (s > 0 && movable(*b.stmts[s - 1], it->second)) --s;
    while (w + 1 < b.stmts.size() && movable(*b.stmts[w + 1], it->second)) ++w;
    auto sig = std::make_unique<kir::Sync>(kir::SyncKind::BarrierSignal);
    auto wait = std::make_unique<kir::Sync>(kir::SyncKind::BarrierWait);
    sig->reason = wait->reason = bar->reason;
    std::vector<kir::NodePtr> out;
    for (size_t j = 0; j < b.stmts.size(); ++j) {
      if (j == s) out.push_back(std::move(sig));
      if (j != i) out.push_back(std::move(b.stmts[j]));
      if (j == w) out.push_back(std::move(wait));
    }
    b.stmts = std::move(out);
    i = w + 1;  // past the wait (the block grew by one)
  }
}

}  // namespace

void splitBarriers(kir::Kernel& k, const std::map<const kir::Sync*, std::set<std::string>>& served) {
  splitIn(k.body, served);
  for (auto& e : k.syncPlan.entries)
    if (e.mechanism.rfind("block barrier", 0) == 0)
      e.mechanism = "split barrier (s_barrier_signal right after the last producer access, s_barrier_wait right "
                    "before the first consumer access): " + e.mechanism;
}

}  // namespace heddle::passes
