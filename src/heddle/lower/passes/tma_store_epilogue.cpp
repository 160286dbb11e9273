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
// Runs when: epilogue_store("tma") from the MMA role. The chunks are lower/build/staged_store.h's, shared
// with the sm_100a tcgen05 epilogue warpgroup (passes/tcgen05_specialize.cpp).
#include "heddle/lower/build/staged_store.h"

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
  const int sd = h.storeStages;
  const int first = 4;  // the MMA role's first warp; bar.sync 1 is the epilogue role's
  const IExpr wgc = (var("warp") - 4) / 4, local = pp ? var("u") : var("tl");  // the warpgroup's own tile count
  StagedStore s = stagingBuffers(k, t, h.storeCols, pp ? 2 * sd : sd);         // ping-pong: sd slots per warpgroup
  s.stages = sd;
  // the generic-proxy writes of a chunk: stmatrix for 16-bit outputs; 8-bit ones (a chunk of 128 one-byte columns,
  // one 128-byte swizzle row) are 16-bit st.shared of satfinite pairs (codegen/wgmma_printer.cpp stagedPair8)
  s.writes = dtypeBytes(k.outDtype) == 1 ? "st.shared" : "stmatrix";
  s.barId = 2;
  s.barThreads = pp ? 128 : 128 * h.mmaWarpgroups;
  if (pp) s.barIndex = wgc;
  s.barWho = pp ? " threads of this warpgroup" : " MMA threads";
  s.writers = "the MMA threads";
  s.issuer = pp ? "thread 128 + 128 c (its warpgroup's first)" : "thread 128";
  s.elect = [&]() -> std::unique_ptr<kir::IfThenElse> {  // the thread issuing the stores and owning their groups
    if (!pp) return electOne(first);
    return when(eq(var("tid") % 128, 0));
  };
  auto& epi = static_cast<kir::EpilogueStore&>(*f.tileBody->stmts[f.at]);
  std::vector<kir::NodePtr> seq =
      stagedChunks(k, s, epi, local, [&](IExpr q) { return pp ? wgc * sd + q % sd : q % sd; });
  auto& stmts = f.tileBody->stmts;
  stmts.erase(stmts.begin() + f.at);
  stmts.insert(stmts.begin() + f.at, std::make_move_iterator(seq.begin()), std::make_move_iterator(seq.end()));

  // the CTA's shared memory must outlive the reads of its last stores
  f.roleBody->stmts.insert(f.roleBody->stmts.begin() + f.loopAt + 1, stagedDrain(k, s));
  allocStaging(k, s);  // sD is allocated with the other shared buffers at the top of the kernel
  k.name += "_tmas" + std::to_string(sd);
  const auto& extra = s.extra;
  const int chunks = s.chunks, cols = s.cols;
  std::string through = "sD[" + std::to_string(sd) + "]", what = "D";
  for (size_t i = 0; i < extra.size(); ++i) {
    through += " and " + extra[i]->name + "[" + std::to_string(sd) + "]";
    what += " and " + k.extraOutputs[i].param;
  }
  if (!extra.empty()) through += " (one bulk group per chunk)";
  k.syncPlan.summary +=
      "; TMA store of " + what + " in " + std::to_string(chunks) + " chunk(s) of " + std::to_string(cols) +
      " columns through " + through +
      (pp ? " per warpgroup (" + s.writes + ", bar.sync 2 + c; overlapping the other warpgroup's mainloop)"
          : " (" + s.writes + ", bar.sync 2)");
}

}  // namespace heddle::passes
