// The grouped matmul's tile walk (Fusion::groupedMatmul; docs/grouped.md), shared by the kernels that run
// a grouped matmul: the cp.async + mma.sync kernel (build_matmul_loops) and the sm_90a warp-specialized TMA +
// wgmma kernel (passes/warp_specialize.cpp on the role-pipeline builder, lower/build/role_pipeline.h).
//
// One launch covers every expert. The grid's m-tile axis is a linear index over every group's m tiles,
// sized from the host-known total rows and expert count only (no host read of the offsets):
//     m-tile CTAs = ceil(tokens / bm) + E   >=   sum_e ceil(rows_e / bm)      (rows_e = offs[e] - offs[e-1])
// Each CTA finds its (expert, m0) by walking the group ends offs[0..E) on the device (the printed walk,
// codegen CLikePrinter::groupedWalk); an index past the last group's tiles exits before any load. Inside
// a group the kernel is the plain one with
//     M         = offs[e]   (absolute row where the group ends: A's loads zero-fill past it, the epilogue
//                            stores stop at it: `row >= M`)
//     m0        = offs[e-1] + j * bm (absolute: D and any residual are indexed with the absolute row)
//     batch_idx = e, B += e * batch_stride_b   (w[e]; a gated pair's second member B1 likewise)
// so the loads, the k loop, its pipeline and its syncs are unchanged.
// The warp-specialized kernel keeps this grid (not persistent: no num_ctas): each CTA runs the one tile its
// walk found (RolePipeline::tilesPerCta is 1, persistentTileLets adds no lets), every role with the same
// m0, n0, batch_idx; a surplus CTA exits before the mbarrier init. B is read through a 3-D tensor map over
// every expert at coordinate batch_idx (passes/tma_operands.cpp) instead of `B += e * batch_stride_b`; A's
// 2-D map over [tokens, K] reads on past the group's end (the next group's rows, never stored).
//
// Before (build_matmul_loops of a 2-D matmul): params A, B, M, N, K, lda, ldb; grid (ceil(N/bn), ceil(M/bm))
// After:  params A, B, offs (const int*), tokens, N, K, E, lda, ldb, batch_stride_b (a gated pair: B, B1, offs,
//         ..., ldb, batch_stride_b, ldb1, batch_stride_b1); grid
//         (ceil(N/bn), ceil(tokens/bm) + E); kernel name + "_grouped"; tile.grouped
#pragma once

#include "heddle/lower/lower.h"

namespace heddle::passes::grouped {

// Turns the 2-D matmul kernel build_matmul_loops made into the grouped one (see above).
void buildGroupedWalk(LowerContext& c);

// The masked layout (Fusion::maskedGroupedMatmul, DeepGEMM's decode layout): x [E, max_tokens, K], counts
// int32 [E], out [E, max_tokens, N]. The kernel is the batched one with batch_idx = blockIdx.z = the expert
// and one change: the rows stop at the expert's count,
//     M = min(counts[e], max_tokens)   (A's loads zero-fill rows >= M, the epilogue stores stop at them)
// and a CTA whose m0 >= M (an m tile wholly in the padding, or an empty expert) exits before any load or
// barrier (the whole CTA takes the same branch). The grid stays (ceil(N/bn), ceil(max_tokens/bm), E), from
// host-known sizes only: no walk over the experts (O(1) per CTA, where a linear walk over every expert's
// counted tiles would read all E counts per CTA), and decode's max_tokens is small, so the exiting CTAs
// cost a launch slot and one 4-byte load each.
// Before (build_matmul_loops of a batched matmul): params A, B, M, N, K, ..., batch_stride_a, batch_stride_b
// After:  params A, B, counts (const int*), max_tokens, N, K, ...; the grid unchanged; kernel name +
//         "_masked"; tile.masked
void buildMaskedWalk(LowerContext& c);

}  // namespace heddle::passes::grouped
