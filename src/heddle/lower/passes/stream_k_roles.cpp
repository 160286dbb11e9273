// stream_k_roles: stream-K on the sm_90a warp-specialized persistent kernel (schedule stream_k(G) with roles
// {load, mma}, cooperative MMA warpgroups). stream_k.cpp sized the grid and moved the loads' k coordinate by
// `skkt`; warp_specialize built the roles over whole tiles (and tma_store_epilogue, where asked, the staged
// epilogue). This pass turns both roles' tile walks into the same walk over the CTA's one or two (tile,
// k-range) segments (stream_k_walk.h), so the producer fills exactly the ring items the MMA warpgroups
// consume, and adds the fixed-order reduction of a split tile before the epilogue.
//
// Before (warp_specialize; ring item g = tl*nk + kt):
//   let bid; init; block_sync
//   if (warp < 4) { if (tid == 0) for tl in [0, tiles_cta) { let tile, m0, n0
//                     for kt in [0, nk) { wait empty[g%s]; expect_tx full[g%s]; tma A, B (k-tile kt + skkt) } } }
//   else { pre-arrive empty; for tl { let tile, m0, n0; acc = 0
//            for kt in [0, nk) { wait full[g%s]; wgmma; commit; wait_group(keep); arrive empty[(g+p+1)%s] }
//            wgmma.wait_group(0); <epilogue: the direct store, or tma_store_epilogue's chunks> } }
// After (c = blockIdx.x; grid = max(tiles, min(G, tiles*nk)) CTAs, no num_ctas parameter):
//   let bid, sk_c, sk_nk, sk_iters, sk_q, sk_r, sk_b, sk_e, sk_t0, sk_t1; init; block_sync
//   if (warp < 4) { if (tid == 0) for sk_s in [0, sk_t1-sk_t0+1) { let sk_t, m0, n0, sk_k0, sk_k1, skkt, sk_o
//                     for kt in [0, sk_k1-sk_k0) { ...the same, item g = sk_o + kt... } } }
//   else { pre-arrive empty; for sk_s { lets; acc = 0; for kt in [0, sk_k1-sk_k0) { ...item g = sk_o + kt... }
//            wgmma.wait_group(0)
//            if (sk_t*sk_nk < sk_k0) { if (warp 4 elected) grid.wait flags[c-1]; bar.sync 2 (MMA threads)
//                                      partial add ws[c-1] -> acc }
//            if (sk_k1 == (sk_t+1)*sk_nk) { <epilogue> }
//            else { partial store acc -> ws[c]; bar.sync 2; if (warp 4 elected) grid.release flags[c] } } }
// sk_o = sk_e - sk_k1: the items of the CTA's earlier segments (the last tile first), so the ring's item
// count runs on across segments in both roles exactly as it runs across tiles. A CTA ends at most one tile
// (its range is at most nk k-tiles: a segment that ends a tile it did not start is its last), so the
// epilogue runs at most once per CTA: its tile counter is 0, and the WAR waits of tma_store_epilogue's first
// sD[sd] chunks go (no earlier store of the CTA read those slots; later chunks keep theirs).
// The waits end: the MMA warpgroups of CTA c wait only on CTA c-1, which publishes in its first segment
// (the head of its last tile) without waiting, or after its own wait on c-2; the producer waits only on
// its own CTA's ring (docs/hopper.md "Stream-K on the warp-specialized kernel").
//
// Runs when: stream-K role-pipeline kernels (kernel.streamK > 0, warp-specialized).
#include <algorithm>

#include "heddle/lower/build/stream_k_walk.h"

