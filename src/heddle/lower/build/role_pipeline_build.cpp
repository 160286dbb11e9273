// Role-pipeline building blocks (see role_pipeline_build.h).
#include "heddle/lower/build/role_pipeline_build.h"

#include <algorithm>

namespace heddle::passes::build {

std::unique_ptr<kir::Sync> setMaxNReg(kir::Kernel& k, const PipelineRole& r, int threads) {
  if (!r.registers) return nullptr;
  const int cap = std::min(256, (65536 / threads) / 8 * 8);  // setmaxnreg counts reach 256
  const bool inc = r.registers >= cap;
  auto s = makeSync(k, kir::SyncKind::SetMaxNReg,
                    {"registers " + r.name, "", "", "", "",
                     std::string("setmaxnreg.") + (inc ? "inc" : "dec") + " " + std::to_string(r.registers) +
                         ": role '" + r.name + "' runs with its budget (the kernel enters with at most " +
                         std::to_string(cap) + " per thread: __launch_bounds__(" + std::to_string(threads) + ", 1))"},
                    r.registers);
  s->count = inc ? 1 : -1;
  return s;
}

std::unique_ptr<kir::IfThenElse> electOne(int warp) {
  auto i = std::make_unique<kir::IfThenElse>();
  i->cond = eq(var("tid"), 32 * warp);
  i->electWarp = warp;
  return i;
}

std::unique_ptr<kir::ForLoop> forLoop(const std::string& v, IExpr lo, IExpr hi) {
  auto l = std::make_unique<kir::ForLoop>();
  l->var = v;
  l->start = lo;
  l->stop = hi;
  return l;
}

std::unique_ptr<kir::IfThenElse> when(IExpr cond) {
  auto i = std::make_unique<kir::IfThenElse>();
  i->cond = cond;
  return i;
}

OperandLoad tmaLoadOfA(kir::Kernel& k, const char* pass) {
  OperandLoad r;
  for (auto& b : k.buffers)
    if (b->role == "A") r.sA = b.get();
  kir::walkMut(k.body, [&](kir::Node& n) {
    if (n.kind != kir::NodeKind::For || r.load) return;
    auto& stmts = static_cast<kir::ForLoop&>(n).body.stmts;
    for (size_t i = 0; i < stmts.size(); ++i)
      if (stmts[i]->kind == kir::NodeKind::TileLoad && static_cast<kir::TileLoad&>(*stmts[i]).dst == r.sA) {
        r.load = static_cast<kir::TileLoad*>(stmts[i].get());
        r.loop = &static_cast<kir::ForLoop&>(n).body;
        r.at = i;
      }
  });
  if (!r.sA || !r.load || r.load->kind != LoadKind::TmaLoad)
    fail<HeddleError>(pass, ": no TMA load of operand A in the k loop of ", k.name);
  return r;
}

IExpr persistentTileCount(const MatmulTiling& t) {
  IExpr tiles = ceilDiv(var("M"), t.bm) * ceilDiv(var("N"), t.bn);
  return t.batched ? tiles * var("batch") : tiles;
}

void persistentTileLets(kir::Block& b, const MatmulTiling& t, IExpr tl) {
  // a grouped matmul's role kernels (wgmma and tcgen05) run one tile per CTA: m0, n0, batch_idx come from the
  // grouped walk printed at the kernel's top (grouped_walk.h)
  if (t.grouped) return;
  IExpr M = var("M"), N = var("N");
  IExpr nM = ceilDiv(M, t.bm), nN = ceilDiv(N, t.bn), G = t.rolePipeline.groupM;
  b.stmts.push_back(std::make_unique<kir::Let>("tile", var("bid") + tl * var("num_ctas")));
  IExpr tile = var("tile"), per = G * nN;
  if (t.batched) {  // the batch is the walk's outer coordinate: every matrix's tiles in the grouped order
    b.stmts.push_back(std::make_unique<kir::Let>("batch_idx", tile / (nM * nN)));
    b.stmts.push_back(std::make_unique<kir::Let>("mtile", tile % (nM * nN)));
    tile = var("mtile");
  }
  IExpr first = (tile / per) * G;
  IExpr gsz = min(nM - first, G);
  b.stmts.push_back(std::make_unique<kir::Let>("m0", (first + (tile % per) % gsz) * t.bm));
  b.stmts.push_back(std::make_unique<kir::Let>("n0", ((tile % per) / gsz) * t.bn));
}

std::unique_ptr<kir::IfThenElse> tmaProducerRole(kir::Kernel& k, const MatmulTiling& t, const Ring& ring,
                                                 const std::vector<kir::TileLoad*>& loads, int warp, IExpr tilesCta,
                                                 IExpr nk) {
  const int s = ring.stages;
  IExpr g = var("tl") * nk + var("kt");
  auto elected = electOne(warp);
  auto tiles = forLoop("tl", 0, tilesCta);
  persistentTileLets(tiles->body, t, var("tl"));
  auto kl = forLoop("kt", 0, nk);
  kl->cbStages = s;
  kl->cbPrefetch = ring.prefetch;
  kl->body.stmts.push_back(ring.producerWait(k, g));
  kl->body.stmts.push_back(ring.producerExpectTx(k, g));
  for (auto* l : loads) {
    auto cl = kir::clone(*l, {});
    auto& x = static_cast<kir::TileLoad&>(*cl);
    x.stage = g % s;
    x.iter = g;
    x.mbar = ring.full;
    x.mbarIndex = g % s;
    kl->body.stmts.push_back(std::move(cl));
  }
  tiles->body.stmts.push_back(std::move(kl));
  elected->thenBody.stmts.push_back(std::move(tiles));
  return elected;
}

}  // namespace heddle::passes::build
