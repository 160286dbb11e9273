// The state of one simulated CTA: its threads (each an explicit-stack interpreter over the kernel
// IR), shared memory with per-element shadow state for happens-before, the cp.async machinery,
// and the global output. Internal to verify/; the entry point is simulate() (simulator.h).
//
// Happens-before. Every thread t has a vector clock vc[t]; its own entry advances after each
// barrier it passes. An access is an epoch (thread, clock). A synchronous write is ordered before
// thread u's access when clock <= vc[u][thread]. A cp.async write is recorded when issued (it may
// land at any moment after that) and becomes ordered only through its group's retirement: the
// wait_group that retires group g of thread t stamps retire[t][g] = vc[t][t], and the write is
// ordered before u's access when retire[t][g] <= vc[u][t] (u == t: once retired). Reads keep one
// epoch per thread per element; a write must be ordered after all of them (WAR) and after the
// previous write (WAW).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "heddle/kir/kir.h"
#include "heddle/verify/mbarrier_state.h"
#include "heddle/verify/report.h"
#include "heddle/verify/simulator.h"

namespace heddle::verify {

constexpr uint32_t kNever = 0xFFFFFFFFu;
constexpr int kNotJoined = -1000;

// One dynamic execution of a leaf node by one thread (named in messages).
struct OpInst {
  const kir::Node* node;
  int thread;
  int64_t iter;
  int64_t stage;
};

struct WriteRec {
  int32_t thread = -1;  // -1: never written
  int32_t group = -1;   // cp.async group sequence number of `thread`; -1: synchronous write
  uint32_t clock = 0;   // writer's own clock at the write (async: at the issue)
  uint32_t inst = 0;    // OpInst index
};

struct Region {
  const kir::Buffer* buf;
  int64_t base, stageElems;
  int stages, rows, cols;
};

struct AsyncChunk {
  uint32_t cell, count, valOffset;
  int32_t thread, group;
  bool landed;
};

enum class Status { Running, AtBarrier, Done, Blocked };  // Blocked: mbarrier wait or bar.sync (sm90)

// Split-K across the CTAs of one simulation (verify/grid.cpp): the partial tiles in the workspace
// (per slot: every storing thread's values and clock, the storing CTA) and the flags (released by
// which CTA). CTAs run in linear order, so a flag only earlier CTAs could release is final.
struct GridState {
  struct Partial {
    int cta = -1;
    std::map<int, std::vector<float>> values;  // storing thread -> its accumulators
    std::map<int, uint32_t> clocks;            // storing thread -> its clock at the store
  };
  std::map<int64_t, Partial> partials;  // by slot
  std::map<int64_t, int> released;      // flag -> releasing CTA
};

// An access ordered after a cp.async's issue but not after the wait_group that retires it. If the
// issuing thread retires the group in the same barrier phase as the access and at an earlier
// program position (a barrier between the two would have fixed it), it is a race: the barrier
// after the wait is missing. Otherwise (retired later in program order, in a later phase, or
// never) it is async misuse: the access comes before the wait. A group still in flight at the
// access is classified when it retires (Cta::settle).
struct Deferred {
  std::string kind;  // RAW / WAW
  uint32_t earlier, later, cell;
  uint32_t seen;  // the accessing thread's clock entry for the issuing thread
  int64_t pos;    // the accessing thread's program position (steps taken) at the access
  int64_t count;
};

struct Frame {
  const kir::Block* blk;
  size_t idx;
  const kir::ForLoop* loop;  // null for an if-branch or the kernel body
  int64_t stop;
  bool hadOld;
  int64_t old;  // the loop variable's previous binding (shadowing)
};

struct Thread {
  int tid = 0, warp = 0, lane = 0;
  int rank = 0;  // its CTA's rank in a simulated cluster (tid = rank * Tc + local)
  Status status = Status::Running;
  const kir::Sync* barrier = nullptr;  // the barrier it waits at
  std::vector<Frame> stack;
  std::map<std::string, int64_t> env;
  std::vector<uint32_t> vc;
  // cp.async: copies join group `openGroup` until a commit closes it
  int32_t openGroup = 0;
  std::deque<int32_t> committed;  // closed, not yet retired (oldest first)
  std::vector<std::vector<uint32_t>> groupChunks;
  std::vector<uint32_t> retire;    // per group: the retiring clock, kNever while in flight
  std::vector<int64_t> retirePos;  // per group: program position of the retiring wait
  int64_t pos = 0;                 // program position: statements executed so far
  // registers: the lane's accumulator elements (row-major over its owned (fm, fn, r) slots)
  std::vector<float> acc;
  // a block-scaled kernel's wgmma accumulators of one promotion interval (buffer role "acctmp",
  // passes/block_scale_promotion.cpp): wgmma accumulates here, a promotion adds them into acc
  std::vector<float> tmp;
  // hand-built kernels: the token program order says each (buffer, stage) holds
  std::map<std::pair<const kir::Buffer*, int64_t>, float> expected;
  // GFX12 split barriers (verify/amdgcn_sim.cpp): signals made / waits passed so far
  int sigCount = 0, waitCount = 0;
  // AMD workgroup fences (verify/workgroup_fences.cpp): execution order through barriers regardless of
  // fences, the clock at the last release fence (what an arrive publishes), what waits made visible
  // that no acquire fence has taken yet; the last wait without its acquire fence, the last arrive
  // without its release fence (messages)
  std::vector<uint32_t> amdX, amdRel, amdAcq;
  const kir::Sync* amdUnacquired = nullptr;
  const kir::Sync* amdUnreleased = nullptr;
  // AMD named barrier objects (verify/barrier_objects.cpp): the barrier this thread joined last
  // (kNotJoined: none; 0: the NULL barrier), per barrier the phase of its latest arrive and the
  // last phase it waited on (-1: none), the barriers it dropped and has not joined since, and what
  // a blocked wait waits for
  int joined = kNotJoined;
  std::map<int, int64_t> arrivedPhase, waitedPhase;
  std::set<int> left;
  int waitBar = 0;
  int64_t waitPhase = 0;
  MbarrierThread h;  // Hopper: async groups, mbarrier / named-barrier waits
};

class Cta {
 public:
  Cta(const kir::Kernel& k, const SimInputs& in, const SimOptions& opt, Reports& rep, std::vector<float>& out,
      std::vector<WriteRec>& outW, int64_t bx, int64_t by, int64_t bz, uint64_t seed);

