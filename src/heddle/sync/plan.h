// The sync room (src/heddle/sync/, docs/sync-plan.md): the hazard planner, the uniformity check and
// the origin of every sync-plan entry. Everything here takes the kernel IR and TargetInfo, never the
// lowering context; the passes insert_syncs and check_uniformity (lower/passes/) are thin adapters.
#pragma once

#include <cstdint>
#include <string>

#include "heddle/kir/kir.h"
#include "heddle/sync/hazards.h"
#include "heddle/target/target.h"

namespace heddle::sync {

// The pipelined loop of a lowered kernel, read from its kernel IR: the first loop that records a trip
// variable (ForLoop::tripsVar, tileK; set where the k loop is built) and its circular-buffer depth
// (ForLoop::cbStages; 1 when it has none). A HeddleError when no loop records one.
PipelineLoop pipelineLoop(const kir::Kernel& k);

// The planner behind insert_syncs (planner.cpp): block barriers and cp.async / vmcnt waits from the
// hazard intervals of the representative traces of `loop` (the first form reads it from the IR).
// `target` spells the waits (cp.async groups or AMD vmcnt, its cap), drains counters before barriers
// without BackOffBarrier and splits barriers where it has split barriers (docs/backends.md).
// `searchBudget`: nodes of the exact barrier search before the planner settles for a valid
// (irredundant greedy) placement; SyncPlan::summary says which it got. Every entry it adds has the
// origin builder "hazard planner" (the pass is stamped by whoever runs it: stampPass).
void planSyncs(kir::Kernel& k, const TargetInfo& target, int64_t searchBudget = 200000);
void planSyncs(kir::Kernel& k, const PipelineLoop& loop, const TargetInfo& target, int64_t searchBudget = 200000);

// Every collective op sits in control flow uniform over the threads that execute it together;
// a HeddleError naming the branch otherwise (uniformity.cpp).
void checkUniformity(const kir::Kernel& k, const TargetInfo& target);

// Entries of k's sync plan with no origin pass get `pass` (the pass manager calls it after each pass,
// so that every entry names the pass that placed it; origin.cpp).
void stampPass(kir::Kernel& k, const std::string& pass);

// Sync-plan entries in program order: each sync op's reason renumbered to its position, entries no op
// refers to any more dropped (origin.cpp).
void numberReasons(kir::Kernel& k);

// The protocol a sync op of this kind belongs to, named by mechanism ("mbarrier ring", "wgmma",
// "tcgen05", "grid flags", ...): the origin builder of ops placed by construction (origin.cpp).
const char* protocolOf(kir::SyncKind kind);

}  // namespace heddle::sync
