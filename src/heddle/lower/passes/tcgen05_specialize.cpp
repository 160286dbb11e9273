// tcgen05_specialize: split a Blackwell (sm_100a) matmul into its roles, derived from the role graph:
// load warp -> MMA warp (tcgen05.mma into tensor memory) -> epilogue warpgroup, and a bias / residual
// producer warp -> epilogue warpgroup when that operand is cached with tma_load, with one mbarrier ring
// per producer -> consumer edge and the persistent, grouped tile walk of the Hopper kernel
// (docs/blackwell.md; docs/sync-cases.md case 13). The graph as lowered is kept in k.syncPlan.roles. Built on the
// role-pipeline builder (lower/build/role_pipeline.h; tcgen05 is its MmaIssue hook: the MMA step's tensor-
// memory stage and accumulate flag, tcgen05.commit -> empty) and the mbarrier rings of sync/ring.h.
//
// Before (build_matmul_loops, tiling with roles {load, mma, epilogue}, tcgen05):
//   alloc sA, sB, acc; for kt { tma A; tma B; mma acc += sA x sB }; epilogue store
// After (s operand stages, a accumulator stages, g = tl*nk + kt):
//   alloc sA, sB, full[s], empty[s], accFull[a], accEmpty[a], tmem_slot; let bid
//   if (tid == 0) { init full[*] (1), empty[*] (1), accFull[*] (1), accEmpty[*] (128) }
//   if (warp == 1) { tcgen05.alloc tmem_slot, C columns; tcgen05.relinquish_alloc_permit }
//   tcgen05.fence::before_thread_sync; block_sync      (each role's first tensor-memory use follows its
//                                                        fence::after_thread_sync after a ring wait)
//   if (warp < 4) {                                                # warpgroup 0: load and mma
//     setmaxnreg.dec R
//     if (tid == 0)  for tl { let tile, m0, n0; for kt {              # role load (warp 0, elected)
//         wait empty[g%s] parity (g/s)%2; arrive.expect_tx full[g%s]; tma A, B -> slot g%s } }
//     if (tid == 32) { for st < s: arrive empty[st]                    # role mma (warp 1, elected)
//       for tl { wait accEmpty[tl%a] parity (tl/a)%2; tcgen05.fence::after_thread_sync
//         for kt { wait full[g%s] parity (g/s)%2; tcgen05.mma tmem[tl%a] += sA x sB (accumulate kt > 0)
//                  tcgen05.commit -> empty[g%s] }
//         (mx32 / nv16: for kt { wait full[g%s]; tcgen05.fence::after_thread_sync;
//                         MmaSm100Mx / MmaSm100Nvf4: tcgen05.cp sSFA[g%s], sSFB[g%s] -> scale columns of stage
//                         g%s, four (two) block-scaled tcgen05.mma; tcgen05.commit -> empty[g%s] }:
//          the load role's TMA of the chunks is passes/mx_scale_ring.cpp's, in the same ring item)
//         tcgen05.commit -> accFull[tl%a] } }
//     if (tid == 64) for tl { let tile, m0, n0                       # role <x>_load (warp 2; only with a
//         wait emptyE[tl%se] parity (tl/se)%2                           #  TMA-cached bias / residual x:
//         arrive.expect_tx fullE[tl%se] box bytes; tma x -> sE[tl%se] } #  ring fullE[se] (1), emptyE[se] (128))
//   } else {                                                        # role epilogue (warps 4-7)
//     setmaxnreg R_epi; for st < a: arrive accEmpty[st]; [for st < se: arrive emptyE[st]]
//     for tl { let tile, m0, n0; wait accFull[tl%a] parity (tl/a)%2; tcgen05.fence::after_thread_sync
//              [wait fullE[tl%se] parity (tl/se)%2]
//              epilogue from tmem[tl%a] (tcgen05.ld 32x32b + wait::ld) [reading x from sE[tl%se]]
//              [arrive emptyE[tl%se]]; tcgen05.fence::before_thread_sync; arrive accEmpty[tl%a] }
//     (epilogue_store("tma"): per chunk c of 128 bytes of columns, q = tl * chunks + c, slot q % sd:
//        if (thread 128) bulk.wait_group.read(sd-1); bar.sync 1, 128
//        tcgen05.ld the chunk's columns + wait::ld, epilogue, st.shared 16-byte vectors -> sD[q%sd] (128B swizzle)
//        [last chunk: arrive emptyE; fence::before_thread_sync; arrive accEmpty[tl%a]]
//        fence.proxy.async; bar.sync 1, 128; if (thread 128) { tma_store sD[q%sd] -> D; bulk.commit_group }
//      and after the tile loop: if (thread 128) bulk.wait_group.read(0); lower/build/staged_store.h)
//   }
//   block_sync; if (warp == 1) { tcgen05.fence::after_thread_sync; tcgen05.dealloc tmem_slot, C columns }
//
// Runs when: role-pipeline kernels with tcgen05 MMA.
#include <map>
#include <sstream>

