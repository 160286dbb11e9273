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
//     batch_idx = e, B += e * batch_stride_b   (w[e])
// so the loads, the k loop, its pipeline and its syncs are unchanged.
// The warp-specialized kernel keeps this grid (not persistent: no num_ctas): each CTA runs the one tile its
// walk found (RolePipeline::tilesPerCta is 1, persistentTileLets adds no lets), every role with the same
// m0, n0, batch_idx; a surplus CTA exits before the mbarrier init. B is read through a 3-D tensor map over
// every expert at coordinate batch_idx (passes/tma_operands.cpp) instead of `B += e * batch_stride_b`; A's
// 2-D map over [tokens, K] reads on past the group's end (the next group's rows, never stored).
//
// Before (build_matmul_loops of a 2-D matmul): params A, B, M, N, K, lda, ldb; grid (ceil(N/bn), ceil(M/bm))
// After:  params A, B, offs (const int*), tokens, N, K, E, lda, ldb, batch_stride_b; grid
//         (ceil(N/bn), ceil(tokens/bm) + E); kernel name + "_grouped"; tile.grouped
#pragma once

#include "heddle/lower/lower.h"

namespace heddle::passes::grouped {

// Turns the 2-D matmul kernel build_matmul_loops made into the grouped one (see above).
void buildGroupedWalk(LowerContext& c);

}  // namespace heddle::passes::grouped
