// tma_store_epilogue: the two-role cooperative sm_90a kernel with epilogue_store("tma") stages its output
// tile through shared memory and writes it with TMA stores (docs/sync-cases.md case 11), instead of every MMA thread
// storing its fragment to global memory behind a bounds check per element.
//
// The tile is written in column chunks of C = 128 bytes / element size (one 128-byte swizzle box: 64
// bf16 columns), c = 0 .. bn/C-1, through sD[sd] (sd = 2 stages when shared memory holds them, else 1).
// Chunk q = tl * (bn/C) + c of the CTA's walk uses stage q % sd.
//
// Before (warp_specialize, role mma, per tile):
//   ... wgmma.wait_group(0); epilogue store -> D
// After:
//   for c in [0, bn/C):                                       # unrolled: constant fragment columns
//     if (warp 4 elected) bulk.wait_group.read(sd-1)          # WAR sD[q%sd]: the store of chunk q-sd read it
//     bar.sync 2, mma threads                                 # ... before any thread rewrites it
//     epilogue store -> sD[q%sd] (columns [c*C, (c+1)*C))     # stmatrix, pairs of columns
//     fence.proxy.async                                       # each writer: generic -> async proxy
//     bar.sync 2, mma threads                                 # every fenced write before the store
//     if (warp 4 elected) { tma_store sD[q%sd] -> D (m0, n0 + c*C); bulk.commit_group }
//   (after the tile loop) if (warp 4 elected) bulk.wait_group.read(0)   # sD outlives its last store
// The store's bounds clip the ragged edges of D (no per-element check); the TMA-loaded bias ring and
// the ring syncs around the epilogue store stay as they were.
//
// Several outputs (Kernel::extraOutputs: D1, the pre-activation a training backward keeps, at D's index):
// each output i has its own slots sDi (same stages, chunks and 128-byte box; validate_schedule requires
// one element size) and map tmDi; the one epilogue store writes every output's chunk (EpilogueStore::toExtra)
// before the fence and barrier, and the elected thread issues all the chunk's stores in ONE bulk group,
// so the wait_group.read counts above stay per chunk:
//     epilogue store -> sD[q%sd], sD1[q%sd]; fence.proxy.async; bar.sync 2
//     if (warp 4 elected) { tma_store sD[q%sd] -> D; tma_store sD1[q%sd] -> D1; bulk.commit_group }
//
// Ping-pong MMA warpgroups (each owns whole tiles, u-th tile of warpgroup c = (warp-4)/4 is tl = 2u+c):
// each warpgroup stages through its own slots sD[c*sd .. c*sd+sd-1] (q = u * (bn/C) + c counts its own
// chunks), publishes them with its own named barrier (bar.sync 2 + c, 128 threads) and its first thread
// (tid % 128 == 0) issues its stores and owns its bulk group (wait_group counts the issuing thread's
// groups only). The epilogue sits after the warpgroup's `arrive order[1-c]`: its stores overlap the
// other warpgroup's mainloop, and no edge crosses warpgroups (disjoint slots, barriers and groups):
//   for c in [0, bn/C):
//     if (tid % 128 == 0) bulk.wait_group.read(sd-1); bar.sync 2+c, 128
//     epilogue store -> sD[c*sd + q%sd]; fence.proxy.async; bar.sync 2+c, 128
//     if (tid % 128 == 0) { tma_store sD[c*sd + q%sd] -> D; bulk.commit_group }
//   (after the u loop) if (tid % 128 == 0) bulk.wait_group.read(0)
//
// 8-bit outputs (e4m3 / e5m2, docs/fp8.md "FP8 output"): C = 128 one-byte columns, one 128-byte swizzle row, so
// bn is a multiple of 128 (validate_schedule); the writes are 16-bit st.shared of satfinite pairs (no stmatrix
// for 8-bit data on sm_90), fenced and stored like the 16-bit chunks. A computed output scale (Kernel::quant) goes
// through here too: each chunk is one group of 128 (or the row of a 128-wide tile), q staged, s [M, groups]
// stored directly by the lanes owning the row's amax (no sD slot, no map: s is not an extra output).
//
// Runs when: epilogue_store("tma") from the MMA role.
#include "heddle/lower/build/role_pipeline_build.h"

