// Operand and output element types a target's matrix cores take (docs/fp8.md).
//
// 8-bit float operands (e4m3, e5m2) need an FP8 tensor-core instruction: wgmma (sm_90a, PTX ISA
// "wgmma.mma_async" .atype/.btype .e4m3/.e5m2, k = 32) or tcgen05.mma kind::f8f6f4 (sm_100a). mma.sync
// kernels (sm_80) and the AMD MFMA / WMMA kernels in this build take f16 / bf16 only: they refuse FP8 here,
// naming the operand, before any tiling is worked out. On sm_100a the tcgen05 kernel takes FP8 (its layout
// and k-tile rules: schedule/tcgen05_schedule.cpp); the cp.async + mma.sync fallback there does not.
#include "heddle/ir/errors.h"
#include "heddle/schedule/schedule.h"

namespace heddle {

namespace {

bool takesFloat8(const TargetInfo& target) {
  return target.mma.has(MmaKind::Wgmma) || target.mma.has(MmaKind::Tcgen05);
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
    if (!target.mma.has(MmaKind::Tcgen05))
      fail<ScheduleError>("matmul operand ", op->name, " is ", dtypeName(op->dtype),
                          ": the FP8 kernel families are not lowered in this build yet (docs/fp8.md); convert the "
                          "operand to bf16");
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
  for (auto* out : f.outputs())
    if (isFloat8(out->dtype))
      fail<ScheduleError>("output ", out->name, " is ", dtypeName(out->dtype),
                          ": an 8-bit float output is not lowered in this build yet (docs/fp8.md); return bf16");
}

}  // namespace heddle
