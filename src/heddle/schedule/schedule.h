// Scheduling: attributes on tensors, each operation validated when it is applied, and the whole
// schedule validated against a target before lowering (validateMatmulSchedule).
//
// Every rule raises ScheduleError naming the tensor, the axis or option, the rule, and what would be
// valid instead.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "heddle/ir/fusion.h"
#include "heddle/schedule/role_pipeline_schedule.h"
#include "heddle/target/target.h"

namespace heddle {

// --- tensor-level operations (the Python API calls these) ---
void initLoopDomain(Fusion& f, TensorView* tv);  // root axes: [b,] m, n, k(r) for a matmul tensor
void split(TensorView* tv, const std::string& axis, int64_t factor);
void reorder(TensorView* tv, const std::vector<std::string>& order);
void parallelize(TensorView* tv, const std::string& axis, ParallelType p);
// The loop nest of the register-MMA automatic schedules (sm_80 mma.sync, AMD MFMA / WMMA): bm x bn x bk CTA
// tiles on BIDy x BIDx (a batch on BIDz), wm x wn warps, order [b,] m.o n.o k.o m.i.o n.i.o m.i.i n.i.i k.i.
void warpTiledNest(Fusion& f, TensorView* mm, int bm, int bn, int bk, int wm, int wn);
// circular_buffer(stages, prefetch): stages >= 2; prefetch < 0 means stages + prefetch.
// war: how a TMA ring without roles releases slots, "mbarrier" (empty barriers) or "block_sync".
void circularBuffer(TensorView* tv, int stages, int prefetch, const std::string& war = "mbarrier");
void warpSpecialize(TensorView* tv, const std::vector<Role>& roles);
// split_k(splits): `splits` CTAs share each output tile's k loop (blockIdx.z), their partial tiles reduced
// in a fixed order through a global workspace (docs/hopper.md "Split-K"). 1 = off; at most kMaxSplitK.
void splitK(TensorView* tv, int splits);
constexpr int kMaxSplitK = 16;
// stream_k(ctas): a persistent grid of at most `ctas` CTAs (the SM count) shares the tiles x k-tiles of the
// matmul evenly; a tile split across CTAs is reduced in CTA order through the workspace (docs/hopper.md
// "Stream-K"). 0 = off; at most kMaxStreamK.
void streamK(TensorView* tv, int ctas);
constexpr int kMaxStreamK = 1024;
// epilogue_store(kind): how the sm_90a warp-specialized kernels write the output tile: "tma" (staged through
// shared memory with stmatrix, written by TMA stores; docs/hopper.md "The TMA-store epilogue") or "direct"
// (every thread stores its fragment to global memory).
void epilogueStore(TensorView* tv, const std::string& kind);
// cluster(size, along): `size` CTAs of a thread-block cluster compute neighbouring tiles along `along`
// ("m": they share the B tile, "n": the A tile), each loading part of the shared tile and multicasting it
// to all (docs/hopper.md "Clusters of 2 with TMA multicast"). size 1 = off, 2 = the only cluster built;
// the rest is checked with the schedule (schedule/cluster_schedule.cpp).
void cluster(TensorView* tv, int size, const std::string& along);
// A role's warp count from warps=count or warpgroups=count (4 warps each), refused (ScheduleError)
// outside 0..32 warps (no block holds more) so that no count wraps around.
int roleWarps(const std::string& role, const std::string& option, int64_t count);
// Validate a role list on its own (names, warp counts, register budgets).
void validateRoles(const std::string& tensor, const std::vector<Role>& roles);

// --- the schedule as the matmul lowering consumes it ---
struct MatmulTiling {
  TensorView* mm = nullptr;                         // the matmul tensor
  TensorView *a = nullptr, *b = nullptr;            // global operands
  TensorView *aCache = nullptr, *bCache = nullptr;  // shared-memory caches
  bool transA = false, transB = false;
  bool batched = false, batchedB = false;
  // A grouped matmul (Fusion::groupedMatmul): B is [E, K, N] per expert, the m tiles walk the groups of
  // the int32 group ends `groupOffsets` on the device (lower/build/grouped_walk.h, docs/grouped.md).
  bool grouped = false;
  std::string groupOffsets;
  // the masked layout (Fusion::maskedGroupedMatmul): a batched matmul over E experts whose m tiles stop at
  // counts[e] (groupOffsets names counts; lower/build/grouped_walk.h)
  bool groupMasked = false;
  int bm = 0, bn = 0, bk = 0;
  int warpsM = 1, warpsN = 1;
  bool swapBlocks = false;  // m bound to BIDx instead of BIDy
  LoadKind loadKind = LoadKind::CpAsync;
  int stages = 1, prefetch = 0;  // circular buffer of the k loop (stages 1 = none)
  int vecA = 8, vecB = 8;        // elements per copy instruction
  std::vector<Role> roles;
  RolePipelineSchedule
      rolePipeline;   // roles, TMA loads and the mbarrier ring: wgmma or tcgen05 (role_pipeline_schedule.h)
  int warpSize = 32;  // the target's wavefront width (64 on CDNA)
  int splitK = 1;     // split_k(splits)
  int streamK = 0;    // stream_k(ctas)
  // A matmul group (Fusion::matmuls, e.g. SwiGLU's gate and up): parts > 1 members share A; bs[p] is
  // member p's B (bs[0] == b), mms[p] its output. The n tile bn is the accumulator width: each warp's
  // WN = bn / warpsN columns hold WN / parts columns of every member, so one CTA computes bn / parts
  // output columns of each (docs/scheduling.md, "Matmul groups").
  int parts = 1;
  std::vector<TensorView*> bs, mms;
  int threads() const { return warpSize * warpsM * warpsN; }
  std::string str() const;
};

// Reads the loop domain of the matmul tensor and the caches of its operands; checks every rule
// against the target. `vec` gives the copy width the inputs' alignment allows (default 8).
MatmulTiling validateMatmulSchedule(const Fusion& f, const TargetInfo& target, int vecA = 8, int vecB = 8);

// Whether an m x n tile (otherwise as `t`: warps, layout, load kind, k-tile) passes the tile-shape
// rules on `target`: warp tiles of 16, operand rows the shared-memory tiles take
// (TargetInfo::smemRowOk), wgmma widths and 64-row warpgroup slabs. "" when it does, else the rule.
std::string tileShapeProblem(const MatmulTiling& t, const TargetInfo& target, int bm, int bn);

// The default schedule heddle.matmul picks for a target: applies split/parallelize/cache_after/
// circular_buffer through the functions above, so it is validated like a user's.
struct AutoScheduleHints {
  int64_t m = -1, n = -1, k = -1;  // problem size when known (for tile choice)
  bool tma = true;                 // the operands allow TMA (Hopper targets pick tma_load + roles)
  int sms = 0;                     // > 0: the SM count; with m, n, k known, too few tiles get split-K
  std::string kShare = "auto";     // cp.async schedules: "auto" (chooseKShare's model), "split_k", "stream_k", "none"
  std::string epilogueLayout = "auto";  // sm_90a roles: "auto", "cooperative", "pingpong", "epilogue_role"
                                        // (schedule/epilogue_layout.h)
  bool epiPairs = false;                // the epilogue operands suit pair reads (vec_e=2: core/kernel.py _pair_ok)
};
// The split-K factor the automatic schedules pick (schedule/wgmma_auto_schedule.cpp): 1 when `tiles` output tiles
// fill at least half of `sms` SMs, else as many splits as bring the CTAs to about `sms`, each split keeping
// at least max(4, stages) of the `nk` k-tiles, at most kMaxSplitK.
int autoSplitK(int64_t tiles, int64_t nk, int stages, int sms);
// The bias / residual inputs the user cached with tma_load (every input but the matmul's operands with a
// tma_load cache): each keeps its producer role and ring (validateEpilogueTma), so the automatic schedules
// leave room for the ring and keep the warp-specialized kernel (no split-K) for them.
std::vector<TensorView*> cachedEpilogueOperands(const Fusion& f);
// The n tile and operand stages the automatic TMA schedules (sm_90a wgmma_auto_schedule.cpp, sm_100a
// tcgen05_schedule.cpp) pick within TargetInfo::smemLimit (schedule/wgmma_auto_schedule.cpp): the widest n tile
// of widest, widest/2, .. 64 beside which two operand stages fit, then the most stages (2..maxStages).
// Counted: the operand stages (bm x bk + bk x bn, 2-byte elements), the ring of every cachedEpilogueOperands
// (its circular_buffer stages, default 2, of a [bn] slice or a [bm, bn] tile), `epilogueBytes` the kernel
// keeps besides (the TMA-store epilogue's staging chunk) and 4 KiB of mbarriers and alignment. A ring that
// leaves no two stages even at n = 64 is a ScheduleError naming it.
struct AutoTileFit {
  int bn = 0, stages = 0;
};
AutoTileFit fitAutoTile(const Fusion& f, const TargetInfo& target, int bm, int bk, int widest, int maxStages,
                        int64_t epilogueBytes);
// The k sharing the automatic cp.async schedule picks (schedule/k_share.cpp): data-parallel, split_k or
// stream_k by a deterministic cost model, `mode` overriding it; str() prints the costs and the choice.
struct KShareChoice {
  int splits = 1, streamCtas = 0;               // the choice (split_k(splits) / stream_k(streamCtas))
  int splitCandidate = 1, streamCandidate = 0;  // what was weighed
  double dataParallel = 0, splitCost = 0, streamCost = 0;
  std::string str() const;
};
// Whether the automatic schedule may share the k loop on `target` at all (grid flags), and may use stream-K
// there (the cp.async pipeline and the sm_90a warp-specialized TMA kernel: not the tcgen05 kernel).
bool kShareOk(const TargetInfo& target);
bool streamKOk(const TargetInfo& target);
// stream_k on a warp-specialized sm_90a kernel: roles {load, mma} with cooperative MMA warpgroups, the
// epilogue in the MMA role (direct or epilogue_store("tma")); ScheduleError naming what to drop otherwise.
void checkStreamKRoles(const MatmulTiling& t);
// Operand / output element types against the target's matrix cores (schedule/operand_types.cpp): 8-bit float
// operands need wgmma or tcgen05; a ScheduleError naming the operand otherwise.
void validateOperandTypes(const Fusion& f, const TargetInfo& target);
// promotion(k): a block-scaled matmul's elements of K accumulated in the tensor core between promotions into
// the f32 accumulators (schedule/block_scales.cpp): 16, 32, 64 or 128 (the default, one per scale block).
void promotion(TensorView* tv, int k);
int promotionInterval(const TensorView* mm);  // promotion(k)'s k, 128 when unset
// A block-scaled matmul's rules against the target (wgmma, K-major operands, the interval against the
// wgmma K); a promotion interval on a matmul without block scales is refused.
void validateBlockScales(const Fusion& f, const TargetInfo& target);
// ... mx32 (MXFP8) scales instead (schedule/mx_scales.cpp): sm_100a's block-scaled tcgen05, K-major operands.
void validateMxScales(const TensorView* mm, const TargetInfo& target);
// The block-scaled tcgen05 kernel's k tile by format (schedule/mx_scales.cpp; docs/fp8.md "MX formats"): mx32 with
// e4m3 / e5m2 operands (MXFP8) one 512-byte scale chunk per 128 rows and k tile, four K = 32 MMAs; nv16 (NVFP4) two
// chunks, two K = 64 MMAs; mx32 with e2m1x2 operands (MXFP4) one chunk, two K = 64 MMAs (scale_vec::2X: two scales of
// 32 each). All k tiles are 128 elements of K; bk counts the stored operand columns (e2m1x2: two elements a byte).
struct MxKTile {
  const char* kind;    // the scale kind: "mx32" | "nv16"
  const char* format;  // "MXFP8" | "NVFP4" | "MXFP4"
  // the device step: "MmaSm100Mx" | "MmaSm100Nvf4" | "MmaSm100Mxf4" (codegen/device/heddle_sm100.cuh)
  const char* step;
  const char* token;  // the kernel-name token: "mx32" | "nv16" | "mxf4"
  int bk;             // stored operand columns of a k tile: 128 (e4m3 / e5m2), 64 (e2m1x2 bytes)
  int chunks;         // 512-byte scale chunks per 128 rows and k tile (4 rows of 128 bytes each)
  int mmas;           // block-scaled tcgen05.mma per k tile
  int block;          // elements of K per scale: 32 | 16
  int scaleColumns(int bn) const { return chunks * (4 + bn / 32); }  // tensor-memory columns per operand stage
};
MxKTile mxKTile(const Expr* matmul);  // by its scale kind and operand dtype
// a matmul with mx32 or nv16 scales (MXFP8, MXFP4, NVFP4): the block-scaled tcgen05 kernel
bool isMxScaled(const TensorView* mm);
// The tensor-memory scale columns of an mx32 / nv16 tiling (0 otherwise): mxKTile's scaleColumns per operand stage.
int mxScaleColumns(const MatmulTiling& t);
// An mx32 / nv16 tiling's tcgen05 rules (the k tile, bn 128 or 256), from validateTcgen05Schedule; no-op otherwise.
void validateMxTcgen05(const MatmulTiling& t);
// ... and the kernel rules after the role pipeline (the tcgen05 roles, no cluster), from validateBlockScaleTiling.
void validateMxTiling(const MatmulTiling& t);
// ... and against the tiling (after the role pipeline is worked out): the warp-specialized wgmma kernel with
// roles load and mma, no split-K / stream-K / cluster, bk dividing the promotion interval.
void validateBlockScaleTiling(const MatmulTiling& t);
KShareChoice chooseKShare(int64_t tiles, int64_t nk, int stages, int sms, int bm, int bn, int bk, bool streamOk,
                          const std::string& mode = "auto");
void autoScheduleMatmul(Fusion& f, const TargetInfo& target, const AutoScheduleHints& hints);
// The Hopper branch of it (tma_load, wgmma, roles): schedule/wgmma_auto_schedule.cpp.
void autoScheduleMatmulWgmma(Fusion& f, const TargetInfo& target, const AutoScheduleHints& hints);
// A grouped matmul's warp-specialized TMA + wgmma schedule (wgmma_auto_schedule.cpp, docs/grouped.md).
void autoScheduleGroupedWgmma(Fusion& f, const TargetInfo& target);
// The AMD branch of it (MFMA / WMMA targets): schedule/mfma_wmma_schedule.cpp.
void autoScheduleMatmulMfmaWmma(Fusion& f, const TargetInfo& target, const AutoScheduleHints& hints);

}  // namespace heddle
