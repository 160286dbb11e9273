// heddle/interp/rt/hrt_core.h -- internal state of the execution runtime (not seen by kernels).
//
// One CTA (with a cluster launch: the CTAs of one cluster, as one Cta, hrt_cluster.cpp) runs at a time
// per OS thread (hrt_launch.workers > 1 runs that many CTAs at once, one OS
// thread each, with its own shared window; the output-write counters are shared): every GPU thread is a Fiber (its own stack, hrt_fiber.cpp);
// a Scheduler picks which fiber runs next (adversarial: each runs until it blocks, order flipped at
// every barrier release, asynchronous work lands as late as the program allows; random: seeded bursts,
// asynchronous work lands at random moments). Happens-before is tracked with vector clocks over
// "agents": the threads, plus one agent per asynchronous engine whose completion a wait observes
// (a thread's cp.async groups, a thread's bulk-store groups, a warpgroup's wgmma groups, each
// mbarrier's phases, a thread's tcgen05.mma engine). Shadow state per 2-byte granule of shared memory
// records the last write and the reads since (hrt_shadow.cpp; tensor memory: hrt_tmem_shadow.cpp);
// accesses come from the primitives and from the compiler's instrumentation of every plain load and
// store of the kernel (-fsanitize=thread hooks).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "heddle/interp/rt/hrt_abi.h"
#include "heddle/interp/rt/hrt_api.h"
#include "heddle/interp/rt/hrt_ptx.h"
#include "heddle/interp/rt/hrt_ptx_tcgen05.h"

