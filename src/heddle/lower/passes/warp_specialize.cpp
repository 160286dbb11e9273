// warp_specialize: split a Hopper matmul into roles (warp groups with their own code), derived from
// the role graph, with one mbarrier ring per producer -> consumer edge (docs/sync-cases.md cases 10, 12) and a
// persistent, grouped walk over the output tiles. The graph as lowered (roles, rings, mbarriers) is
// kept in k.syncPlan.roles for explain(format="mermaid"). Batched (B x M x N): the walk covers batch x
// m-tiles x n-tiles, `let batch_idx = tile / tiles per matrix` and the grouped (m0, n0) of the rest; the
// TMA loads of a batched operand (and the TMA store of D) take batch_idx as their third coordinate, a
// rank-2 B (a shared weight) is one 2-D map; param `batch`, grid.z = 1 (kir Tile::batchWalk).
// Grouped (a grouped matmul, lower/build/grouped_walk.h): not persistent, one tile per CTA of the grouped
// walk's grid, cooperative MMA warpgroups storing directly with the group-end predicate (no num_ctas, no
// tile lets: m0, n0, batch_idx are the walk's, printed before the body).
// Built on the role-pipeline builder (lower/build/role_pipeline.h; wgmma is its MmaIssue hook: wgmma.fence,
// commit, wait_group(keep), the ring release) and the mbarrier rings of sync/ring.h.
//
// Before (build_matmul_loops, tiling with roles {load, mma[, epilogue]}):
//   alloc sA, sB, acc; for kt { tma A; tma B; wgmma acc += sA x sB }; epilogue store
// After (2 roles, cooperative; s stages, prefetch p, keep = s-p-1):
//   alloc ...; if (tid == 0) { init full[s] (1), empty[s] (mma threads) }; block_sync
//   if (warp < 4) {                                         # role load: one warpgroup
//     setmaxnreg.dec R_load
//     if (tid == 0) for tl in tiles of this CTA { let tile, m0, n0
//       for kt in [0, nk) { g = tl*nk + kt
//         wait empty[g%s] parity (g/s)%2; arrive.expect_tx full[g%s]; tma A, B -> slot g%s } }
//   } else {                                                # role mma
//     setmaxnreg.inc R_mma
//     for st in [0, p+1): arrive empty[st]
//     for tl { let tile, m0, n0; acc.zero(); wgmma.fence
//       for kt { wait full[g%s] parity (g/s)%2; wgmma; commit; wait_group(keep); arrive empty[(g+p+1)%s] }
//       wgmma.wait_group(0); epilogue store }
//   }
// The single-thread issuers (`if (tid == 0)`, the TMA store's first epilogue thread) are elected issues
// (kir::IfThenElse::electWarp), printed `if (warp == W && heddle::elect_one_sync())` where the target
// has elect.sync.
// Ping-pong (two MMA warpgroups, tiles alternate): warpgroup c = (warp-4)/4 takes tiles tl = 2u+c,
// and an order ring (order[2], 128 arrivals) serialises the mainloops: c waits order[c] parity
// (u+1-c)%2 before its k loop and arrives on order[1-c] after wait_group(0), so one warpgroup's
// epilogue overlaps the other's mainloop, every parity wait is at most one round ahead of its
// barrier (parities alias beyond that), and the release of item g-keep (possibly the other
// warpgroup's) is already retired.
// Three roles: the accumulator edge mma -> epilogue is staged through an accumulator ring
// sC[accStages] (f32) with fullC/emptyC: mma waits emptyC, stores its fragments, arrives fullC; the
// epilogue warpgroup waits fullC, applies the epilogue into the swizzled output tile sD, releases
// sC, fence.proxy.async + a named barrier publish sD to the async proxy, and one thread stores it
// with TMA (bulk group, wait_group.read before sD is rewritten: the named barrier at the top of
// the next tile).
// A bias row (or residual) cached with tma_load (role_pipeline_schedule.h epiTma): a second producer role, warp 1
// of the load warpgroup, walks the tiles and loads the bias slice [bn] (residual tile [bm, bn]) of each
// into sE[tl % se] by TMA (ring fullE/emptyE, expect_tx of the box bytes); the role running the
// epilogue program (mma, or the epilogue role) waits fullE before it and releases emptyE after it, and
// reads sE instead of global memory:
//   if (tid == 32) for tl { let tile, m0, n0; wait emptyE[tl%se] parity (tl/se)%2;
//                           arrive.expect_tx fullE[tl%se] box bytes; tma bias[n0, n0+bn) -> sE[tl%se] }
//   consumer, per tile: wait fullE[tl%se] parity (tl/se)%2; epilogue (r = sE[tl%se][(lr,) lc]);
//                       arrive emptyE[tl%se]
//
// Runs when: role-pipeline kernels with wgmma (warp_specialize, not tcgen05).
#include <map>
#include <sstream>