  // Runs the CTA to completion, deadlock, or the step budget. Returns the steps taken.
  int64_t run(int64_t stepBudget);

  // --- interp.cpp: one step of thread t (control flow, or one leaf / sync node)
  void step(Thread& t);
  std::string where(const Thread& t) const;  // "kt=3" loop context of a thread

  // --- sync.cpp
  void execSync(Thread& t, const kir::Sync& s);
  void commit(Thread& t);
  void waitGroups(Thread& t, int keep);
  void arriveBarrier(Thread& t, const kir::Sync& s);
  void diagnoseStuck();  // no runnable thread but some alive
  void land(uint32_t chunk);
  void landAll();

  // --- ops.cpp
  void execLeaf(Thread& t, const kir::Node& n);

  // --- grid.cpp: split-K partial tiles and grid flags (GridState); acquired: flag -> (thread, clock)
  GridState* grid = nullptr;
  std::map<int64_t, std::pair<int, uint32_t>> acquired;
  bool execGridSync(Thread& t, const kir::Sync& s);          // false: not a grid op
  bool execPartial(Thread& t, const kir::EpilogueStore& e);  // false: not a partial store / add

  // --- memory.cpp
  void setupMemory();
  uint32_t cellOf(const kir::Buffer* b, int64_t stage, int64_t r, int64_t c, const kir::Node& n) const;
  float readCell(uint32_t cell, Thread& u, uint32_t inst);
  void writeCell(uint32_t cell, Thread& w, uint32_t inst, int32_t group);  // checks + shadow update
  // a generic-proxy st.shared of v into `cell`, unfenced until the thread's fence.proxy.async (tma_wgmma_ops.cpp)
  void writeGeneric(Thread& t, uint32_t cell, uint32_t inst, float v);
  uint32_t newInst(const kir::Node& n, const Thread& t, int64_t iter, int64_t stage);
  std::string describeInst(uint32_t inst) const;
  std::string describeCell(uint32_t cell) const;
  const std::string& bufferName(uint32_t cell) const;

