// Stream-K building blocks (see stream_k_walk.h).
#include "heddle/lower/build/stream_k_walk.h"

namespace heddle::passes::streamk {

using build::makeSync;
using build::var;

void ctaLets(std::vector<kir::NodePtr>& out, const MatmulTiling& t, IExpr grid) {
  IExpr cta = var("sk_c"), nk = var("sk_nk"), q = var("sk_q"), r = var("sk_r");
  IExpr gn = ceilDiv(var("N"), t.bn), gm = ceilDiv(var("M"), t.bm);
  out.push_back(std::make_unique<kir::Let>("sk_c", var("blockIdx.x")));  // signed, like every index below
  out.push_back(std::make_unique<kir::Let>("sk_nk", ceilDiv(var("K"), t.bk)));
  out.push_back(std::make_unique<kir::Let>("sk_iters", gm * gn * nk));
  // the first sk_r CTAs get sk_q + 1 iterations, the others sk_q (no product c * iters: it would overflow
  // 32 bits on large grids, e.g. 8192 tiles of 64 k-tiles)
  out.push_back(std::make_unique<kir::Let>("sk_q", var("sk_iters") / grid));
  out.push_back(std::make_unique<kir::Let>("sk_r", var("sk_iters") % grid));
  out.push_back(std::make_unique<kir::Let>("sk_b", cta * q + min(cta, r)));
  out.push_back(std::make_unique<kir::Let>("sk_e", var("sk_b") + q + (cta < r)));
  out.push_back(std::make_unique<kir::Let>("sk_t0", var("sk_b") / nk));
  out.push_back(std::make_unique<kir::Let>("sk_t1", (var("sk_e") - 1) / nk));
}

std::unique_ptr<kir::ForLoop> segmentLoop(const MatmulTiling& t) {
  IExpr nk = var("sk_nk"), tile = var("sk_t");
  IExpr gn = ceilDiv(var("N"), t.bn);
  auto seg = build::forLoop("sk_s", 0, var("sk_t1") - var("sk_t0") + 1);
  auto& sb = seg->body.stmts;
  sb.push_back(std::make_unique<kir::Let>("sk_t", var("sk_t1") - var("sk_s")));
  sb.push_back(std::make_unique<kir::Let>("m0", tile / gn * t.bm));
  sb.push_back(std::make_unique<kir::Let>("n0", tile % gn * t.bn));
  sb.push_back(std::make_unique<kir::Let>("sk_k0", max(var("sk_b"), tile * nk)));
  sb.push_back(std::make_unique<kir::Let>("sk_k1", min(var("sk_e"), (tile + 1) * nk)));
  sb.push_back(std::make_unique<kir::Let>("skkt", var("sk_k0") - tile * nk));
  return seg;
}

void reduction(kir::Kernel& k, const MatmulTiling& t, kir::Block& seg, const kir::EpilogueStore& proto,
               std::vector<kir::NodePtr> epilogue, const Threads& th) {
  IExpr cta = var("blockIdx.x"), nk = var("sk_nk"), tile = var("sk_t");
  const std::string tl = std::to_string(t.bm) + "x" + std::to_string(t.bn);
  auto byOne = [&](std::unique_ptr<kir::Sync> s) {
    auto one = th.one();
    one->thenBody.stmts.push_back(std::move(s));
    return one;
  };

  auto fix = build::when(tile * nk < var("sk_k0"));  // not the tile's first CTA: add CTA c-1's running sum
  {
    auto wait = makeSync(k, kir::SyncKind::GridWait,
                         {"grid RAW ws (CTA c-1 -> CTA c)", "partial store of CTA blockIdx.x - 1",
                          "partial add of CTA blockIdx.x", "ws, flags", "",
                          "grid-level edge: ld.acquire.gpu spins on flags[blockIdx.x - 1], reset to 0 once seen "
                          "(this CTA is its only reader): the running sum of this tile's earlier CTAs. Only the "
                          "previous CTA is waited on, which never waits on a later one, so the wait ends"});
    wait->index = cta - 1;
    wait->count = 1;
    fix->thenBody.stmts.push_back(byOne(std::move(wait)));
    fix->thenBody.stmts.push_back(th.barrier({"RAW ws (acquire -> partial add)", "grid.wait by " + th.issuer,
                                              "partial add (every thread)", "ws", "",
                                              th.who + ": " + th.issuer +
                                                  "'s acquire is ordered before every thread "
                                                  "reads the running sum"}));
    auto add = std::make_unique<kir::EpilogueStore>(proto);
    add->partial = kir::EpilogueStore::Partial::Add;
    add->slot = cta - 1;
    add->count = 1;
    fix->thenBody.stmts.push_back(std::move(add));
  }
  auto fin = build::when(eq(var("sk_k1"), (tile + 1) * nk));  // the tile's last CTA applies the epilogue once
  for (auto& n : epilogue) fin->thenBody.stmts.push_back(std::move(n));
  {
    auto& b = fin->elseBody;
    auto st = std::make_unique<kir::EpilogueStore>(proto);
    st->partial = kir::EpilogueStore::Partial::Store;
    st->slot = cta;
    b.stmts.push_back(std::move(st));
    b.stmts.push_back(th.barrier({"RAW ws (partial store -> release)", "partial stores of ws (every thread)",
                                  "grid.release by " + th.issuer, "ws", "",
                                  th.who + ": every thread's running sum of the " + tl + " tile is stored before " +
                                      th.issuer + " releases the flag that publishes it"}));
    auto rel = makeSync(k, kir::SyncKind::GridRelease,
                        {"grid RAW ws (CTA c -> CTA c+1)", "partial store of CTA blockIdx.x",
                         "partial add of CTA blockIdx.x + 1", "ws, flags", "",
                         "grid-level edge: fence.acq_rel.gpu + store flags[blockIdx.x] = 1 (a gpu-scope release) "
                         "publishes this CTA's running sum of the tile to the next CTA, which continues the tile"});
    rel->index = cta;
    b.stmts.push_back(byOne(std::move(rel)));
  }
  seg.stmts.push_back(std::move(fix));
  seg.stmts.push_back(std::move(fin));
}

std::string summary(const kir::Kernel& k) {
  return k.syncPlan.summary + (k.syncPlan.summary.empty() ? "" : "; ") + "stream-K over at most " +
         std::to_string(k.streamK) +
         " CTAs: one or two tile segments each, a split tile's running sum passed CTA to "
         "CTA through the workspace behind one gpu-scope flag per CTA, the epilogue applied by the CTA that finishes "
         "the tile";
}

}  // namespace heddle::passes::streamk
