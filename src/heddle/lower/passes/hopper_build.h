// Building blocks of the Hopper lowering shared by warp_specialize.cpp and tma_pipeline.cpp: mbarrier
// buffers, sync nodes that carry their reason into the SyncPlan, and the mbarrier ring -- the one
// mechanism every producer -> consumer edge through a circular buffer uses (docs/sync-cases.md cases 8, 10, 12).
//
// Ring of s stages, prefetch p (the consumer's item i releases the slot of item i + p + 1 - s),
// `keep` = s - p - 1 wgmma groups left in flight by an asynchronous consumer:
//   full[s]   count fullCount (1 for a TMA producer: arrive.expect_tx + complete_tx; the producing
//             threads for a generic producer)
//   empty[s]  count emptyCount (the consuming threads)
//   producer, item j:  wait empty[j % s] parity (j / s) % 2      (WAR; passes at once for j < p+1:
//                      the consumers pre-arrived on stages [0, p+1))
//                      arrive.expect_tx full[j % s] bytes; TMA ...      or   writes; arrive full[j % s]
//   consumer, item i:  wait full[i % s] parity (i / s) % 2       (RAW)
//                      read (wgmma: commit, wait_group(keep)); arrive empty[(i + p + 1) % s]
// Phase q of empty[st] completes with the consumers' arrivals for item st - p - 1 + q*s (the
// pre-arrive for q = 0 when st < p + 1), which is what the producer of item st + q*s needs: the
// reads of item st + (q-1)*s are retired, because that item is older than i - keep.
#pragma once

#include <string>

#include "heddle/lower/lower.h"

namespace heddle::passes::hopper {

using kir::IExpr;

inline IExpr var(const char* n) { return IExpr::var(n); }

struct Why {
  std::string hazards;    // "RAW sA, sB (tma -> wgmma)"
  std::string producer, consumer, buffer, stage;
  std::string mechanism;  // why this op and argument
};

// An array of `count` mbarriers (8 bytes each) in shared memory.
kir::Buffer* addMbarriers(kir::Kernel& k, const std::string& name, int count);

// A sync op with its reason registered in k.syncPlan (renumbered in program order at the end).
std::unique_ptr<kir::Sync> makeSync(kir::Kernel& k, kir::SyncKind kind, const Why& why, int arg = 0);
std::unique_ptr<kir::Sync> makeMbar(kir::Kernel& k, kir::SyncKind kind, kir::Buffer* bar, IExpr index,
                                    const Why& why, int arg = 0, IExpr parity = 0);

// setmaxnreg for role `r` (nullptr when it sets no budget): .inc when its budget reaches the entry cap of a
// block of `threads` (__launch_bounds__(threads, 1)), else .dec; its reason names both.
std::unique_ptr<kir::Sync> setMaxNReg(kir::Kernel& k, const HopperRole& r, int threads);

struct Ring {
  std::string label;                 // "sA, sB" for messages
  kir::Buffer *full = nullptr, *empty = nullptr;
  int stages = 2, prefetch = 1, keep = 0;
  int fullCount = 1, emptyCount = 1;
  int txBytes = 0;                   // > 0: TMA producer
  std::string producer, consumer;    // role names for reasons

  // init every barrier of the ring (one thread), with counts
  void init(kir::Kernel& k, kir::Block& b) const;
  std::unique_ptr<kir::Sync> producerWait(kir::Kernel& k, IExpr j) const;
  std::unique_ptr<kir::Sync> producerExpectTx(kir::Kernel& k, IExpr j) const;
  std::unique_ptr<kir::Sync> producerArrive(kir::Kernel& k, IExpr j) const;
  std::unique_ptr<kir::Sync> consumerWait(kir::Kernel& k, IExpr i) const;
  std::unique_ptr<kir::Sync> consumerRelease(kir::Kernel& k, IExpr i) const;
  // for st in [0, p+1): arrive empty[st]   (the consumers, before their loop)
  void preArrive(kir::Kernel& k, kir::Block& b, const std::string& loopVar) const;
};

// `if (tid == 32 * warp) { ... }`: one thread issues, the lowest lane of `warp`, marked as elected
// (printed with elect.sync where the target has it, kir::IfThenElse::electWarp).
std::unique_ptr<kir::IfThenElse> electOne(int warp);

// `for (v = lo; v < hi; ++v) {}` (a serial loop) and `if (cond) {}`.
std::unique_ptr<kir::ForLoop> forLoop(const std::string& v, IExpr lo, IExpr hi);
std::unique_ptr<kir::IfThenElse> when(IExpr cond);

// let tile, m0, n0 for this CTA's local tile index `tl` of the persistent walk (blockIdx.x + tl *
// num_ctas, in the grouped order: groupM m-tiles share an n tile). Batched: tile -> (batch_idx = tile /
// tiles per matrix, mtile = the rest), m0 and n0 from mtile: the walk covers batch x m-tiles x n-tiles.
void persistentTileLets(kir::Block& b, const MatmulTiling& t, IExpr tl);
// The tiles the persistent walk covers: ceil(M/bm) * ceil(N/bn) (times the run-time `batch` when batched).
IExpr persistentTileCount(const MatmulTiling& t);

// The TMA producer role of a persistent warp-specialized matmul: one elected thread of `warp` walks this
// CTA's tiles, and for item g = tl * nk + kt waits the ring's empty[g%s], arrive.expect_tx full[g%s] and
// issues clones of `loads` into slot g % s completing on full[g%s].
std::unique_ptr<kir::IfThenElse> tmaProducerRole(kir::Kernel& k, const MatmulTiling& t, const Ring& ring,
                                                 const std::vector<kir::TileLoad*>& loads, int warp, IExpr tilesCta,
                                                 IExpr nk);

// Renumbers the sync reasons in program order, sets the plan summary and marks the kernel as
// planned (insert_syncs then leaves it alone).
void finishPlan(kir::Kernel& k, const std::string& summary);

// Appends `n` at the end of block `b` and returns it.
template <typename T>
T* append(kir::Block& b, std::unique_ptr<T> n) {
  T* p = n.get();
  b.stmts.push_back(std::move(n));
  return p;
}

}  // namespace heddle::passes::hopper
