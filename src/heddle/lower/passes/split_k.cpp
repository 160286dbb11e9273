// split_k: share each output tile's k loop among S CTAs (schedule split_k(S)); split z = blockIdx.z runs
// k-tiles [z*nk/S, (z+1)*nk/S) (balanced: every split gets floor or ceil of nk/S, at least one when
// nk >= S, which the launch checks). The reduction of the partial tiles is reduce_splits (after
// insert_syncs); this pass only reshapes the k loop, before it is pipelined.
//
// Before (build_matmul_loops, S = 3):
//   for kt in [0, ceil(K/64)) serial { load A (m0, kt*64); load B (kt*64, n0); mma (k-tile kt) }
// After (nk = ceil(K/64)):
//   let KS = ((blockIdx.z+1)*nk/3 - blockIdx.z*nk/3) * 64
//   for kt in [0, ceil(KS/64)) serial {
//     load A (m0, (kt + blockIdx.z*nk/3)*64); load B ((kt + blockIdx.z*nk/3)*64, n0); mma (k-tile kt) }
//   grid z = 3; params ws (f32), flags (i32); name + "_sk3"
// The loop index stays 0-based (stages and ring phases count this CTA's own k-tiles); only the
// global k coordinate of the loads moves.
//
// Runs when: split-K schedules (split_k(S), S > 1).
#include "heddle/lower/lower.h"

namespace heddle::passes {

using kir::IExpr;

kir::ForLoop& shareKLoop(LowerContext& c, const IExpr& firstTile, const char* pass) {
  auto& k = c.kernel;
  size_t at = 0;
  while (at < k.body.stmts.size() && k.body.stmts[at]->kind != kir::NodeKind::For) ++at;
  if (at == k.body.stmts.size()) fail<HeddleError>(pass, ": ", k.name, " has no k loop");
  auto* loop = static_cast<kir::ForLoop*>(k.body.stmts[at].get());
  const std::map<std::string, IExpr> shift{{loop->var, IExpr::var(loop->var) + firstTile}};
  // KS: this CTA's k extent in whole k-tiles; the sync planner walks the loop with KS as its trip variable
  loop->stop = ceilDiv(IExpr::var("KS"), c.tiling.bk);
  loop->tripsVar = "KS";
  for (auto& n : loop->body.stmts) {
    if (n->kind != kir::NodeKind::TileLoad) continue;
    auto& l = static_cast<kir::TileLoad&>(*n);
    l.row0 = l.row0.substitute(shift);
    l.col0 = l.col0.substitute(shift);
  }
  return *loop;
}

void addWorkspaceParams(kir::Kernel& k) {
  kir::Param ws;
  ws.kind = kir::Param::TensorPtr;
  ws.name = "ws";
  ws.dtype = DType::F32;
  ws.tensor = "workspace";
  ws.isConst = false;
  k.params.push_back(ws);
  kir::Param flags = ws;
  flags.kind = kir::Param::FlagPtr;
  flags.name = "flags";
  flags.tensor = "flags";
  k.params.push_back(flags);
}

void splitK(LowerContext& c) {
  const int S = c.tiling.splitK;
  requireWhen(c, "split_k");
  auto& k = c.kernel;
  IExpr z = IExpr::var("blockIdx.z"), nk = ceilDiv(IExpr::var("K"), c.tiling.bk);
  IExpr kb = z * nk / S, ke = (z + 1) * nk / S;
  auto& loop = shareKLoop(c, kb, "split_k");
  size_t at = 0;
  while (k.body.stmts[at].get() != &loop) ++at;
  k.body.stmts.insert(k.body.stmts.begin() + at, std::make_unique<kir::Let>("KS", (ke - kb) * c.tiling.bk));
  k.splitK = S;
  k.workspaceTiles = k.launch.gridX * k.launch.gridY;
  k.launch.gridZ = S;
  k.name += "_sk" + std::to_string(S);
  // the fewest k-tiles a split gets (floor(nk / S)) must be >= 1
  k.tripChecks.push_back({loop.var, nk / S, 1, c.tiling.a->name,
                          "split_k(" + std::to_string(S) + ") gives every split at least one k-tile of " +
                              std::to_string(c.tiling.bk) + ": K must be at least " + std::to_string(S) + " x " +
                              std::to_string(c.tiling.bk) + " = " + std::to_string(S * c.tiling.bk) +
                              " (use fewer splits for this K)"});
  addWorkspaceParams(k);
}

}  // namespace heddle::passes
