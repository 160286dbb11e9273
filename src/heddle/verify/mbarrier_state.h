// Hopper state of a simulated CTA (mbarrier_sync.cpp, tma_wgmma_ops.cpp): mbarriers with phases and
// transaction counts, TMA loads in flight, wgmma and bulk-store groups with their asynchronous
// shared-memory reads, proxy fences and named barriers. Internal to verify/.
//
// Happens-before, extended. Each mbarrier object b has its own vector-clock entry T + b (an
// "agent"): a TMA copy completing on b is a write by that agent, stamped with the agent's next
// epoch when it lands. An arrival (and a landing) joins its clock into the barrier's current
// phase; completing the phase publishes the join (cumulative over all earlier phases: the arrive
// / complete_tx operations form one release sequence), and a try_wait.parity that finds the phase
// complete acquires it. An arriving thread advances its own entry afterwards (release).
//   asynchronous reads (wgmma, TMA store) are checked like reads when issued and recorded again
//   when the wait_group that retires their group executes: a write must be ordered after the
//   retirement, and a write while the read is still in flight is reported at once.
//   the generic -> async proxy edge: an async-proxy read of a cell whose last write came through
//   the generic proxy needs a fence.proxy.async by the writer, after the write, ordered before
//   the reader (the fence's clock <= the reader's view of the writer).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "heddle/kir/kir.h"

namespace heddle::verify {

struct MbarState {
  const kir::Buffer* buf = nullptr;
  int64_t index = 0;
  bool init = false;
  int initThread = -1;
  uint32_t initClock = 0;
  int count = 0, pending = 0;
  int64_t tx = 0;
  int64_t phase = 0;                  // completed phases (the current one has parity phase % 2)
  int64_t observed = -1;              // the latest phase a successful wait observed (-1: none)
  const kir::Node* lastBy = nullptr;  // what completed the latest phase (phase - 1), and its thread
  int lastThread = -1;
  std::vector<uint32_t> acc;       // joined by the current phase's arrivals and landings
  std::vector<uint32_t> released;  // cumulative clock of the completed phases
  uint32_t epoch = 0;              // this barrier's agent clock (TMA landings)
  bool initFenced = false;         // fence.mbarrier_init.release.cluster by the init thread after the init
  uint32_t fenceClock = 0;         // the init thread's clock at that fence
  int rank = -1;                   // its CTA's rank in a simulated cluster (-1: no cluster)
  std::string name() const {
    return (rank >= 0 ? "CTA rank " + std::to_string(rank) + "'s " : std::string()) + buf->name + "[" +
           std::to_string(index) + "]";
  }
};

struct TmaOp {
  int bar = -1;
  uint32_t inst = 0;
  int thread = -1;
  std::vector<uint32_t> cells;
  std::vector<float> vals;
  int64_t bytes = 0;
  std::vector<uint32_t> issuerVc;  // the issuing thread's clock at the issue
  bool landed = false;
  int64_t phase = 0;  // clusters: the target barrier's phase at the issue (it must land in it)
};

struct AsyncReadGroup {
  std::vector<uint32_t> cells, insts;
};

struct MbarrierThread {
  AsyncReadGroup wgOpen;                // wgmma reads not yet committed
  std::deque<AsyncReadGroup> wgGroups;  // committed, not retired (oldest first)
  AsyncReadGroup bulkOpen;              // TMA store reads not yet committed
  std::deque<AsyncReadGroup> bulkGroups;
  bool accTouched = true;  // accumulators accessed by ordinary code since the last wgmma.fence
  std::string accTouchedBy = "the start of the thread";
  int waitBar = -1, waitParity = 0;  // blocked in try_wait.parity
  const kir::Sync* waitNode = nullptr;
  int namedBar = -1;  // blocked in bar.sync
  const kir::Sync* namedNode = nullptr;
  std::vector<uint32_t> unfenced;  // cells written through the generic proxy since the last proxy fence
  // sm100 (tcgen05_sim.cpp): the clock asynchronous tcgen05 accesses are ordered by (the thread's clock at its
  // last tcgen05.fence::after_thread_sync), and its tcgen05.ld reads not yet published (cells, instances)
  // until its next fence::before_thread_sync or tcgen05.commit
  std::vector<uint32_t> tcView;
  std::vector<std::pair<uint32_t, uint32_t>> tcReads;
  uint32_t tcCommits = 0;  // tcgen05.commit issued: the ordinal of the thread's MMA engine (Cta::tcAgent)
};

struct MbarrierState {
  bool active = false;  // the kernel has Hopper nodes
  std::vector<MbarState> bars;
  std::map<const kir::Buffer*, int> barBase;
  std::vector<TmaOp> tma;
  std::vector<int> pending;            // TMA ops not landed (issue order)
  std::vector<uint16_t> inflight;      // per cell: asynchronous reads in flight
  std::vector<uint32_t> inflightInst;  // per cell: one of them (for messages)
  std::vector<uint32_t> fencedAt;      // per cell: the writer's clock at its proxy fence after the last generic write
  std::map<int, std::vector<int>> named;  // bar.sync id -> waiting threads
  // sm100: tensor memory (the accumulator buffer's cells: stages x 128 lanes x bn columns)
  bool tmemLive = false, tmemEverAllocated = false, relinquished = false;
  int tmemCols = 0;
};

}  // namespace heddle::verify