  const kir::Kernel& k;
  const SimInputs& in;
  const SimOptions& opt;
  Reports& rep;
  std::vector<float>& out;  // D, then D1, ... (Kernel::extraOutputs), shared by all CTAs of a simulation
  std::vector<WriteRec>& outW;
  // elements per output: output o (0 = D) is out[o * outElems() ...]
  int64_t outElems() const { return (int64_t)out.size() / (1 + (int64_t)k.extraOutputs.size()); }
  // the output param a node stores (0: "D", o: "D<o>"), for messages
  std::string outName(int o) const { return o ? k.extraOutputs.at(o - 1).param : std::string("D"); }
  int T = 0, W = 32;
  // A cluster (kir::Kernel::cluster > 1) is simulated as one Cta of `ranks` CTAs of Tc threads each: thread
  // i is thread i % Tc of CTA rank i / Tc (blockIdx.x = bx + rank); every CTA has its own shared memory
  // (ctaCells cells from rank * ctaCells), mbarriers (barsPerCta from rank * barsPerCta) and named
  // barriers; barrier.cluster is the block barrier of all T threads (docs/verification.md "Clusters").
  int ranks = 1, Tc = 0;
  int64_t ctaCells = 0;
  int barsPerCta = 0;
  int curRank = 0;  // the rank whose shared memory cellOf / mbarId address (the stepping thread's)
  int64_t bx, by, bz, m0 = 0, n0 = 0;
  int64_t batch() const { return k.splitK > 1 || k.streamK > 0 ? 0 : bz; }  // blockIdx.z is the split under split-K
  std::vector<Thread> th;
  std::mt19937_64 rng;
  int64_t releases = 0;    // barrier releases so far (the adversarial schedule turns at each)
  bool stopped = false;    // stopAtFirstError hit, deadlock, or budget
  bool divergent = false;  // a thread-dependent branch ran: hand-built kernels' data tokens no
                           // longer follow one program order (happens-before alone judges)

  // shared memory: cells of every shared buffer, all stages
  std::map<const kir::Buffer*, Region> regions;
  std::vector<float> smem;
  std::vector<WriteRec> smemW;
  std::vector<uint64_t> smemR;  // [cell * T + t]: (clock << 32) | (inst + 1); 0 = no read
  std::vector<OpInst> insts;
  std::vector<AsyncChunk> chunks;
  std::vector<float> chunkVals;
  std::vector<uint32_t> unlanded;        // chunk indices, possibly landed already (lazily dropped)
  std::map<std::string, int> mappings;   // SmemAccess mapping name -> index
  std::map<int, const kir::Node*> byId;  // node id -> node (decoding hand-built kernels' tokens)
  int ctaIndex = 0;
  struct DeferredGroup {
    std::vector<Deferred> list;
    std::map<std::string, size_t> index;
  };
  std::map<std::pair<int, int32_t>, DeferredGroup> deferred;  // by (issuing thread, group)
  void settle(int thread, int32_t group);                     // classify the deferred accesses of a retired group

  // --- amdgcn_sim.cpp: split barriers (phase k completes when every thread made its k-th signal;
  // a wait joins the clocks of that phase) and the no-BackOffBarrier rule
  struct SplitPhase {
    int signals = 0;
    bool completed = false;
    std::vector<uint32_t> clock;
    std::vector<uint32_t> xclock;  // execution order (workgroup_fences.cpp)
  };
  std::map<int, SplitPhase> splitPhases;
  int firstOpenSplit = 0;  // phases below it completed
  void signalBarrier(Thread& t, const kir::Sync& s);
  // verify/workgroup_fences.cpp: t's arrive on a barrier phase (memory into `mem`, execution into `exec`) and
  // its wait; without SimOptions::amdFences an arrive publishes t's clock and a wait acquires it
  void fencedArrive(Thread& t, const kir::Sync& s, std::vector<uint32_t>& mem, std::vector<uint32_t>& exec);
  void fencedWait(Thread& t, const kir::Sync& s, const std::vector<uint32_t>& mem, const std::vector<uint32_t>& exec);
  std::string fenceNote(int reader, int writer, uint32_t clock) const;  // names a missing fence, or
  void waitSplitBarrier(Thread& t, const kir::Sync& s);
  void completeSplitPhases();  // phase k completes when every thread not dropped by then signalled it
  void checkBackOff(const Thread& t, const kir::Sync& s);

  // --- barrier_objects.cpp: the barrier objects of the AMDGPU execution-synchronization model (named
  // barriers 1..16 with init / join / drop (s_barrier_leave) / arrive / wait, the NULL barrier 0)
  // and the drop of the workgroup barrier by a thread that ends (SimOptions::dropOnExit)
  struct BarrierObject {
    bool initialized = false;
    int64_t expected = 0, arrived = 0;  // in lanes: a wave-uniform op counts once per lane (W per wave)
    int64_t phase = 0;                  // phases completed so far
    std::vector<uint32_t> clock;        // join of the current phase's arrivers
    std::map<int64_t, std::vector<uint32_t>> completed;  // phase -> the clocks it released
  };
  std::map<int, BarrierObject> barrierObjects;
  bool execBarrierObject(Thread& t, const kir::Sync& s);  // false: not a named-barrier op
  void completeBarrierObject(int id);
  void barrierMisuse(const Thread& t, const kir::Sync& s, const std::string& key, const std::string& what);
  void threadExited(Thread& t);
  void releaseBlockBarrier(const kir::Sync& s);

