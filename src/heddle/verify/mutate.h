// Mutations of a kernel's synchronisation: the checker's own test. Each mutant is the kernel with
// one sync op deleted or weakened; a correct simulator must flag every mutant of a minimal plan
// (a race, a deadlock, an early async read, or wrong numbers). A mutant nobody flags means the sync
// was unnecessary (the plan is not minimal) or the simulator is blind to it.
//
// Kinds (mutationKinds(); new kinds plug in by adding an entry -- e.g. the Hopper path's
// flip_parity, over_arrive / under_arrive of an mbarrier, role_cycle):
//   delete_sync   remove one block_sync, cp.async.commit_group or cp.async.wait_group (AMD: one
//                 s_waitcnt vmcnt, s_barrier_signal, s_barrier_wait, or a named-barrier
//                 s_barrier_init / _join / _leave / _signal_isfirst)
//   loosen_wait   cp.async.wait_group(N) -> cp.async.wait_group(N + 1) (AMD: vmcnt(N) -> vmcnt(N + 1))
//   slide_barrier GFX12 split barrier: s_barrier_signal moved above the access before it, or
//                 s_barrier_wait below the access after it (split_barriers.cpp moves each as far
//                 as the hazard intervals allow, so one step further must be caught)
//   shift_flag    split-K: grid.release / grid.wait on flags[i + 1] instead of flags[i] (delete_sync also
//                 deletes them)
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "heddle/kir/kir.h"

namespace heddle::verify {

struct Mutant {
  std::string kind;         // a MutationKind name
  int site = -1;            // pre-order index of the mutated node in the kernel body
  std::string description;  // "delete block_sync [main loop body, at its end] (sync 5: RAW sA, WAR sA)"
};

struct MutationKind {
  std::string name;
  std::function<bool(const kir::Node&)> applies;
  std::function<std::string(const kir::Node&)> verb;            // "delete block_sync"
  std::function<void(kir::Block& parent, size_t index)> apply;  // the node is parent.stmts[index]
  // when set, used instead of apply: mutations that need the kernel (e.g. another buffer)
  std::function<void(kir::Kernel& k, kir::Block& parent, size_t index)> applyInKernel = nullptr;
  // when set, a node `applies` to is a site only if this also holds (it can look at the kernel)
  std::function<bool(const kir::Kernel& k, const kir::Node& n)> appliesInKernel = nullptr;
};

// The Hopper kinds (verify/ring_mutate.cpp): flip_parity, over_arrive, under_arrive, role_cycle.
std::vector<MutationKind> ringMutationKinds();

const std::vector<MutationKind>& mutationKinds();

// Opt-in kinds: not in mutationKinds(), so no part of kill rates -- their mutants add work instead of
// removing or weakening a sync, and are bugs on some trip counts only; name them to enumerate them:
//   unguard_sync  the `if` (no else, not an elected issue) around a run of sync ops dropped: they run
//                 unconditionally (tma_pipeline's `if (kt + 1 < nk - p)` around the release reverted:
//                 an arrival no wait observes, tests/lower/test_unawaited_release.py)
//   drop_release_fence / drop_acquire_fence  (AMD kernels) the workgroup release fence before a
//                 block_sync / s_barrier_signal -1, or the acquire fence after a block_sync /
//                 s_barrier_wait -1, deleted (kir::Sync::noReleaseFence / noAcquireFence; caught by
//                 verify/workgroup_fences.cpp; tests/sync/test_workgroup_fences.py)
//   promotion_interval  (block-scaled kernels) the `if` around the promotion fires every 2P k-tiles instead of
//                 every P: tmp carries two intervals, scaled with the second's scales (verify/mutate.cpp)
const std::vector<MutationKind>& optInMutationKinds();

// Every mutant of every kind, in program order of the sites.
std::vector<Mutant> enumerateMutants(const kir::Kernel& k);
// The mutants of the named kinds (of mutationKinds() or optInMutationKinds()).
std::vector<Mutant> enumerateMutants(const kir::Kernel& k, const std::vector<std::string>& kinds);

// A deep copy of `k` with the mutation applied (and node ids renumbered).
kir::Kernel applyMutant(const kir::Kernel& k, const Mutant& m);

}  // namespace heddle::verify
