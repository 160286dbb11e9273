// heddle/interp/rt/hrt_tmem_shadow.cpp -- tensor memory under a happens-before shadow, like shared memory
// (hrt_shadow.cpp), with the tcgen05 ordering rules of the PTX memory model:
//   * Categories (PTX ISA 9.7.16.6.1): tcgen05.mma / .cp / .shift / .ld / .st are asynchronous -- not
//     ordered with other tcgen05 operations, even of the same thread, except as pipelined pairs
//     (9.7.16.6.2: mma -> mma on the same accumulator); .alloc / .dealloc / .relinquish / .fence / .wait /
//     .commit are synchronous -- in program order with the thread's other operations.
//   * Across threads (9.7.16.6.3, 9.7.16.11.1): a thread sync (bar.sync, mbarrier arrive -> wait) orders an
//     asynchronous tcgen05 operation before a later one only when the earlier side has
//     tcgen05.fence::before_thread_sync between its operation and the sync, and the later side has
//     tcgen05.fence::after_thread_sync between the sync and its operation.
//   * tcgen05.commit (9.7.16.6.4.2 and .4.4): its mbarrier arrival happens once the thread's earlier
//     asynchronous tcgen05 operations completed, and it acts as an implicit fence::before_thread_sync; the
//     waiter still needs fence::after_thread_sync before its tcgen05.ld (the ISA's mma -> commit ->
//     try_wait -> fence::after -> ld pattern). A fence::before + arrive after an MMA does not publish the
//     MMA's accumulator: it is complete only at its commit's arrival.
// A second source, the public Blackwell kernels that follow these rules: DeepGEMM's sm100 GEMMs wait the
// tensor-memory "empty" mbarrier, then tcgen05_after_thread_sync, then issue UMMAs and umma_arrive
// (tcgen05.commit) the "full" one; FlashMLA's sm100 kernels wait an MMA-done mbarrier, then
// tcgen05_after_thread_sync, tcgen05.ld, fence_view_async_tmem_load (wait::ld), tcgen05_before_thread_sync
// before their arrive; both allocate tensor memory and publish the address with a plain __syncthreads,
// and CUTLASS-based sm100 examples free it right after a plain __syncthreads (alloc and dealloc are
// synchronous: no fence needed around them).
//
// Model (clocks as in hrt_core.h): every thread keeps a tcgen05 view -- its clock at its latest
// fence::after_thread_sync (own entry always current) -- and asynchronous tcgen05 accesses are checked
// against it, synchronous ones (alloc, dealloc) against the thread's clock. A tcgen05.ld read is recorded
// unpublished until its thread's next fence::before_thread_sync or tcgen05.commit, which stamps it with the
// thread's clock then. A tcgen05.mma write is its thread's MMA engine's (agent Cta::agent_tc), at the
// ordinal of the thread's next commit; the commit's arrival carries that ordinal, so only a wait on it
// (then an after-fence) orders the accumulator before a reader. A block-scaled MMA's reads of its scale columns
// are the engine's, at the same ordinal (tmem_shadow_mma_read). The shadow is per lane and column.
// tcgen05.wait::ld is not modelled apart: heddle_sm100.cuh issues it right after every tcgen05.ld.
#include <algorithm>

#include "heddle/interp/rt/hrt_tmem_shadow.h"

namespace heddle_rt {

constexpr Clock kUnpublished = 0xFFFFFFF0u;  // a tcgen05.ld read no fence::before / commit has published yet

struct TcShadow {
  struct Read {
    int tid = -1;  // the reading thread (for an MMA's read: the thread that issued it)
    Clock clk = 0;
    const void* pc = nullptr;
    uint32_t agent = UINT32_MAX;  // whose clock orders it: tid, or the MMA engine (Cta::agent_tc) at ordinal clk
  };
  struct Cell {
    uint32_t w_agent = UINT32_MAX;
    Clock w_clk = 0;
    const void* w_pc = nullptr;
    int w_tid = 0;
    const char* w_what = "";
    Read reads[2];  // tcgen05.ld readers since the write (newest two)
  };
  struct Thr {
    VC view;                        // the clock at the latest fence::after_thread_sync
    std::vector<uint32_t> pending;  // cells holding this thread's unpublished reads
    Clock commits = 0;              // tcgen05.commit issued (the MMA engine's ordinal)
  };
  std::vector<Cell> cells;  // lane * kTmemCols + column
  std::vector<Thr> th;
};

namespace {

TcShadow& sh() {
  Cta& c = cta();
  if (!c.tc_shadow) {
    c.tc_shadow = std::make_shared<TcShadow>();
    c.tc_shadow->cells.resize(size_t(ptx::kTmemLanes) * ptx::kTmemCols);
    c.tc_shadow->th.resize(size_t(c.nthreads));
    for (auto& t : c.tc_shadow->th) t.view.assign(size_t(c.nagents()), 0);
  }
  return *c.tc_shadow;
}

bool is_mma_agent(uint32_t agent) {
  const Cta& c = cta();
  return int(agent) >= c.agent_tc(0) && int(agent) < c.agent_tc(c.nthreads);
}

// One tcgen05 access of a range of cells by thread `tid`: `async` picks the clock it is checked with.
struct Access {
  int tid;
  bool async;
  const char* what;  // "tcgen05.ld", ...
  const void* pc;
  uint32_t lane0, lanes, col0, cols;
  bool reported = false;

