// Building blocks of the role-pipeline lowering (warp-specialized wgmma and tcgen05 kernels, the TMA
// pipeline without roles) shared by the passes that build them: setmaxnreg per role, elected issue,
// loops, the persistent grouped tile walk and the TMA producer role. Not a pass. The mbarrier ring and the
// sync-plan entries of syncs placed by construction are heddle::sync's (sync/ring.h), re-exported here
// for these builders.
#pragma once

#include <string>

#include "heddle/lower/lower.h"
#include "heddle/sync/ring.h"

namespace heddle::passes::build {

using heddle::sync::addMbarriers;
using heddle::sync::finishPlan;
using heddle::sync::makeMbar;
using heddle::sync::makeSync;
using heddle::sync::Ring;
using heddle::sync::RingSpec;
using heddle::sync::Why;
using kir::IExpr;

inline IExpr var(const char* n) { return IExpr::var(n); }

// setmaxnreg for role `r` (nullptr when it sets no budget): .inc when its budget reaches the entry cap of a
// block of `threads` (__launch_bounds__(threads, 1)), else .dec; its reason names both.
std::unique_ptr<kir::Sync> setMaxNReg(kir::Kernel& k, const PipelineRole& r, int threads);

// `if (tid == 32 * warp) { ... }`: one thread issues, the lowest lane of `warp`, marked as elected
// (printed with elect.sync where the target has it, kir::IfThenElse::electWarp).
std::unique_ptr<kir::IfThenElse> electOne(int warp);

// `for (v = lo; v < hi; ++v) {}` (a serial loop) and `if (cond) {}`.
std::unique_ptr<kir::ForLoop> forLoop(const std::string& v, IExpr lo, IExpr hi);
std::unique_ptr<kir::IfThenElse> when(IExpr cond);

// let tile, m0, n0 for this CTA's local tile index `tl` of the persistent walk (blockIdx.x + tl *
// num_ctas, in the grouped order: groupM m-tiles share an n tile). Batched: tile -> (batch_idx = tile /
// tiles per matrix, mtile = the rest), m0 and n0 from mtile: the walk covers batch x m-tiles x n-tiles.
// Grouped (MatmulTiling::grouped): none, the CTA's one tile is the grouped walk's (build/grouped_walk.h).
void persistentTileLets(kir::Block& b, const MatmulTiling& t, IExpr tl);
// The tiles the persistent walk covers: ceil(M/bm) * ceil(N/bn) (times the run-time `batch` when batched).
IExpr persistentTileCount(const MatmulTiling& t);

// The TMA producer role of a persistent warp-specialized matmul: one elected thread of `warp` walks this
// CTA's tiles, and for item g = tl * nk + kt waits the ring's empty[g%s], arrive.expect_tx full[g%s] and
// issues clones of `loads` into slot g % s completing on full[g%s].
std::unique_ptr<kir::IfThenElse> tmaProducerRole(kir::Kernel& k, const MatmulTiling& t, const Ring& ring,
                                                 const std::vector<kir::TileLoad*>& loads, int warp, IExpr tilesCta,
                                                 IExpr nk);

// The serial k loop's TMA load of operand A (build_matmul_loops, before the roles): the load, the loop body
// holding it and its index there; a HeddleError naming `pass` where there is none. The block-scale passes insert
// their scale loads after it (passes/block_scale_ring.cpp, passes/mx_scale_ring.cpp).
struct OperandLoad {
  kir::Buffer* sA = nullptr;
  kir::TileLoad* load = nullptr;
  kir::Block* loop = nullptr;
  size_t at = 0;
};
OperandLoad tmaLoadOfA(kir::Kernel& k, const char* pass);

// Appends `n` at the end of block `b` and returns it.
template <typename T>
T* append(kir::Block& b, std::unique_ptr<T> n) {
  T* p = n.get();
  b.stmts.push_back(std::move(n));
  return p;
}

}  // namespace heddle::passes::build
