// The schedule rules of the block-scaled tcgen05 kernels (docs/fp8.md "MX formats"): MXFP8 (scales "mx32", e4m3 /
// e5m2 operands), NVFP4 (scales "nv16", e2m1x2 operands) and MXFP4 (scales "mx32", e2m1x2 operands), before tiling
// and of the tiling. The kernel itself is lowered by lower/passes/mx_scale_ring.cpp (the scale chunks in the operand
// ring) and tcgen05_specialize (tcgen05.cp + the block-scaled MMAs in the MMA role: MmaSm100Mx / MmaSm100Nvf4 /
// MmaSm100Mxf4).
//
// Before: a matmul whose definition carries mx32 / nv16 scales (ir/block_scales.cpp: the operand formats, the scales
// in torch's blocked layout, K a multiple of the scale block). After: a ScheduleError naming the rule, or nothing.
//
// The block-scaled MMA is sm_100a's tcgen05.mma kind::mxf8f6f4 / kind::mxf4nvf4 with .block_scale (PTX ISA
// 9.7.16.10.7 "Block Scaling"; no other target heddle lowers for has one: wgmma and mma.sync apply no per-32 scales,
// so sm_90a takes block128 f32 scales with promotion instead). Its operands are K-major: the instruction descriptor
// of the block-scaled kinds has no transpose that the scales follow (the interpreter's model refuses transposed
// operands, interp/rt/hrt_ptx_tcgen05_mx.h; CUTLASS's SM100 block-scaled collectives take A and B K-major, as do
// torch._scaled_mm's MX / NVFP4 inputs: a row-major, b column-major). The scales apply inside the tensor core, per
// 32 (16) of K, so promotion(k) -- sm_90a's interval of f32 promotions -- has nothing to set.
//
// The tiling (after the tcgen05 roles are worked out): k tiles of 128 elements (mxKTile: MXFP8 four K = 32
// instructions reading the four scale bytes of a row in one 512-byte chunk of torch's blocked layout; NVFP4 128 e2m1
// = 64 stored bytes a row, the 64-byte swizzle -- the UMMA shared-memory descriptor's layout type 4 at bits 61-63, PTX
// ISA "tcgen05 shared memory descriptor" and CuTe's UMMA::LayoutType::SWIZZLE_64B (cute/arch/mma_sm100_desc.hpp),
// which sm90::make_desc's 2 << 62 sets and the interpreter decodes (interp/rt/hrt_ptx_tcgen05.h) -- two K = 64
// instructions each with its own chunk; MXFP4 the same 64-byte rows, two K = 64 kind::mxf4 instructions sharing one
// chunk, scale factor IDs 0 and 2 -- the half word of each row's scale word, PTX ISA 9.7.16.10.7.2.2), n tiles of
// 128 or 256 (whole 128-row chunks of B's scales). Tensor memory holds, besides the accumulator stages, chunks x
// (4 + bn/32) scale columns per operand stage
// (tcgen05.cp.32x128b.warpx4 fills 4 columns per chunk, PTX ISA 9.7.16.9.2): each stage its own, because
// tcgen05.mma -> tcgen05.cp is not a pipelined pair (9.7.16.6.2), so a copy may only overwrite columns whose MMAs
// the stage's commit -> empty -> full chain has retired. tcgen05.alloc
// takes a power of two of columns in [32, 512] (PTX ISA "tcgen05.alloc": "The number of columns must be a power of
// 2", "within the range [32, 512]"; the interpreter refuses other counts, interp/rt/hrt_ptx_tcgen05.h), counted with
// the accumulators in validateRolesTcgen05 (mxScaleColumns). A bias / residual cached with tma_load keeps its own
// producer role (warp 2) and ring, an edge of the role graph apart from the operand ring that carries the chunks; its
// stages' bytes count with the chunks' in the shared-memory budget.
//
// NVFP4's K: a multiple of 16 by the format (ir/block_scales.cpp), and of 32 for this kernel (MXFP4's is a multiple
// of 32 by its format already) -- the operands' TMA maps step rows of K / 2 bytes, which cuTensorMapEncodeTiled takes
// as multiples of 16 only (checked at launch, core/tma.py check_operands; refused here for a concrete K). K need not
// be a multiple of 128: the last k tile's operand bytes past K / 2 and its scale rows past round_up(K/16, 4) are TMA
// zero fill (MXFP4's Kp = round_up(K/32, 4) rows cover its last k tile: the scale bytes past K/32 are torch's zero
// padding).
#include "heddle/ir/errors.h"
#include "heddle/schedule/schedule.h"

