// The schedule rules of a block-scaled matmul (docs/fp8.md "Block scales and promotion").
//
// Promotion: Hopper's wgmma accumulates FP8 products in the tensor core with fewer bits than f32 (DeepGEMM's
// README: "the imprecision of FP8 tensor core accumulation", fixed by "CUDA-core two-level accumulation
// (promotion)"; the DeepSeek-V3 report, "Increasing Accumulation Precision": promote every 128 elements of
// K, 4 WGMMAs; CUTLASS's fp8_accumulation.hpp, mma_promotion_interval). The MMA role accumulates a
// promotion interval of K into a temporary accumulator set (the first wgmma of the interval with
// scale-d = 0), waits for it (wgmma.wait_group) and adds temp * sa[m, kb] * sb[n/128, kb] into the f32
// accumulators in registers. The scales change at every 128 of K, so an interval never spans two scale
// blocks: promotion(k) takes k elements of K per promotion, a divisor of 128 and a multiple of the wgmma's
// K (16 for f16 / bf16, 32 for e4m3 / e5m2: PTX ISA "wgmma.mma_async", the K of each .atype); 128 (one
// promotion per scale block, DeepGEMM's choice) is the default.
//
// Operands: K-major in shared memory (A stored [M, K], B stored [N, K]): wgmma's transpose immediates
// (imm-trans-a / imm-trans-b) exist for .f16 / .bf16 only (PTX ISA "wgmma.mma_async", "Matrix Descriptor
// Format"), and DeepGEMM's kernels take K-major A and B; the 16-bit vehicle of the family keeps the FP8 rule.
#include "heddle/ir/errors.h"
#include "heddle/schedule/register_pool.h"
#include "heddle/schedule/schedule.h"

