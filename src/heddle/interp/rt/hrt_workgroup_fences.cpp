// heddle/interp/rt/hrt_workgroup_fences.cpp -- the AMD workgroup fences and what an AMD barrier publishes.
//
// The rule (docs/verification.md, "AMD workgroup fences"), the same as the kernel-IR simulator's
// (verify/workgroup_fences.cpp):
//   * an AMD barrier (s_barrier, s_barrier_signal / _wait -1, the gfx1250 named barriers) orders
//     execution only. LLVM AMDGPUExecutionSynchronization: "Barriers only synchronize execution and do
//     not affect the visibility of memory operations between threads".
//   * memory is ordered through it by fences: LLVM AMDGPUUsage, "Memory Model" / "Execution Barriers"
//     (llvm-project PR 170447): a signal pairs with a release fence program-ordered before it (a
//     barrier-signal-release), a wait with an acquire fence program-ordered after it (a
//     barrier-wait-acquire), and BR synchronizes-with BA iff the signal barrier-executes-before the wait
//     (the fences at workgroup scope, not one-as). Second source: the SYCL 2020 specification, 4.15.1
//     (a group barrier is a release fence before and an acquire fence after, synchronizing with each
//     other), which is how AMD's HIP __syncthreads and AdaptiveCpp's amdgpu barrier are spelled:
//     fence(release, "workgroup"); s_barrier; fence(acquire, "workgroup").
//   No target is exempt: the rule is LLVM's for every AMDGPU target, and without the fences the
//   compiler may move LDS accesses across the s_barrier intrinsic (it is not a memory operation).
//
// Model, per thread: `rel` is its clock at its last workgroup release fence (the fence ticks the
// thread's own clock, so what follows it is not published); an arrive publishes `rel`, not the current
// clock. A wait adds the phase's clocks to `acq`, which the next acquire fence joins into the thread's
// clock. Beside it, `x` follows barriers regardless of fences (execution order): barrier-object checks
// (a named barrier's init before its use) use it, and a race between accesses that `x` orders is
// reported with the fence that is missing. Deterministic: it is vector-clock bookkeeping, the same
// under every schedule.
#include "heddle/interp/rt/hrt_core.h"

namespace heddle_rt {

namespace {

void ensure(Fiber& f) {
  const size_t n = f.vc.size();
  if (f.amd_x.size() != n) f.amd_x.assign(n, 0);
  if (f.amd_rel.size() != n) f.amd_rel.assign(n, 0);
  if (f.amd_acq.size() != n) f.amd_acq.assign(n, 0);
}

}  // namespace

void amdgcn_fence_workgroup(int order) {
  tick();
  Fiber& f = me();
  ensure(f);
  const bool rel = order == __ATOMIC_RELEASE || order == __ATOMIC_ACQ_REL || order == __ATOMIC_SEQ_CST;
  const bool acq = order == __ATOMIC_ACQUIRE || order == __ATOMIC_ACQ_REL || order == __ATOMIC_SEQ_CST;
  if (acq) {
    vc_join(f.vc, f.amd_acq);
    f.amd_acq_pc = nullptr;
  }
  if (rel) {
    f.amd_rel = f.vc;
    ++f.vc[f.tid];  // what this thread does after the fence is not published by it
  }
}

void amd_arrive(VC& join, VC& xjoin) {
  Fiber& f = me();
  ensure(f);
  const size_t n = f.vc.size();
  if (join.size() != n) join.assign(n, 0);
  if (xjoin.size() != n) xjoin.assign(n, 0);
  vc_join(join, f.amd_rel);
  vc_join(xjoin, f.vc);
  vc_join(xjoin, f.amd_x);
}

void amd_wait(const VC& done, const VC& xdone, const void* pc) {
  Fiber& f = me();
  ensure(f);
  vc_join(f.amd_acq, done);
  vc_join(f.amd_x, xdone);
  f.amd_acq_pc = pc;
}

bool amd_exec_ordered(const Fiber& f, uint32_t agent, Clock clk) {
  return f.vc[agent] >= clk || (agent < f.amd_x.size() && f.amd_x[agent] >= clk);
}

std::string amd_fence_note(uint32_t accessor, uint32_t tid, uint32_t agent, Clock clk) {
  Cta& c = cta();
  // the accessor is thread `tid` or the LDS DMA it issued (ordered by what the thread was ordered after)
  if (!c.amd || (int)accessor >= 2 * c.nthreads || tid >= c.fibers.size()) return "";
  const Fiber& f = *c.fibers[tid];
  if (f.amd_acq_pc && agent < f.amd_acq.size() && f.amd_acq[agent] >= clk)
    return " (the barrier wait at " + pcs(f.amd_acq_pc) + " orders them, but no workgroup acquire fence "
           "(heddle::fence_acquire_workgroup(), __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, \"workgroup\")) follows it "
           "in this thread before the access: missing acquire fence; an AMD barrier orders execution, not memory)";
  if (amd_exec_ordered(f, agent, clk))
    return " (a barrier orders them in execution, but the other side published nothing through it: no workgroup "
           "release fence (heddle::fence_release_workgroup(), __builtin_amdgcn_fence(__ATOMIC_RELEASE, \"workgroup\")) "
           "between that access and its barrier signal: missing release fence; an AMD barrier orders execution, "
           "not memory)";
  return "";
}

}  // namespace heddle_rt
