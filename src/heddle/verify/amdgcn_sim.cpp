// The AMD parts of the simulator (docs/verification.md, docs/backends.md):
//
//   LDS DMA + vmcnt   every async_lds chunk (and every async SmemAccess of an AMD lab kernel) is its
//                     own group, committed at its issue (ops.cpp); s_waitcnt vmcnt(N) retires all but
//                     the thread's N newest (sync.cpp: the wait_group machinery). Per thread, not per
//                     wavefront: a lane's own ops are a subset of its wave's, so this retires no more
//                     than the hardware does (the simulator is never more lenient than the GPU).
//   split barriers    s_barrier_signal adds the thread's clock to the barrier's current phase and
//                     lets it run on; s_barrier_wait blocks until every thread has signalled that
//                     phase, then joins the phase's clocks. Phase k of a thread is its k-th signal
//                     and k-th wait, so a fast thread may signal phase k+1 before a slow one waits on
//                     phase k, as on the hardware. A wait with no signal of its own before it, and a
//                     second signal before the wait, are barrier misuse (reported as deadlocks: the
//                     first hangs on the GPU). A thread that ends drops the barrier (the model's
//                     implicit drop, SimOptions::dropOnExit): later phases complete without it.
//                     The release / acquire fences around them: workgroup_fences.cpp.
//   no BackOffBarrier s_barrier / s_barrier_signal reached with LDS DMA of the thread in flight is
//                     reported (LLVM drains the counters there on such targets; the planner places
//                     vmcnt(0) before those barriers).
//   fragments         MmaStep / EpilogueStore ownership of the MFMA (wave64) and WMMA (wave32) 16x16
//                     accumulator tiles of heddle_hip_mma.cuh.
#include <sstream>

#include "heddle/verify/cta.h"

namespace heddle::verify {

void amdOwnedSlot(const kir::Kernel::Tile& tl, int frag, int lane, int idx, int& row, int& col) {
  const int TN = tl.bn / tl.warpsN / 16;
  if (frag == 1) {  // MFMA 16x16x16, wave64: D[4*(lane/16) + r][lane%16]
    const int r = idx % 4, tn = (idx / 4) % TN, tm = idx / 4 / TN;
    row = tm * 16 + 4 * (lane / 16) + r;
    col = tn * 16 + lane % 16;
  } else {  // WMMA 16x16x16 (gfx12), wave32: D[8*(lane/16) + r8][lane%16]
    const int r8 = idx % 8, tn = (idx / 8) % TN, tm = idx / 8 / TN;
    row = tm * 16 + 8 * ((lane / 16) % 2) + r8;
    col = tn * 16 + lane % 16;
  }
}

int amdOwnedCount(const kir::Kernel::Tile& tl, int frag) {
  const int tiles = (tl.bm / tl.warpsM / 16) * (tl.bn / tl.warpsN / 16);
  return tiles * (frag == 1 ? 4 : 8);
}

void Cta::checkBackOff(const Thread& t, const kir::Sync& s) {
  if (t.committed.empty()) return;
  size_t n = t.committed.size();
  rep.add(Finding::AsyncMisuse, "backoff|" + std::to_string(s.id), [&] {
    std::ostringstream os;
    os << threadName(t.tid, W) << " reaches '" << kir::describe(s) << "' (node " << s.id << ", " << where(t)
       << ") with " << n << " LDS DMA op(s) in flight; this target has no BackOffBarrier: vector-memory counters "
       << "must be drained (s_waitcnt vmcnt(0)) before a barrier";
    return os.str();
  });
  if (opt.stopAtFirstError) stopped = true;
}

void Cta::signalBarrier(Thread& t, const kir::Sync& s) {
  if (!opt.backOffBarrier) checkBackOff(t, s);
  if (t.sigCount > t.waitCount) {
    rep.add(Finding::Deadlock, "dsig|" + std::to_string(s.id), [&] {
      std::ostringstream os;
      os << "barrier misuse: " << threadName(t.tid, W) << " signals again at '" << kir::describe(s) << "' (node "
         << s.id << ", " << where(t) << ") before waiting on its previous s_barrier_signal (a double signal)";
      return os.str();
    });
    stopped = true;
    return;
  }
  SplitPhase& ph = splitPhases[t.sigCount++];
  if (ph.clock.empty()) ph.clock.assign(T, 0), ph.xclock.assign(T, 0);
  fencedArrive(t, s, ph.clock, ph.xclock);  // the release fence before the signal (workgroup_fences.cpp)
  t.vc[t.tid]++;                            // what this thread does after its signal is not released by this barrier
  ++ph.signals;
  completeSplitPhases();
}

void Cta::completeSplitPhases() {
  for (auto it = splitPhases.lower_bound(firstOpenSplit); it != splitPhases.end(); ++it) {
    auto& [phase, ph] = *it;
    int needed = T;  // a thread that ended before signalling this phase dropped the barrier
    if (opt.dropOnExit)
      for (auto& u : th) needed -= u.status == Status::Done && u.sigCount <= phase;
    if (ph.signals < needed) return;
    ph.completed = true;
    firstOpenSplit = phase + 1;
    ++releases;  // the phase completes: release the threads waiting on it
    for (auto& u : th)
      if (u.status == Status::AtBarrier && u.barrier && u.barrier->sync == kir::SyncKind::BarrierWait &&
          u.barrier->arg == kir::kWorkgroupBarrier && u.waitCount == phase) {
        fencedWait(u, *u.barrier, ph.clock, ph.xclock);  // the acquire fence after the wait
        u.waitCount++;
        u.status = Status::Running;
        u.barrier = nullptr;
      }
  }
}

void Cta::waitSplitBarrier(Thread& t, const kir::Sync& s) {
  if (t.waitCount >= t.sigCount) {
    rep.add(Finding::Deadlock, "wnosig|" + std::to_string(s.id), [&] {
      std::ostringstream os;
      os << "barrier misuse: " << threadName(t.tid, W) << " waits at '" << kir::describe(s) << "' (node " << s.id
         << ", " << where(t) << ") without a s_barrier_signal of its own before it (the wait never completes)";
      return os.str();
    });
    stopped = true;
    return;
  }
  auto it = splitPhases.find(t.waitCount);
  if (it != splitPhases.end() && it->second.completed) {
    fencedWait(t, s, it->second.clock, it->second.xclock);
    t.waitCount++;
    return;
  }
  t.status = Status::AtBarrier;  // released by the last signal of this phase
  t.barrier = &s;
}

}  // namespace heddle::verify
