// The barrier objects of the AMDGPU execution-synchronization model (LLVM docs,
// AMDGPUExecutionSynchronization: "Execution Model" and the GFX12 "Named Barriers" extensions),
// as the simulator runs them. docs/verification.md and docs/backends.md, "Barrier objects".
//
//   object      expected count, arrive count (both in lanes here: every op is wave-uniform, so a
//               wave's op is W lane ops and the counts are W times the model's), phase number.
//               When an operation makes arrive == expected the phase completes: its arrivers'
//               vector clocks are joined and handed to every wait on that phase
//               (barrier-executes-before), and the arrive count resets.
//   init        s_barrier_init id, count waves: expected = count, arrive = 0. An operation on a
//               barrier no init preceded is undefined ("the first element of
//               barrier-modification-order is always an init").
//   join        s_barrier_join id: the thread may wait on id; joining 0 (the NULL barrier) unjoins.
//   drop        s_barrier_leave: drops the barrier the thread joined (expected - 1); without a join
//               it drops nothing. A thread that ends drops the workgroup barrier (-1; GFX6-11
//               s_barrier too: SimOptions::dropOnExit, amdgcn_sim.cpp / sync.cpp), never a named one.
//               Drop race: an arrive of the thread in a phase it has not waited on before the drop
//               (undefined). The expected count never goes negative (undefined otherwise).
//   arrive      s_barrier_signal id / s_barrier_signal_isfirst id (the NULL barrier: no-op). An
//               arrive after the thread dropped the barrier (and did not join again) counts against
//               an expected count its drop already lowered: defined by the model, reported as misuse.
//   wait        s_barrier_wait id: waits on the barrier the thread joined last (the hardware does,
//               whatever id says); no join, or a join of another barrier, is undefined. It waits for
//               the phase of its own latest arrive, or, without one, the phase after the last it
//               waited on. A wait that never completes is undefined: reported as a deadlock.
// Not modelled: the cluster barriers (-3, -4), the m0 expected-count update on arrive, and the
// "join barrier-executes-before a participating arrive" clause of join-and-wait ordering.
#include <sstream>

#include "heddle/verify/cta.h"

