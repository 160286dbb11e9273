// reduce_splits: the grid-level edge of split-K (split_k.cpp shared the k loop): partial tiles go through
// a global workspace behind one flag each, reduced in a fixed order by the last split, which applies the
// epilogue once. Runs after insert_syncs (the CTA-level plan) and adds its syncs, with their reasons, to
// the same SyncPlan.
//
// Before (S = 3; tile = blockIdx.x + blockIdx.y * gridX, base = tile * 2):
//   ...k loop...; [wgmma.wait_group(0)]; epilogue store -> D
// After:
//   ...k loop...; [wgmma.wait_group(0)]
//   if (blockIdx.z < 2) {
//     partial store -> ws[base + blockIdx.z]
//     block_sync                                   # every thread's partial before the release
//     if (tid == 0) { grid.release flags[base + blockIdx.z] }
//   } else {
//     if (tid == 0) { grid.wait flags[base + 0..1] }   # acquire each, reset it to 0
//     block_sync                                   # thread 0's acquires before every thread's reads
//     partial add ws[base + 0..1] -> acc           # slot order: a fixed summation order
//     epilogue store -> D
//   }
// Only CTAs with a larger blockIdx.z (a larger linear index) wait, and only on smaller ones, so the
// waits end on a GPU that dispatches CTAs in linear order (heddle_grid.cuh).
//
// Runs when: split-K kernels (kernel.splitK > 1).
#include "heddle/lower/build/role_pipeline_build.h"

namespace heddle::passes {

using namespace build;

void reduceSplits(LowerContext& c) {
  auto& k = c.kernel;
  const int S = k.splitK;
  requireWhen(c, "reduce_splits");
  auto& body = k.body.stmts;
  size_t at = 0;
  while (at < body.size() && body[at]->kind != kir::NodeKind::EpilogueStore) ++at;
  if (at == body.size()) fail<HeddleError>("reduce_splits: ", k.name, " has no epilogue store at the top level");
  auto& epi = static_cast<kir::EpilogueStore&>(*body[at]);
  IExpr z = var("blockIdx.z"), tid = var("tid");
  IExpr base = (var("blockIdx.x") + var("blockIdx.y") * k.launch.gridX) * (S - 1);
  const std::string tile = std::to_string(k.tile.bm) + "x" + std::to_string(k.tile.bn);

  auto branch = std::make_unique<kir::IfThenElse>();
  branch->cond = z < S - 1;
  {  // splits 0..S-2: publish the partial tile
    auto& b = branch->thenBody;
    auto st = std::make_unique<kir::EpilogueStore>(epi);
    st->partial = kir::EpilogueStore::Partial::Store;
    st->slot = base + z;
    b.stmts.push_back(std::move(st));
    b.stmts.push_back(makeSync(k, kir::SyncKind::BlockSync,
                               {"RAW ws (partial store -> release)", "partial stores of ws (every thread)",
                                "grid.release by thread 0", "ws", "",
                                "block barrier: every thread's partial " + tile +
                                    " tile is stored before thread 0 "
                                    "releases the flag that publishes it (the release covers what the barrier ordered "
                                    "before it)"}));
    auto one = std::make_unique<kir::IfThenElse>();
    one->cond = eq(tid, 0);
    auto rel =
        makeSync(k, kir::SyncKind::GridRelease,
                 {"grid RAW ws (split z -> split " + std::to_string(S - 1) + ")", "partial store of split blockIdx.z",
                  "partial add of split " + std::to_string(S - 1), "ws, flags", "",
                  "grid-level edge: fence.acq_rel.gpu + store flags[tile*(S-1) + z] = 1 (a gpu-scope release) "
                  "publishes this split's partial tile to the CTA that reduces the tile"});
    rel->index = base + z;
    one->thenBody.stmts.push_back(std::move(rel));
    b.stmts.push_back(std::move(one));
  }
  {  // split S-1: acquire every partial in slot order, reduce, apply the epilogue once
    auto& b = branch->elseBody;
    auto one = std::make_unique<kir::IfThenElse>();
    one->cond = eq(tid, 0);
    auto wait =
        makeSync(k, kir::SyncKind::GridWait,
                 {"grid RAW ws (splits 0.." + std::to_string(S - 2) + " -> split " + std::to_string(S - 1) + ")",
                  "partial stores of splits 0.." + std::to_string(S - 2),
                  "partial add of split " + std::to_string(S - 1), "ws, flags", "",
                  "grid-level edge: ld.acquire.gpu spins on flags[tile*(S-1) + j], j = 0.." + std::to_string(S - 2) +
                      " in order, each reset to 0 once seen (this CTA is its only "
                      "reader); only earlier CTAs (smaller blockIdx.z) are waited on, so the wait ends"});
    wait->index = base;
    wait->count = S - 1;
    one->thenBody.stmts.push_back(std::move(wait));
    b.stmts.push_back(std::move(one));
    b.stmts.push_back(
        makeSync(k, kir::SyncKind::BlockSync,
                 {"RAW ws (acquire -> partial add)", "grid.wait by thread 0", "partial add (every thread)", "ws", "",
                  "block barrier: thread 0's acquires are ordered before every thread reads the "
                  "partial tiles"}));
    auto add = std::make_unique<kir::EpilogueStore>(epi);
    add->partial = kir::EpilogueStore::Partial::Add;
    add->slot = base;
    add->count = S - 1;
    b.stmts.push_back(std::move(add));
    b.stmts.push_back(std::move(body[at]));
  }
  body[at] = std::move(branch);
  const bool planned = k.syncsPlanned;  // the CTA-level plan stays whoever's it was
  finishPlan(k, k.syncPlan.summary + (k.syncPlan.summary.empty() ? "" : "; ") + "split-K " + std::to_string(S) +
                    ": partial tiles through the workspace, one gpu-scope flag each, reduced in slot order by split " +
                    std::to_string(S - 1));
  k.syncsPlanned = planned;
}

}  // namespace heddle::passes
