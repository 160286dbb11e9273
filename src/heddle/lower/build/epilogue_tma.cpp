// The TMA-loaded epilogue operand's buffer, ring and producer role (see epilogue_tma.h).
#include "heddle/lower/build/epilogue_tma.h"

namespace heddle::passes::build {

kir::Buffer* epilogueOperandTma(kir::Kernel& k, const MatmulTiling& t, const RolePipelineSchedule& h) {
  if (h.epiTma.empty()) return nullptr;
  kir::Buffer* sE = nullptr;
  for (auto& op : k.epilogue) {
    if (op.op != OpKind::Input || op.tensorParam != "E_" + h.epiTma) continue;
    if (op.colStride.empty() || !op.batchStride.empty())
      fail<ScheduleError>("cache_after(", h.epiTma, ", 'tma_load'): the epilogue reads ", h.epiTma,
                          " broadcast "
                          "along n; TMA loads a bias row [N] or a residual [M, N]: drop the cache");
    if (!sE) {
      auto b = std::make_unique<kir::Buffer>();
      b->name = "sE";
      b->role = "epi_tma";
      b->memory = MemoryType::Shared;
      b->dtype = op.dtype;
      b->stages = h.epiStages;
      b->rows = op.rowStride.empty() ? 1 : t.bm;
      b->cols = t.bn;
      b->align = 128;
      sE = k.addBuffer(std::move(b));
    }
    op.smem = sE;
  }
  if (!sE)
    fail<ScheduleError>("cache_after(", h.epiTma, ", 'tma_load'): the epilogue does not read ", h.epiTma,
                        "; drop the cache");
  kir::Param p;
  p.kind = kir::Param::TensorMap;
  p.name = "tmE";
  p.tensor = h.epiTma;
  k.params.push_back(p);
  k.tensorMaps.push_back({"tmE", h.epiTma, t.bn, sE->rows, 0, false, 128});  // read once per tile
  return sE;
}

Ring epilogueOperandRing(kir::Kernel& k, const MatmulTiling& t, const RolePipelineSchedule& h, const RoleGraph::Edge& e,
                         const kir::Buffer& sE, const std::string& consumer, int consumerThreads) {
  Ring r;
  r.label = "sE (" + h.epiTma + ")";
  r.stages = e.stages;
  r.prefetch = e.stages - 1;  // the consumer reads with ordinary loads: nothing in flight after its release
  r.keep = 0;
  r.fullCount = 1;
  r.emptyCount = consumerThreads;
  r.txBytes = sE.rows * t.bn * dtypeBytes(sE.dtype);
  r.producer = h.role(PipelineRole::EpiLoad)->name;
  r.consumer = consumer;
  r.full = addMbarriers(k, "fullE", e.stages);
  r.empty = addMbarriers(k, "emptyE", e.stages);
  return r;
}

std::unique_ptr<kir::IfThenElse> epiLoadRole(kir::Kernel& k, const MatmulTiling& t, const RolePipelineSchedule& h,
                                             const Ring& ringE, kir::Buffer* sE, int warp, IExpr tilesCta) {
  const IExpr tl = var("tl");
  auto elected = electOne(warp);
  auto tiles = forLoop("tl", 0, tilesCta);
  persistentTileLets(tiles->body, t, tl);
  tiles->body.stmts.push_back(ringE.producerWait(k, tl));
  tiles->body.stmts.push_back(ringE.producerExpectTx(k, tl));
  auto l = std::make_unique<kir::TileLoad>();
  l->dst = sE;
  l->stage = tl % ringE.stages;
  l->iter = tl;
  l->src = "E_" + h.epiTma;
  const bool tile = sE->rows > 1;  // a residual tile, else a bias row
  l->row0 = tile ? var("m0") : IExpr(0);
  l->col0 = var("n0");
  l->rowsBound = tile ? var("M") : IExpr(1);
  l->colsBound = var("N");
  for (auto& op : k.epilogue)
    if (op.smem == sE) l->ld = tile ? op.rowStride : "N";  // a bias row: never stepped
  l->kind = LoadKind::TmaLoad;
  l->tensorMap = "tmE";
  l->mbar = ringE.full;
  l->mbarIndex = tl % ringE.stages;
  tiles->body.stmts.push_back(std::move(l));
  elected->thenBody.stmts.push_back(std::move(tiles));
  return elected;
}

void epilogueWithOperand(kir::Kernel& k, kir::Block& b, kir::NodePtr epi, const Ring* ringE, IExpr tl) {
  if (!ringE) {
    b.stmts.push_back(std::move(epi));
    return;
  }
  b.stmts.push_back(ringE->consumerWait(k, tl));
  static_cast<kir::EpilogueStore&>(*epi).operandStage = tl % ringE->stages;
  b.stmts.push_back(std::move(epi));
  b.stmts.push_back(ringE->consumerRelease(k, tl));
}

}  // namespace heddle::passes::build
