// Operand and output element types a target's matrix cores take (docs/fp8.md).
//
// 8-bit float operands (e4m3, e5m2) need an FP8 tensor-core instruction: wgmma (sm_90a, PTX ISA
// "wgmma.mma_async" .atype/.btype .e4m3/.e5m2, k = 32) or tcgen05.mma kind::f8f6f4 (sm_100a). mma.sync
// kernels (sm_80) and the AMD MFMA / WMMA kernels in this build take f16 / bf16 only: they refuse FP8 here,
// naming the operand, before any tiling is worked out.
//
// wgmma (sm_90a) takes them K-major only: the transpose immediates exist only for .f16/.bf16 (PTX ISA
// "wgmma.mma_async": "The transpose operation is only supported for the wgmma.mma_async variants with
// .f16/.bf16 types"; CUTLASS's SM90 FP8 GMMA atoms are all _TN). So A is [M, K] row-major (matmul without
// trans_a) and B is stored [N, K] (matmul(a, b, trans_b=True), torch._scaled_mm's column-major b); any other
// layout is refused here naming the operand. An 8-bit float output (cvt.rn.satfinite) is lowered on the
// same kernels (docs/fp8.md), and on sm_100a's tcgen05 kernel as the q of a computed output scale only (8-bit
// operands, or the NVFP4 kernel's e2m1x2 ones). On sm_100a the tcgen05 kernel takes FP8 (kind::f8f6f4; its layout
// and k-tile rules: schedule/tcgen05_schedule.cpp); the cp.async + mma.sync fallback there does not.
#include "heddle/ir/errors.h"
#include "heddle/schedule/schedule.h"

namespace heddle {

namespace {

bool takesFloat8(const TargetInfo& target) {
  return target.mma.has(MmaKind::Wgmma) || target.mma.has(MmaKind::Tcgen05);
}

// sm_90a's wgmma kernels (a target with wgmma and without tcgen05); on sm_100a the tcgen05 kernel takes
// them (its layout and k-tile rules: schedule/tcgen05_schedule.cpp)
bool wgmmaFloat8(const TargetInfo& target) {
  return target.mma.has(MmaKind::Wgmma) && !target.mma.has(MmaKind::Tcgen05);
}

}  // namespace

void validateOperandTypes(const Fusion& f, const TargetInfo& target) {
  auto* mm = f.findMatmul();
  if (!mm) return;
  for (auto* op : mm->definition->inputs) {
    if (!isFloat8(op->dtype)) continue;
    if (!takesFloat8(target))
      fail<ScheduleError>("matmul operand ", op->name, " is ", dtypeName(op->dtype), ": target ", target.name,
                          " has no 8-bit float tensor-core instruction (FP8 GEMMs need wgmma on sm_90a or "
                          "tcgen05 on sm_100a); convert the operand to bf16 (with its scale applied) for ",
                          target.name);
    if (!target.mma.has(MmaKind::Tcgen05)) continue;
    // sm_100a: 8-bit operands run on the tcgen05 kernel (kind::f8f6f4) only, never on its mma.sync fallback
    auto caches = f.cachesOf(op);
    if (!caches.empty() && caches[0]->loadKind != LoadKind::TmaLoad)
      fail<ScheduleError>("matmul operand ", op->name, " is ", dtypeName(op->dtype), " and cached with ",
                          loadKindName(caches[0]->loadKind), ": on ", target.name,
                          " 8-bit operands run on the tcgen05 kernel only (tcgen05.mma kind::f8f6f4; mma.sync has no "
                          "8-bit float form); cache it with tma_load and warp_specialize the matmul (docs/fp8.md)");
    if (mm->rank() == 3)
      fail<ScheduleError>("matmul operand ", op->name, " is ", dtypeName(op->dtype), ": the ", target.name,
                          " tcgen05 kernel takes no batched matmul in this build and mma.sync has no 8-bit float "
                          "form; run the batches as separate matmuls");
  }
  auto* e = mm->definition;
  if (wgmmaFloat8(target) && isFloat8(e->inputs[0]->dtype)) {
    if (e->transA)
      fail<ScheduleError>("matmul operand ", e->inputs[0]->name, " is ", dtypeName(e->inputs[0]->dtype),
                          " and stored [K, M] (trans_a): 8-bit wgmma reads operands K-major only (the .e4m3/.e5m2 "
                          "forms have no transpose); pass A as [M, K] row-major (a.t().contiguous())");
    if (!e->transB)
      fail<ScheduleError>("matmul operand ", e->inputs[1]->name, " is ", dtypeName(e->inputs[1]->dtype),
                          " and stored [K, N]: 8-bit wgmma reads operands K-major only (the .e4m3/.e5m2 forms have "
                          "no transpose); pass B K-major, stored [N, K] with matmul(a, b, trans_b=True) (b.t()."
                          "contiguous(), or torch._scaled_mm's column-major b)");
  }
  if (wgmmaFloat8(target) && isFloat8(e->inputs[0]->dtype)) {
    auto* a = e->inputs[0];
    const Size& K = a->shape[a->rank() - 1];  // A is [.., M, K] (K-major, checked above)
    if (!K.isSymbolic() && K.value % 16)
      fail<InputError>("matmul operand ", a->name, " is ", dtypeName(a->dtype), " with K = ", K.value,
                       ": TMA reads 16-byte rows, so 8-bit operands need K a multiple of 16; pad K with zeros to ",
                       (K.value + 15) / 16 * 16, " (both operands)");
  }
  const bool f8in = isFloat8(e->inputs[0]->dtype);
  // the block-scaled kernels' operands count too: NVFP4's and MXFP4's e2m1x2 like MXFP8's 8-bit ones -- their
  // epilogue warpgroup is the plain tcgen05 kernel's, reading the accumulator columns only (docs/fp8.md)
  const bool lowBitIn = f8in || (e->scaleKind != ScaleKind::None && e->inputs[0]->dtype == DType::E2M1X2);
  for (auto* out : f.outputs()) {
    // sm_100a: the q of a computed output scale only (heddle.ops.quantize; the tcgen05 printer's quantized store)
    const bool quant = out->definition && out->definition->kind == OpKind::Quantize;
    // an MX-format output (group="mx32"): the tcgen05 epilogue's per-thread rows, whatever the operands (a 16-bit
    // layer's output is the next MXFP8 layer's operand too); no other target has it (docs/fp8.md "MX formats")
    const bool mxOut = quant && out->definition->quantGroup == kQuantMx32;
    if (mxOut && !target.mma.has(MmaKind::Tcgen05))
      fail<ScheduleError>("quantize(", out->definition->inputs[0]->name, ", ", dtypeName(out->dtype),
                          ", group=mx32): an MX-format output (e8m0 scales per 32 columns, blocked) is lowered on "
                          "the sm_100a tcgen05 kernels only; target ",
                          target.name, " has none: use group=128 or group='row' (f32 scales) there");
    const bool tcgen05Quant = (lowBitIn || mxOut) && target.mma.has(MmaKind::Tcgen05) && quant;
    if (isFloat8(out->dtype) && !(f8in && wgmmaFloat8(target)) && !tcgen05Quant)
      fail<ScheduleError>("output ", out->name, " is ", dtypeName(out->dtype),
                          ": an 8-bit float output is lowered on the sm_90a FP8 wgmma kernels only (8-bit "
                          "operands on a wgmma target; on sm_100a the q of heddle.ops.quantize with 8-bit "
                          "operands; docs/fp8.md); return bf16 on ",
                          target.name);
  }
}

}  // namespace heddle