  // --- mbarrier_sync.cpp / tma_wgmma_ops.cpp: Hopper (mbarriers, TMA, wgmma, proxy fences, named barriers)
  MbarrierState mbar;
  void setupMbarrierState();  // before the threads' clocks are sized
  // the threads, the mbarriers, and (sm_100a) each thread's tcgen05.mma engine (tcgen05_sim.cpp)
  int clockSize() const { return T + (int)mbar.bars.size() + (k.tile.mma == MmaKind::Tcgen05 ? T : 0); }
  int tcAgent(int tid) const { return T + (int)mbar.bars.size() + tid; }
  bool execMbarrierSync(Thread& t, const kir::Sync& s);     // false: not a Hopper op
  bool execTmaWgmmaLeaf(Thread& t, const kir::Node& n);     // false: not a Hopper leaf
  bool tmaLand(bool oldest);                                // lands one TMA copy; false when none is in flight
  void mbarrierFinish();                                    // end-of-CTA checks (phases, groups in flight)
  std::string mbarrierStuck() const;                        // who waits on which mbarrier / named barrier
  void asyncProxyCheckWrite(uint32_t cell, uint32_t inst);  // a write over an in-flight asynchronous read
  int mbarId(const kir::Buffer* b, int64_t index, const kir::Node& n) const;
  bool mbarVisible(Thread& t, MbarState& m, const kir::Node& n);
  void asyncProxyInitCheck(Thread& t, MbarState& m, const kir::Node& n);  // the init fenced (TMA, tcgen05.commit)
  // `by` / `thread`: the op completing a phase, for the unobserved-phases report (mbarUnobserved)
  void mbarArrive(int id, const std::vector<uint32_t>& vc, const kir::Node* by = nullptr, int thread = -1);
  void mbarComplete(int id, const kir::Node* by, int thread);
  void mbarTx(int id, int64_t bytes, const kir::Node& n, int thread = -1);
  void mbarUnobserved(const MbarState& m, int64_t n);  // phases n and n+1 completed, no wait observed either
  // clusters: a remote operation (peer arrive, multicast landing) on CTA `rank`'s mbarrier `id` -- reported
  // when that CTA already exited or the barrier's init was not fenced for the cluster
  void clusterRemoteCheck(int id, const std::string& what);
  bool rankExited(int rank) const;
  float asyncRead(Thread& t, uint32_t cell, uint32_t inst, AsyncReadGroup& g, const char* reader);
  void retireReads(Thread& t, AsyncReadGroup& g);
  void landTma(TmaOp& op);
  // --- tcgen05_sim.cpp: tcgen05 (tensor memory, tcgen05.mma / commit / ld, the tcgen05 fences)
  bool execTcgen05Sync(Thread& t, const kir::Sync& s);  // false: not a tcgen05 op
  bool execTcgen05Leaf(Thread& t, const kir::Node& n);  // false: not a tcgen05 leaf
  void publishTcReads(Thread& t);  // fence::before_thread_sync (or commit): stamps its tcgen05.ld reads
  void tcgen05Finish();

 private:
  enum class Order { Ordered, Unordered, AfterIssue };  // AfterIssue: async write not yet ordered
  Order orderOf(const WriteRec& w, const Thread& u) const;
  void conflict(Order o, const char* kind, uint32_t earlier, uint32_t later, uint32_t cell, bool asyncRetired);
  void reportEarly(const std::string& k, uint32_t earlier, uint32_t later, uint32_t cell, int64_t count,
                   bool missingBarrier);
  bool missingBarrier(int thread, int32_t group, uint32_t seen, int64_t pos) const;
};

// Stage value of an access, checked against the buffer.
int64_t evalStage(const kir::IExpr& e, const Thread& t);

// AMD matrix-core fragment ownership (SimOptions::mmaFragment 1 or 2; verify/amdgcn_sim.cpp): the
// lane's idx-th accumulator as a warp-tile-local (row, col), and how many it owns.
void amdOwnedSlot(const kir::Kernel::Tile& tl, int frag, int lane, int idx, int& row, int& col);
int amdOwnedCount(const kir::Kernel::Tile& tl, int frag);

}  // namespace heddle::verify
