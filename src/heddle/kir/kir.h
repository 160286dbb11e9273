// Kernel IR: what the printers print and the simulator runs. Every loop, allocation, predicate and
// synchronisation is an explicit node here; nothing is implied by the printer.
//
// Data movement and math are tile-level nodes (TileLoad, MmaStep, EpilogueStore) whose per-thread
// expansion lives in the device runtime headers (codegen/device/*.cuh). Each such node declares the
// buffer accesses it makes and the thread mapping it makes them with (accesses()), which is all the
// hazard analysis and the simulator need to know about it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "heddle/ir/fusion.h"
#include "heddle/ir/mma_kind.h"
#include "heddle/kir/expr.h"

namespace heddle::kir {

// ---------------------------------------------------------------------------------------------
// Buffers and parameters

struct Buffer {
  std::string name;  // "sA", "sB", "acc"
  MemoryType memory = MemoryType::Shared;
  DType dtype = DType::F16;
  int stages = 1;            // circular-buffer depth (1 = not circular)
  int rows = 0, cols = 0;    // tile shape of one stage as stored (cols contiguous)
  int align = 16;            // bytes; 128 for TMA / swizzled tiles, 8 for mbarriers
  std::string role;          // "A" / "B" operand tile, "acc", "mbar", ...
  std::string sourceTensor;  // fusion tensor it caches ("T0"), for messages
  // filled by the smem planner
  int64_t offset = -1;
  int64_t bytesPerStage() const { return (int64_t)rows * cols * dtypeBytes(dtype); }
  int64_t bytes() const { return bytesPerStage() * stages; }
};

struct Param {
  // TensorMap: CUtensorMap by value; FlagPtr: int* (grid flags); IndexPtr: const int* (a grouped matmul's
  // group ends, read-only during the launch)
  enum Kind { TensorPtr, Int32, Int64, Float, TensorMap, FlagPtr, IndexPtr } kind = Int32;
  std::string name;
  DType dtype = DType::F32;  // element type for TensorPtr
  bool isConst = true;       // read-only tensor
  std::string tensor;        // fusion tensor name for TensorPtr
};

// ---------------------------------------------------------------------------------------------
// Nodes

enum class NodeKind {
  Block,
  For,
  If,
  Alloc,
  TileLoad,
  MmaStep,
  EpilogueStore,
  SmemAccess,
  Sync,
  Comment,
  Let,
  TmaStore,
  MmaPromote
};

struct Node {
  explicit Node(NodeKind k) : kind(k) {}
  virtual ~Node() = default;
  NodeKind kind;
  int id = -1;  // stable id, assigned by Kernel::renumber()
};
using NodePtr = std::unique_ptr<Node>;

struct Block : Node {
  Block() : Node(NodeKind::Block) {}
  std::vector<NodePtr> stmts;
  template <typename T, typename... A>
  T* add(A&&... a) {
    stmts.push_back(std::make_unique<T>(std::forward<A>(a)...));
    return static_cast<T*>(stmts.back().get());
  }
};

enum class LoopStage { Serial, Prologue, Main, Epilogue };
const char* loopStageName(LoopStage s);

struct ForLoop : Node {
  ForLoop() : Node(NodeKind::For) {}
  std::string var;    // loop index name
  IExpr start, stop;  // [start, stop), step 1
  LoopStage stage = LoopStage::Serial;
  int cbStages = 0, cbPrefetch = 0;  // the circular buffer it came from (0 = none)
  // A loop over a runtime extent: it (with the loops circular_buffer makes of it) runs ceil(tripsVar /
  // tileK) iterations in all. The sync planner walks it at representative values ("" = none).
  std::string tripsVar;
  int64_t tileK = 0;
  Block body;
};

struct IfThenElse : Node {
  IfThenElse() : Node(NodeKind::If) {}
  IExpr cond;
  Block thenBody, elseBody;
  // >= 0: a single-thread issue elected in warp electWarp. cond stays `tid == 32 * electWarp` (what the
  // simulator and the hazard analysis evaluate: the lowest lane of the warp); on targets with
  // TargetInfo::electSync the printer spells it `warp == W && heddle::elect_one_sync()` (PTX elect.sync).
  int electWarp = -1;
};

struct Alloc : Node {
  explicit Alloc(Buffer* b) : Node(NodeKind::Alloc), buf(b) {}
  Buffer* buf;
};

// A tile of a global operand copied into one stage of a shared buffer. Out-of-bounds elements
// (rows >= rowsBound or cols >= colsBound) are zero-filled, which is how ragged M, N, K work.
struct TileLoad : Node {
  TileLoad() : Node(NodeKind::TileLoad) {}
  Buffer* dst = nullptr;
  IExpr stage;                 // which stage of dst
  IExpr iter;                  // the k-iteration whose data this is (for messages / simulator)
  std::string src;             // global param name
  IExpr row0, col0;            // tile origin in the source's storage order (cols contiguous)
  IExpr rowsBound, colsBound;  // valid extent of the source in storage order
  std::string ld;              // leading-dimension param name (elements)
  std::string batchStride;     // batch stride param name ("" when not batched)
  LoadKind kind = LoadKind::CpAsync;
  int vec = 8;  // elements per copy instruction
  // kind == TmaLoad: one thread issues the tile's boxes through the tensor map parameter
  // `tensorMap`; they complete (complete_tx) on mbarrier mbar[mbarIndex].
  std::string tensorMap;
  Buffer* mbar = nullptr;
  IExpr mbarIndex;
  // Matmul groups: the stage is filled in parts (one node: one write of the whole stage). Part i copies
  // the box of `partExtent` rows (partAxis 0) or cols (partAxis 1) at offset srcOffset from (row0, col0)
  // of its own source `src` (leading dimension `ld`) to offset dstOffset of the stage along that axis;
  // the other axis is the whole tile's. Empty: one copy of the whole tile from `src`.
  struct Part {
    std::string src, ld;
    int srcOffset = 0, dstOffset = 0;
  };
  std::vector<Part> parts;
  int partAxis = 1, partExtent = 0;
  // Clusters (passes/cluster_multicast.cpp): > 1 when the tile is shared by the `multicast` CTAs of a
  // cluster: this CTA (rank crank) loads rows [crank * R / multicast, +R / multicast) of the stored tile
  // (R = dst->rows) and multicasts them to the same offset of every CTA of the cluster, completing their
  // bytes on each CTA's mbar[mbarIndex].
  int multicast = 1;
  int boxRows() const { return parts.empty() || partAxis == 1 ? dst->rows : partExtent; }
  int boxCols() const { return parts.empty() || partAxis == 0 ? dst->cols : partExtent; }
};

// One BK-deep slab of the CTA tile's MMA: acc += A[stageA] x B[stageB].
struct MmaStep : Node {
  MmaStep() : Node(NodeKind::MmaStep) {}
  Buffer *a = nullptr, *b = nullptr, *acc = nullptr;
  IExpr stageA, stageB;
  IExpr iter;
  // The mechanism (ir/mma_kind.h). Wgmma: asynchronous warpgroup MMA, its reads retired by wgmma.wait_group.
  // Tcgen05 (passes/tcgen05_specialize.cpp): one thread issues tcgen05.mma into the tensor-memory
  // accumulator stage accStage (columns accStage * bn ..); accumulate == 0 on a tile's first k-tile
  // (enable-input-d = 0: fresh columns hold no value). Asynchronous: it completes at the next tcgen05.commit.
  MmaKind kind = MmaKind::MmaSync;
  IExpr accStage, accumulate;
};

// The fused epilogue: reads the accumulator fragment, applies the epilogue program, stores to
// global memory with per-element predicates (row < M && col < N).
struct EpilogueStore : Node {
  EpilogueStore() : Node(NodeKind::EpilogueStore) {}
  Buffer* acc = nullptr;
  std::string out;  // output param
  // Hopper roles (heddle_sm90.cuh fragment layout): accumulators read from the smem staging
  // buffer from[fromStage] instead of registers, and/or results written to the smem tile
  // to[toStage] (for a TMA store) instead of global memory. raw: copy the f32 accumulators as
  // they are (no epilogue program). warpShift: the role's warps sit this many warps after the
  // MMA role's (fragment ownership is the MMA role's).
  Buffer* from = nullptr;
  IExpr fromStage;
  Buffer* to = nullptr;
  IExpr toStage;
  // A staged store of a fusion with further outputs (Kernel::extraOutputs): output i's values go to
  // toExtra[i][toStage], same chunk and layout as `to` (passes/tma_store_epilogue.cpp).
  std::vector<Buffer*> toExtra;
  bool raw = false;
  int warpShift = 0;
  // Blackwell: the accumulators come from tensor-memory stage fromStage (tcgen05.ld 32x32b, wait::ld),
  // one tile row per epilogue thread (warpShift: the epilogue warpgroup's first warp).
  bool tmem = false;
  IExpr operandStage;  // the stage of the TMA-loaded epilogue operands (EpiOp::smem) this tile reads
  // A column chunk of the tile (colEnd > colBegin): only the fragment elements of tile columns
  // [colBegin, colEnd), written to column lc - colBegin of `to` (passes/tma_store_epilogue.cpp).
  int colBegin = 0, colEnd = 0;
  // The register epilogue of an mma.sync kernel (TargetInfo::mma has MmaKind::MmaSync, heddle_mma_sm80.cuh): fragment
  // registers 2h, 2h+1 are columns c, c+1 of one row, so the epilogue runs per column pair (the pair
  // program, packed 32-bit stores; codegen CLikePrinter::pairEpilogue). false: per element.
  bool columnPairs = false;
  // Split-K (passes/reduce_splits.cpp): Partial::Store writes this thread's raw accumulator fragment to
  // workspace slot `slot` (no epilogue program, no bounds: the whole tile); Partial::Add adds the
  // fragments of slots [slot, slot + count) to the accumulators, in slot order (nothing is stored).
  // Slot j's flag is flags[j] (heddle_grid.cuh): the interpreter checks each partial is read only
  // after its flag was acquired.
  enum class Partial { None, Store, Add } partial = Partial::None;
  IExpr slot;
  int count = 0;
};

// A generic shared-memory access with a named thread mapping: used by the sync planner's and the
// simulator's hand-built test kernels (and by paths whose data movement is not a tile op).
struct SmemAccess : Node {
  SmemAccess() : Node(NodeKind::SmemAccess) {}
  Buffer* buf = nullptr;
  IExpr stage;
  IExpr iter;
  bool write = false;
  bool async = false;   // a cp.async write: lands at its group's wait
  bool vmcnt = false;   // with async: an AMD LDS DMA write, its own vmcnt entry (no commit)
  std::string mapping;  // equal strings = the same thread touches the same elements
  std::string label;    // "write X", "read X" ...
};

// Every synchronisation / async-protocol op. `arg` is the op's immediate (wait_group N, named
// barrier id, parity expression index...). `reason` indexes Kernel::syncPlan.
enum class SyncKind {
  BlockSync,      // __syncthreads / bar.sync 0
  CpAsyncCommit,  // cp.async.commit_group
  CpAsyncWait,    // cp.async.wait_group arg
  // Hopper (sm_90a). mbarrier ops act on buf[index]; see docs/hopper.md.
  MbarInit,            // mbarrier.init buf[index], count
  MbarArrive,          // mbarrier.arrive buf[index]
  MbarArriveExpectTx,  // mbarrier.arrive.expect_tx buf[index], arg bytes
  MbarWait,            // mbarrier.try_wait.parity buf[index], parity (loop until the phase completed)
  WgmmaFence,          // wgmma.fence (buf = the accumulator)
  WgmmaCommit,         // wgmma.commit_group
  WgmmaWait,           // wgmma.wait_group arg (buf = the accumulator)
  FenceProxyAsync,     // fence.proxy.async.shared::cta
  SetMaxNReg,          // setmaxnreg.{inc if count > 0, dec} arg registers
  NamedBarrier,        // bar.sync arg + index, count (index: 0, or per warpgroup, e.g. ping-pong's (warp - 4) / 4)
  BulkCommit,          // cp.async.bulk.commit_group (TMA stores)
  BulkWaitRead,        // cp.async.bulk.wait_group.read arg
  // AMD (docs/backends.md)
  VmcntWait,  // s_waitcnt vmcnt(arg) / s_wait_loadcnt arg: all but the arg newest vector-memory ops done
  // GFX12 split barriers; arg = the barrier id: -1 the workgroup barrier, 0 the NULL barrier, 1..16
  // the named barrier objects of GFX12.5 (TargetInfo::namedBarriers; docs/backends.md, "Barrier objects")
  BarrierSignal,         // s_barrier_signal arg (after a workgroup release fence): arrive
  BarrierWait,           // s_barrier_wait arg (then a workgroup acquire fence)
  BarrierInit,           // s_barrier_init arg, expected count = `count` waves (m0[31:16]); named only
  BarrierJoin,           // s_barrier_join arg: this wave may wait on named barrier arg (0: unjoin)
  BarrierLeave,          // s_barrier_leave: drop the named barrier this wave joined
  BarrierSignalIsFirst,  // s_barrier_signal_isfirst arg: arrive (SCC = first wave to arrive; unused)
  // Grid level (split-K, passes/reduce_splits.cpp): flags[index] in global memory, one per partial tile.
  GridRelease,  // one thread: fence.acq_rel.gpu; flags[index] = 1 (publishes the CTA's partial)
  GridWait,     // one thread: for j in [index, index + count): spin on ld.acquire.gpu flags[j] until
                // set, then reset it to 0 (every flag is back to 0 after the launch)
  // Blackwell (sm_100a, docs/blackwell.md): tensor memory and the tcgen05 ordering ops.
  TmemAlloc,       // tcgen05.alloc (a whole warp): arg columns, address written to buf[0] (shared memory)
  TmemRelinquish,  // tcgen05.relinquish_alloc_permit (a whole warp)
  TmemDealloc,     // tcgen05.dealloc (the allocating warp): arg columns at the address in buf[0]
  TcgenCommit,  // tcgen05.commit -> mbarrier buf[index]: one arrival once this thread's earlier tcgen05 ops completed
  TcgenFenceBefore,  // tcgen05.fence::before_thread_sync
  TcgenFenceAfter,   // tcgen05.fence::after_thread_sync
  // Clusters of 2 (sm_90a, passes/cluster_multicast.cpp): the peer is cluster rank crank ^ 1.
  MbarArriveRemote,   // mapa + mbarrier.arrive.release.cluster on the peer CTA's buf[index]
  FenceMbarrierInit,  // fence.mbarrier_init.release.cluster (after this thread's mbarrier.init)
  ClusterSync,        // barrier.cluster.arrive.release + wait.acquire: every thread of both CTAs
};
// The barrier id a split-barrier op names (BarrierSignal / BarrierWait default to the workgroup barrier).
constexpr int kWorkgroupBarrier = -1;
const char* syncKindName(SyncKind k);

struct Sync : Node {
  explicit Sync(SyncKind k, int a = 0) : Node(NodeKind::Sync), sync(k), arg(a) {}
  SyncKind sync;
  int arg = 0;
  int reason = -1;        // index into Kernel::syncPlan.entries (-1 for structural ops like commit)
  Buffer* buf = nullptr;  // mbarrier array / accumulator (Hopper ops)
  IExpr index, parity;    // mbarrier element; MbarWait parity
  int count = 0;          // MbarInit arrival count; NamedBarrier threads; SetMaxNReg: +1 inc, -1 dec
  // AMD workgroup barrier (block_sync, s_barrier_signal / _wait -1): an execution barrier that orders
  // memory only through the workgroup release fence before its arrive and the acquire fence after its
  // wait (docs/verification.md, "AMD workgroup fences"). The printer emits both; the simulator honours
  // them; mutants (the opt-in kind drop_fence) clear one. Ignored on CUDA, whose bar.sync orders memory.
  bool noReleaseFence = false, noAcquireFence = false;
};

struct Comment : Node {
  explicit Comment(std::string t) : Node(NodeKind::Comment), text(std::move(t)) {}
  std::string text;
};

// `const int var = value;` for the rest of the enclosing block (persistent tile coordinates).
struct Let : Node {
  Let(std::string v, IExpr e) : Node(NodeKind::Let), var(std::move(v)), value(std::move(e)) {}
  std::string var;
  IExpr value;
};

// TMA store of the tile src[stage] (laid out as heddle_sm90.cuh TmaTile) to (row0, col0) of the
// output through tensor map `tensorMap`: one thread issues it, it reads shared memory through the
// async proxy until cp.async.bulk.wait_group.read retires its bulk group.
struct TmaStore : Node {
  TmaStore() : Node(NodeKind::TmaStore) {}
  Buffer* src = nullptr;
  IExpr stage;
  std::string tensorMap;
  IExpr row0, col0;
  IExpr iter;  // the tile (for messages)
};

// Promotion of a block-scaled matmul (passes/block_scale_promotion.cpp, docs/fp8.md "Block scales and
// promotion"): every MMA thread adds its fragment of the wgmma accumulators `tmp` (one promotion interval
// of K, retired by the wgmma.wait_group(0) before it) times the block scales into the f32 accumulators
// `acc` in registers: acc[r][c] += tmp[r][c] * scaleA[m0 + r, kb] * scaleB[(n0 + c) / 128, kb], scaleA read from
// the operand ring's slot scaleSmem[scaleStage] (the tile's BM values of k-block kb, landed by TMA with the
// slot's A and B: row r of the tile at element r), scaleB from global memory (rows >= M and columns >= N read
// none: their tmp values are zeros that are never stored); then tmp.zero(): the next interval's first wgmma
// runs with scale-d = 0.
struct MmaPromote : Node {
  MmaPromote() : Node(NodeKind::MmaPromote) {}
  Buffer* acc = nullptr;        // ordinary f32 registers (never a wgmma operand)
  Buffer* tmp = nullptr;        // the wgmma accumulators of the interval
  std::string scaleA, scaleB;   // the scale parameters
  IExpr kBlock;                 // kb: the scale block the interval lies in
  IExpr kBlocks;                // ceil(K / 128): the scales' row length
  IExpr first;                  // non-zero on the tile's first promotion: acc = tmp * scales (acc holds no value)
  Buffer* scaleSmem = nullptr;  // the ring's scale_a slots [stages][BM] (f32)
  IExpr scaleStage;             // the slot this promotion reads: the interval's last k-tile's
};

// ---------------------------------------------------------------------------------------------
// Accesses: what a node reads and writes, as the hazard analysis sees it.

enum class AsyncKind { None, CpAsync, Tma, Wgmma, BulkStore, Vmcnt };  // Tma..BulkStore: the async proxy;
                                                                       // Vmcnt: AMD LDS DMA
struct Access {
  Buffer* buf = nullptr;
  IExpr stage;
  bool write = false;
  std::string mapping;  // which thread touches which element; equal strings = same threads
  AsyncKind async = AsyncKind::None;
};
std::vector<Access> accessesOf(const Node& n);
// Vector-memory instructions every thread issues for an AsyncKind::Vmcnt access: a lower bound
// (floor(chunks / threads)), so waits counted with it are never too loose; kir/kir.cpp.
int vmemOpsPerThread(const Node& n, int threads);

// ---------------------------------------------------------------------------------------------
// The sync plan: one entry per sync op the planner placed, with its reason.

// Who placed a sync op: the pass that ran (stamped by the pass manager, lower/lower.cpp) and the
// builder inside it ("hazard planner", "mbarrier ring", ...); str() is "insert_syncs / hazard planner".
struct SyncOrigin {
  std::string pass, builder;
  std::string str() const { return (pass.empty() ? "?" : pass) + " / " + (builder.empty() ? "?" : builder); }
};

struct SyncReason {
  SyncOrigin origin;
  std::string hazards;             // "RAW sA (cp.async -> mma), WAR sA (mma -> cp.async)"
  std::string producer, consumer;  // node descriptions
  std::vector<std::string> pairs;  // "RAW sA: <producer> -> <consumer>", one per distinct hazard
  std::string buffer;              // buffer name(s)
  std::string stage;               // stage expression(s)
  std::string mechanism;           // why this mechanism and argument
};
// The role graph of a warp-specialized kernel as lowered (explain(format="mermaid") draws it).
struct RoleDiagram {
  struct Role {
    std::string name;
    int firstWarp = 0, warps = 0, registers = 0;
  };
  struct Edge {
    int from = -1, to = -1;
    std::string kind;         // "ring" | "order"
    std::string buffers;      // "sA, sB"
    std::string full, empty;  // mbarrier arrays ("" when none)
    int stages = 0;
    std::string produce, consume;  // how the producer publishes / the consumer waits
    std::string release;           // how the consumer frees a slot ("" for order edges)
  };
  std::vector<Role> roles;
  std::vector<Edge> edges;
};

struct SyncPlan {
  std::vector<SyncReason> entries;
  int barriersPerMainIteration = 0;
  std::string summary;
  RoleDiagram roles;  // empty without warp specialization
};

struct SmemPlan {
  struct Slot {
    std::string buffer;
    int64_t offset, bytes;
    int align;
    std::string aliasOf;
  };
  std::vector<Slot> slots;
  int64_t total = 0;
};

// Epilogue program: straight-line SSA over per-element values (registers r0, r1, ...).
// op == Matmul: dst = the accumulator of matmul-group member `a` (>= 1) at this element (member 0 is r0).
struct EpiOp {
  OpKind op = OpKind::Input;
  int dst = -1;
  int a = -1, b = -1;  // source registers (-1 = unused)
  std::optional<double> scalar;
  bool scalarOnLeft = false;
  std::string tensorParam;           // load of a broadcast/residual tensor (op == Input)
  std::string rowStride, colStride;  // its strides params ("" = broadcast over that axis)
  std::string batchStride;
  DType dtype = DType::F32;  // element type of the loaded tensor / cast target
  Buffer* smem = nullptr;    // op == Input loaded by TMA (bias row, residual): smem[stage][(row,) col]
  bool pairs = false;        // op == Input read two adjacent columns per load (vectorize_epilogue_reads)
};

struct LaunchConfig {
  int threads = 128;
  int64_t smemBytes = 0;
  IExpr gridX, gridY, gridZ;
};

struct Kernel {
  std::string name;
  std::vector<Param> params;
  std::vector<std::unique_ptr<Buffer>> buffers;
  Block body;
  LaunchConfig launch;
  SyncPlan syncPlan;
  SmemPlan smemPlan;
  std::vector<EpiOp> epilogue;  // acc value is register 0
  int epilogueResult = 0;
  DType outDtype = DType::F16;
  // Further fusion outputs (a value the epilogue computes on the way, e.g. the pre-activation a backward
  // needs): register `reg` stored to param `param` ("D1", "D2", ...) at D's index (same ldd, batch stride).
  struct ExtraOutput {
    std::string param;
    int reg = 0;
    DType dtype = DType::F16;
  };
  std::vector<ExtraOutput> extraOutputs;
  // A computed output scale (Fusion::quantize; docs/fp8.md "Computed output scales"): register `reg` (y) is
  // quantized into D (outDtype, 8-bit) by its group's scale, which goes to param `scale` [M, groups] f32:
  // s = max(amax |y| over the group's columns inside N, 1e-4) / maxFinite(outDtype), D = satfinite(y / s).
  // group: columns per scale (0 = the whole row, one CTA tile covers N); groups: the scale tensor's columns.
  struct QuantOut {
    int reg = 0;
    int group = 0, groups = 1;
    std::string scale;
  };
  std::optional<QuantOut> quant;
  // matmul template parameters the printer passes to the device headers
  struct Tile {
    int bm = 0, bn = 0, bk = 0, warpsM = 0, warpsN = 0;
    bool aKMajor = true, bKMajor = false;
    DType inDtype = DType::F16;
    bool batched = false;
    bool swapBlocks = false;
    MmaKind mma = MmaKind::MmaSync;
    int mmaWarpgroups = 0;
    bool coop = true;
    int mmaWarpBase = 0;
    int accStages = 0;
    int tmemCols = 0;
    int parts = 1;
    bool batchWalk = false;
    bool grouped = false;  // a grouped matmul: the m tile from the device walk over offs (lower/build/grouped_walk.h)
    bool masked = false;   // the masked layout: batch_idx = the expert, M = its row count (grouped_walk.h)
    DType inDtypeB = DType::F16;  // B's element type (differs from inDtype only for mixed e4m3 / e5m2)
  } tile;  // mma: the kernel's one MMA kind (Wgmma: MmaSm90, Tcgen05: MmaSm100); parts: matmul-group members (n0 = blockIdx * bn / parts)
  // batchWalk: a batched persistent kernel whose tile walk sets batch_idx per tile (passes/warp_specialize.cpp):
  // no blockIdx.z batch, D indexed with batch_idx * batch_stride_d
  // Hopper: every sync was placed by construction (mbarrier protocols); insert_syncs leaves it.
  bool syncsPlanned = false;
  // Tensor maps the launcher encodes: box {boxCols (contiguous), boxRows}, swizzle bytes, L2 promotion bytes
  // (0, 64, 128 or 256: the granularity at which a TMA load's L2 misses fetch from DRAM). A batched map is 3-D,
  // its box boxDepth deep along the third dimension (1 but for the MX scale chunks of B: passes/mx_scale_ring.cpp).
  struct TensorMapSpec {
    std::string param, operand;
    int boxCols = 0, boxRows = 0, swizzle = 0;
    bool batched = false;
    int l2Promotion = 0;
    int boxDepth = 1;
  };
  std::vector<TensorMapSpec> tensorMaps;
  // launch-time checks: loops whose trip count must be >= minTrips
  struct TripCheck {
    std::string loop;
    IExpr trips;
    int minTrips;
    std::string tensor;
    std::string rule;
  };
  std::vector<TripCheck> tripChecks;
  // Split-K (passes/split_k.cpp): the k loop shared by splitK CTAs per output tile (blockIdx.z), partial
  // tiles reduced through the workspace params `ws` (f32, workspaceTiles x (splitK-1) x bm x bn) and
  // `flags` (i32, workspaceTiles x (splitK-1), zero before the launch and after it).
  int splitK = 1;
  IExpr workspaceTiles;
  // Stream-K (passes/stream_k.cpp, stream_k_fixup.cpp): a persistent grid of at most streamK CTAs shares
  // tiles x k-tiles; one workspace slot and one flag per CTA (launch.gridX of them). 0 = off.
  int streamK = 0;
  // Thread-block clusters (passes/cluster_multicast.cpp): `cluster` CTAs along x (1 = none) walking
  // neighbouring tiles along clusterAlong ('m': they share the B tile, 'n': the A tile), launched with the
  // cluster dimension; num_ctas is a whole number of clusters.
  int cluster = 1;
  char clusterAlong = 'm';

  Buffer* addBuffer(std::unique_ptr<Buffer> b) {
    buffers.push_back(std::move(b));
    return buffers.back().get();
  }
  void renumber();          // assign node ids in program order
  std::string str() const;  // readable kernel IR (kir/printer.cpp)
};

// Walk every node in program order (pre-order).
void walk(const Block& b, const std::function<void(const Node&)>& f);
void walkMut(Block& b, const std::function<void(Node&)>& f);
std::string describe(const Node& n);  // one-line description used in reasons and dumps
// Reads (kir/reads.cpp): the names n's own code reads from its scope (not its children's): its index
// expressions' variables and the tile coordinates the printers and the simulator read without one (m0, n0,
// batch_idx, crank; the list is in reads.cpp).
void collectReads(const Kernel& k, const Node& n, std::set<std::string>& out);
// The names n and every node inside it read that no Let or loop inside n binds first: what the code around n
// must declare (a Block's: its statements', in order).
std::set<std::string> freeReads(const Kernel& k, const Node& n);
// Deep copy of a node with index variables substituted (kir/clone.cpp).
NodePtr clone(const Node& n, const std::map<std::string, IExpr>& subst);

}  // namespace heddle::kir