#include "heddle/lower/build/epilogue_tma.h"
#include "heddle/lower/build/role_pipeline.h"
#include "heddle/lower/build/staged_store.h"

namespace heddle::passes {

using namespace build;

namespace {

kir::Buffer* tmemSlot(kir::Kernel& k) {
  auto b = std::make_unique<kir::Buffer>();
  b->name = "tmem_slot";
  b->role = "tmem";
  b->memory = MemoryType::Shared;
  b->dtype = DType::F32;  // one 32-bit word: the tensor-memory address tcgen05.alloc writes
  b->rows = b->cols = 1;
  b->align = 16;
  return k.addBuffer(std::move(b));
}

std::unique_ptr<kir::Sync> tcgenOp(kir::Kernel& k, kir::SyncKind kind, kir::Buffer* buf, IExpr index, const Why& why,
                                   int arg = 0) {
  auto s = makeSync(k, kind, why, arg);
  s->buf = buf;
  s->index = index;
  return s;
}

kir::RoleDiagram diagram(const RoleGraph& g, const Ring& ab, const Ring& acc, const Ring* epiRing) {
  kir::RoleDiagram d;
  for (auto& n : g.nodes)
    d.roles.push_back({n.name, n.role->firstWarp, n.role->kind == PipelineRole::Epilogue ? 4 : 1, n.role->registers});
  auto edge = [&](int from, int to, const Ring& r, const std::string& buffers, const std::string& produce,
                  const std::string& release) {
    kir::RoleDiagram::Edge x;
    x.from = from;
    x.to = to;
    x.kind = "ring";
    x.buffers = buffers;
    x.full = r.full->name;
    x.empty = r.empty->name;
    x.stages = r.stages;
    const std::string S = std::to_string(r.stages);
    x.produce = produce;
    x.consume = "wait " + r.full->name + "[i%" + S + "] parity (i/" + S + ")%2";
    x.release = release + "; producer waits parity (j/" + S + ")%2";
    d.edges.push_back(x);
  };
  const int load = g.node(PipelineRole::Load), mma = g.node(PipelineRole::Mma), epi = g.node(PipelineRole::Epilogue);
  const std::string S = std::to_string(ab.stages), A = std::to_string(acc.stages);
  edge(load, mma, ab, ab.label, "arrive.expect_tx " + ab.full->name + "[j%" + S + "], TMA",
       "tcgen05.commit -> " + ab.empty->name + "[i%" + S + "] after the k-tile's MMAs");
  edge(mma, epi, acc, "accumulator in tensor memory", "tcgen05.commit -> " + acc.full->name + "[t%" + A + "]",
       "tcgen05.ld, wait::ld, fence::before_thread_sync; arrive " + acc.empty->name + "[t%" + A + "]");
  if (epiRing) {
    const std::string E = std::to_string(epiRing->stages);
    edge(g.node(PipelineRole::EpiLoad), epi, *epiRing, epiRing->label,
         "arrive.expect_tx " + epiRing->full->name + "[j%" + E + "], TMA",
         "ld.shared in the epilogue; arrive " + epiRing->empty->name + "[t%" + E + "]");
  }
  return d;
}

}  // namespace

void tcgen05Specialize(LowerContext& c) {
  auto& t = c.tiling;
  auto& h = t.rolePipeline;
  auto& k = c.kernel;
  requireWhen(c, "tcgen05_specialize");
  RolePipeline P(c);
  kir::Buffer* sE = P.sE;
  const RoleGraph& graph = P.graph;
  const PipelineRole& loadR = *h.role(PipelineRole::Load);
  const PipelineRole& mmaR = *h.role(PipelineRole::Mma);
  const PipelineRole& epiR = *h.role(PipelineRole::Epilogue);
  const RoleGraph::Edge* ab = graph.find(PipelineRole::Load, PipelineRole::Mma);
  const RoleGraph::Edge* accEdge = graph.find(PipelineRole::Mma, PipelineRole::Epilogue);
  const RoleGraph::Edge* epiEdge = sE ? graph.find(PipelineRole::EpiLoad, PipelineRole::Epilogue) : nullptr;
  if (!ab || !accEdge || (sE && !epiEdge) || graph.edges.size() != (sE ? 3u : 2u))
    fail<HeddleError>("tcgen05_specialize: the role graph is not load -> mma -> epilogue",
                      sE ? " <- " + h.epiTma + "_load" : "", " (", graph.str(), ")");
  const int s = ab->stages, a = accEdge->stages, C = h.tmemCols;
  kir::Buffer* acc = P.acc;
  // mx32 (MXFP8) / nv16 (NVFP4): the k tile's scale chunks ride in the operand ring (passes/mx_scale_ring.cpp): two
  // more loads
  const bool mx = isMxScaled(t.mm);
  const MxKTile mxf = mxKTile(t.mm->definition);
  if (!P.sA || !P.sB || !acc || !P.mma || !P.epi || P.loads.size() != (mx ? 4u : 2u))
    fail<HeddleError>("tcgen05_specialize: expected ", mx ? "four" : "two",
                      " TMA loads, one MMA and one epilogue in the k loop");
  const int scaleCols = mx ? s * mxf.scaleColumns(t.bn) : 0;  // the step's columns per operand stage, after the accs

  // --- rings, one per edge of the role graph --------------------------------------------------
  RingSpec abSpec = P.operandRingSpec(*ab);  // the MMA thread releases item i itself (tcgen05.commit)
  abSpec.prefetch = s - 1;                   // so prefetch s-1, keep 0
  const Ring ring = Ring::create(k, abSpec);
  RingSpec accSpec;  // the accumulator in tensor memory: tcgen05.commit publishes it, 128 epilogue threads free it
  accSpec.label = "tmem acc";
  accSpec.fullName = "accFull";
  accSpec.emptyName = "accEmpty";
  accSpec.stages = a;
  accSpec.prefetch = a - 1;
  accSpec.emptyCount = 128;
  accSpec.producer = mmaR.name;
  accSpec.consumer = epiR.name;
  const Ring ringAcc = Ring::create(k, accSpec);
  Ring ringE;  // the bias / residual: read by the 128 epilogue threads with ordinary loads
  if (epiEdge) ringE = epilogueOperandRing(k, t, h, *epiEdge, *sE, epiR.name, 128);
  kir::Buffer* slot = tmemSlot(k);
  // A grouped matmul (MatmulTiling::grouped, docs/grouped.md "sm_100a"): not persistent. Each CTA runs the one
  // (expert, m tile, n tile) that the printed grouped walk (lower/build/grouped_walk.h) found at the kernel's
  // top, and a surplus CTA of the grid's bound returned there, whole (the walk is CTA-uniform), before any
  // mbarrier init or tcgen05.alloc, so alloc and dealloc stay paired on every path (PTX ISA 9.7.16.7.1,
  // tcgen05.alloc / dealloc: all tensor memory a kernel allocates is deallocated before it exits, and no thread
  // of the allocating warp may have exited; the Tilus TMEM guide states the same pairing). The roles' tile
  // loops run once; m0, n0, M (= offs[e]) and batch_idx are the walk's.
  const bool grouped = t.grouped;
  const kir::LaunchConfig groupedGrid = k.launch;  // (ceil(N / bn), ceil(tokens / bm) + E): grouped_walk.cpp
  if (!grouped) P.addWalkParams();

  // epilogue_store("tma") (schedule: validateTcgen05Store): the epilogue warpgroup stages 128-byte column chunks in
  // sD[sd] and thread 128 (warp 4's elected lane) stores them by TMA; bar.sync 1 over the 128 epilogue threads
  const bool staged = h.tmaStore;
  StagedStore store;
  if (staged) {
    store = stagingBuffers(k, t, h.storeCols, h.storeStages);
    store.stages = h.storeStages;
    store.writes = "st.shared";
    store.barId = 1;
    store.barThreads = 128;
    store.barWho = " epilogue threads";
    store.writers = "the epilogue threads";
    store.issuer = "thread 128";
    store.elect = [&] { return electOne(epiR.firstWarp); };
  }

  // --- the kernel body ----------------------------------------------------------------------
  std::vector<const Ring*> inits{&ring, &ringAcc};
  if (epiEdge) inits.push_back(&ringE);
  std::vector<kir::NodePtr> body = P.head(inits);
  const std::string cols = std::to_string(C);
  auto alloc = when(eq(var("warp"), 1));
  alloc->thenBody.stmts.push_back(
      tcgenOp(k, kir::SyncKind::TmemAlloc, slot, 0,
              {"alloc tensor memory", "", "", "tmem_slot", "",
               "tcgen05.alloc (warp 1, the MMA role's warp): " + cols + " columns = " + std::to_string(a) + " x " +
                   std::to_string(t.bn) + " accumulator columns" +
                   (mx ? " + " + std::to_string(scaleCols) + " MX scale columns (" + std::to_string(s) +
                             " operand stages x " + std::to_string(mxf.scaleColumns(t.bn)) + ")"
                       : std::string()) +
                   " rounded up to a power of two >= 32; the address "
                   "lands in tmem_slot"},
              C));
  alloc->thenBody.stmts.push_back(tcgenOp(k, kir::SyncKind::TmemRelinquish, slot, 0,
                                          {"relinquish tensor memory permit", "", "", "tmem_slot", "",
                                           "tcgen05.relinquish_alloc_permit: this CTA allocates once, so another "
                                           "CTA on the SM may allocate without waiting"}));
  body.push_back(std::move(alloc));
  body.push_back(tcgenOp(k, kir::SyncKind::TcgenFenceBefore, slot, 0,
                         {"publish tmem_slot", "tcgen05.alloc", "every role's tensor-memory use", "tmem_slot", "",
                          "tcgen05.fence::before_thread_sync: the allocation is ordered before the block barrier "
                          "that hands its address to the MMA and epilogue roles"}));
  body.push_back(makeSync(k, kir::SyncKind::BlockSync,
                          {"init mbarriers, tmem_slot", "", "", "", "",
                           "block barrier: thread 0's mbarrier.init and warp 1's tcgen05.alloc must be visible to "
                           "every role before it arrives, waits or reads tmem_slot (roles diverge after it)"}));
  // (not batched: tcgen05_schedule refuses it; grouped: one tile per CTA)
  const IExpr tilesCta = grouped ? IExpr(1) : P.tilesPerCta(), tl = var("tl");

  auto wg0 = P.loadWarpgroup(ring, loadR, loadR.firstWarp, tilesCta);  // role load
  {  // role mma: warp 1's elected thread issues every tcgen05 op of the kernel
    auto elected = electOne(mmaR.firstWarp);
    ring.preArrive(k, elected->thenBody, "st");
    auto tiles = forLoop("tl", 0, tilesCta);
    tiles->body.stmts.push_back(ringAcc.producerWait(k, tl));
    tiles->body.stmts.push_back(tcgenOp(
        k, kir::SyncKind::TcgenFenceAfter, acc, 0,
        {"WAR tmem acc (epilogue -> mma)", "epilogue tcgen05.ld of the stage", "tcgen05.mma writes of the stage",
         "tmem acc", (tl % a).str(),
         "tcgen05.fence::after_thread_sync after the accEmpty wait: the MMAs that overwrite the stage are ordered "
         "after the epilogue's loads of it (which it fenced before arriving)"}));
    MmaIssue tcgen05;
    if (mx)  // the copies into the stage's scale columns follow the full wait through a tcgen05 fence
      tcgen05.before = [&](kir::Block& b, IExpr g) {
        b.stmts.push_back(tcgenOp(
            k, kir::SyncKind::TcgenFenceAfter, acc, 0,
            {"WAR tmem scale columns (mma -> tcgen05.cp)",
             "the block-scaled tcgen05.mma reads of the stage's scale "
             "columns, item g-" +
                 std::to_string(s),
             "tcgen05.cp writes of the stage's scale columns", "tmem scales", (g % s).str(),
             "tcgen05.fence::after_thread_sync after the full wait: tcgen05.mma -> tcgen05.cp is not a pipelined "
             "pair (PTX ISA 9.7.16.6.2), so the copies into stage g%" +
                 std::to_string(s) + "'s scale columns are ordered after the MMAs of item g-" + std::to_string(s) +
                 " only through that item's commit -> empty -> TMA -> full chain and this fence (9.7.16.6.3)"}));
      };
    tcgen05.configure = [&](kir::MmaStep& mm) {
      mm.kind = MmaKind::Tcgen05;
      mm.accStage = tl % a;
      mm.accumulate = var("kt");
    };
    tcgen05.after = [&](kir::Block& b, IExpr g) {
      b.stmts.push_back(
          tcgenOp(k, kir::SyncKind::TcgenCommit, ring.empty, g % s,
                  {"WAR " + ring.label + " (" + mmaR.name + " -> " + loadR.name + ")",
                   "tcgen05.mma reads of " + ring.label, "tma writes of " + ring.label, ring.label, (g % s).str(),
                   "tcgen05.commit -> " + ring.empty->name + "[g%" + std::to_string(s) +
                       "]: one arrival once this k-tile's "
                       "MMAs have read the slot; the producer's item g+" +
                       std::to_string(s) +
                       " waits that phase, parity "
                       "((g+" +
                       std::to_string(s) + ")/" + std::to_string(s) + ")%2"}));
    };
    auto kl = P.mmaKLoop(ring, tcgen05);
    tiles->body.stmts.push_back(std::move(kl));
    tiles->body.stmts.push_back(
        tcgenOp(k, kir::SyncKind::TcgenCommit, ringAcc.full, tl % a,
                {"RAW tmem acc (" + mmaR.name + " -> " + epiR.name + ")", "tcgen05.mma writes of the stage",
                 "epilogue tcgen05.ld", "tmem acc", (tl % a).str(),
                 "tcgen05.commit -> accFull[t%" + std::to_string(a) +
                     "]: one arrival once every MMA of the tile completed "
                     "(the accumulator is final); the epilogue waits parity (t/" +
                     std::to_string(a) + ")%2"}));
    elected->thenBody.stmts.push_back(std::move(tiles));
    wg0->thenBody.stmts.push_back(std::move(elected));
  }
  if (epiEdge)  // role <x>_load: warp 2's elected thread, the operand's box of each tile
    wg0->thenBody.stmts.push_back(epiLoadRole(k, t, h, ringE, sE, h.role(PipelineRole::EpiLoad)->firstWarp, tilesCta));
  {  // role epilogue: warps 4-7, one tile row per thread
    kir::Block& eb = wg0->elseBody;
    if (auto r = setMaxNReg(k, epiR, h.threads)) eb.stmts.push_back(std::move(r));
    ringAcc.preArrive(k, eb, "st");
    if (epiEdge) ringE.preArrive(k, eb, "st");
    auto tiles = forLoop("tl", 0, tilesCta);
    persistentTileLets(tiles->body, t, tl);
    tiles->body.stmts.push_back(ringAcc.consumerWait(k, tl));
    tiles->body.stmts.push_back(
        tcgenOp(k, kir::SyncKind::TcgenFenceAfter, acc, 0,
                {"RAW tmem acc (" + mmaR.name + " -> " + epiR.name + ")", "tcgen05.mma writes", "epilogue tcgen05.ld",
                 "tmem acc", (tl % a).str(),
                 "tcgen05.fence::after_thread_sync after the accFull wait: the loads are ordered after the MMAs the "
                 "commit published"}));
    auto st = kir::clone(*P.epi, {});
    auto& e = static_cast<kir::EpilogueStore&>(*st);
    e.tmem = true;
    e.fromStage = tl % a;
    e.warpShift = epiR.firstWarp;
    auto release = [&](std::vector<kir::NodePtr>& out, const std::string& after) {  // free the accumulator stage
      out.push_back(tcgenOp(k, kir::SyncKind::TcgenFenceBefore, acc, 0,
                            {"WAR tmem acc (" + epiR.name + " -> " + mmaR.name + ")", "epilogue tcgen05.ld",
                             "next tcgen05.mma writes", "tmem acc", (tl % a).str(),
                             "tcgen05.fence::before_thread_sync: this thread's loads (retired by wait::ld) are ordered "
                             "before the accEmpty arrive that frees the stage" +
                                 after}));
      out.push_back(ringAcc.consumerRelease(k, tl));
    };
    if (!staged) {
      epilogueWithOperand(k, tiles->body, std::move(st), epiEdge ? &ringE : nullptr, tl);
      release(tiles->body.stmts, "");
    } else {  // the chunks through sD (lower/build/staged_store.h); the stage is freed after the last chunk's loads
      if (epiEdge) {
        tiles->body.stmts.push_back(ringE.consumerWait(k, tl));
        e.operandStage = tl % ringE.stages;
      }
      auto seq = stagedChunks(
          k, store, e, tl, [&](IExpr q) { return q % store.stages; },
          [&](int ch, std::vector<kir::NodePtr>& out) {
            if (ch != store.chunks - 1) return;
            if (epiEdge) out.push_back(ringE.consumerRelease(k, tl));
            release(out,
                    " (after the tile's last chunk of tcgen05.ld, before its TMA store: the "
                    "MMA warp's next tile overlaps the store)");
          });
      for (auto& n : seq) tiles->body.stmts.push_back(std::move(n));
    }
    eb.stmts.push_back(std::move(tiles));
    if (staged) eb.stmts.push_back(stagedDrain(k, store));  // shared memory outlives the last store's reads
  }
  body.push_back(std::move(wg0));
  body.push_back(makeSync(k, kir::SyncKind::BlockSync,
                          {"teardown tmem", "every role's tensor-memory use", "tcgen05.dealloc", "tmem_slot", "",
                           "block barrier: the epilogue's last loads (fenced before_thread_sync) happen before warp 1 "
                           "frees the tensor memory"}));
  auto dealloc = when(eq(var("warp"), 1));
  dealloc->thenBody.stmts.push_back(tcgenOp(k, kir::SyncKind::TcgenFenceAfter, slot, 0,
                                            {"acquire teardown", "the epilogue's loads", "tcgen05.dealloc", "tmem_slot",
                                             "", "tcgen05.fence::after_thread_sync before the dealloc"}));
  dealloc->thenBody.stmts.push_back(
      tcgenOp(k, kir::SyncKind::TmemDealloc, slot, 0,
              {"free tensor memory", "", "", "tmem_slot", "",
               "tcgen05.dealloc by the allocating warp, the same " + cols + " columns, before the kernel exits"},
              C));
  body.push_back(std::move(dealloc));
  k.body.stmts = std::move(body);  // (sD, made before the head, is allocated there with the other buffers)

  k.tile.mma = MmaKind::Tcgen05;
  k.tile.accStages = a;
  k.tile.tmemCols = C;
  k.tile.inDtypeB = t.b->dtype;  // 8-bit operands may mix e4m3 / e5m2: MmaSm100's B type (the idesc's B format)
  if (t.b->dtype != t.a->dtype) k.name += std::string("_b") + dtypeName(t.b->dtype);
  P.finish("_ws3tc_a" + std::to_string(a), epiEdge ? &ringE : nullptr);
  if (staged) k.name += "_tmas" + std::to_string(store.stages);
  if (grouped) {  // the grouped walk's grid, one CTA per tile of the bound, not num_ctas
    k.launch.gridX = groupedGrid.gridX;
    k.launch.gridY = groupedGrid.gridY;
    k.launch.gridZ = groupedGrid.gridZ;
  }
  std::ostringstream sum;
  sum << "roles: " << loadR.name << " (warp 0) -(" << ring.label << ")-> " << mmaR.name << " (warp 1, tcgen05.mma) -("
      << "accumulator in tensor memory)-> " << epiR.name << " (warps 4-7); ring " << ring.label << ": " << s
      << " stages, released by tcgen05.commit; accumulator ring in tensor memory: " << a << " stage(s) of " << t.bn
      << " columns (" << C << " allocated)";
  if (grouped) sum << "; grouped: one tile per CTA, found by the walk over offs before any init or alloc";
  if (mx)
    sum << "; " << mxf.kind << " scales: the k tile's chunks (" << 512 * mxf.chunks << " bytes of A, "
        << 512 * mxf.chunks * (t.bn / 128)
        << " of B) by TMA into the ring slot, counted in its expect-tx; the MMA thread fences after the full wait, "
           "tcgen05.cp's them into the stage's own "
        << mxf.scaleColumns(t.bn) << " scale columns and issues the " << (mxf.mmas == 4 ? "four" : "two")
        << " block-scaled MMAs before the commit";
  if (staged)
    sum << "; TMA store of D in " << store.chunks << " chunk(s) of " << store.cols << " columns through sD["
        << store.stages << "] (st.shared of 16-byte vectors into the 128-byte swizzle, bar.sync 1; the accumulator "
        << "stage freed after the last chunk's tcgen05.ld, before its store)";
  if (epiEdge)
    sum << "; " << h.epiTma << " ring sE: " << ringE.stages << " stage(s), TMA by role '" << ringE.producer
        << "' (warp " << h.role(PipelineRole::EpiLoad)->firstWarp << ") -> " << epiR.name;
  k.syncPlan.summary = sum.str();
  k.syncPlan.roles = diagram(graph, ring, ringAcc, epiEdge ? &ringE : nullptr);
}

}  // namespace heddle::passes