namespace heddle::passes {

using namespace build;

namespace {

struct Found {
  kir::Block* tileBody = nullptr;  // the tile loop's body, holding the epilogue store
  size_t at = 0;
  kir::Block* roleBody = nullptr;  // the block holding the tile loop
  size_t loopAt = 0;
};

// The direct epilogue store of the MMA role (registers -> D) and the blocks around it.
bool findStore(kir::Block& b, Found& f) {
  for (size_t i = 0; i < b.stmts.size(); ++i) {
    auto& n = *b.stmts[i];
    if (n.kind == kir::NodeKind::For) {
      auto& body = static_cast<kir::ForLoop&>(n).body;
      for (size_t j = 0; j < body.stmts.size(); ++j) {
        auto& m = *body.stmts[j];
        if (m.kind != kir::NodeKind::EpilogueStore) continue;
        auto& e = static_cast<kir::EpilogueStore&>(m);
        if (e.from || e.to || e.raw) continue;
        f = {&body, j, &b, i};
        return true;
      }
      if (findStore(body, f)) return true;
    } else if (n.kind == kir::NodeKind::If) {
      auto& x = static_cast<kir::IfThenElse&>(n);
      if (findStore(x.thenBody, f) || findStore(x.elseBody, f)) return true;
    }
  }
  return false;
}

}  // namespace

void tmaStoreEpilogue(LowerContext& c) {
  auto& t = c.tiling;
  auto& h = t.rolePipeline;
  auto& k = c.kernel;
  requireWhen(c, "tma_store_epilogue");
  Found f;
  if (!findStore(k.body, f))
    fail<HeddleError>("tma_store_epilogue: the MMA role of ", k.name, " has no direct epilogue store");
  const bool pp = !h.coop;  // ping-pong: per warpgroup slots, barrier and issuing thread
  const int cols = h.storeCols, chunks = t.bn / cols, sd = h.storeStages;
  const int barThreads = pp ? 128 : 128 * h.mmaWarpgroups;
  const int first = 4, barId = 2;  // the MMA role's first warp; bar.sync 1 is the epilogue role's
  const IExpr wgc = (var("warp") - 4) / 4, local = pp ? var("u") : var("tl");  // the warpgroup's own tile count
  const std::string issuer = pp ? "thread 128 + 128 c (its warpgroup's first)" : "thread 128";
  // the thread issuing the stores and owning their bulk group
  auto elect = [&]() -> std::unique_ptr<kir::IfThenElse> {
    if (!pp) return electOne(first);
    return when(eq(var("tid") % 128, 0));
  };
  // one staging buffer and tensor map per output: sD / tmD for D, sD1 / tmD1 for D1, ...
  auto staging = [&](const std::string& out, DType dtype) {
    auto b = std::make_unique<kir::Buffer>();
    b->name = "s" + out;
    b->role = out;
    b->memory = MemoryType::Shared;
    b->dtype = dtype;
    b->stages = pp ? 2 * sd : sd;  // ping-pong: sd slots per warpgroup
    b->rows = t.bm;
    b->cols = cols;
    b->align = 1024;  // a 128-byte swizzled TMA box
    if (dtypeBytes(dtype) * cols != 128)
      fail<HeddleError>("tma_store_epilogue: output ", out, " of ", k.name, " has ", dtypeBytes(dtype) * cols,
                        "-byte chunk rows, not one 128-byte box (validate_schedule checks the element sizes)");
    kir::Param pd;
    pd.kind = kir::Param::TensorMap;
    pd.name = "tm" + out;
    pd.tensor = out;
    k.params.push_back(pd);
    k.tensorMaps.push_back({pd.name, out, cols, t.bm, 128, t.batched});  // batched: a 3-D map, batch_idx per tile
    return k.addBuffer(std::move(b));
  };
  kir::Buffer* sD = staging("D", k.outDtype);
  // the generic-proxy writes of a chunk: stmatrix for 16-bit outputs; 8-bit ones (a chunk of 128 one-byte columns,
  // one 128-byte swizzle row) are 16-bit st.shared of satfinite pairs (codegen/wgmma_printer.cpp stagedPair8)
  const std::string writes = dtypeBytes(k.outDtype) == 1 ? "st.shared" : "stmatrix";
  std::vector<kir::Buffer*> extra;  // further outputs (training's pre-activation): their own slots, same chunks
  for (auto& o : k.extraOutputs) extra.push_back(staging(o.param, o.dtype));
  std::string names = "sD";
  for (auto* x : extra) names += ", " + x->name;

  // `if (warp 4 elected) cp.async.bulk.wait_group.read(n)`, the WAR edge tma_store reads -> `next`
  auto waitRead = [&](int n, const std::string& next, const std::string& why) {
    auto w = elect();
    const std::string to = next == "the end of the CTA" ? "exit" : "epilogue";
    w->thenBody.stmts.push_back(makeSync(k, kir::SyncKind::BulkWaitRead,
                                         {"WAR sD (tma_store -> " + to + ")", "tma_store reads of sD", next, "sD", "",
                                          "cp.async.bulk.wait_group.read(" + std::to_string(n) + "): " + why},
                                         n));
    return w;
  };
  auto& epi = static_cast<kir::EpilogueStore&>(*f.tileBody->stmts[f.at]);
  auto barrier = [&](Why why) {  // bar.sync 2 over the MMA warpgroups (ping-pong: 2 + c over warpgroup c)
    why.mechanism = "named barrier (" + std::to_string(barThreads) +
                    (pp ? " threads of this warpgroup" : " MMA threads") + "): " + why.mechanism;
    auto b = makeSync(k, kir::SyncKind::NamedBarrier, why, barId);
    b->count = barThreads;
    if (pp) b->index = wgc;
    return b;
  };
  std::vector<kir::NodePtr> seq;
  for (int ch = 0; ch < chunks; ++ch) {
    IExpr q = local * chunks + ch, st = pp ? wgc * sd + q % sd : q % sd;
    const std::string col =
        " (columns " + std::to_string(ch * cols) + ".." + std::to_string(ch * cols + cols - 1) + ")";
    seq.push_back(waitRead(sd - 1, "epilogue writes of sD",
                           "the store of chunk q-" + std::to_string(sd) +
                               " (the last one from this slot) has read sD "
                               "before the barrier lets the MMA threads rewrite it" +
                               col));
    seq.push_back(barrier({"WAR sD (tma_store -> epilogue)", "tma_store reads of sD", "epilogue writes of sD", "sD", "",
                           issuer + "'s wait_group.read happens before every thread's rewrite of the slot" + col}));
    auto st1 = kir::clone(epi, {});
    auto& e = static_cast<kir::EpilogueStore&>(*st1);
    e.to = sD;
    e.toExtra = extra;
    e.toStage = st;
    e.colBegin = ch * cols;
    e.colEnd = ch * cols + cols;
    seq.push_back(std::move(st1));
    seq.push_back(makeSync(
        k, kir::SyncKind::FenceProxyAsync,
        {"RAW " + names + " (" + writes + " -> tma_store)", "epilogue writes of " + names + " (generic proxy)",
         "tma_store reads (async proxy)", "sD", "",
         "fence.proxy.async in every writing thread, before the barrier that orders its writes before the TMA store: "
         "generic-proxy writes (" +
             writes + ") are not visible to the async proxy otherwise" + col}));
    seq.push_back(barrier({"RAW " + names + " (" + writes + " -> tma_store)", "epilogue writes of " + names,
                           "tma_store reads of " + names, "sD", "",
                           "every fenced write of the chunk happens before " + issuer + " issues its TMA store" +
                               (extra.empty() ? "" : "s") + col}));
    auto issue = elect();
    std::vector<kir::Buffer*> srcs{sD};
    srcs.insert(srcs.end(), extra.begin(), extra.end());
    for (auto* src : srcs) {  // every output's chunk, in one bulk group: one wait_group.read retires them all
      auto ts = std::make_unique<kir::TmaStore>();
      ts->src = src;
      ts->stage = st;
      ts->tensorMap = "tm" + src->role;
      ts->row0 = var("m0");
      ts->col0 = var("n0") + ch * cols;
      ts->iter = q;
      issue->thenBody.stmts.push_back(std::move(ts));
    }
    issue->thenBody.stmts.push_back(makeSync(
        k, kir::SyncKind::BulkCommit,
        {"group tma_store " + names, "", "", "sD", "",
         (extra.empty()
              ? "close the bulk group of this chunk's store"
              : "close the one bulk group of this chunk's " + std::to_string(srcs.size()) + " stores (" + names + ")") +
             " so wait_group.read can retire it" + col}));
    seq.push_back(std::move(issue));
  }
  auto& stmts = f.tileBody->stmts;
  stmts.erase(stmts.begin() + f.at);
  stmts.insert(stmts.begin() + f.at, std::make_move_iterator(seq.begin()), std::make_move_iterator(seq.end()));

  // the CTA's shared memory must outlive the reads of its last stores
  f.roleBody->stmts.insert(f.roleBody->stmts.begin() + f.loopAt + 1,
                           waitRead(0, "the end of the CTA",
                                    "after the last tile: the CTA's shared memory stays valid until its last TMA store "
                                    "has read it"));
  // sD is allocated with the other shared buffers at the top of the kernel
  size_t at = 0;
  while (at < k.body.stmts.size() && k.body.stmts[at]->kind == kir::NodeKind::Alloc) ++at;
  k.body.stmts.insert(k.body.stmts.begin() + at, std::make_unique<kir::Alloc>(sD));
  for (size_t i = 0; i < extra.size(); ++i)
    k.body.stmts.insert(k.body.stmts.begin() + at + 1 + i, std::make_unique<kir::Alloc>(extra[i]));
  k.name += "_tmas" + std::to_string(sd);
  std::string through = "sD[" + std::to_string(sd) + "]", what = "D";
  for (size_t i = 0; i < extra.size(); ++i) {
    through += " and " + extra[i]->name + "[" + std::to_string(sd) + "]";
    what += " and " + k.extraOutputs[i].param;
  }
  if (!extra.empty()) through += " (one bulk group per chunk)";
  k.syncPlan.summary +=
      "; TMA store of " + what + " in " + std::to_string(chunks) + " chunk(s) of " + std::to_string(cols) +
      " columns through " + through +
      (pp ? " per warpgroup (" + writes + ", bar.sync 2 + c; overlapping the other warpgroup's mainloop)"
          : " (" + writes + ", bar.sync 2)");
}

}  // namespace heddle::passes
