// The automatic matmul schedule for AMD targets (autoScheduleMatmul dispatches here for targets
// with MFMA or WMMA). Same operations as a user's schedule, so it is validated the same way.
//
//   CDNA (gfx90a, gfx942; wave64, MFMA 16x16x16): 128x128x32 tile, 2x2 wavefronts (256 threads),
//     operands cached with LDS DMA (async_lds) in a 3-stage ring, 2 stages in flight: 48 KiB of
//     the 64 KiB LDS. Skinny M (<= 64): 64x128, 1x4 wavefronts.
//   GFX12 (gfx1200; wave32, WMMA 16x16x16, no LDS DMA): 128x128x32 tile, 2x4 waves (256 threads),
//     plain (register-staged) copies in a 3-stage LDS ring with prefetch 1 (48 KiB): the barrier
//     then sits between the next stage's copies and this stage's MMA, which reads a stage the
//     previous barrier published, so the split barrier's wait moves below the MMA and the WMMAs
//     issue between s_barrier_signal and s_barrier_wait (split_barriers.cpp). With prefetch 2 the
//     barrier has to follow the MMA (its reads are the WAR producers) and nothing fits between.
// A K that covers fewer k-tiles than the ring has stages shrinks the ring (at least 2 stages), as
// on CUDA; caches the user made already are kept with their load kind.
#include <algorithm>

#include "heddle/schedule/schedule.h"

namespace heddle {

void autoScheduleMatmulMfmaWmma(Fusion& f, const TargetInfo& target, const AutoScheduleHints& given) {
  auto* mm = f.findMatmul();
  if (!mm) fail<ScheduleError>("auto schedule: this fusion has no matmul");
  const bool cdna = target.mma.has(MmaKind::Mfma);
  int bm = 128, bn = 128, bk = 32, wm = 2, wn = cdna ? 2 : 4, stages = 3;
  AutoScheduleHints hints = given;
  auto* e = mm->definition;
  {
    auto* a = e->inputs[0];
    int r = a->rank();
    const Size& K = e->transA ? a->shape[r - 2] : a->shape[r - 1];
    const Size& M = mm->shape[mm->rank() - 2];
    if (hints.k < 0 && !K.isSymbolic()) hints.k = K.value;
    if (hints.m < 0 && !M.isSymbolic()) hints.m = M.value;
  }
  if (hints.m >= 0 && hints.m <= 64) {  // skinny M: one wavefront row, four across n
    bm = 64;
    wm = 1;
    wn = 4;
  }
  LoadKind kind = target.asyncLds ? LoadKind::AsyncLds : LoadKind::Plain;
  auto existing = f.cachesOf(e->inputs[0]);
  if (!existing.empty()) kind = existing[0]->loadKind;
  if (kind == LoadKind::Plain && cdna) bm = 64;  // register-staged copies: a smaller accumulator tile
  if (hints.k >= 0 && hints.k < (int64_t)bk * stages) stages = std::max<int>(2, (int)((hints.k + bk - 1) / bk));
  warpTiledNest(f, mm, bm, bn, bk, wm, wn);
  for (auto* in : {e->inputs[0], e->inputs[1]}) {
    auto caches = f.cachesOf(in);
    TensorView* c = caches.empty() ? f.cacheAfter(in, kind) : caches[0];
    const int prefetch = target.splitBarrier && stages >= 3 ? stages - 2 : -1;
    if (hints.k < 0 || (hints.k + bk - 1) / bk >= stages) circularBuffer(c, stages, prefetch);
  }
}

}  // namespace heddle
