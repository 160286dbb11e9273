// The TMA-loaded epilogue operand (a bias row [N] or a residual [M, N] cached with
// cache_after(x, 'tma_load'), role_pipeline_schedule.h epiTma): the building blocks both role lowerings use
// (warp_specialize.cpp on sm_90a, tcgen05_specialize.cpp on sm_100a) for the second producer role
// (PipelineRole::EpiLoad, one warp of the load warpgroup) and its ring sE / fullE / emptyE:
//   epilogueOperandTma  the ring buffer sE[se][rows x bn] (the epilogue reads it instead of global memory)
//                       and the tensor map tmE: a bias row is one [1, bn] box of a [1, N] map, a residual
//                       one [bm, bn] box per tile
//   epilogueOperandRing the ring of the edge EpiLoad -> the role running the epilogue program: prefetch
//                       se-1, keep 0 (the consumer reads with ordinary loads), full count 1 with expect_tx
//                       of the box bytes, empty count = the consuming threads
//   epiLoadRole         if (tid == 32*warp) for tl { let tile, m0, n0; wait emptyE[tl%se] parity (tl/se)%2;
//                         arrive.expect_tx fullE[tl%se] box bytes; tma x -> sE[tl%se] }
//   epilogueWithOperand wait fullE[tl%se] parity (tl/se)%2; epilogue (operandStage tl%se); arrive emptyE[tl%se]
#pragma once

#include <string>

#include "heddle/lower/analysis/role_graph.h"
#include "heddle/lower/build/role_pipeline_build.h"

namespace heddle::passes::build {

// sE and tmE for h.epiTma (nullptr when no epilogue operand is TMA-loaded); ScheduleError when the
// epilogue does not read it or reads it broadcast along n.
kir::Buffer* epilogueOperandTma(kir::Kernel& k, const MatmulTiling& t, const RolePipelineSchedule& h);

// The ring of edge `e` (EpiLoad -> `consumer`, read by `consumerThreads` threads) over sE.
Ring epilogueOperandRing(kir::Kernel& k, const MatmulTiling& t, const RolePipelineSchedule& h, const RoleGraph::Edge& e,
                         const kir::Buffer& sE, const std::string& consumer, int consumerThreads);

// The producer role: warp `warp`'s elected thread loads the operand's box of each of this CTA's tiles.
std::unique_ptr<kir::IfThenElse> epiLoadRole(kir::Kernel& k, const MatmulTiling& t, const RolePipelineSchedule& h,
                                             const Ring& ringE, kir::Buffer* sE, int warp, IExpr tilesCta);

// Appends the epilogue `epi` of tile `tl` to `b`, reading the operand's slot tl % se between the ring's
// wait and release (`ringE` null: no operand, the epilogue alone).
void epilogueWithOperand(kir::Kernel& k, kir::Block& b, kir::NodePtr epi, const Ring* ringE, IExpr tl);

}  // namespace heddle::passes::build
