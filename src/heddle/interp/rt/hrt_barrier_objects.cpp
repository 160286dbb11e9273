// heddle/interp/rt/hrt_barrier_objects.cpp -- the GFX12.5 (gfx1250) named barrier objects the HIP device
// header heddle_hip_barriers.cuh calls under HEDDLE_INTERPRET, written from the AMDGPU execution-
// synchronization model (LLVM docs, AMDGPUExecutionSynchronization, "Execution Model": barrier objects
// with an expected and an arrive count; a phase completes when an operation makes arrive == expected)
// -- the same model the kernel-IR simulator runs (src/heddle/verify/barrier_objects.cpp), here on the
// printed source. Each lane is a thread, so counts are in lanes: a wave's op is `wave` lane ops.
//
//   s_barrier_init m0     a wave collective: barrier m0[15:0] (1..16) expects m0[31:16] waves per
//                         phase, arrive count 0. An init while a phase has arrivals: misuse (error).
//   s_barrier_join id     the thread may wait on id; joining 0 (the NULL barrier) unjoins.
//   s_barrier_leave       drops the barrier the thread joined (expected - 1 per lane; may complete the
//                         phase); nothing joined: drops nothing. Undefined: a drop after an arrive the
//                         thread has not waited for (drop race), an expected count below zero.
//   s_barrier_signal id   arrive: the arrivers' clocks are joined into the phase (release); an arrive
//   (_isfirst)            after the thread dropped id and did not join again is misuse (error).
//                         _isfirst is true in the wave that arrived first in the phase.
//   s_barrier_wait id     waits on the barrier the thread joined last (undefined: none, or another id)
//                         for the phase of its own latest arrive or, without one, the phase after the
//                         last it waited for; then acquires what that phase published. Never
//                         completing: a deadlock report.
//   NULL barrier (0)      every op but join is a no-op. Operations on an object no init preceded:
//                         undefined; an init not ordered before a use (happens-before, on every
//                         schedule) is reported too. A thread that ends drops no named barrier.
// Undefined behaviour stops the CTA (an error finding naming the printed line).
#include "heddle/interp/rt/hrt_api.h"
#include "heddle/interp/rt/hrt_core.h"

