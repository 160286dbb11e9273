// Hazard analysis (read-only; the sync planner's input, plan.h): which pairs of shared-memory accesses need ordering, and where
// an ordering op could go.
//
// The kernel IR is executed symbolically for representative trip counts of the pipelined loop (for
// s stages: every count from the smallest legal one to s+1, and 3s+1), which walks every loop body
// at least twice and so exposes loop-carried hazards. Each dynamic access is tagged with the buffer,
// the stage it touches (evaluated), its thread mapping and, for cp.async, the commit group it joins.
// A hazard is an interval of that trace between a producer and a consumer:
//   RAW  write -> later read of the same buffer stage      (async writer: from its commit)
//   WAR  read  -> later write of the same buffer stage
//   WAW  write -> later write of the same buffer stage
// An interval needs a block barrier when the two accesses use different thread mappings, and a
// cp.async wait when the producer is asynchronous. Static program points ("before statement j of
// block B", "end of block B") are the places a sync can go; each point knows which intervals one of
// its dynamic instances falls inside, and how many commit groups are newer than the producer's
// group there (the largest legal wait_group argument).
//
// Branches whose condition the walk cannot evaluate (docs/sync-plan.md, "Paths"):
//   uniform, loop-invariant  ("if (f)", f a kernel scalar): every combination of outcomes is walked
//                            (one trace per path, up to kMaxEnumerated such conditions), so wait
//                            arguments are the minimum over paths and a barrier inside such a
//                            branch only counts on the paths that take it;
//   thread-dependent, or uniform beyond the cap or varying per iteration: both sides are walked in
//                            one trace as alternatives. A point inside one side counts only for
//                            intervals whose ends lie on that side; commit counts take the side with
//                            fewer commits (sound, possibly not minimal); a write there does not end
//                            the history of the bytes it writes (it may not happen). Two sides of a
//                            thread-dependent branch run on different threads at once, so a
//                            cross-thread interval between them has no point a barrier could use.
// A point is uniform when no enclosing branch or loop bound depends on the thread (tid, warp, lane
// or a value computed from them); only uniform points may hold a block barrier.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "heddle/kir/kir.h"

namespace heddle::sync {

struct ProgramPoint {
  kir::Block* block = nullptr;
  int index = 0;      // before stmts[index]; == size() means end of block
  std::string where;  // "main loop body, before mma ..." for messages
  int loopDepth = 0;
  const kir::ForLoop* loop = nullptr;  // innermost enclosing loop (null at top level)
  int64_t executions = 0;              // in the representative trace
  bool hasBarrier = false;             // an existing BlockSync stands at this point already
  bool vmIssuedBefore = false;         // an AMD LDS DMA was issued before one of its instances
  bool uniform = true;                 // every thread of the block reaches it the same number of times
  std::string nonUniformBranch;        // the innermost thread-dependent branch around it ("if (tid < 32)")
};

struct Hazard {
  enum Kind { RAW, WAR, WAW } kind = RAW;
  bool crossThread = false;  // producer and consumer mappings differ -> barrier
  bool async = false;        // producer is a cp.async copy -> wait_group
  bool vmcnt = false;        // producer is an AMD LDS DMA (async, counted by vmcnt, no commit)
  const kir::Node* producer = nullptr;
  const kir::Node* consumer = nullptr;
  std::string buffer;
  int64_t stage = 0;
  std::string stageExpr;                         // producer's stage expression
  int64_t producerIter = -1, consumerIter = -1;  // k-tile numbers (for messages)
  int trace = 0;                                 // which representative trace
  // per static point: the latest instance inside the interval, and the wait argument it allows
  std::vector<int> latestInstance;    // event index, -1 when none inside
  std::vector<int> allowedWait;       // commit groups newer than the producer's at that instance
                                      // (vmcnt: vector-memory ops issued after the producer's last one)
  std::vector<int> earliestInstance;  // per static point: the earliest instance inside, -1 when none
  const kir::ForLoop* consumerLoop = nullptr;
};
const char* hazardKindName(Hazard::Kind k);

struct HazardAnalysis {
  std::vector<ProgramPoint> points;
  std::vector<Hazard> hazards;
  std::vector<int64_t> tripCounts;  // the representative trip counts walked
  int enumeratedBranches = 0;       // uniform unknown conditions walked one path per trace
  int mergedBranches = 0;           // unknown conditions walked as alternatives in one trace
  int paths = 1;                    // traces per trip count (2^enumerated, or fewer)
};
constexpr int kMaxEnumerated = 8;

// The pipelined loop the walk varies, as the kernel IR records it (ForLoop::tripsVar, tileK, cbStages;
// plan.h's pipelineLoop finds it): `tripsVar` is the variable whose value sets the loop's trip count
// (e.g. "K"), `tileK` the amount one iteration covers, `stages` its circular-buffer depth (1 = none).
struct PipelineLoop {
  std::string tripsVar = "K";
  int64_t tileK = 1;
  int stages = 1;
};

// The smallest legal trip count is the largest minTrips of the kernel's tripChecks (1 when it has none).
HazardAnalysis analyzeHazards(kir::Kernel& k, const PipelineLoop& loop);

// Over the same traces: does every barrier (block_sync, s_barrier_signal) run with no LDS DMA in
// flight, given the s_waitcnt vmcnt waits the kernel holds? (targets without BackOffBarrier)
bool vmDrainedAtBarriers(kir::Kernel& k, const PipelineLoop& loop);

// Over the same traces: is every cross-thread hazard interval ordered by a barrier the kernel holds,
// i.e. does it contain a block_sync, or an s_barrier_signal followed by that signal's s_barrier_wait
// (the next one of its block: ordered when the earliest signal instance inside the interval has a
// wait instance after it still inside)? "" when every interval is; otherwise the first one that is not, named.
std::string unorderedInterval(kir::Kernel& k, const PipelineLoop& loop);

}  // namespace heddle::sync
