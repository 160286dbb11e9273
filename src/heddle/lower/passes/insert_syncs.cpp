// insert_syncs: the hazard-driven sync planner for block barriers and cp.async / vmcnt waits.
//
// Before (k loop after circular_buffer, s=4 p=3; no syncs besides commits):
//   for i in [0, 3) prologue { if (i < nk) { cp_async A -> sA[i%4]; cp_async B -> sB[i%4] }; commit }
//   for i in [0, nk-3) main  { cp_async A -> sA[(i+3)%4]; ...; commit; mma sA[i%4] x sB[i%4] }
//   for i in [max(nk-3, 0), nk) epilogue { mma sA[i%4] x sB[i%4] }
// After:
//   prologue ...; cp.async.wait_group(2); block_sync        # RAW sA/sB stage 0
//   main { ...; commit; mma; cp.async.wait_group(2); block_sync }   # RAW next stage + WAR this stage
//   cp.async.wait_group(0); block_sync                      # drain: epilogue reads the last stages
//   epilogue { mma }
//
// The planner (sync/planner.cpp, docs/sync-plan.md) reads the pipelined loop -- its trip variable
// (K, or KS under split-K / stream-K), k-tile and stage count -- from the kernel IR's loops.
//
// Runs when: kernels whose syncs no builder placed (kernel.syncsPlanned unset: not the mbarrier rings, built with
//   theirs).
#include "heddle/lower/lower.h"
#include "heddle/sync/plan.h"

namespace heddle::passes {

void insertSyncs(LowerContext& c) {
  requireWhen(c, "insert_syncs");  // not the rings placed by construction (warp_specialize, tma_pipeline)
  sync::planSyncs(c.kernel, c.target);
}

}  // namespace heddle::passes
