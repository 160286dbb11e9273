// tma_pipeline: the mbarrier ring of a TMA pipeline without roles (docs/sync-cases.md cases 8 and 9). Every
// thread computes; thread 0 also issues the TMA copies. Warp-specialized kernels were built with
// their rings by warp_specialize; this pass only finishes their plan.
//
// Before (after circular_buffer, s stages, prefetch p, T threads):
//   for kt in [0, p) prologue         { if (kt < nk) { tma A -> sA[kt%s]; tma B -> sB[kt%s] } }
//   for kt in [0, nk-p) main          { tma A,B -> s[(kt+p)%s]; wgmma acc += s[kt%s] }
//   for kt in [max(nk-p, 0), nk) epilogue { wgmma acc += s[kt%s] }
//   epilogue store
// After (war = mbarrier, case 8):
//   if (tid == 0) { init full[0..s) count 1; init empty[0..s) count T }; block_sync
//   for st in [0, p+1): arrive empty[st]                                   # WAR pre-arrives
//   for kt in [0, p) prologue { if (kt < nk) { if (tid == 0) { arrive.expect_tx full[kt%s]; tma ... } } }
//   for kt in [0, nk-p) main {
//     if (tid == 0) { wait empty[(kt+p)%s] parity ((kt+p)/s)%2; arrive.expect_tx full[(kt+p)%s]; tma ... }
//     wait full[kt%s] parity (kt/s)%2
//     wgmma.fence; wgmma ...; wgmma.commit_group; wgmma.wait_group(s-p-1)
//     if (kt + 1 < nk - p) arrive empty[(kt+p+1)%s]   # only a release some load waits for (k-tile kt+p+1)
//   }
//   for kt in [max(nk-p, 0), nk) epilogue { wait full[kt%s] parity (kt/s)%2; wgmma.fence; wgmma ...; commit }
//   wgmma.wait_group(0); epilogue store
// `if (tid == 0)` is an elected issue (kir::IfThenElse::electWarp = 0): printed
//   `if (warp == 0 && heddle::elect_one_sync())` on targets with elect.sync (TargetInfo::electSync).
// war = block_sync (case 9): no empty barriers, no pre-arrives; the main loop ends with
//   wgmma.wait_group(s-p-1); block_sync      # the slot thread 0 overwrites next was read and retired
// The prologue needs no WAR wait (its slots are fresh) and the epilogue releases nothing (no load
// follows): every op placed here is needed by some trace, which the mutation tests check. The main
// loop's last release is skipped for the same reason: no load waits for it. Found on a GPU
// (2026-11-27, H200, compute-sanitizer synccheck "Missing wait" on a split-K kernel with 4 k-tiles per
// split): for nk in [s, s+p), that unawaited release completed phase 1 of empty[nk-s], whose pre-arrived
// phase 0 the prologue never waited for either: two completions a parity wait could not tell apart.
//
// Runs when: wgmma / tcgen05 kernels (a role-pipeline kernel, built with its rings, only has its sync plan closed
//   here).
#include <optional>
#include <sstream>

#include "heddle/lower/build/role_pipeline_build.h"

