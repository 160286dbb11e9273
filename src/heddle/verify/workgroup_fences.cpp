// The AMD workgroup fences in the kernel-IR simulator (SimOptions::amdFences; docs/verification.md,
// "AMD workgroup fences"). The same rule as the interpreter's (interp/rt/hrt_workgroup_fences.cpp), written
// against the kernel IR's barrier nodes instead of the printed fences:
//   * the workgroup barrier (block_sync = s_barrier, s_barrier_signal / _wait -1) orders execution only
//     (LLVM AMDGPUExecutionSynchronization: "Barriers only synchronize execution and do not affect
//     the visibility of memory operations between threads");
//   * a signal publishes memory with the release fence program-ordered before it, a wait makes it
//     visible with the acquire fence program-ordered after it (LLVM AMDGPUUsage, "Memory Model",
//     "Execution Barriers": barrier-signal-release synchronizes-with barrier-wait-acquire when the
//     signal barrier-executes-before the wait; second source: SYCL 2020 4.15.1, a group barrier is a
//     release fence before and an acquire fence after, the spelling of HIP's __syncthreads).
// Every barrier node carries both fences unless a mutant cleared one (kir::Sync::noReleaseFence /
// noAcquireFence, the opt-in mutation kinds drop_release_fence / drop_acquire_fence). Per thread:
// amdRel is its clock at its last release fence, what an arrive publishes; a wait without its acquire
// fence leaves what it made visible in amdAcq until a later acquire fence; amdX follows barriers
// regardless of fences, so a race that execution order covers is reported with the missing fence.
// The named barrier objects (barrier_objects.cpp) are printed with their fences inside the header
// (heddle_hip_barriers.cuh) and order memory as before.
#include <sstream>

#include "heddle/verify/cta.h"

namespace heddle::verify {

namespace {

void join(std::vector<uint32_t>& into, const std::vector<uint32_t>& from) {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (size_t i = 0; i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
}

}  // namespace

void Cta::fencedArrive(Thread& t, const kir::Sync& s, std::vector<uint32_t>& mem, std::vector<uint32_t>& exec) {
  if (!opt.amdFences) {
    join(mem, t.vc);
    return;
  }
  if (!s.noReleaseFence) t.amdRel = t.vc;
  else t.amdUnreleased = &s;
  join(mem, t.amdRel);
  join(exec, t.vc);
  join(exec, t.amdX);
}

void Cta::fencedWait(Thread& t, const kir::Sync& s, const std::vector<uint32_t>& mem,
                     const std::vector<uint32_t>& exec) {
  if (!opt.amdFences) {
    join(t.vc, mem);
    return;
  }
  join(t.amdX, exec);
  if (s.noAcquireFence) {
    join(t.amdAcq, mem);
    t.amdUnacquired = &s;
    return;
  }
  join(t.vc, t.amdAcq);
  join(t.vc, mem);
  t.amdUnacquired = nullptr;
}

std::string Cta::fenceNote(int reader, int writer, uint32_t clock) const {
  if (!opt.amdFences || reader < 0 || writer < 0 || reader >= (int)th.size() || writer >= (int)th.size()) return "";
  const Thread& u = th[reader];
  auto covers = [&](const std::vector<uint32_t>& v) { return (size_t)writer < v.size() && v[writer] >= clock; };
  std::ostringstream os;
  if (u.amdUnacquired && covers(u.amdAcq)) {
    os << "; '" << kir::describe(*u.amdUnacquired) << "' (node " << u.amdUnacquired->id
       << ") orders them, but the workgroup acquire fence after it is missing in " << threadName(reader, W)
       << " (an AMD barrier orders execution, not memory)";
    return os.str();
  }
  if (!covers(u.amdX)) return "";
  os << "; a barrier orders them in execution, but " << threadName(writer, W)
     << " made no workgroup release fence between that access and its arrive";
  if (th[writer].amdUnreleased)
    os << " ('" << kir::describe(*th[writer].amdUnreleased) << "', node " << th[writer].amdUnreleased->id
       << ", has no release fence)";
  os << " (an AMD barrier orders execution, not memory)";
  return os.str();
}

}  // namespace heddle::verify
