// stream_k_fixup: the segment walk and the grid-level edge of stream-K (stream_k.cpp reshaped the k loop
// and the launch). Runs after insert_syncs: the CTA-level plan covers one segment (the pipelined k loop
// and the epilogue); this pass repeats it per segment (the block barrier between segments: below) and adds
// the reduction's syncs, with their reasons, to the same SyncPlan.
//
// Before (one tile's pipelined loops, then the epilogue):
//   alloc sA, sB, acc; ...prologue / main / epilogue loops over ceil(KS/bk) k-tiles from skkt...; epilogue store
// After (c = blockIdx.x; nk k-tiles per tile; CTA c owns the global k-iterations [b, e)):
//   let sk_b = c*iters/grid, sk_e = (c+1)*iters/grid, sk_t1 = (sk_e-1)/nk, sk_t0 = sk_b/nk
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
#include "heddle/lower/passes/hopper_build.h"

namespace heddle::passes {

using namespace hopper;

void streamKFixup(LowerContext& c) {
  auto& k = c.kernel;
  if (k.streamK <= 0) return;
  const auto& t = c.tiling;
  auto& body = k.body.stmts;
  size_t at = 0;
  while (at < body.size() && body[at]->kind != kir::NodeKind::EpilogueStore) ++at;
  if (at == body.size()) fail<HeddleError>("stream_k_fixup: ", k.name, " has no epilogue store at the top level");
  IExpr cta = var("blockIdx.x"), tid = var("tid"), nk = var("sk_nk"), tile = var("sk_t");
  IExpr k0 = var("sk_k0"), k1 = var("sk_k1");
  IExpr gn = ceilDiv(var("N"), t.bn), gm = ceilDiv(var("M"), t.bm);
  const std::string tl = std::to_string(t.bm) + "x" + std::to_string(t.bn);
  auto byThreadZero = [&](std::unique_ptr<kir::Sync> s) {  // `if (tid == 0) { s }`
    auto one = std::make_unique<kir::IfThenElse>();
    one->cond = eq(tid, 0);
    one->thenBody.stmts.push_back(std::move(s));
    return one;
  };

  auto fix = std::make_unique<kir::IfThenElse>();  // not the tile's first CTA: add CTA c-1's running sum
  fix->cond = tile * nk < k0;
  {
    auto wait = makeSync(k, kir::SyncKind::GridWait,
                         {"grid RAW ws (CTA c-1 -> CTA c)", "partial store of CTA blockIdx.x - 1",
                          "partial add of CTA blockIdx.x", "ws, flags", "",
                          "grid-level edge: ld.acquire.gpu spins on flags[blockIdx.x - 1], reset to 0 once seen "
                          "(this CTA is its only reader): the running sum of this tile's earlier CTAs. Only the "
                          "previous CTA is waited on, which never waits on a later one, so the wait ends"});
    wait->index = cta - 1;
    wait->count = 1;
    fix->thenBody.stmts.push_back(byThreadZero(std::move(wait)));
    fix->thenBody.stmts.push_back(makeSync(k, kir::SyncKind::BlockSync,
                                           {"RAW ws (acquire -> partial add)", "grid.wait by thread 0",
                                            "partial add (every thread)", "ws", "",
                                            "block barrier: thread 0's acquire is ordered before every thread reads "
                                            "the running sum"}));
    auto& epi = static_cast<kir::EpilogueStore&>(*body[at]);
    auto add = std::make_unique<kir::EpilogueStore>(epi);
    add->partial = kir::EpilogueStore::Partial::Add;
    add->slot = cta - 1;
    add->count = 1;
    fix->thenBody.stmts.push_back(std::move(add));
  }
  auto fin = std::make_unique<kir::IfThenElse>();  // the tile's last CTA applies the epilogue once
  fin->cond = eq(k1, (tile + 1) * nk);
  {
    auto& b = fin->elseBody;
    auto st = std::make_unique<kir::EpilogueStore>(static_cast<kir::EpilogueStore&>(*body[at]));
    st->partial = kir::EpilogueStore::Partial::Store;
    st->slot = cta;
    b.stmts.push_back(std::move(st));
    b.stmts.push_back(makeSync(k, kir::SyncKind::BlockSync,
                               {"RAW ws (partial store -> release)", "partial stores of ws (every thread)",
                                "grid.release by thread 0", "ws", "",
                                "block barrier: every thread's running sum of the " + tl + " tile is stored before "
                                "thread 0 releases the flag that publishes it"}));
    auto rel = makeSync(k, kir::SyncKind::GridRelease,
                        {"grid RAW ws (CTA c -> CTA c+1)", "partial store of CTA blockIdx.x",
                         "partial add of CTA blockIdx.x + 1", "ws, flags", "",
                         "grid-level edge: fence.acq_rel.gpu + store flags[blockIdx.x] = 1 (a gpu-scope release) "
                         "publishes this CTA's running sum of the tile to the next CTA, which continues the tile"});
    rel->index = cta;
    b.stmts.push_back(byThreadZero(std::move(rel)));
  }
  fin->thenBody.stmts.push_back(std::move(body[at]));

  auto seg = std::make_unique<kir::ForLoop>();
  seg->var = "sk_s";
  seg->start = 0;
  seg->stop = var("sk_t1") - var("sk_t0") + 1;
  auto& sb = seg->body.stmts;
  sb.push_back(std::make_unique<kir::Let>("sk_t", var("sk_t1") - var("sk_s")));
  sb.push_back(std::make_unique<kir::Let>("m0", tile / gn * t.bm));
  sb.push_back(std::make_unique<kir::Let>("n0", tile % gn * t.bn));
  sb.push_back(std::make_unique<kir::Let>("sk_k0", max(var("sk_b"), tile * nk)));
  sb.push_back(std::make_unique<kir::Let>("sk_k1", min(var("sk_e"), (tile + 1) * nk)));
  sb.push_back(std::make_unique<kir::Let>("skkt", k0 - tile * nk));
  sb.push_back(std::make_unique<kir::Let>("KS", (k1 - k0) * t.bk));
  for (size_t i = 0; i < at; ++i) sb.push_back(std::move(body[i]));
  sb.push_back(std::move(fix));
  sb.push_back(std::move(fin));
  for (size_t i = at + 1; i < body.size(); ++i) sb.push_back(std::move(body[i]));

  std::vector<kir::NodePtr> out;
  out.push_back(std::make_unique<kir::Let>("sk_nk", ceilDiv(var("K"), t.bk)));
  out.push_back(std::make_unique<kir::Let>("sk_iters", gm * gn * nk));
  out.push_back(std::make_unique<kir::Let>("sk_b", cta * var("sk_iters") / k.launch.gridX));
  out.push_back(std::make_unique<kir::Let>("sk_e", (cta + 1) * var("sk_iters") / k.launch.gridX));
  out.push_back(std::make_unique<kir::Let>("sk_t0", var("sk_b") / nk));
  out.push_back(std::make_unique<kir::Let>("sk_t1", (var("sk_e") - 1) / nk));
  out.push_back(std::move(seg));
  body = std::move(out);
  const bool planned = k.syncsPlanned;  // the CTA-level plan stays whoever's it was
  finishPlan(k, k.syncPlan.summary + (k.syncPlan.summary.empty() ? "" : "; ") + "stream-K over at most " +
                    std::to_string(k.streamK) + " CTAs: one or two tile segments each, a split tile's running sum "
                    "passed CTA to CTA through the workspace behind one gpu-scope flag per CTA, the epilogue applied "
                    "by the CTA that finishes the tile");
  k.syncsPlanned = planned;
}

}  // namespace heddle::passes