namespace heddle::passes {

using namespace build;

namespace {

struct LoopParts {
  std::vector<kir::NodePtr> loads, mmas, rest;
  std::optional<IExpr> guard;  // the prologue's `kt < nk` around its loads (circular_buffer)
};

LoopParts split(kir::ForLoop& l) {
  LoopParts p;
  for (auto& n : l.body.stmts) {
    if (n->kind == kir::NodeKind::If) {  // a guarded run of loads: take them, keep the predicate
      auto& g = static_cast<kir::IfThenElse&>(*n);
      p.guard = g.cond;
      for (auto& m : g.thenBody.stmts) p.loads.push_back(std::move(m));
      continue;
    }
    if (n->kind == kir::NodeKind::TileLoad) p.loads.push_back(std::move(n));
    else if (n->kind == kir::NodeKind::MmaStep) p.mmas.push_back(std::move(n));
    else p.rest.push_back(std::move(n));
  }
  l.body.stmts.clear();
  return p;
}

}  // namespace

void tmaPipeline(LowerContext& c) {
  auto& t = c.tiling;
  auto& h = t.rolePipeline;
  auto& k = c.kernel;
  requireWhen(c, "tma_pipeline");
  if (h.warpSpecialized) {  // built with its rings by warp_specialize
    finishPlan(k, k.syncPlan.summary);
    return;
  }
  const int s = t.stages, p = t.prefetch, keep = s - p - 1, T = k.launch.threads;
  kir::Buffer *sA = nullptr, *sB = nullptr, *acc = nullptr;
  for (auto& b : k.buffers) {
    if (b->role == "A") sA = b.get();
    if (b->role == "B") sB = b.get();
    if (b->role == "acc") acc = b.get();
  }
  RingSpec spec;
  spec.label = "sA, sB";
  spec.emptyName = h.warMbarrier ? "empty" : "";  // else a block barrier orders the WAR
  spec.stages = s;
  spec.prefetch = p;
  spec.keep = keep;
  spec.emptyCount = T;
  spec.txBytes = (int)(sA->bytesPerStage() + sB->bytesPerStage());
  spec.producer = "tma (thread 0)";
  spec.consumer = "wgmma (all threads)";
  const Ring ring = Ring::create(k, spec);

  auto& body = k.body.stmts;
  size_t firstLoop = 0;
  while (firstLoop < body.size() && body[firstLoop]->kind == kir::NodeKind::Alloc) ++firstLoop;
  std::vector<kir::NodePtr> head;
  head.push_back(std::make_unique<kir::Alloc>(ring.full));
  if (ring.empty) head.push_back(std::make_unique<kir::Alloc>(ring.empty));
  auto init = electOne(0);
  ring.init(k, init->thenBody);
  head.push_back(std::move(init));
  head.push_back(makeSync(k, kir::SyncKind::BlockSync,
                          {"init " + ring.full->name + (ring.empty ? ", " + ring.empty->name : ""), "", "", "", "",
                           "block barrier: thread 0's mbarrier.init must be visible before any thread arrives on or "
                           "waits for the barriers"}));
  if (ring.empty) {
    kir::Block pre;
    ring.preArrive(k, pre, "st");
    for (auto& n : pre.stmts) head.push_back(std::move(n));
  }
  body.insert(body.begin() + firstLoop, std::make_move_iterator(head.begin()), std::make_move_iterator(head.end()));

  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i]->kind != kir::NodeKind::For) continue;
    auto& loop = static_cast<kir::ForLoop&>(*body[i]);
    const bool main = loop.stage == kir::LoopStage::Main;
    LoopParts parts = split(loop);
    if (!parts.loads.empty()) {
      IExpr j = static_cast<kir::TileLoad&>(*parts.loads[0]).iter;
      auto issue = electOne(0);
      if (main && ring.empty) issue->thenBody.stmts.push_back(ring.producerWait(k, j));
      issue->thenBody.stmts.push_back(ring.producerExpectTx(k, j));
      for (auto& l : parts.loads) {
        auto& tl = static_cast<kir::TileLoad&>(*l);
        tl.mbar = ring.full;
        tl.mbarIndex = j % s;
        issue->thenBody.stmts.push_back(std::move(l));
      }
      if (parts.guard) {  // no expect_tx and no copy for a k-tile past the end: its slot stays idle
        auto guard = std::make_unique<kir::IfThenElse>();
        guard->cond = *parts.guard;
        guard->thenBody.stmts.push_back(std::move(issue));
        loop.body.stmts.push_back(std::move(guard));
      } else {
        loop.body.stmts.push_back(std::move(issue));
      }
    }
    for (auto& m : parts.mmas) {
      IExpr it = static_cast<kir::MmaStep&>(*m).iter;
      loop.body.stmts.push_back(ring.consumerWait(k, it));
      auto fence = makeSync(k, kir::SyncKind::WgmmaFence,
                            {"registers acc", "", "", "acc", "",
                             "wgmma.fence before this k-tile's wgmma: the accumulators were last touched by ordinary "
                             "instructions (zero, the previous wait's operand fence)"});
      fence->buf = acc;
      loop.body.stmts.push_back(std::move(fence));
      loop.body.stmts.push_back(std::move(m));
      auto commit = makeSync(k, kir::SyncKind::WgmmaCommit,
                             {"group wgmma " + ring.label, "", "", ring.label, "",
                              "commit this k-tile's wgmma ops as one group, which wait_group retires"});
      commit->buf = acc;
      loop.body.stmts.push_back(std::move(commit));
      if (main) {
        auto wait = makeSync(k, kir::SyncKind::WgmmaWait,
                             {"WAR " + ring.label + " (wgmma -> tma)", "wgmma reads of " + ring.label,
                              "tma writes of " + ring.label, ring.label, "",
                              "wgmma.wait_group(" + std::to_string(keep) + "): the group of k-tile kt-" +
                                  std::to_string(keep) + " finished reading its slot, which is released next; " +
                                  std::to_string(keep) + " group(s) stay in flight (s-p-1)"},
                             keep);
        wait->buf = acc;
        loop.body.stmts.push_back(std::move(wait));
        if (ring.empty) {  // released only when a load will wait for it: k-tile kt+p+1 exists
          auto release = std::make_unique<kir::IfThenElse>();
          release->cond = it + 1 < loop.stop;
          release->thenBody.stmts.push_back(ring.consumerRelease(k, it));
          loop.body.stmts.push_back(std::move(release));
        } else {
          loop.body.stmts.push_back(makeSync(
              k, kir::SyncKind::BlockSync,
              {"WAR " + ring.label + " (wgmma -> tma)", "wgmma reads of " + ring.label, "tma writes of " + ring.label,
               ring.label, ((it + p + 1) % s).str(),
               "block barrier after the last read (retired by the wait above): thread 0 overwrites slot (kt+p+1)%s "
               "in the next iteration (circular_buffer war='block_sync')"}));
        }
      }
    }
    for (auto& r : parts.rest) loop.body.stmts.push_back(std::move(r));
  }
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i]->kind != kir::NodeKind::EpilogueStore) continue;
    auto wait = makeSync(k, kir::SyncKind::WgmmaWait,
                         {"RAW acc (wgmma -> epilogue)", "wgmma", "epilogue", "acc", "",
                          "wgmma.wait_group(0): every group has written the accumulators the epilogue reads"},
                         0);
    wait->buf = acc;
    body.insert(body.begin() + i, std::move(wait));
    break;
  }
  std::ostringstream os;
  os << "TMA ring of " << s << " stages, prefetch " << p << ": full[" << s << "]"
     << (ring.empty ? ", empty[" + std::to_string(s) + "] (WAR by mbarrier)" : " (WAR by block barrier)")
     << ", wgmma.wait_group(" << keep << ") in flight";
  finishPlan(k, os.str());
}

}  // namespace heddle::passes