  Clock seen(uint32_t agent) const {
    Cta& c = cta();
    return async ? sh().th[size_t(tid)].view[agent] : c.fibers[size_t(tid)]->vc[agent];
  }
  bool ordered(uint32_t agent, Clock clk) const { return int(agent) == tid || seen(agent) >= clk; }

  void report(const char* race, uint32_t cell, uint32_t other, int other_tid, Clock other_clk, const void* other_pc,
              const std::string& other_what) {
    if (reported) return;
    reported = true;
    Cta& c = cta();
    const Fiber& f = *c.fibers[size_t(tid)];
    std::string why;
    if (other_clk == kUnpublished)
      why = "missing tcgen05.fence::before_thread_sync: " + who(other_tid) + " has no tcgen05.fence::before_thread_sync "
            "(or tcgen05.commit) between its tcgen05.ld and the thread sync that was to publish it";
    else if (async && f.vc[other] >= other_clk)
      why = "missing tcgen05.fence::after_thread_sync: " + who(tid) + " synchronised with it, but has no "
            "tcgen05.fence::after_thread_sync between that sync and this asynchronous tcgen05 op";
    else if (is_mma_agent(other))
      why = "no wait on the mbarrier of a tcgen05.commit issued after that tcgen05.mma orders them (an MMA's "
            "result is complete only at its commit's mbarrier arrival)";
    else
      why = "no thread sync (bar.sync, mbarrier arrive -> wait) orders them";
    const uint32_t lane = cell / ptx::kTmemCols, col = cell % ptx::kTmemCols;
    finding("race", std::string("tensor-memory ") + race + " race on lane " + std::to_string(lane) + ", column " +
                        std::to_string(col) + " (" + what + " of lanes " + std::to_string(lane0) + "-" +
                        std::to_string(lane0 + lanes - 1) + ", columns " + std::to_string(col0) + "-" +
                        std::to_string(col0 + cols - 1) + "): " + what + " by " + who(tid) + " at " + pcs(pc) +
                        " is not ordered after the " + other_what + " by " + who(other_tid) + " at " + pcs(other_pc) +
                        ": " + why + " (CTA " + std::to_string(c.linear) + ")");
  }