namespace heddle {

void validateMxScales(const TensorView* mm, const TargetInfo& target) {
  const Expr* e = mm->definition;
  if (e->scaleKind == ScaleKind::None)  // e2m1x2 operands without scales
    fail<ScheduleError>("matmul ", mm->name, ": operands ", e->inputs[0]->name, " and ", e->inputs[1]->name,
                        " are e2m1x2 (packed FP4), NVFP4 or MXFP4 data that needs its block scales: "
                        "fd.matmul(a, b, trans_b=True, scale_a=sa, scale_b=sb, scales='nv16') (e4m3 scales per 16 "
                        "of K) or scales='mx32' (e8m0 scales per 32 of K)");
  const MxKTile f = mxKTile(e);
  const std::string what = std::string(f.kind) + "-scaled matmul " + mm->name;
  if (f.bk == 64) {  // packed e2m1 operands: NVFP4 or MXFP4
    if (!target.mma.has(MmaKind::Tcgen05))
      fail<ScheduleError>(what, ": ", f.kind, " (", f.format,
                          ") scales are applied by sm_100a's block-scaled tcgen05.mma (",
                          e->scaleKind == ScaleKind::Nv16 ? "kind::mxf4nvf4" : "kind::mxf4", "); target ", target.name,
                          " has no block-scaled MMA: run it on sm_100a");
    const TensorView* a = e->inputs[0];
    const Size& kb = a->shape[e->transA ? 0 : 1];  // K / 2 bytes a stored row
    if (!kb.isSymbolic() && kb.value % 16)
      fail<ScheduleError>(what, ": K = ", 2 * kb.value, " (", a->name, " stored [M, ", kb.value,
                          "] bytes); the kernel loads the e2m1x2 operands by TMA, whose row strides are multiples of "
                          "16 bytes (cuTensorMapEncodeTiled), so K must be a multiple of 32: pad K with zeros to ",
                          (2 * kb.value + 31) / 32 * 32, " in both operands (and their scales)");
  }
  if (!target.mma.has(MmaKind::Tcgen05))
    fail<ScheduleError>(what,
                        ": mx32 (MXFP8) scales are applied by sm_100a's block-scaled tcgen05.mma "
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
    fail<ScheduleError>("promotion(", mm->promotionK, ") on ", what, ": the tensor core applies ", f.format,
                        " scales per ", f.block, " of K itself; promotion is sm_90a's block128 interval: drop it");
}

MxKTile mxKTile(const Expr* e) {
  if (e->scaleKind == ScaleKind::Nv16) return {"nv16", "NVFP4", "MmaSm100Nvf4", "nv16", 64, 2, 2, 16};
  if (e->inputs[0]->dtype == DType::E2M1X2) return {"mx32", "MXFP4", "MmaSm100Mxf4", "mxf4", 64, 1, 2, 32};
  return {"mx32", "MXFP8", "MmaSm100Mx", "mx32", 128, 1, 4, 32};
}

bool isMxScaled(const TensorView* mm) {
  const ScaleKind k = mm->definition->scaleKind;
  return k == ScaleKind::Mx32 || k == ScaleKind::Nv16;
}

int mxScaleColumns(const MatmulTiling& t) {
  if (!isMxScaled(t.mm)) return 0;
  return t.stages * mxKTile(t.mm->definition).scaleColumns(t.bn);
}

void validateMxTcgen05(const MatmulTiling& t) {
  if (!isMxScaled(t.mm)) return;
  const MxKTile f = mxKTile(t.mm->definition);
  const std::string what = std::string(f.kind) + "-scaled matmul " + t.mm->name;
  if (t.bk != f.bk) {
    if (f.bk == 64)
      fail<ScheduleError>(what, ": k tile ", t.bk, " (stored e2m1x2 bytes); the ", f.format, " step (", f.step,
                          ") takes k tiles of 128 e2m1 = 64 bytes a row (the 64-byte swizzle): two K = 64 "
                          "tcgen05.mma, ",
                          f.chunks == 2 ? "each reading its own 512-byte scale chunk"
                                        : "each reading two of the four scales of a row in one 512-byte chunk",
                          "; split 'k' by 64 (the stored axis)");
    fail<ScheduleError>(what, ": k tile ", t.bk,
                        "; the MXFP8 step (MmaSm100Mx) takes k tiles of 128: four K = 32 tcgen05.mma that read the "
                        "four scale bytes of each row in one 512-byte scale chunk; split 'k' by 128");
  }
  if (t.bn % 128)
    fail<ScheduleError>(what, ": n tile ", t.bn,
                        "; B's scales come in chunks of 128 rows of B (torch's blocked layout), so the n tile is "
                        "128 or 256");
}

void validateMxTiling(const MatmulTiling& t) {
  const std::string what = std::string(mxKTile(t.mm->definition).kind) + "-scaled matmul " + t.mm->name;
  const RolePipelineSchedule& h = t.rolePipeline;
  if (!h.enabled || !h.tcgen05)
    fail<ScheduleError>(what,
                        ": the block-scaled MMA runs in the MMA role of the TMA + tcgen05 kernel; cache the operands "
                        "with cache_after(..., 'tma_load') and add warp_specialize({'load': 1, 'mma': 1, "
                        "'epilogue': 4}) (or use Fusion.auto_schedule('sm_100a'))");
  if (h.cluster > 1)
    fail<ScheduleError>(what, ": cluster(", h.cluster,
                        ") is not built with MX scales (each CTA copies its own scale chunks); drop it");
  if (t.grouped)
    fail<ScheduleError>(what,
                        ": a grouped (per-expert) matmul is not built with MX scales (the scale chunks are "
                        "addressed by the tile's 128-row block of the whole scale tensor); run the groups as "
                        "separate matmuls");
  // a TMA-loaded bias / residual: its producer role (warp 2) and ring are apart from the load -> mma ring that carries
  // the scale chunks (one a k tile for MXFP8 and MXFP4, two for NVFP4), so every format takes it
  // (split-K, stream-K and batched: refused for every tcgen05 kernel, tcgen05_schedule.cpp; the TMA-store epilogue
  // takes the mx32 kernel like the others, validateTcgen05Store)
}

}  // namespace heddle
