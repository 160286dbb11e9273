// Hazard analysis (read-only): which pairs of shared-memory accesses need ordering, and where
// an ordering op could go.
//
// The kernel IR is executed symbolically for a few representative trip counts (for a pipelined
// loop of s stages: s, s+1 and 3s+1 iterations), which walks every loop body at least twice and so
// exposes loop-carried hazards. Each dynamic access is tagged with the buffer, the stage it touches
// (evaluated), its thread mapping and, for cp.async, the commit group it belongs to. A hazard is an
// interval of that trace between a producer and a consumer:
//   RAW  write -> later read of the same buffer stage      (async writer: from its commit)
//   WAR  read  -> later write of the same buffer stage
//   WAW  write -> later write of the same buffer stage
// An interval needs a block barrier when the two accesses use different thread mappings, and a
// cp.async wait when the producer is asynchronous. Static program points ("before statement j of
// block B", "end of block B") are the places a sync can go; each point knows which intervals one of
// its dynamic instances falls inside, and how many commit groups are newer than the producer's
// group there (the largest legal wait_group argument).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "heddle/kir/kir.h"

namespace heddle {

struct ProgramPoint {
  kir::Block* block = nullptr;
  int index = 0;                // before stmts[index]; == size() means end of block
  std::string where;            // "main loop body, before mma ..." for messages
  int loopDepth = 0;
  const kir::ForLoop* loop = nullptr;  // innermost enclosing loop (null at top level)
  int64_t executions = 0;       // in the representative trace
  bool hasBarrier = false;      // an existing BlockSync stands at this point already
  bool vmIssuedBefore = false;  // an AMD LDS DMA was issued before one of its instances
};

struct Hazard {
  enum Kind { RAW, WAR, WAW } kind = RAW;
  bool crossThread = false;     // producer and consumer mappings differ -> barrier
  bool async = false;           // producer is a cp.async copy -> wait_group
  bool vmcnt = false;           // producer is an AMD LDS DMA (async, counted by vmcnt, no commit)
  const kir::Node* producer = nullptr;
  const kir::Node* consumer = nullptr;
  std::string buffer;
  int64_t stage = 0;
  std::string stageExpr;        // producer's stage expression
  int64_t producerIter = -1, consumerIter = -1;  // k-tile numbers (for messages)
  int trace = 0;                // which representative trace
  // per static point: the latest instance inside the interval, and the wait argument it allows
  std::vector<int> latestInstance;   // event index, -1 when none inside
  std::vector<int> allowedWait;      // commit groups newer than the producer's at that instance
                                     // (vmcnt: vector-memory ops issued after the producer's last one)
  const kir::ForLoop* consumerLoop = nullptr;
};
const char* hazardKindName(Hazard::Kind k);

struct HazardAnalysis {
  std::vector<ProgramPoint> points;
  std::vector<Hazard> hazards;
  std::vector<int64_t> tripCounts;  // the representative trip counts walked
};

// `tripsVar` is the variable whose value sets the k loop's trip count (e.g. "K"), `tileK` the
// amount one iteration covers; `minTrips` is the smallest legal trip count.
HazardAnalysis analyzeHazards(kir::Kernel& k, const std::string& tripsVar, int64_t tileK, int minTrips,
                              int stages);

}  // namespace heddle