namespace heddle_rt {

namespace {

NamedBarrierObject& object(int id, const char* what, const void* pc) {
  Cta& c = cta();
  if (id < 1 || id > 16)
    abort_cta(std::string(what) + " " + std::to_string(id) + " at " + pcs(pc) +
              ": named barrier ids are 1..16 (0 is the NULL barrier, -1 the workgroup barrier)");
  NamedBarrierObject& o = c.amd_bars[id];
  if (o.arrived_phase.empty()) {
    o.arrived_phase.assign(c.nthreads, -1);
    o.waited_phase.assign(c.nthreads, -1);
    o.left.assign(c.nthreads, 0);
    o.join.assign(c.nagents(), 0);
  }
  if (!o.initialized)
    abort_cta(std::string(what) + " " + std::to_string(id) + " at " + pcs(pc) + " by " + who(me().tid) +
              ": undefined behaviour: barrier " + std::to_string(id) +
              " is used before any s_barrier_init (the first modification of a barrier object must be its init)");
  return o;
}

// the init must be first in the object's modification order for every schedule: it happens-before each use
// (some lane of the initializing wave has published its init clock to the user, through a barrier)
NamedBarrierObject& ordered_object(int id, const char* what, const void* pc) {
  NamedBarrierObject& o = object(id, what, pc);
  const Fiber& f = me();
  for (size_t l = 0; l < o.init_clk.size(); ++l)
    if (o.init_clk[l] && amd_exec_ordered(f, (uint32_t)l, o.init_clk[l])) return o;  // execution order suffices
  abort_cta(std::string(what) + " " + std::to_string(id) + " at " + pcs(pc) + " by " + who(f.tid) +
            ": undefined behaviour: the s_barrier_init of barrier " + std::to_string(id) + " at " + pcs(o.init_pc) +
            " is not ordered before this use (no barrier between them); on another schedule the use comes first");
}

std::vector<int>& joined() {
  Cta& c = cta();
  if (c.amd_joined.empty()) c.amd_joined.assign(c.nthreads, -1);
  return c.amd_joined;
}

void complete(NamedBarrierObject& o) {
  Cta& c = cta();
  o.done.push_back(o.join);
  o.xdone.push_back(o.xjoin);
  o.join.assign(c.nagents(), 0);
  o.xjoin.assign(c.nagents(), 0);
  ++o.phase;
  o.arrived = 0;
  o.first_wave = -1;
  c.flipped = !c.flipped;  // the next round runs the threads in the other order
}

std::string state(const NamedBarrierObject& o, int id) {  // (not the arrive count: it changes while blocked)
  return "named barrier " + std::to_string(id) + " expects " + std::to_string(o.expected) + " lane arrivals per phase";
}

}  // namespace

void s_barrier_init(uint32_t m0) {
  const void* pc = __builtin_return_address(0);
  const int id = (int)(m0 & 0xffffu), waves = (int)(m0 >> 16);
  if (id < 1 || id > 16 || waves < 1)
    abort_cta("s_barrier_init at " + pcs(pc) + " with barrier " + std::to_string(id) + ", " + std::to_string(waves) +
              " wave(s): the ids are 1..16 and the expected count at least one wave");
  Fiber& f = me();
  Clock clk = ++f.vc[f.tid];  // the init is an event of its own: what a barrier publishes after it includes it
  int tid = f.tid;
  collective(cta().wave, "s_barrier_init", pc, &tid, &clk, [&](void** ins, void** outs) {
    Cta& c = cta();
    NamedBarrierObject& o = c.amd_bars[id];
    o.init_clk.assign(c.nthreads, 0);
    for (int l = 0; l < c.wave; ++l) o.init_clk[*static_cast<int*>(ins[l])] = *static_cast<Clock*>(outs[l]);
    o.init_pc = pc;
    if (o.arrived > 0)
      finding("error", "s_barrier_init " + std::to_string(id) + " at " + pcs(pc) + ": misuse: the init resets " +
                           std::to_string(o.arrived) + " lane arrival(s) of a phase in progress");
    o.initialized = true;
    (void)object(id, "s_barrier_init", pc);  // sizes the per-thread state
    o.expected = (int64_t)waves * c.wave;
    o.arrived = 0;
    o.first_wave = -1;
  });
}

void s_barrier_join(int id) {
  const void* pc = __builtin_return_address(0);
  tick();
  const int tid = me().tid;
  if (id == 0) {  // the NULL barrier: joining it unjoins
    joined()[tid] = 0;
    return;
  }
  NamedBarrierObject& o = ordered_object(id, "s_barrier_join", pc);
  joined()[tid] = id;
  o.left[tid] = 0;
}

void s_barrier_leave() {
  const void* pc = __builtin_return_address(0);
  tick();
  const int tid = me().tid;
  const int id = joined()[tid];
  if (id < 1) return;  // nothing joined: nothing dropped
  NamedBarrierObject& o = ordered_object(id, "s_barrier_leave", pc);
  if (o.arrived_phase[tid] > o.waited_phase[tid])
    abort_cta("s_barrier_leave at " + pcs(pc) + " by " + who(tid) + ": undefined behaviour (drop race): this " +
              "thread arrived in phase " + std::to_string(o.arrived_phase[tid]) + " of barrier " + std::to_string(id) +
              " and drops it before waiting for that phase to complete");
  if (--o.expected < 0)
    abort_cta("s_barrier_leave at " + pcs(pc) + " by " + who(tid) + ": undefined behaviour: the drop makes the " +
              "expected count of barrier " + std::to_string(id) + " negative");
  joined()[tid] = -1;
  o.left[tid] = 1;
  if (o.arrived > 0 && o.arrived >= o.expected) complete(o);
}

bool named_arrive(int id, const char* what, const void* pc) {
  tick();
  if (id == 0) return false;  // the NULL barrier
  Cta& c = cta();
  Fiber& f = me();
  NamedBarrierObject& o = ordered_object(id, what, pc);
  if (o.left[f.tid] && f.tid % c.wave == 0)
    finding("error", std::string(what) + " " + std::to_string(id) + " at " + pcs(pc) + " by " + who(f.tid) +
                         ": misuse: arrive after this wave dropped barrier " + std::to_string(id) +
                         " (s_barrier_leave) without joining it again; the arrive counts against an expected count "
                         "its drop already lowered, so a phase can complete without one of its members");
  amd_arrive(o.join, o.xjoin);  // what the thread's last workgroup release fence published (hrt_workgroup_fences.cpp)
  ++f.vc[f.tid];  // what this thread does after its arrive is not released by this phase
  o.arrived_phase[f.tid] = (int64_t)o.phase;
  if (o.arrived == 0) o.first_wave = f.tid / c.wave;
  const bool first = o.first_wave == f.tid / c.wave;
  if (++o.arrived >= o.expected) complete(o);
  return first;
}

bool s_barrier_signal_isfirst(int id) {
  return named_arrive(id, "s_barrier_signal_isfirst", __builtin_return_address(0));
}

void named_wait(int id, const void* pc) {
  tick();
  if (id == 0) return;  // the NULL barrier
  Fiber& f = me();
  const int j = joined()[f.tid];
  if (j < 1)
    abort_cta("s_barrier_wait " + std::to_string(id) + " at " + pcs(pc) + " by " + who(f.tid) +
              ": undefined behaviour: a wait on named barrier " + std::to_string(id) +
              " by a thread that has not joined it (s_barrier_join)");
  if (j != id)
    abort_cta("s_barrier_wait " + std::to_string(id) + " at " + pcs(pc) + " by " + who(f.tid) +
              ": undefined behaviour: the barrier this thread joined last is " + std::to_string(j) +
              " (the hardware waits on that one)");
  NamedBarrierObject& o = ordered_object(id, "s_barrier_wait", pc);
  const int64_t a = o.arrived_phase[f.tid], w = o.waited_phase[f.tid];
  const int64_t target = a > w ? a : w + 1;
  block_until([&o, target] { return (int64_t)o.phase > target; },
              "s_barrier_wait " + std::to_string(id) + (a > w ? "" : " without an arrive of its own") + " (" +
                  state(o, id) + ", waiting for phase " + std::to_string(target) + ")",
              pc);
  amd_wait(o.done[(size_t)target], o.xdone[(size_t)target], pc);  // visible at its next acquire fence
  o.waited_phase[f.tid] = target;
}

}  // namespace heddle_rt