namespace heddle::passes {

using namespace build;

namespace {

void tileLoops(kir::Block& b, std::vector<kir::ForLoop*>& out) {
  for (auto& n : b.stmts) {
    if (n->kind == kir::NodeKind::For) {
      auto& f = static_cast<kir::ForLoop&>(*n);
      if (f.var == "tl") out.push_back(&f);
      else tileLoops(f.body, out);
    } else if (n->kind == kir::NodeKind::If) {
      auto& x = static_cast<kir::IfThenElse&>(*n);
      tileLoops(x.thenBody, out);
      tileLoops(x.elseBody, out);
    }
  }
}

// The k loop of a tile loop over the segment's k-tiles: item g = tl*nk + kt becomes sk_o + kt (every node
// but the loads' coordinates, which stay kt + skkt).
std::unique_ptr<kir::ForLoop> segmentKLoop(const kir::ForLoop& kl) {
  const std::map<std::string, IExpr> item{{"tl", IExpr(0)}, {"kt", var("kt") + var("sk_o")}};
  auto out = forLoop("kt", 0, var("sk_k1") - var("sk_k0"));
  out->stage = kl.stage;
  out->cbStages = kl.cbStages;
  out->cbPrefetch = kl.cbPrefetch;
  for (auto& n : kl.body.stmts) {
    auto c = kir::clone(*n, item);
    if (n->kind == kir::NodeKind::TileLoad) {
      auto& from = static_cast<const kir::TileLoad&>(*n);
      auto& to = static_cast<kir::TileLoad&>(*c);
      to.row0 = from.row0;
      to.col0 = from.col0;
    }
    out->body.stmts.push_back(std::move(c));
  }
  return out;
}

// The TMA-store epilogue runs at most once per CTA: its first `sd` chunks write sD slots no earlier store
// of this CTA has read, so their WAR edge (elected wait_group.read, then the named barrier) goes.
void dropFirstSlotWaits(std::vector<kir::NodePtr>& epi, int sd) {
  auto syncKind = [](const kir::Node& n) {
    return n.kind == kir::NodeKind::Sync ? static_cast<const kir::Sync&>(n).sync : kir::SyncKind::BlockSync;
  };
  int stores = 0;
  for (size_t i = 0; i < epi.size();) {
    auto* x = epi[i]->kind == kir::NodeKind::If ? static_cast<kir::IfThenElse*>(epi[i].get()) : nullptr;
    const bool waitRead =
        x && x->thenBody.stmts.size() == 1 && syncKind(*x->thenBody.stmts[0]) == kir::SyncKind::BulkWaitRead;
    if (waitRead && stores < sd && i + 1 < epi.size() && syncKind(*epi[i + 1]) == kir::SyncKind::NamedBarrier) {
      epi.erase(epi.begin() + i, epi.begin() + i + 2);
      continue;
    }
    if (x && !x->thenBody.stmts.empty() && x->thenBody.stmts[0]->kind == kir::NodeKind::TmaStore) ++stores;
    ++i;
  }
}

}  // namespace

void streamKRoles(LowerContext& c) {
  auto& k = c.kernel;
  const auto& t = c.tiling;
  requireWhen(c, "stream_k_roles");
  std::vector<kir::ForLoop*> loops;
  tileLoops(k.body, loops);
  if (loops.size() != 2)
    fail<HeddleError>("stream_k_roles: ", k.name, " has ", loops.size(),
                      " tile loops; stream-K walks those of the "
                      "load and mma roles");
  const int mmaThreads = 128 * t.rolePipeline.mmaWarpgroups, first = k.tile.mmaWarpBase;  // the MMA role's first warp
  streamk::Threads th;
  th.one = [first] { return electOne(first); };
  th.barrier = [&](Why w) {  // bar.sync 2 over the MMA warpgroups (as tma_store_epilogue's)
    auto b = makeSync(k, kir::SyncKind::NamedBarrier, w, 2);
    b->count = mmaThreads;
    return b;
  };
  th.who = "named barrier (" + std::to_string(mmaThreads) + " MMA threads)";
  th.issuer = "thread " + std::to_string(32 * first);

  for (auto* tl : loops) {
    auto seg = streamk::segmentLoop(t);
    seg->body.stmts.push_back(std::make_unique<kir::Let>("sk_o", var("sk_e") - var("sk_k1")));
    auto& stmts = tl->body.stmts;
    size_t i = 0;
    for (; i < stmts.size() && stmts[i]->kind != kir::NodeKind::For; ++i) {
      auto* l = stmts[i]->kind == kir::NodeKind::Let ? static_cast<kir::Let*>(stmts[i].get()) : nullptr;
      if (l && (l->var == "tile" || l->var == "m0" || l->var == "n0")) continue;  // the segment's lets instead
      seg->body.stmts.push_back(kir::clone(*stmts[i], {{"tl", var("sk_s")}}));
    }
    if (i == stmts.size()) fail<HeddleError>("stream_k_roles: a tile loop of ", k.name, " has no k loop");
    seg->body.stmts.push_back(segmentKLoop(static_cast<kir::ForLoop&>(*stmts[i])));
    std::vector<kir::NodePtr> after;
    for (++i; i < stmts.size(); ++i) after.push_back(kir::clone(*stmts[i], {{"tl", var("sk_s")}}));
    if (!after.empty()) {  // the MMA role: the accumulators are final after wgmma.wait_group(0)
      size_t e = 0;
      if (after[0]->kind == kir::NodeKind::Sync && static_cast<kir::Sync&>(*after[0]).sync == kir::SyncKind::WgmmaWait)
        seg->body.stmts.push_back(std::move(after[e++]));
      const kir::EpilogueStore* proto = nullptr;
      kir::walk(k.body, [&](const kir::Node& n) {
        if (!proto && n.kind == kir::NodeKind::EpilogueStore) proto = static_cast<const kir::EpilogueStore*>(&n);
      });
      if (!proto) fail<HeddleError>("stream_k_roles: the MMA role of ", k.name, " has no epilogue store");
      kir::EpilogueStore acc(*proto);  // the accumulators in registers, the whole fragment
      acc.to = nullptr;
      acc.colBegin = acc.colEnd = 0;
      std::vector<kir::NodePtr> epi;  // run at most once per CTA: its tile counter is 0
      for (; e < after.size(); ++e) epi.push_back(kir::clone(*after[e], {{"sk_s", IExpr(0)}}));
      if (t.rolePipeline.mmaTmaStore) dropFirstSlotWaits(epi, t.rolePipeline.storeStages);
      streamk::reduction(k, t, seg->body, acc, std::move(epi), th);
    }
    tl->var = "sk_s";
    tl->start = seg->start;
    tl->stop = seg->stop;
    tl->body.stmts = std::move(seg->body.stmts);
  }

  // the CTA's range, before the roles diverge; the grid of stream_k.cpp instead of num_ctas
  auto& body = k.body.stmts;
  size_t at = 0;
  while (at < body.size() && !(body[at]->kind == kir::NodeKind::Let && static_cast<kir::Let&>(*body[at]).var == "bid"))
    ++at;
  if (at == body.size()) fail<HeddleError>("stream_k_roles: ", k.name, " has no `let bid`");
  std::vector<kir::NodePtr> lets;
  streamk::ctaLets(lets, t, k.workspaceTiles);
  body.insert(body.begin() + at + 1, std::make_move_iterator(lets.begin()), std::make_move_iterator(lets.end()));
  k.launch.gridX = k.workspaceTiles;
  auto numCtas = [](const kir::Param& p) { return p.name == "num_ctas"; };
  k.params.erase(std::remove_if(k.params.begin(), k.params.end(), numCtas), k.params.end());
  k.syncPlan.summary = streamk::summary(k);
}

}  // namespace heddle::passes
