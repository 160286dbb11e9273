// circular_buffer: clone a buffered k loop into prologue / main / epilogue with modulo stages.
//
// Before (stages s=4, prefetch p=3, loop marked by build_matmul_loops):
//   for kt in [0, nk) serial { load(kt) -> sX[0]; commit; mma sX[0] (kt) }
// After:
//   for kt in [0, 3) prologue             { if (kt < nk) { load(kt) -> sX[kt % 4] }; commit }
//   for kt in [0, nk - 3) main            { load(kt+3) -> sX[(kt+3) % 4]; commit; mma sX[kt % 4] (kt) }
//   for kt in [max(nk - 3, 0), nk) epilogue { mma sX[kt % 4] (kt) }
// p = 0 gives only the main loop (load(kt), commit, mma(kt)). Storage is s stages; p+1 loads are
// in flight at the top of a main iteration.
// Every trip count nk >= 1 runs: when nk <= p the main loop is empty, the epilogue starts at 0, and
// the prologue's loads of k-tiles past the end are predicated off. Its commits stay unconditional,
// so every thread commits p groups whatever nk is (an empty cp.async group retires at once) and the
// wait counts the planner derives stay valid. Loads counted per instruction (AMD LDS DMA, vmcnt) are
// not predicated: a k-tile past the end is all out of bounds, so it issues the same instructions,
// each zero-filling its chunk, and no wait is loosened by missing counter entries.
//
// Runs when: always (it clones only the loops marked with 2 or more stages).
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
    // a prologue load of k-tile kt >= nk is skipped, unless its completion is counted per instruction
    auto predicated = [](const kir::Node& n) {
      return n.kind == kir::NodeKind::TileLoad && static_cast<const kir::TileLoad&>(n).kind != LoadKind::AsyncLds;
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
      l->tripsVar = loop.tripsVar, l->tileK = loop.tileK;  // the planner's trip count (sync/plan.h)
      return l;
    };
    std::vector<kir::NodePtr> out;
    if (p > 0) {
      auto pro = newLoop(kir::LoopStage::Prologue, 0, p);
      kir::IfThenElse* guard = nullptr;  // one `if (kt < nk)` around each run of predicated loads
      for (auto& n : loop.body.stmts) {
        if (!isLoad(*n)) continue;
        if (!predicated(*n)) {
          guard = nullptr;
          addClone(pro->body, *n, kt);
          continue;
        }
        if (!guard) {
          guard = pro->body.add<kir::IfThenElse>();
          guard->cond = kt < nk;
        }
        addClone(guard->thenBody, *n, kt);
      }
      out.push_back(std::move(pro));
    }
    auto main = newLoop(kir::LoopStage::Main, 0, nk - p);  // empty when nk <= p
    for (auto& n : loop.body.stmts)
      if (isLoad(*n)) addClone(main->body, *n, kt + p);
    for (auto& n : loop.body.stmts)
      if (!isLoad(*n)) addClone(main->body, *n, kt);
    out.push_back(std::move(main));
    if (p > 0) {
      auto epi = newLoop(kir::LoopStage::Epilogue, max(nk - p, 0), nk);
      for (auto& n : loop.body.stmts)
        if (!isLoad(*n)) addClone(epi->body, *n, kt);
      out.push_back(std::move(epi));
    }
    body.erase(body.begin() + i);
    body.insert(body.begin() + i, std::make_move_iterator(out.begin()), std::make_move_iterator(out.end()));
    return;  // one pipelined loop per kernel
  }
}

}  // namespace heddle::passes
