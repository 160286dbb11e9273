// circular_buffer: clone a buffered k loop into prologue / main / epilogue with modulo stages.
//
// Before (stages s=4, prefetch p=3, loop marked by build_matmul_loops):
//   for kt in [0, nk) serial { load(kt) -> sX[0]; commit; mma sX[0] (kt) }
// After:
//   for kt in [0, 3) prologue         { load(kt)   -> sX[kt % 4];     commit }
//   for kt in [0, nk - 3) main        { load(kt+3) -> sX[(kt+3) % 4]; commit; mma sX[kt % 4] (kt) }
//   for kt in [nk - 3, nk) epilogue   { mma sX[kt % 4] (kt) }
// p = 0 gives only the main loop (load(kt), commit, mma(kt)). Storage is s stages; p+1 loads are
// in flight at the top of a main iteration. The launch check nk >= s is recorded in tripChecks
// (a pipelined loop shorter than its stage count is refused at launch, never run wrong).
#include "heddle/lower/lower.h"

namespace heddle::passes {

using kir::IExpr;

void circularBuffer(LowerContext& c) {
  auto& body = c.kernel.body.stmts;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i]->kind != kir::NodeKind::For) continue;
    auto& loop = static_cast<kir::ForLoop&>(*body[i]);
    if (loop.cbStages < 2) continue;
    const int s = loop.cbStages, p = loop.cbPrefetch;
    IExpr kt = IExpr::var(loop.var), nk = loop.stop;
    auto isLoad = [](const kir::Node& n) {
      return n.kind == kir::NodeKind::TileLoad ||
             (n.kind == kir::NodeKind::Sync && static_cast<const kir::Sync&>(n).sync == kir::SyncKind::CpAsyncCommit);
    };
    auto stageOf = [&](IExpr it) { return it % s; };
    auto addClone = [&](kir::Block& dst, const kir::Node& n, IExpr it) {
      auto cl = kir::clone(n, {{loop.var, it}});
      if (cl->kind == kir::NodeKind::TileLoad) static_cast<kir::TileLoad&>(*cl).stage = stageOf(it);
      if (cl->kind == kir::NodeKind::MmaStep) {
        auto& m = static_cast<kir::MmaStep&>(*cl);
        m.stageA = m.stageB = stageOf(it);
      }
      dst.stmts.push_back(std::move(cl));
    };
    auto newLoop = [&](kir::LoopStage st, IExpr lo, IExpr hi) {
      auto l = std::make_unique<kir::ForLoop>();
      l->var = loop.var;
      l->start = lo;
      l->stop = hi;
      l->stage = st;
      l->cbStages = s;
      l->cbPrefetch = p;
      return l;
    };
    std::vector<kir::NodePtr> out;
    if (p > 0) {
      auto pro = newLoop(kir::LoopStage::Prologue, 0, p);
      for (auto& n : loop.body.stmts)
        if (isLoad(*n)) addClone(pro->body, *n, kt);
      out.push_back(std::move(pro));
    }
    auto main = newLoop(kir::LoopStage::Main, 0, nk - p);
    for (auto& n : loop.body.stmts)
      if (isLoad(*n)) addClone(main->body, *n, kt + p);
    for (auto& n : loop.body.stmts)
      if (!isLoad(*n)) addClone(main->body, *n, kt);
    out.push_back(std::move(main));
    if (p > 0) {
      auto epi = newLoop(kir::LoopStage::Epilogue, nk - p, nk);
      for (auto& n : loop.body.stmts)
        if (!isLoad(*n)) addClone(epi->body, *n, kt);
      out.push_back(std::move(epi));
    }
    std::string cached = c.tiling.aCache ? c.tiling.aCache->name : "the k loop";
    c.kernel.tripChecks.push_back({"k", nk, s, cached,
                                   "a circular-buffered loop needs at least as many iterations as stages"});
    body.erase(body.begin() + i);
    body.insert(body.begin() + i, std::make_move_iterator(out.begin()), std::make_move_iterator(out.end()));
    return;  // one pipelined loop per kernel
  }
}

}  // namespace heddle::passes