namespace heddle_rt {

using Clock = uint32_t;
using VC = std::vector<Clock>;

enum class FState { Ready, Blocked, Done };

struct Fiber {
  void* sp = nullptr;
  char* stack_lo = nullptr;
  char* stack_hi = nullptr;
  int tid = 0;
  Dim3 idx{0, 0, 0};
  FState st = FState::Ready;
  std::function<bool()> ready;  // while Blocked: may it go on?
  std::string waiting;          // while Blocked: what it waits for (deadlock reports)
  const void* wait_pc = nullptr;
  VC vc;
  int cp_committed = 0, bulk_committed = 0, wg_committed = 0;
  bool wg_fenced = false;     // a wgmma.fence has run in this thread (the ISA wants one before its first wgmma)
  // bulk stores: the group of the last one issued, and the groups whose shared-memory reads a
  // cp.async.bulk.wait_group.read has waited for (the CTA must not end before they were read)
  int bulk_store_group = 0, bulk_read_waited = 0;
  const void* bulk_store_pc = nullptr;
  int vm_issued = 0;          // AMD: LDS DMA ops this lane took part in (its wave's vmcnt ordinal)
  std::vector<Clock> fences;  // own clock at each fence.proxy.async
  int rank = 0;               // its CTA's rank in the cluster (tid / Cta::cta_threads)
  uint64_t cl_arrived = 0;    // the cluster-barrier phase it arrived on last, plus one (0: none)
  // AMD workgroup fences (hrt_workgroup_fences.cpp): an AMD barrier orders execution (x: what this thread is
  // ordered after through barriers alone) and publishes memory only through the fences around it
  // (rel: this thread's clock at its last workgroup release fence, what its barrier arrivals publish;
  // acq: what its barrier waits made visible and no acquire fence has taken yet, from the wait at acq_pc)
  VC amd_x, amd_rel, amd_acq;
  const void* amd_acq_pc = nullptr;
};

struct PendingCopy {  // cp.async: issued, lands at most at the wait that retires its group
  int tid, group;
  uint32_t dst;
  int bytes;
  uint8_t data[16];
};

struct PendingTma {  // TMA load: lands (and completes its bytes on the mbarrier) when the scheduler says
  int tid;
  uint32_t bar;
  uint32_t phase;  // the phase of `bar` it completes
  uint32_t bytes;
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> pieces;
  const void* pc;
};

struct PendingStore {  // TMA store: reads shared memory at the latest at the wait that retires it
  int tid, group;
  ptx::TensorMap map;
  int rank;
  int32_t coords[5];
  uint32_t src;
  const void* pc;
};

struct PendingWgmma {  // a thread's share of a wgmma: its accumulators land at its wait_group
  int tid, group;
  float* d;
  std::vector<float> result;
};

struct PendingTcMma {  // tcgen05.mma issued, not yet run: it runs when a later commit of its thread lands
  int tid;
  uint32_t d, idesc;
  uint64_t a, b;
  bool enable;
  const void* pc;
  ptx::TcKind kind = ptx::TcKind::F16;  // the .kind qualifier: how the idesc's type fields read
  // kBlockScaled: tcgen05.mma kind::mxf8f6f4.block_scale (scales at tensor-memory addresses sfa / sfb), kNvf4:
  // kind::mxf4nvf4.block_scale.scale_vec::4X; kMxf4: kind::mxf4.block_scale.scale_vec::2X; kCopy:
  // tcgen05.cp.32x128b.warpx4 to d from the descriptor a. Queued with the MMAs: cp -> mma of one thread run in
  // issue order (PTX ISA 9.7.16.6.2), and a commit tracks both.
  enum Op { kMma, kBlockScaled, kNvf4, kMxf4, kCopy } op = kMma;
  uint32_t sfa = 0, sfb = 0;
};

struct PendingTcCommit {  // tcgen05.commit: runs its thread's earlier MMAs, then one arrival on `bar`
  int tid;
  uint32_t bar;
  std::vector<PendingTcMma> mmas;
  VC vc;           // the issuing thread's clock at the commit (what the arrival publishes)
  const void* pc;
};

struct Mbar {
  int count = 0, pending = 0;
  int64_t tx = 0;
  uint32_t phase = 0;  // number of completed phases
  int agent = -1;
  VC arrivals;         // join of the current phase's arrivals
  VC done[2];          // clocks published by the last completed phase of each parity
  int init_tid = -1;
  Clock init_clk = 0;
  const void* init_pc = nullptr;
  Clock fence_clk = 0;  // the init thread's clock at its fence.mbarrier_init after the init (0: none)
  int64_t observed = -1;          // the latest phase a successful try_wait observed (-1: none)
  const void* last_pc = nullptr;  // what completed the latest phase (phase - 1), and its thread
  int last_tid = -1;
  bool unobserved_reported = false;
  bool unfenced_reported = false;  // an async-proxy use before that fence was reported (once per barrier)
};

struct NamedBar {
  int expected = 0, arrived = 0;
  uint64_t gen = 0;
  VC join;
  const void* pc = nullptr;
  std::vector<int> members;
};

struct NamedBarrierObject {  // a gfx1250 named barrier object (hrt_barrier_objects.cpp); counts in lanes
  bool initialized = false;
  int64_t expected = 0, arrived = 0;
  uint64_t phase = 0;                 // completed phases
  int first_wave = -1;                // the wave of the current phase's first arrive (signal_isfirst)
  VC join;                            // the current phase's arrivers
  std::vector<VC> done;               // per completed phase: what it publishes
  std::vector<int64_t> arrived_phase; // per thread: the phase of its latest arrive (-1: none)
  std::vector<int64_t> waited_phase;  // per thread: the last phase it waited for (-1: none)
  std::vector<char> left;             // per thread: dropped by s_barrier_leave and not joined since
  const void* init_pc = nullptr;
  std::vector<Clock> init_clk;        // per lane of the initializing wave: its clock at the init (0: not one)
  VC xjoin;                           // execution order of the current phase's arrivers (hrt_workgroup_fences.cpp)
  std::vector<VC> xdone;              // per completed phase: the execution order it publishes
};

struct PendingDma {  // AMD LDS DMA (one lane's dword): lands when the scheduler says, retired by s_waitcnt
  int tid, op;       // op: the wave's vector-memory ordinal (1-based)
  uint32_t dst, m0;
  int32_t rsrc[4];
  uint8_t data[4];
  const void* pc;
  bool landed;       // written early by the random schedule (still retired by the wait)
};

// An AMD hardware barrier: s_barrier and the GFX12 split s_barrier_signal / s_barrier_wait on the
// workgroup barrier (id -1). A phase completes when every member thread has signalled it or has ended
// (the ISA: a barrier waits on the surviving waves only). The workgroup barrier's members are all the
// workgroup's threads; a named barrier (gfx1250) is another object whose members and expected count
// come from its init.
struct HwBarrier {
  int id = -1;
  int expected = 0;         // member threads (the phase needs each one's signal, or its end)
  std::vector<char> member; // per thread of the CTA
  int arrived = 0;          // signals in the current phase
  uint64_t phase = 0;       // completed phases
  VC join;                  // the current phase's signals
  VC done;                  // published by the last completed phase
  std::vector<int64_t> sig; // per thread: the phase it signalled and has not waited for yet (-1: none)
  const void* pc = nullptr; // the first signal of the current phase
  VC xjoin, xdone;          // the same in execution order (barriers without their fences, hrt_workgroup_fences.cpp)
};

struct ClusterBar {  // barrier.cluster: a phase completes when every non-exited thread of the cluster arrived
  int arrived = 0;
  uint64_t phase = 0;  // completed phases
  VC join;             // the current phase's arrivals
  VC done;             // published by the last completed phase
};

struct Coll {  // a warp / wave / warpgroup collective in progress
  int arrived = 0;
  uint64_t gen = 0;
  const void* pc = nullptr;
  const char* what = nullptr;
  void* in[128];
  void* out[128];
};

struct Finding {
  std::string kind;  // race | async | deadlock | error
  std::string text;
  uint32_t cta = 0;  // the CTA it was found in (orders the findings of parallel workers)
};

struct ReadRec {
  uint32_t agent;
  Clock clk;
  const void* pc;
  uint32_t tid;  // the thread behind the agent (for messages)
};

struct Granule {  // 2 bytes of shared memory
  uint32_t w_agent = UINT32_MAX;
  Clock w_clk = 0;
  const void* w_pc = nullptr;
  uint32_t w_tid = 0;
  bool w_generic = false;  // written by a thread's st.shared (needs fence.proxy.async before async-proxy reads)
  uint8_t nreads = 0;
  ReadRec reads[6];
};

struct Cta;
struct GridState;  // grid-level flags and partial tiles (hrt_grid.cpp)

// Per-OS-thread run state
struct Run {
  const hrt_launch* launch = nullptr;
  void* const* argv = nullptr;
  unsigned char* smem = nullptr;
  uint32_t smem_bytes = 0;  // the window in use: a cluster's spans (ranks - 1) * HRT_SMEM_WINDOW_BYTES more
  std::vector<Finding> findings;
  std::map<std::string, int> per_kind;
  int max_findings = 20;
  std::atomic<uint8_t>* out_written = nullptr;  // per output element: writes seen (shared by the workers)
  std::vector<size_t> region_granule0;
  uint64_t events_total = 0;
  Cta* cta = nullptr;
  int ranks = 1;  // CTAs per cluster (hrt_launch.cluster)
  std::shared_ptr<GridState> grid;  // created on first use, lives for the launch
};

struct Cta {
  Run* run;
  uint32_t linear = 0;
  Dim3 idx{0, 0, 0};   // of rank 0 (rank r is idx.x + r)
  int nthreads = 0, nwg = 0;  // of the whole cluster (one CTA without one)
  int ranks = 1, cta_threads = 0;  // CTAs in the cluster, threads per CTA
  std::vector<int> rank_done;      // per rank: its threads that have ended
  ClusterBar cluster_bar;
  std::vector<std::unique_ptr<Fiber>> fibers;
  Fiber* cur = nullptr;
  void* sched_sp = nullptr;
  bool aborted = false;
  bool flipped = false;
  int cursor = 0;
  std::mt19937_64 rng;
  int policy = HRT_ADVERSARIAL;
  int64_t burst = 0, events = 0, max_events = 0;
  std::vector<Granule> shadow;
  std::map<uint32_t, Mbar> mbars;
  int next_mbar_agent = 0;
  NamedBar bars[16 * HRT_MAX_CLUSTER];  // per rank: bar.sync ids 0..15
  std::vector<Coll> warp_coll, wave64_coll, wg_coll;
  int wave = 32;       // the kernel's wavefront size (CUDA warps: 32; AMD: 64 on CDNA, 32 on GFX12)
  bool amd = false;    // a HIP kernel (threads are named by wave; vector-memory agents per wave)
  int ndone = 0;       // threads that have ended
  HwBarrier hw_bar;    // AMD workgroup barrier (-1)
  NamedBarrierObject amd_bars[17];  // gfx1250 named barriers 1..16 (0, the NULL barrier, unused)
  std::vector<int> amd_joined;   // per thread: the named barrier it joined last (0 / -1: none)
  std::vector<PendingDma> dmas;
  std::vector<PendingCopy> copies;
  std::vector<PendingTma> tmas;
  std::vector<PendingStore> stores;
  std::vector<PendingWgmma> wgmmas;
  // sm_100a (hrt_tcgen05.cpp): the CTA's tensor memory, MMAs not yet committed, commits not yet landed
  std::unique_ptr<ptx::Tmem> tmem;
  std::vector<PendingTcMma> tc_mmas;
  std::vector<PendingTcCommit> tc_commits;
  std::shared_ptr<struct TcShadow> tc_shadow;  // tensor memory's race shadow and the tcgen05 views (hrt_tmem_shadow.cpp)
  std::vector<uint8_t> scratch;  // TMA box images (sized to the shared window once per CTA)
  // setmaxnreg (hrt_regs.cpp): the register pool of each CTA (rank) and every warpgroup's per-thread budget
  int reg_entry = 0;                 // registers per thread at entry
  bool reg_from_ptxas = false;       // reg_entry is ptxas's count (else the __launch_bounds__ cap)
  int64_t reg_pool = 0;              // reg_entry x threads of one CTA
  std::vector<int64_t> reg_used;     // per rank: registers the warpgroups hold
  std::vector<int> wg_regs;          // per warpgroup: its per-thread budget
  std::vector<int> wg_reg_pending;   // per warpgroup: an increase waiting for registers (0: none)
  // agents
  int agent_cp(int t) const { return nthreads + t; }
  int agent_vm(int t) const { return agent_cp(t - t % wave); }  // AMD: the LDS DMA of t's wave
  int agent_bulk(int t) const { return 2 * nthreads + t; }
  int agent_wg(int w) const { return 3 * nthreads + w; }
  int agent_mbar(int j) const { return 3 * nthreads + nwg + j; }
  int agent_tc(int t) const { return 3 * nthreads + nwg + kMaxMbars + t; }  // t's tcgen05.mma (hrt_tmem_shadow.cpp)
  int nagents() const { return 4 * nthreads + nwg + kMaxMbars; }
  static constexpr int kMaxMbars = 64;
};

Run& run();
Run* run_ptr();  // null outside hrt_run
Cta& cta();
Fiber& me();

// findings (hrt_report.cpp); `pc` markers are resolved to source lines by the driver
void finding(const char* kind, const std::string& text);
std::string pcs(const void* pc);                 // "@pc(0x...)"
std::string who(int tid);                        // "thread 37 (warp 1 lane 5)"
std::string hex(uint64_t v);                     // "0x1f"
[[noreturn]] void abort_cta(const std::string& text);  // error finding + stop this CTA

// scheduling (hrt_sched.cpp)
void tick();                                                       // one event: may preempt (random)
void block_until(std::function<bool()> ready, std::string what, const void* pc);
// A warp (width 32), wave64 (64) or warpgroup (128) collective: the last member to arrive runs `all` over every
// member's in/out pointers (hrt_sched.cpp).
void collective(int width, const char* what, const void* pc, void* in, void* out,
                const std::function<void(void** ins, void** outs)>& all);

// register pool (hrt_regs.cpp): every warpgroup at the entry count (regs_per_thread 0: the launch-bounds cap)
void regs_reset(Cta& c, uint32_t regs_per_thread);

// happens-before (hrt_shadow.cpp)
void vc_join(VC& into, const VC& from);
void smem_access(uint32_t off, uint32_t bytes, bool write, uint32_t agent, Clock clk, uint32_t tid, const VC& vc,
                 const void* pc, bool async_proxy, const char* what);
// `natural`: a load or store of 2, 4, 8 or 16 bytes (not a block copy), which a GPU faults on unless its
// address is a multiple of its size ("misaligned address"): reported as such.
void thread_access(const void* p, uint32_t bytes, bool write, const void* pc, bool natural = false);
void shadow_reset();
int region_of(uint64_t addr, uint32_t bytes, bool writable_only = false);  // index into launch regions, or -1
void global_store_by_engine(uint64_t a, uint32_t bytes, const void* pc, int tid);

// async engines (hrt_async.cpp)
bool land_one(bool random_pick);  // lands one piece of pending asynchronous work; false if none
bool land_one_tcgen05(bool random_pick);  // hrt_tcgen05.cpp: the same for tcgen05 commits
void finish_cta_tcgen05();                // hrt_tcgen05.cpp: what tcgen05 leaves behind at exit
void mbar_arrive_vc(uint32_t bar, const VC& vc, const void* pc, const char* what);  // an arrival carrying `vc`
bool land_one_dma(bool random_pick);  // hrt_amdgcn.cpp: the same for LDS DMA
void finish_cta_amd();                // hrt_amdgcn.cpp: LDS DMA still in flight at exit
void hw_barrier_try_complete(HwBarrier& b);
// hrt_workgroup_fences.cpp: the calling thread's arrive on an AMD barrier phase (memory: what its last workgroup
// release fence published, into `join`; execution: everything it is ordered after, into `xjoin`) and its
// wait (memory: pending until its next workgroup acquire fence; execution: at once)
void amd_arrive(VC& join, VC& xjoin);
void amd_wait(const VC& done, const VC& xdone, const void* pc);
bool amd_exec_ordered(const Fiber& f, uint32_t agent, Clock clk);  // through barriers, with or without fences
// " (...)" naming the missing workgroup fence when an access of thread `tid` races with (agent, clk) and
// a barrier orders the pair in execution, else ""
std::string amd_fence_note(uint32_t accessor, uint32_t tid, uint32_t agent, Clock clk);
// hrt_barrier_objects.cpp: arrive on / wait for named barrier `id` (1..16, or 0: the NULL barrier, a no-op);
// named_arrive returns whether the caller's wave arrived first in the phase
bool named_arrive(int id, const char* what, const void* pc);
void named_wait(int id, const void* pc);  // hrt_amdgcn.cpp: completes b's phase once every live member signalled
void finish_cta_async();          // reports what is still in flight at exit
void cluster_barrier_try_complete();
// mbarriers (hrt_async.cpp): the barrier at a window offset (use-before-init and, across the CTAs of a cluster,
// init-fence and exited-owner checks), and an arrival of the calling thread with `tx` expected bytes
struct Mbar& mbar_at(uint32_t bar, const void* pc, const char* what);
// The same for a use by the async proxy (a TMA load's complete_tx, tcgen05.commit): the init must also have
// been fenced (fence.mbarrier_init by the initializing thread, ordered before this use), else async misuse.
struct Mbar& mbar_async_use(uint32_t bar, const void* pc, const char* what);
void mbar_arrive_impl(uint32_t bar, int64_t tx, const void* pc, const char* what);  // completes barrier.cluster's phase once every live thread arrived

}  // namespace heddle_rt
