// Building blocks of stream-K shared by stream_k_fixup.cpp (the cp.async kernel, every thread computes)
// and stream_k_roles.cpp (the sm_90a warp-specialized kernel: a TMA producer role and MMA warpgroups):
// the walk of a CTA over its one or two (tile, k-range) segments and the fixed-order reduction of a
// split tile through the workspace behind one gpu-scope flag per CTA (docs/hopper.md "Stream-K").
//
//   CTA lets:      sk_nk = ceil(K/bk), sk_iters = tiles * sk_nk, sk_q = sk_iters/grid, sk_r = sk_iters%grid,
//                  sk_b = c*sk_q + min(c, sk_r), sk_e = sk_b + sk_q + (c < sk_r) (the first sk_r CTAs one more),
//                  sk_t0 = sk_b/sk_nk, sk_t1 = (sk_e-1)/sk_nk   (c = sk_c = blockIdx.x)
//   segment loop:  for sk_s in [0, sk_t1 - sk_t0 + 1) { let sk_t = sk_t1 - sk_s; m0, n0 of tile sk_t (m
//                  tile-major); sk_k0 = max(sk_b, sk_t*sk_nk); sk_k1 = min(sk_e, (sk_t+1)*sk_nk);
//                  skkt = sk_k0 - sk_t*sk_nk (the segment's first k-tile in its tile) ... }
//   reduction:     if (sk_t*sk_nk < sk_k0) { one thread: grid.wait flags[c-1]; barrier; partial add ws[c-1] }
//                  if (sk_k1 == (sk_t+1)*sk_nk) { epilogue } else { partial store ws[c]; barrier;
//                                                                   one thread: grid.release flags[c] }
#pragma once

#include <functional>

#include "heddle/lower/build/role_pipeline_build.h"

namespace heddle::passes::streamk {

using kir::IExpr;

// The CTA's range of global k-iterations and its first and last tile, for a grid of `grid` CTAs.
void ctaLets(std::vector<kir::NodePtr>& out, const MatmulTiling& t, IExpr grid);

// The segment loop `for sk_s` with the segment's lets (sk_t, m0, n0, sk_k0, sk_k1, skkt) in its body.
std::unique_ptr<kir::ForLoop> segmentLoop(const MatmulTiling& t);

// How the threads that hold the accumulators synchronise around the workspace: `one` wraps a grid sync in
// the branch of the thread that issues it, `barrier` orders the threads (its reason is given), `who`
// names the barrier in the reasons ("block barrier", "named barrier (256 MMA threads)").
struct Threads {
  std::function<std::unique_ptr<kir::IfThenElse>()> one;
  std::function<std::unique_ptr<kir::Sync>(const build::Why&)> barrier;
  std::string who, issuer;  // issuer: "thread 0", "thread 128"
};

// Appends to `seg` the reduction of a split tile: the running sum of CTA c-1 added to the accumulators when
// this CTA does not start the tile, then `epilogue` (moved in) when it ends the tile, else its running
// sum published to CTA c+1. `proto` is the accumulators' epilogue store (cloned for the partials).
void reduction(kir::Kernel& k, const MatmulTiling& t, kir::Block& seg, const kir::EpilogueStore& proto,
               std::vector<kir::NodePtr> epilogue, const Threads& th);

// The SyncPlan summary's stream-K clause.
std::string summary(const kir::Kernel& k);

}  // namespace heddle::passes::streamk
