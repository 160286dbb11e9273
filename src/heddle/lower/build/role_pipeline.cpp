// The role-pipeline builder shared by the wgmma and tcgen05 role lowerings (see role_pipeline.h).
#include "heddle/lower/build/role_pipeline.h"

#include <sstream>

#include "heddle/lower/build/epilogue_tma.h"

namespace heddle::passes::build {

RolePipeline::RolePipeline(LowerContext& c)
    : k(c.kernel),
      t(c.tiling),
      h(c.tiling.rolePipeline),
      sE(epilogueOperandTma(c.kernel, c.tiling, c.tiling.rolePipeline)),
      graph(buildRoleGraph(c.kernel, c.tiling.rolePipeline)),
      nk(ceilDiv(var("K"), c.tiling.bk)) {
  for (auto& b : k.buffers) {
    if (b->role == "A") sA = b.get();
    if (b->role == "B") sB = b.get();
    if (b->role == "acc") acc = b.get();
  }
  for (auto& n : k.body.stmts) {
    if (n->kind == kir::NodeKind::For)
      for (auto& m : static_cast<kir::ForLoop&>(*n).body.stmts) ops.push_back(kir::clone(*m, {}));
    if (n->kind == kir::NodeKind::EpilogueStore) ops.push_back(kir::clone(*n, {}));
  }
  for (auto& n : ops) {
    if (n->kind == kir::NodeKind::TileLoad) loads.push_back(static_cast<kir::TileLoad*>(n.get()));
    if (n->kind == kir::NodeKind::MmaStep && !mma) mma = static_cast<kir::MmaStep*>(n.get());
    if (n->kind == kir::NodeKind::EpilogueStore && !epi) epi = static_cast<kir::EpilogueStore*>(n.get());
  }
}

RingSpec RolePipeline::operandRingSpec(const RoleGraph::Edge& ab) const {
  RingSpec r;
  r.label = ab.label();
  r.stages = ab.stages;
  r.txBytes = 0;  // every buffer of the edge lands by TMA: sA, sB (and block scales' sSA: block_scale_ring.cpp)
  for (const kir::Buffer* b : ab.bufs) r.txBytes += (int)b->bytesPerStage();
  r.producer = h.role(PipelineRole::Load)->name;
  r.consumer = h.role(PipelineRole::Mma)->name;
  return r;
}

void RolePipeline::addWalkParams() {
  if (t.grouped) return;  // one tile per CTA of the grouped walk's grid: no num_ctas (grouped_walk.h)
  kir::Param nc;
  nc.kind = kir::Param::Int32;
  nc.name = "num_ctas";
  k.params.push_back(nc);
  if (t.batched) {  // the batch is a coordinate of the tile walk (persistentTileLets), not blockIdx.z
    nc.name = "batch";
    k.params.push_back(nc);
    k.tile.batchWalk = true;
  }
}

std::vector<kir::NodePtr> RolePipeline::head(const std::vector<const Ring*>& rings) {
  std::vector<kir::NodePtr> body;
  for (auto& b : k.buffers)
    if (b->memory == MemoryType::Shared) body.push_back(std::make_unique<kir::Alloc>(b.get()));
  if (!t.grouped)  // (the grouped walk's one tile per CTA: grouped_walk.h)
    body.push_back(std::make_unique<kir::Let>("bid", var("blockIdx.x")));  // signed: tile counts subtract it
  auto init = electOne(0);
  for (const Ring* r : rings) r->init(k, init->thenBody);
  body.push_back(std::move(init));
  return body;
}

IExpr RolePipeline::tilesPerCta() const {
  if (t.grouped) return 1;  // the grouped walk: this CTA's one tile, found before the body (grouped_walk.h)
  return ceilDiv(persistentTileCount(t) - var("bid"), var("num_ctas"));
}

std::unique_ptr<kir::IfThenElse> RolePipeline::loadWarpgroup(const Ring& ring, const PipelineRole& loadR, int warp,
                                                             IExpr tilesCta) {
  auto wg = when(var("warp") < 4);
  if (auto r = setMaxNReg(k, loadR, h.threads)) wg->thenBody.stmts.push_back(std::move(r));
  wg->thenBody.stmts.push_back(tmaProducerRole(k, t, ring, loads, warp, tilesCta, nk));
  return wg;
}

std::unique_ptr<kir::ForLoop> RolePipeline::mmaKLoop(const Ring& ring, const MmaIssue& issue) {
  const IExpr g = var("tl") * nk + var("kt");
  auto kl = forLoop("kt", 0, nk);
  kl->cbStages = ring.stages;
  kl->cbPrefetch = ring.prefetch;
  kl->body.stmts.push_back(ring.consumerWait(k, g));
  if (issue.before) issue.before(kl->body, g);
  auto m = kir::clone(*mma, {});
  auto& mm = static_cast<kir::MmaStep&>(*m);
  mm.stageA = mm.stageB = g % ring.stages;
  mm.iter = g;
  if (issue.configure) issue.configure(mm);
  kl->body.stmts.push_back(std::move(m));
  issue.after(kl->body, g);
  return kl;
}

void RolePipeline::finish(const std::string& stem, const Ring* ringE) {
  k.launch.threads = h.threads;
  if (!t.grouped) {  // grouped: the walk's grid (n tiles, ceil(tokens / bm) + E) of build/grouped_walk.cpp
    k.launch.gridX = var("num_ctas");
    k.launch.gridY = 1;
    k.launch.gridZ = 1;
  }
  std::ostringstream name;
  name << stem;
  for (auto& r : h.roles)
    if (r.warpgroups) name << "_" << r.registers;
  if (ringE) name << "_tmae" << ringE->stages;
  k.name += name.str();
}

}  // namespace heddle::passes::build
