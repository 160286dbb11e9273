// The schedule rules of an MXFP8 matmul (scales "mx32", docs/fp8.md "MX formats"), checked before any tiling.
//
// Before: a matmul whose definition carries mx32 scales (ir/block_scales.cpp: e4m3 / e5m2 operands, e8m0 scales in
// torch's blocked layout, K a multiple of 32). After: a ScheduleError naming the rule, or nothing.
//
// The block-scaled MMA is sm_100a's tcgen05.mma kind::mxf8f6f4 with .block_scale (PTX ISA 9.7.16.10.7 "Block
// Scaling"; no other target heddle lowers for has one: wgmma and mma.sync apply no per-32 scales, so sm_90a takes
// block128 f32 scales with promotion instead). Its operands are K-major: the instruction descriptor of the
// block-scaled kinds has no transpose that the scales follow (the interpreter's model refuses transposed
// operands, interp/rt/hrt_ptx_tcgen05_mx.h; CUTLASS's SM100 block-scaled collectives take A and B K-major, as do
// torch._scaled_mm's MX inputs: a row-major, b column-major). The scales apply inside the tensor core, per 32 of
// K, so promotion(k) -- sm_90a's interval of f32 promotions -- has nothing to set.
#include "heddle/ir/errors.h"
#include "heddle/schedule/schedule.h"

namespace heddle {

void validateMxScales(const TensorView* mm, const TargetInfo& target) {
  const Expr* e = mm->definition;
  const std::string what = "mx32-scaled matmul " + mm->name;
  if (!target.mma.has(MmaKind::Tcgen05))
    fail<ScheduleError>(what, ": mx32 (MXFP8) scales are applied by sm_100a's block-scaled tcgen05.mma "
                              "(kind::mxf8f6f4); target ",
                        target.name,
                        " has no block-scaled MMA: run it on sm_100a, or on sm_90a give the matmul block128 f32 "
                        "scales (scales='block128')");
  if (e->transA)
    fail<ScheduleError>(what, ": operand ", e->inputs[0]->name,
                        " is stored [K, M] (trans_a=True); the block-scaled tcgen05.mma takes A K-major: store it "
                        "[M, K]");
  if (!e->transB)
    fail<ScheduleError>(what, ": operand ", e->inputs[1]->name,
                        " is stored [K, N] (trans_b=False); the block-scaled tcgen05.mma takes B K-major: store it "
                        "[N, K] and pass trans_b=True (torch._scaled_mm's column-major b)");
  if (mm->promotionK)
    fail<ScheduleError>("promotion(", mm->promotionK, ") on ", what,
                        ": the tensor core applies MX scales per 32 of K itself; promotion is sm_90a's block128 "
                        "interval: drop it");
  fail<ScheduleError>(what,
                      ": the sm_100a block-scaled tcgen05 kernel (scale chunks in the operand ring, tcgen05.cp into "
                      "tensor memory) is not built yet (issue 32); the definition and its float64 reference "
                      "(heddle.reference.evaluate) are, and the primitives (MmaSm100Mx, docs/fp8.md \"MX formats\")");
}

}  // namespace heddle