  void check_write(TcShadow::Cell& g, uint32_t cell, uint32_t agent) {
    if (g.w_agent != UINT32_MAX && g.w_agent != agent && !ordered(g.w_agent, g.w_clk))
      report("write-after-write", cell, g.w_agent, g.w_tid, g.w_clk, g.w_pc, g.w_what);
    for (auto& r : g.reads)
      if (r.tid >= 0 && !ordered(r.agent, r.clk))
        report("write-after-read", cell, r.agent, r.tid, r.clk, r.pc,
               is_mma_agent(r.agent) ? "block-scaled tcgen05.mma scale read" : "tcgen05.ld read");
  }
};

}  // namespace

namespace {

// The cell's read slot for `agent`: its own, else a free one, else the older of the two (the newest two stay).
TcShadow::Read* reader_slot(TcShadow::Cell& g, uint32_t agent) {
  for (auto& r : g.reads)
    if (r.tid >= 0 && r.agent == agent) return &r;
  if (g.reads[0].tid < 0) return &g.reads[0];
  if (g.reads[1].tid < 0) return &g.reads[1];
  g.reads[0] = g.reads[1];
  return &g.reads[1];
}

}  // namespace

void tmem_shadow_alloc(int tid, uint32_t col, int ncols, const void* pc) {
  TcShadow& s = sh();
  const Clock clk = cta().fibers[size_t(tid)]->vc[size_t(tid)];
  for (uint32_t l = 0; l < uint32_t(ptx::kTmemLanes); ++l)
    for (uint32_t k = col; k < col + uint32_t(ncols) && k < uint32_t(ptx::kTmemCols); ++k) {
      TcShadow::Cell& g = s.cells[l * ptx::kTmemCols + k];
      g = TcShadow::Cell{};
      g.w_agent = uint32_t(tid);
      g.w_clk = clk;
      g.w_pc = pc;
      g.w_tid = tid;
      g.w_what = "tcgen05.alloc";
    }
}

void tmem_shadow_dealloc(int tid, uint32_t col, int ncols, const void* pc) {
  TcShadow& s = sh();
  Access a{tid, false, "tcgen05.dealloc", pc, 0, uint32_t(ptx::kTmemLanes), col, uint32_t(ncols)};
  for (uint32_t l = 0; l < uint32_t(ptx::kTmemLanes); ++l)
    for (uint32_t k = col; k < col + uint32_t(ncols) && k < uint32_t(ptx::kTmemCols); ++k) {
      const uint32_t cell = l * ptx::kTmemCols + k;
      a.check_write(s.cells[cell], cell, uint32_t(tid));
      s.cells[cell] = TcShadow::Cell{};
    }
}

void tmem_shadow_mma(int tid, uint32_t col, int ncols, const void* pc) {
  TcShadow& s = sh();
  Cta& c = cta();
  const uint32_t agent = uint32_t(c.agent_tc(tid));
  const Clock clk = s.th[size_t(tid)].commits + 1;
  Access a{tid, true, "tcgen05.mma", pc, 0, uint32_t(ptx::kTmemLanes), col, uint32_t(ncols)};
  for (uint32_t l = 0; l < uint32_t(ptx::kTmemLanes); ++l)
    for (uint32_t k = col; k < col + uint32_t(ncols) && k < uint32_t(ptx::kTmemCols); ++k) {
      const uint32_t cell = l * ptx::kTmemCols + k;
      TcShadow::Cell& g = s.cells[cell];
      a.check_write(g, cell, agent);
      g = TcShadow::Cell{};
      g.w_agent = agent;
      g.w_clk = clk;
      g.w_pc = pc;
      g.w_tid = tid;
      g.w_what = "tcgen05.mma write";
    }
}

void tmem_shadow_ld(int tid, uint32_t lane, uint32_t col, int ncols, const void* pc) {
  TcShadow& s = sh();
  TcShadow::Thr& t = s.th[size_t(tid)];
  Access a{tid, true, "tcgen05.ld", pc, lane, 1, col, uint32_t(ncols)};
  for (uint32_t k = col; k < col + uint32_t(ncols) && k < uint32_t(ptx::kTmemCols); ++k) {
    const uint32_t cell = lane * ptx::kTmemCols + k;
    TcShadow::Cell& g = s.cells[cell];
    if (g.w_agent != UINT32_MAX && !a.ordered(g.w_agent, g.w_clk))
      a.report("read-after-write", cell, g.w_agent, g.w_tid, g.w_clk, g.w_pc, g.w_what);
    *reader_slot(g, uint32_t(tid)) = TcShadow::Read{tid, kUnpublished, pc, uint32_t(tid)};
    t.pending.push_back(cell);
  }
}

// A block-scaled tcgen05.mma reading its scale columns (all lanes): an asynchronous read by the thread's MMA
// engine at the ordinal of its next commit. tcgen05.cp -> tcgen05.mma of one thread is a pipelined pair (PTX ISA
// 9.7.16.6.2), so the engine's own copy is ordered before it; tcgen05.mma -> tcgen05.cp is not, so a later copy
// over these columns must follow the commit's mbarrier wait and a fence::after_thread_sync (checked in
// check_write of that copy, a tcgen05_shadow_mma write by the same engine).
void tmem_shadow_mma_read(int tid, uint32_t col, int ncols, const void* pc) {
  TcShadow& s = sh();
  const uint32_t agent = uint32_t(cta().agent_tc(tid));
  const Clock clk = s.th[size_t(tid)].commits + 1;
  Access a{tid, true, "block-scaled tcgen05.mma scale read", pc, 0, uint32_t(ptx::kTmemLanes), col, uint32_t(ncols)};
  for (uint32_t l = 0; l < uint32_t(ptx::kTmemLanes); ++l)
    for (uint32_t k = col; k < col + uint32_t(ncols) && k < uint32_t(ptx::kTmemCols); ++k) {
      const uint32_t cell = l * ptx::kTmemCols + k;
      TcShadow::Cell& g = s.cells[cell];
      if (g.w_agent != UINT32_MAX && g.w_agent != agent && !a.ordered(g.w_agent, g.w_clk))
        a.report("read-after-write", cell, g.w_agent, g.w_tid, g.w_clk, g.w_pc, g.w_what);
      *reader_slot(g, agent) = TcShadow::Read{tid, clk, pc, agent};
    }
}

static void publish(int tid) {
  TcShadow& s = sh();
  TcShadow::Thr& t = s.th[size_t(tid)];
  const Clock now = cta().fibers[size_t(tid)]->vc[size_t(tid)];
  for (uint32_t cell : t.pending)
    for (auto& r : s.cells[cell].reads)
      if (r.tid == tid && r.agent == uint32_t(tid) && r.clk == kUnpublished) r.clk = now;
  t.pending.clear();
}

Clock tmem_shadow_commit(int tid) {
  publish(tid);  // the implicit fence::before_thread_sync of tcgen05.commit
  return ++sh().th[size_t(tid)].commits;
}

void tmem_shadow_fence(int tid, bool before) {
  if (before) {
    publish(tid);
    return;
  }
  TcShadow::Thr& t = sh().th[size_t(tid)];
  vc_join(t.view, cta().fibers[size_t(tid)]->vc);
}

}  // namespace heddle_rt