namespace heddle {

void promotion(TensorView* tv, int k) {
  if (!tv->definition || tv->definition->kind != OpKind::Matmul)
    fail<ScheduleError>("promotion(", tv->name, "): the promotion interval is set on the matmul tensor");
  if (k != 16 && k != 32 && k != 64 && k != 128)
    fail<ScheduleError>("promotion(", tv->name, "): k = ", k,
                        " elements of K per promotion must divide the 128-wide scale block and be a multiple of the "
                        "wgmma K: one of 16 (16-bit operands only), 32, 64, 128 (the default)");
  tv->promotionK = k;
}

int promotionInterval(const TensorView* mm) { return mm->promotionK ? mm->promotionK : kScaleBlock; }

void validateBlockScales(const Fusion& f, const TargetInfo& target) {
  auto* mm = f.findMatmul();
  if (!mm) return;
  const Expr* e = mm->definition;
  if (e->scaleKind == ScaleKind::None) {
    if (e->inputs[0]->dtype == DType::E2M1X2)  // packed FP4 has no meaning without its scales (mx_scales.cpp)
      validateMxScales(mm, target);
    if (mm->promotionK)
      fail<ScheduleError>("promotion(", mm->promotionK, ") on ", mm->name,
                          ": the matmul has no block scales; promotion applies to a block-scaled matmul "
                          "(fd.matmul(a, b, trans_b=True, scale_a=..., scale_b=...))");
    return;
  }
  if (e->scaleKind == ScaleKind::Mx32 || e->scaleKind == ScaleKind::Nv16)
    return validateMxScales(mm, target);  // schedule/mx_scales.cpp
  const std::string what = "block-scaled matmul " + mm->name;
  if (!target.mma.has(MmaKind::Wgmma))
    fail<ScheduleError>(what, ": ", scaleKindName(e->scaleKind),
                        " scales with promotion are a wgmma kernel (sm_90a); target ", target.name,
                        " has none (sm_100a's tcgen05 has its own block-scaled kinds, MXFP8); run it on sm_90a or "
                        "apply the scales to bf16 operands before the matmul");
  if (e->transA)
    fail<ScheduleError>(what, ": operand ", e->inputs[0]->name,
                        " is stored [K, M] (trans_a=True); block-scaled wgmma takes A K-major: store it [M, K]");
  if (!e->transB)
    fail<ScheduleError>(what, ": operand ", e->inputs[1]->name,
                        " is stored [K, N] (trans_b=False); block-scaled wgmma takes B K-major: store it [N, K] and "
                        "pass trans_b=True");
  const int kInstr = isFloat8(e->inputs[0]->dtype) ? 32 : 16;
  if (promotionInterval(mm) % kInstr)
    fail<ScheduleError>(what, ": promotion(", mm->promotionK, ") is shorter than one wgmma of ",
                        dtypeName(e->inputs[0]->dtype), " operands (K = ", kInstr, "); use 32, 64 or 128");
}

void validateBlockScaleTiling(const MatmulTiling& t) {
  const Expr* e = t.mm->definition;
  if (e->scaleKind == ScaleKind::None) return;
  if (isMxScaled(t.mm)) return validateMxTiling(t);  // mx32 / nv16: schedule/mx_scales.cpp
  const std::string what = "block-scaled matmul " + t.mm->name;
  const RolePipelineSchedule& h = t.rolePipeline;
  if (!h.enabled || !h.warpSpecialized || h.tcgen05)
    fail<ScheduleError>(what,
                        ": the promotion runs in the MMA role of the warp-specialized wgmma kernel; cache the "
                        "operands with cache_after(..., 'tma_load') and add warp_specialize({'load': ..., 'mma': ...}) "
                        "(or use Fusion.auto_schedule('sm_90a'))");
  if (h.role(PipelineRole::Epilogue))
    fail<ScheduleError>(what,
                        ": an epilogue role is not built with block scales yet; leave it out (roles load "
                        "and mma: the MMA warpgroups run the epilogue)");
  if (t.splitK > 1 || t.streamK > 0 || h.cluster > 1)
    fail<ScheduleError>(what, ": ",
                        t.splitK > 1    ? "split_k"
                        : t.streamK > 0 ? "stream_k"
                                        : "cluster(2)",
                        " is not built with block scales (each CTA's k loop must start at a promotion interval); "
                        "drop it");
  // two accumulator sets per MMA thread (acc and tmp, wgRows x bn / 128 floats each): the project's accumulator rule
  // (register_pool.h accumulatorsFit: kSpareRegisters left for addresses, scales and the epilogue) on both sets
  // together, in the MMA role's setmaxnreg budget (the entry cap without one). ptxas allocates the MMA warpgroups'
  // code under that budget, not under __launch_bounds__' 168 at 384 threads (PTX ISA "setmaxnreg": .inc raises
  // "the absolute per-thread maximum register count" to imm-reg-count; DeepGEMM's sm90_fp8_gemm_1d2d holds its
  // accum and final_accum at BLOCK_N 128 and more with 384 threads and 232 registers). Measured with NVRTC 13 at
  // 232: 64 x 128 per warpgroup (64 + 64) compiles without spills (tests/lower/test_block_scale_promotion.py), 64 x 192
  // (96 + 96, above the 168) compiles clean with the plain store but spills with the TMA-store epilogue and ping-pong
  // e4m3, so the rule's margin stays; before promote() loaded scale_b once per block
  // (commit e5a3898) 64 + 64 spilled too, which had held the tile at 64 x 64
  const int perSet = h.wgRows * t.bn / 128;
  const PipelineRole* mma = h.role(PipelineRole::Mma);
  const int budget = mma && mma->registers ? mma->registers : entryRegisterCap(h.threads);
  if (!accumulatorsFit(2 * perSet, budget)) {
    int bn = t.bn;
    while (bn > 64 && !accumulatorsFit(2 * h.wgRows * bn / 128, budget)) bn -= 64;
    fail<ScheduleError>(what, ": each MMA warpgroup's tile ", h.wgRows, " x ", t.bn, " holds ", perSet,
                        " accumulators per thread, twice over (acc and the promotion's tmp): ", 2 * perSet,
                        " of the MMA role's ", budget, " registers leave fewer than ", kSpareRegisters,
                        " for the rest (ptxas would spill); use bn = ", bn,
                        " (or fewer rows per warpgroup, or give the mma role ",
                        (2 * perSet + kSpareRegisters + 7) / 8 * 8, " registers)");
  }
  const int p = promotionInterval(t.mm);
  if (p % t.bk)
    fail<ScheduleError>(what, ": promotion(", p, ") is shorter than or not a multiple of the k tile bk = ", t.bk,
                        " (a promotion follows a whole k-tile's wgmma); use promotion(", t.bk < 128 ? t.bk : 128,
                        ") or more, or split k by ", p);
}

}  // namespace heddle
