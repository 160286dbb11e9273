// stream_k_fixup: the segment walk and the grid-level edge of stream-K (stream_k.cpp reshaped the k loop
// and the launch). Runs after insert_syncs: the CTA-level plan covers one segment (the pipelined k loop
// and the epilogue); this pass repeats it per segment (the block barrier between segments: below) and adds
// the reduction's syncs, with their reasons, to the same SyncPlan.
//
// Before (one tile's pipelined loops, then the epilogue):
//   alloc sA, sB, acc; ...prologue / main / epilogue loops over ceil(KS/bk) k-tiles from skkt...; epilogue store
// After (c = blockIdx.x; nk k-tiles per tile; CTA c owns the global k-iterations [b, e)):
//   let sk_b, sk_e (sk_q = iters/grid each, one more for the first iters%grid CTAs), sk_t1 = (sk_e-1)/nk,
//       sk_t0 = sk_b/nk
//   for sk_s in [0, sk_t1 - sk_t0 + 1) serial {         # the last tile first: its head is published at once
//     let sk_t = sk_t1 - sk_s; m0, n0 of tile sk_t; sk_k0 = max(sk_b, sk_t*nk); sk_k1 = min(sk_e, (sk_t+1)*nk)
//     let skkt = sk_k0 - sk_t*nk, KS = (sk_k1 - sk_k0)*bk
//     alloc sA, sB, acc (zeroed); ...the pipelined loops...
//     if (sk_t*nk < sk_k0) {                              # not the tile's first CTA
//       if (tid == 0) { grid.wait flags[c - 1] }          # CTA c-1's running sum of this tile
//       block_sync
//       partial add ws[c - 1] -> acc
//     }
//     if (sk_k1 == (sk_t+1)*nk) { epilogue store -> D }   # the CTA that finishes the tile: epilogue once
//     else { partial store -> ws[c]; block_sync; if (tid == 0) { grid.release flags[c] } }
//   }
// No barrier is added between segments: a second segment follows only when the first one does not
// finish its tile (a CTA's range is at most nk k-tiles, so the first segment, the head of tile sk_t1,
// ends before that tile's end), and then the block barrier before the release also orders every warp's
// last smem reads of the first segment before the second segment's loads refill the stages.
// The partials of a tile are summed in CTA order (((p0 + p1) + p2) ...): deterministic. A CTA waits only
// on CTA c-1 (an earlier CTA in dispatch order), which publishes in its first segment without waiting,
// or after its own wait on c-2: the chain ends at the tile's first CTA, so every wait ends (and the grid
// is at most the SM count when the tiles do not fill the SMs: every CTA is resident anyway).
//
// Runs when: stream-K kernels without roles (kernel.streamK > 0, not warp-specialized).
#include "heddle/lower/build/stream_k_walk.h"

namespace heddle::passes {

using namespace build;

void streamKFixup(LowerContext& c) {
  auto& k = c.kernel;
  requireWhen(c, "stream_k_fixup");  // roles: passes/stream_k_roles.cpp
  const auto& t = c.tiling;
  auto& body = k.body.stmts;
  size_t at = 0;
  while (at < body.size() && body[at]->kind != kir::NodeKind::EpilogueStore) ++at;
  if (at == body.size()) fail<HeddleError>("stream_k_fixup: ", k.name, " has no epilogue store at the top level");
  streamk::Threads th;
  th.one = [] { return when(eq(var("tid"), 0)); };
  th.barrier = [&](const Why& w) { return makeSync(k, kir::SyncKind::BlockSync, w); };
  th.who = "block barrier";
  th.issuer = "thread 0";

  auto seg = streamk::segmentLoop(t);
  auto& sb = seg->body.stmts;
  sb.push_back(std::make_unique<kir::Let>("KS", (var("sk_k1") - var("sk_k0")) * t.bk));
  for (size_t i = 0; i < at; ++i) sb.push_back(std::move(body[i]));
  auto proto = static_cast<kir::EpilogueStore&>(*body[at]);  // a copy: body[at] moves into the reduction
  std::vector<kir::NodePtr> epi;
  epi.push_back(std::move(body[at]));
  streamk::reduction(k, t, seg->body, proto, std::move(epi), th);
  for (size_t i = at + 1; i < body.size(); ++i) sb.push_back(std::move(body[i]));

  std::vector<kir::NodePtr> out;
  streamk::ctaLets(out, t, k.launch.gridX);
  out.push_back(std::move(seg));
  body = std::move(out);
  const bool planned = k.syncsPlanned;  // the CTA-level plan stays whoever's it was
  finishPlan(k, streamk::summary(k));
  k.syncsPlanned = planned;
}

}  // namespace heddle::passes