namespace heddle::verify {

namespace {

bool namedOp(const kir::Sync& s) {
  switch (s.sync) {
    case kir::SyncKind::BarrierInit:
    case kir::SyncKind::BarrierJoin:
    case kir::SyncKind::BarrierLeave:
    case kir::SyncKind::BarrierSignalIsFirst: return true;
    case kir::SyncKind::BarrierSignal:
    case kir::SyncKind::BarrierWait: return s.arg != kir::kWorkgroupBarrier;
    default: return false;
  }
}

}  // namespace

void Cta::barrierMisuse(const Thread& t, const kir::Sync& s, const std::string& key, const std::string& what) {
  rep.add(Finding::BarrierMisuse, key + "|" + std::to_string(s.id), [&] {
    std::ostringstream os;
    os << threadName(t.tid, W) << " at '" << kir::describe(s) << "' (node " << s.id << ", " << where(t)
       << "): " << what;
    return os.str();
  });
}

void Cta::completeBarrierObject(int id) {
  BarrierObject& o = barrierObjects[id];
  const int64_t phase = o.phase++;
  o.completed[phase] = o.clock;
  o.clock.assign(T, 0);
  o.arrived = 0;
  ++releases;
  for (auto& u : th)
    if (u.status == Status::AtBarrier && u.barrier && u.barrier->sync == kir::SyncKind::BarrierWait &&
        u.waitBar == id && u.waitPhase == phase) {
      for (int i = 0; i < T; ++i) u.vc[i] = std::max(u.vc[i], o.completed[phase][i]);
      u.waitedPhase[id] = phase;
      u.status = Status::Running;
      u.barrier = nullptr;
    }
}

bool Cta::execBarrierObject(Thread& t, const kir::Sync& s) {
  if (!namedOp(s)) return false;
  const int id = s.sync == kir::SyncKind::BarrierLeave ? t.joined : s.arg;
  if (s.sync == kir::SyncKind::BarrierLeave && id < 1) return true;  // nothing joined: nothing dropped
  if (id == 0) {  // the NULL barrier: every op but join is a no-op; joining it unjoins
    if (s.sync == kir::SyncKind::BarrierJoin) t.joined = 0;
    return true;
  }
  if (id < 1 || id > 16)
    fail<HeddleError>("simulate: '", kir::describe(s), "' names barrier ", id,
                      "; AMD barrier ids are -1 (workgroup), "
                      "0 (NULL) and 1..16 (named)");
  BarrierObject& o = barrierObjects[id];
  if (o.clock.empty()) o.clock.assign(T, 0);
  if (s.sync == kir::SyncKind::BarrierInit) {
    if (o.arrived > 0)
      barrierMisuse(t, s, "reinit",
                    "misuse: the init resets " + std::to_string(o.arrived) + " lane arrival(s) of a phase in progress");
    o.initialized = true;
    o.expected = (int64_t)s.count * W;
    o.arrived = 0;
    return true;
  }
  if (!o.initialized) {
    barrierMisuse(t, s, "noinit",
                  "undefined behaviour: barrier " + std::to_string(id) +
                      " is used before any s_barrier_init (the first barrier modification of an "
                      "object must be its init)");
    return true;
  }
  const int64_t pending = t.arrivedPhase.count(id) ? t.arrivedPhase[id] : -1;
  const int64_t waited = t.waitedPhase.count(id) ? t.waitedPhase[id] : -1;
  switch (s.sync) {
    case kir::SyncKind::BarrierJoin:
      t.joined = id;
      t.left.erase(id);
      return true;
    case kir::SyncKind::BarrierLeave:
      if (pending > waited)
        barrierMisuse(t, s, "droprace",
                      "undefined behaviour (drop race): this thread arrived in phase " + std::to_string(pending) +
                          " of barrier " + std::to_string(id) +
                          " and drops it before waiting for that phase to complete");
      if (--o.expected < 0) {
        barrierMisuse(
            t, s, "negative",
            "undefined behaviour: the drop makes the expected count of barrier " + std::to_string(id) + " negative");
        o.expected = 0;
      }
      t.joined = kNotJoined;
      t.left.insert(id);
      if (o.arrived > 0 && o.arrived >= o.expected) completeBarrierObject(id);
      return true;
    case kir::SyncKind::BarrierSignal:
    case kir::SyncKind::BarrierSignalIsFirst:
      if (t.left.count(id))
        barrierMisuse(t, s, "afterdrop",
                      "misuse: arrive after this thread dropped barrier " + std::to_string(id) +
                          " (s_barrier_leave) without joining it again; the arrive counts against "
                          "an expected count its drop already lowered, so a phase can complete "
                          "without one of its members");
      for (int i = 0; i < T; ++i) o.clock[i] = std::max(o.clock[i], t.vc[i]);
      t.vc[t.tid]++;  // what this thread does after its arrive is not released by this phase
      t.arrivedPhase[id] = o.phase;
      if (++o.arrived >= o.expected) completeBarrierObject(id);
      return true;
    case kir::SyncKind::BarrierWait: {
      if (t.joined < 1) {
        barrierMisuse(t, s, "nojoin",
                      "undefined behaviour: s_barrier_wait on named barrier " + std::to_string(id) +
                          " by a thread that has not joined it (s_barrier_join)");
        return true;
      }
      int b = id;
      if (t.joined != id) {
        barrierMisuse(t, s, "otherjoin",
                      "undefined behaviour: waits on barrier " + std::to_string(id) +
                          " while the barrier it joined last is " + std::to_string(t.joined) +
                          " (the hardware waits on that one)");
        b = t.joined;
      }
      const int64_t pb = t.arrivedPhase.count(b) ? t.arrivedPhase[b] : -1;
      const int64_t wb = t.waitedPhase.count(b) ? t.waitedPhase[b] : -1;
      const int64_t phase = pb > wb ? pb : wb + 1;
      auto& ob = barrierObjects[b];
      auto it = ob.completed.find(phase);
      if (it != ob.completed.end()) {
        for (int i = 0; i < T; ++i) t.vc[i] = std::max(t.vc[i], it->second[i]);
        t.waitedPhase[b] = phase;
        return true;
      }
      t.status = Status::AtBarrier;
      t.barrier = &s;
      t.waitBar = b;
      t.waitPhase = phase;
      return true;
    }
    default: return true;
  }
}

void Cta::threadExited(Thread& t) {
  if (!opt.dropOnExit) return;
  // the implicit drop of the workgroup barrier: a signal without its wait before it races the drop
  if (t.sigCount > t.waitCount)
    rep.add(Finding::BarrierMisuse, "exitrace", [&] {
      return threadName(t.tid, W) +
             " ends after an s_barrier_signal without its s_barrier_wait: undefined "
             "behaviour (drop race: the implicit drop of the workgroup barrier at the "
             "thread's end races its arrive)";
    });
  completeSplitPhases();
  for (auto& u : th)
    if (u.status == Status::AtBarrier && u.barrier && u.barrier->sync == kir::SyncKind::BlockSync) {
      releaseBlockBarrier(*u.barrier);
      break;
    }
}

}  // namespace heddle::verify
