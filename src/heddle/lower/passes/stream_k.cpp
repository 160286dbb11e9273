// stream_k: a persistent grid shares the matmul's tiles x k-tiles evenly (schedule stream_k(G), G = the SM
// count). This pass only reshapes the k loop and the launch, before the loop is pipelined; the walk over
// the CTA's segments and the reduction of split tiles is stream_k_fixup (after insert_syncs), or on the
// warp-specialized sm_90a kernel stream_k_roles (after warp_specialize, which takes the shifted loads).
//
//   nk = ceil(K / bk), tiles = ceil(M / bm) * ceil(N / bn), iters = tiles * nk
//   grid x = max(tiles, min(G, iters)) CTAs (<= G whenever tiles <= G: persistent, all resident);
//   CTA c runs floor(iters / grid) global k-iterations, one more for c < iters % grid (contiguous, in CTA
//   order: [c*q + min(c, r), ...) with q, r = iters / grid, iters % grid), at least one each and at
//   most nk (grid >= tiles), so its range touches one or two tiles: one or two segments.
//
// Before (build_matmul_loops):
//   for kt in [0, ceil(K/64)) serial { load A (m0, kt*64); load B (kt*64, n0); mma (k-tile kt) }
// After (KS, skkt: the segment's k extent and first k-tile, bound per segment by stream_k_fixup):
//   for kt in [0, ceil(KS/64)) serial {
//     load A (m0, (kt + skkt)*64); load B ((kt + skkt)*64, n0); mma (k-tile kt) }
//   grid = (max(tiles, min(G, iters)), 1, 1); params ws (f32), flags (i32); name + "_stkG"
//
// Runs when: stream-K schedules (stream_k(G)).
#include "heddle/lower/lower.h"

namespace heddle::passes {

using kir::IExpr;

void streamK(LowerContext& c) {
  const int G = c.tiling.streamK;
  requireWhen(c, "stream_k");
  auto& k = c.kernel;
  IExpr nk = ceilDiv(IExpr::var("K"), c.tiling.bk);
  auto& loop = shareKLoop(c, IExpr::var("skkt"), "stream_k");
  IExpr tiles = k.launch.gridX * k.launch.gridY;
  k.launch.gridX = max(tiles, min(IExpr(G), tiles * nk));
  k.workspaceTiles = k.launch.gridX;  // one workspace slot (and one flag) per CTA
  k.launch.gridY = 1;
  k.launch.gridZ = 1;
  k.streamK = G;
  k.name += "_stk" + std::to_string(G);
  k.tripChecks.push_back({loop.var, nk, 1, c.tiling.a->name,
                          "stream_k walks k-tiles of " + std::to_string(c.tiling.bk) +
                              ": K must be at least 1 (an empty k loop has nothing to share)"});
  addWorkspaceParams(k);
}

}  // namespace heddle::passes