#include "heddle/lower/build/epilogue_tma.h"
#include "heddle/lower/build/role_pipeline.h"
#include "heddle/schedule/epilogue_layout.h"

namespace heddle::passes {

using namespace build;

namespace {

kir::Buffer* smemTile(kir::Kernel& k, const std::string& name, const std::string& role, DType dt, int stages, int rows,
                      int cols, int align) {
  auto b = std::make_unique<kir::Buffer>();
  b->name = name;
  b->role = role;
  b->memory = MemoryType::Shared;
  b->dtype = dt;
  b->stages = stages;
  b->rows = rows;
  b->cols = cols;
  b->align = align;
  return k.addBuffer(std::move(b));
}

// wgmma's step of the role pipeline (wgmma.fence, commit and wait_group carry the accumulator buffer)
std::unique_ptr<kir::Sync> wgmmaOp(kir::Kernel& k, kir::SyncKind kind, kir::Buffer* acc, const Why& why, int arg = 0) {
  auto s = makeSync(k, kind, why, arg);
  s->buf = acc;
  return s;
}

// The role graph as lowered: roles with their warps and budgets, one entry per edge with its barriers.
kir::RoleDiagram diagram(const RoleGraph& g, const std::map<const RoleGraph::Edge*, const Ring*>& rings,
                         const kir::Buffer* order) {
  kir::RoleDiagram d;
  for (auto& n : g.nodes)  // a role inside another's warpgroup (the bias producer) has its own warps only
    d.roles.push_back(
        {n.name, n.role->firstWarp, n.role->warpgroups ? 4 * n.role->warpgroups : n.role->warps, n.role->registers});
  for (auto& e : g.edges) {
    kir::RoleDiagram::Edge x;
    x.from = e.from;
    x.to = e.to;
    if (e.kind == RoleGraph::EdgeKind::Order) {
      x.kind = "order";
      x.buffers = "(token)";
      x.full = order->name;
      x.stages = e.stages;
      x.produce = "arrive order[1-c] after its k loop";
      x.consume = "wait order[c] parity (u+1-c)%2";
    } else {
      const Ring& r = *rings.at(&e);
      x.kind = "ring";
      x.buffers = r.label + (e.registers ? " (accumulator " + e.label() + ")" : "");
      x.full = r.full->name;
      x.empty = r.empty->name;
      x.stages = r.stages;
      x.produce = r.txBytes ? "arrive.expect_tx " + r.full->name + "[j%" + std::to_string(r.stages) + "], TMA"
                            : "arrive " + r.full->name + "[j%" + std::to_string(r.stages) + "]";
      x.consume =
          "wait " + r.full->name + "[i%" + std::to_string(r.stages) + "] parity (i/" + std::to_string(r.stages) + ")%2";
      x.release = "arrive " + r.empty->name + "[(i+" + std::to_string(r.prefetch + 1) + ")%" +
                  std::to_string(r.stages) + "]; producer waits parity (j/" + std::to_string(r.stages) + ")%2";
    }
    d.edges.push_back(x);
  }
  return d;
}

}  // namespace

void warpSpecialize(LowerContext& c) {
  auto& t = c.tiling;
  auto& h = t.rolePipeline;
  auto& k = c.kernel;
  requireWhen(c, "warp_specialize");  // tcgen05: passes/tcgen05_specialize.cpp
  RolePipeline P(c);
  kir::Buffer* sE = P.sE;
  const RoleGraph& graph = P.graph;
  const PipelineRole& loadR = *h.role(PipelineRole::Load);
  const PipelineRole& mmaR = *h.role(PipelineRole::Mma);
  const PipelineRole* epiR = h.role(PipelineRole::Epilogue);
  const int p = t.prefetch, keep = t.stages - p - 1;
  const int mmaThreads = 128 * h.mmaWarpgroups;
  kir::Buffer* acc = P.acc;
  kir::EpilogueStore* epiOp = P.epi;

  // --- rings, one per edge of the role graph -------------------------------------------------
  const RoleGraph::Edge* ab = graph.find(PipelineRole::Load, PipelineRole::Mma);
  if (!ab) fail<HeddleError>("warp_specialize: no load -> mma edge in the role graph (", graph.str(), ")");
  const RoleGraph::Edge* accEdge = epiR ? graph.find(PipelineRole::Mma, PipelineRole::Epilogue) : nullptr;
  if (accEdge && !k.extraOutputs.empty())
    fail<ScheduleError>("warp_specialize: this fusion has ", k.extraOutputs.size() + 1,
                        " outputs, but an epilogue "
                        "role stores one tile (sD) with one TMA store; leave out the epilogue role (roles load and "
                        "mma: the mma warpgroups store every output from registers) or split the fusion");
  if (epiR && !(accEdge && accEdge->registers))
    fail<HeddleError>("warp_specialize: the epilogue role has no accumulator edge (", graph.str(), ")");
  const RoleGraph::Edge* epiEdge = nullptr;  // the bias producer -> the role running the epilogue program
  for (auto& e : graph.edges) {              // the edges this pass builds rings for
    if (e.kind != RoleGraph::EdgeKind::Ring || &e == ab || &e == accEdge) continue;
    if (sE && graph.nodes[e.from].role->kind == PipelineRole::EpiLoad && !epiEdge) {
      epiEdge = &e;
      continue;
    }
    fail<ScheduleError>("warp_specialize: the role graph has an edge ", graph.nodes[e.from].name, " -> ",
                        graph.nodes[e.to].name, " (", e.label(),
                        ") that the Hopper lowering does not "
                        "build a ring for (it builds load -> mma, mma -> epilogue and a TMA bias producer -> "
                        "the epilogue's role: ",
                        graph.str(), ")");
  }
  RingSpec abSpec = P.operandRingSpec(*ab);
  abSpec.prefetch = p;
  abSpec.keep = keep;
  abSpec.emptyCount = h.coop ? mmaThreads : 128;  // ping-pong: one warpgroup consumes each item
  const Ring ring = Ring::create(k, abSpec);
  // ping-pong: the mainloops take turns. Needed for correctness, not only speed: a parity wait only
  // tells phases apart that are one round apart, and a warpgroup starting its next tile would wait on
  // items a whole tile (often several rounds) ahead of the ring; with keep > 0 its first releases
  // also cover the other warpgroup's last items, which must have retired
  const int mmaNode = graph.node(PipelineRole::Mma);
  const RoleGraph::Edge* orderEdge = graph.find(mmaNode, mmaNode, RoleGraph::EdgeKind::Order);
  kir::Buffer* order = orderEdge ? addMbarriers(k, "order", orderEdge->stages) : nullptr;
  Ring ringC;
  kir::Buffer *sC = nullptr, *sD = nullptr;
  if (accEdge) {
    const int sc = accEdge->stages;
    sC = smemTile(k, "sC", "accstage", DType::F32, sc, t.bm, t.bn + 4, 128);
    sD = smemTile(k, "sD", "D", k.outDtype, 1, t.bm, t.bn, 1024);
    RingSpec cSpec;
    cSpec.label = "sC";
    cSpec.fullName = "fullC";
    cSpec.emptyName = "emptyC";
    cSpec.stages = sc;
    cSpec.prefetch = sc - 1;
    cSpec.fullCount = mmaThreads;
    cSpec.emptyCount = 128 * epiR->warpgroups;
    cSpec.producer = mmaR.name;
    cSpec.consumer = epiR->name;
    ringC = Ring::create(k, cSpec);
    kir::Param pd;
    pd.kind = kir::Param::TensorMap;
    pd.name = "tmD";
    pd.tensor = "D";
    k.params.push_back(pd);
    const int esz = dtypeBytes(k.outDtype), sw = t.bn * esz >= 128 ? 128 : t.bn * esz;
    k.tensorMaps.push_back({"tmD", "D", sw / esz, t.bm, sw, t.batched});
  }
  Ring ringE;
  const PipelineRole* epiLoadR = h.role(PipelineRole::EpiLoad);
  if (epiEdge)
    ringE = epilogueOperandRing(k, t, h, *epiEdge, *sE, graph.nodes[epiEdge->to].name,
                                128 * (epiR ? epiR->warpgroups : h.mmaWarpgroups));
  P.addWalkParams();

  // --- the kernel body ----------------------------------------------------------------------
  Ring ord;  // the ping-pong order barriers: init only
  ord.full = order;
  ord.stages = 2;
  ord.fullCount = 128;
  std::vector<const Ring*> inits{&ring};
  if (accEdge) inits.push_back(&ringC);
  if (epiEdge) inits.push_back(&ringE);
  if (order) inits.push_back(&ord);
  std::vector<kir::NodePtr> body = P.head(inits);
  body.push_back(makeSync(k, kir::SyncKind::BlockSync,
                          {"init mbarriers", "", "", "", "",
                           "block barrier: thread 0's mbarrier.init must be visible to every role before it "
                           "arrives or waits (the last block-wide barrier: roles diverge after it)"}));
  const IExpr tilesCta = P.tilesPerCta(), tl = var("tl");

  // role load: one elected thread walks every tile's k loop
  auto loadRole = P.loadWarpgroup(ring, loadR, 0, tilesCta);
  if (epiEdge)  // role <operand>_load: warp 1's elected thread, the operand's box of each tile
    loadRole->thenBody.stmts.push_back(epiLoadRole(k, t, h, ringE, sE, epiLoadR->firstWarp, tilesCta));
  // the role running the epilogue program around it: wait for the tile's bias slice, read it, release it
  auto epilogueWithOperands = [&](kir::Block& b, kir::NodePtr epi) {
    epilogueWithOperand(k, b, std::move(epi), epiEdge ? &ringE : nullptr, tl);
  };

  // role mma (and the epilogue when there is no epilogue role)
  kir::Block* rest = &loadRole->elseBody;
  std::unique_ptr<kir::IfThenElse> mmaIf;
  kir::Block* mmaBody = rest;
  if (epiR) {
    mmaIf = when(var("warp") < 4 + 4 * h.mmaWarpgroups);
    mmaBody = &mmaIf->thenBody;
  }
  if (auto r = setMaxNReg(k, mmaR, h.threads)) mmaBody->stmts.push_back(std::move(r));
  IExpr wgc = (var("warp") - 4) / 4;  // ping-pong: which MMA warpgroup
  if (h.coop) {
    ring.preArrive(k, *mmaBody, "st");
    if (epiEdge && !epiR) ringE.preArrive(k, *mmaBody, "st");
  } else {
    auto first = when(var("warp") < 8);
    ring.preArrive(k, first->thenBody, "st");
    mmaBody->stmts.push_back(std::move(first));
  }
  {
    std::unique_ptr<kir::ForLoop> tiles;
    if (h.coop) {
      tiles = forLoop("tl", 0, tilesCta);
    } else {
      tiles = forLoop("u", 0, ceilDiv(tilesCta - wgc, 2));
      tiles->body.stmts.push_back(std::make_unique<kir::Let>("tl", var("u") * 2 + wgc));
    }
    persistentTileLets(tiles->body, t, tl);
    tiles->body.stmts.push_back(std::make_unique<kir::Alloc>(acc));
    if (order) {
      Why w{"order mainloops",
            "the other MMA warpgroup's k loop",
            "this warpgroup's k loop",
            "order",
            "",
            "ping-pong: wait for the other warpgroup's mainloop (its wgmma retired, its ring slots released), "
            "so this warpgroup's parity waits are at most one round ahead of the ring; parity (u+1-c)%2, the "
            "first wait of warpgroup 0 passes on the fresh barrier"};
      tiles->body.stmts.push_back(makeMbar(k, kir::SyncKind::MbarWait, order, wgc, w, 0, (var("u") + 1 - wgc) % 2));
    }
    MmaIssue wgmma;
    wgmma.before = [&](kir::Block& b, IExpr) {
      b.stmts.push_back(wgmmaOp(k, kir::SyncKind::WgmmaFence, acc,
                                {"registers acc", "", "", "acc", "",
                                 "wgmma.fence before this k-tile's wgmma: the accumulators were last touched by "
                                 "ordinary instructions (zero, the wait's operand fence, the previous tile's "
                                 "epilogue)"}));
    };
    wgmma.after = [&](kir::Block& b, IExpr g) {
      b.stmts.push_back(wgmmaOp(k, kir::SyncKind::WgmmaCommit, acc,
                                {"group wgmma sA, sB", "", "", "sA, sB", "",
                                 "commit this k-tile's wgmma ops as one group, which wait_group retires"}));
      b.stmts.push_back(
          wgmmaOp(k, kir::SyncKind::WgmmaWait, acc,
                  {"WAR sA, sB (wgmma -> tma)", "wgmma reads of sA, sB", "tma writes of sA, sB", "sA, sB", "",
                   "wgmma.wait_group(" + std::to_string(keep) + "): item g-" + std::to_string(keep) +
                       " finished reading before its slot is released; " + std::to_string(keep) +
                       " group(s) stay in flight (s-p-1)"},
                  keep));
      b.stmts.push_back(ring.consumerRelease(k, g));
    };
    auto kl = P.mmaKLoop(ring, wgmma);
    tiles->body.stmts.push_back(std::move(kl));
    if (keep > 0)  // with keep = 0 the k loop's own wait_group(0) already retired every group
      tiles->body.stmts.push_back(
          wgmmaOp(k, kir::SyncKind::WgmmaWait, acc,
                  {"RAW acc (wgmma -> epilogue)", "wgmma", "epilogue", "acc", "",
                   "wgmma.wait_group(0): the last " + std::to_string(keep) + " group(s) wrote the accumulators"},
                  0));
    if (order) {
      Why w{"order mainloops",
            "this warpgroup's k loop",
            "the other warpgroup's k loop",
            "order",
            "",
            "ping-pong: hand the tensor cores (and the ring position) to the other warpgroup"};
      tiles->body.stmts.push_back(makeMbar(k, kir::SyncKind::MbarArrive, order, 1 - wgc, w));
    }
    if (!accEdge) {
      epilogueWithOperands(tiles->body, kir::clone(*epiOp, {}));
    } else {
      IExpr j = tl;
      tiles->body.stmts.push_back(ringC.producerWait(k, j));
      auto st = kir::clone(*epiOp, {});
      auto& e = static_cast<kir::EpilogueStore&>(*st);
      e.raw = true;
      e.to = sC;
      e.toStage = j % ringC.stages;
      tiles->body.stmts.push_back(std::move(st));
      tiles->body.stmts.push_back(ringC.producerArrive(k, j));
    }
    mmaBody->stmts.push_back(std::move(tiles));
  }
  if (epiR) {
    kir::Block& eb = mmaIf->elseBody;
    if (auto r = setMaxNReg(k, *epiR, h.threads)) eb.stmts.push_back(std::move(r));
    ringC.preArrive(k, eb, "st");
    if (epiEdge) ringE.preArrive(k, eb, "st");
    auto tiles = forLoop("tl", 0, tilesCta);
    persistentTileLets(tiles->body, t, tl);
    const int nthr = 128 * epiR->warpgroups, first = 32 * epiR->firstWarp;
    tiles->body.stmts.push_back(ringC.consumerWait(k, tl));
    auto bar1 =
        makeSync(k, kir::SyncKind::NamedBarrier,
                 {"WAR sD (tma store -> epilogue)", "tma_store reads of sD", "epilogue writes of sD", "sD", "",
                  "named barrier (" + std::to_string(nthr) + " epilogue threads): thread " + std::to_string(first) +
                      " retired the previous tile's TMA store reads "
                      "(cp.async.bulk.wait_group.read 0) before the epilogue rewrites sD"},
                 1);
    bar1->count = nthr;
    tiles->body.stmts.push_back(std::move(bar1));
    auto st = kir::clone(*epiOp, {});
    auto& e = static_cast<kir::EpilogueStore&>(*st);
    e.from = sC;
    e.fromStage = tl % ringC.stages;
    e.to = sD;
    e.toStage = 0;
    e.warpShift = 4 * h.mmaWarpgroups;
    epilogueWithOperands(tiles->body, std::move(st));
    tiles->body.stmts.push_back(ringC.consumerRelease(k, tl));
    tiles->body.stmts.push_back(
        makeSync(k, kir::SyncKind::FenceProxyAsync,
                 {"RAW sD (st.shared -> tma_store)", "epilogue writes of sD (generic proxy)",
                  "tma_store reads (async proxy)", "sD", "",
                  "fence.proxy.async in every writing thread, before the barrier that orders its writes before the TMA "
                  "store: generic-proxy writes are not visible to the async proxy otherwise"}));
    auto bar2 = makeSync(k, kir::SyncKind::NamedBarrier,
                         {"RAW sD (st.shared -> tma_store)", "epilogue writes of sD", "tma_store reads of sD", "sD", "",
                          "named barrier (" + std::to_string(nthr) +
                              " epilogue threads): every fenced write of sD "
                              "happens before thread " +
                              std::to_string(first) + " issues the TMA store"},
                         1);
    bar2->count = nthr;
    tiles->body.stmts.push_back(std::move(bar2));
    auto issue = electOne(epiR->firstWarp);
    auto ts = std::make_unique<kir::TmaStore>();
    ts->src = sD;
    ts->stage = 0;
    ts->tensorMap = "tmD";
    ts->row0 = var("m0");
    ts->col0 = var("n0");
    ts->iter = tl;
    issue->thenBody.stmts.push_back(std::move(ts));
    issue->thenBody.stmts.push_back(makeSync(k, kir::SyncKind::BulkCommit,
                                             {"group tma_store sD", "", "", "sD", "",
                                              "close the bulk group of this store so wait_group.read can retire it"}));
    issue->thenBody.stmts.push_back(
        makeSync(k, kir::SyncKind::BulkWaitRead,
                 {"WAR sD (tma_store -> epilogue)", "tma_store reads of sD", "epilogue writes of sD", "sD", "",
                  "cp.async.bulk.wait_group.read(0): the store has read sD before the "
                  "next tile's named barrier lets the epilogue rewrite it"},
                 0));
    tiles->body.stmts.push_back(std::move(issue));
    eb.stmts.push_back(std::move(tiles));
    rest->stmts.push_back(std::move(mmaIf));
  }
  body.push_back(std::move(loadRole));
  k.body.stmts = std::move(body);

  int ownWarpgroups = 0;  // roles with warpgroups of their own (not the bias producer inside the load's)
  for (auto& r : h.roles) ownWarpgroups += r.warpgroups > 0;
  P.finish("_ws" + std::to_string(ownWarpgroups) + (h.coop ? "coop" : "pp"), epiEdge ? &ringE : nullptr);
  std::ostringstream sum;
  sum << "roles: " << graph.str() << "; ring sA, sB: " << t.stages << " stages, prefetch " << p << ", wgmma.wait_group("
      << keep << ")";
  if (accEdge) sum << "; accumulator ring sC: " << h.accStages << " stage(s), TMA store of sD";
  if (epiEdge)
    sum << "; " << h.epiTma << " ring sE: " << ringE.stages << " stage(s), TMA by role '" << epiLoadR->name << "'";
  if (order) sum << "; ping-pong order barriers";
  if (!accEdge)  // (with an epilogue role the graph above already shows where the epilogue runs)
    sum << "; epilogue: " << epilogueLayoutPhrase(h.coop ? "cooperative" : "pingpong");
  k.syncPlan.summary = sum.str();
  std::map<const RoleGraph::Edge*, const Ring*> rings{{ab, &ring}};
  if (accEdge) rings[accEdge] = &ringC;
  if (epiEdge) rings[epiEdge] = &ringE;
  k.syncPlan.roles = diagram(graph, rings, order);
}

}  // namespace heddle::passes
