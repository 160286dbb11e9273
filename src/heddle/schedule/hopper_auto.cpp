// The automatic Hopper schedule (heddle.matmul on sm_90a when the operands allow TMA): applied
// through the same scheduling operations a user calls, so validate checks it like any other.
//
//   tile         128 x 128 x 64, two MMA warpgroups splitting it (cooperative); 128 x 256 x 64 when
//                N >= 256 and M > 128; 64 x 128 x 64 with one warpgroup for M <= 64 (decode shapes)
//   ring         4 stages (fewer when shared memory would not hold them), prefetch stages-2: one
//                wgmma group stays in flight while the next k-tile's data is awaited
//   roles        {load: 1 warp, 40 registers; mma: 2 warpgroups, 232 registers} -- the load
//                warpgroup gives registers to the MMA warpgroups (setmaxnreg). One MMA warpgroup
//                (256 threads) leaves every thread 255 registers, so no budgets are set.
//   persistent   one CTA per SM walks the tiles in groups of 8 m-tiles (warp_specialize)
//   epilogue     two MMA warpgroups with N known and 16-byte output rows (one output): epilogue_store("tma")
//                -- stmatrix into shared chunks, TMA stores (passes/tma_store_epilogue.cpp)
//   batched      the TMA pipeline without roles (batched kernels are not warp-specialized yet)
//   k sharing    with M, N, K and the SM count known (heddle.matmul's M buckets) and tiles not filling the
//                SMs: the cost model of k_share.cpp (k_share= overrides it) picks split_k(autoSplitK(...)) on
//                the TMA pipeline without roles, or stream_k(SMs) on the warp-specialized kernel
// Operands TMA cannot take (hints.tma = false: a row stride or base not 16-byte aligned) get the
// cp.async schedule instead (python/heddle/pytorch/matmul.py decides, heddle.tma checks).
#include <algorithm>

#include "heddle/schedule/schedule.h"

namespace heddle {

int autoSplitK(int64_t tiles, int64_t nk, int stages, int sms) {
  if (tiles <= 0 || nk <= 0 || sms <= 0 || 2 * tiles > sms) return 1;
  int64_t s = std::min<int64_t>({sms / tiles, nk / std::max(4, stages), kMaxSplitK});
  return s >= 2 ? (int)s : 1;
}

void autoScheduleMatmulHopper(Fusion& f, const TargetInfo& target, const AutoScheduleHints& given) {
  auto* mm = f.findMatmul();
  auto* e = mm->definition;
  AutoScheduleHints hints = given;
  {
    auto* a = e->inputs[0];
    int r = a->rank();
    const Size& K = e->transA ? a->shape[r - 2] : a->shape[r - 1];
    const Size& M = mm->shape[mm->rank() - 2];
    const Size& N = mm->shape[mm->rank() - 1];
    if (hints.k < 0 && !K.isSymbolic()) hints.k = K.value;
    if (hints.m < 0 && !M.isSymbolic()) hints.m = M.value;
    if (hints.n < 0 && !N.isSymbolic()) hints.n = N.value;
  }
  const bool batched = mm->rank() == 3;
  int bm = 128, bn = 128, bk = 64, wgs = 2;
  if (hints.m >= 0 && hints.m <= 64) {
    bm = 64;
    wgs = 1;
  }
  if (hints.n >= 256 && bm == 128 && !(hints.m >= 0 && hints.m <= 128)) bn = 256;
  int stages = 4;
  auto fits = [&](int s) { return (int64_t)s * (bm * bk + bk * bn) * 2 + 4096 <= target.smemLimit; };
  while (stages > 2 && !fits(stages)) --stages;
  const int64_t nk = hints.k >= 0 ? (hints.k + bk - 1) / bk : -1;
  if (batched && nk >= 0 && nk < stages) {  // the pipeline without roles needs stages <= k-tiles
    while (bk > 16 && (hints.k + bk - 1) / bk < 2) bk /= 2;
    const int64_t n2 = (hints.k + bk - 1) / bk;
    if (n2 < 2) {  // one k-tile: nothing to pipeline, use the cp.async schedule
      AutoScheduleHints h = given;
      h.tma = false;
      return autoScheduleMatmul(f, target, h);
    }
    stages = (int)std::min<int64_t>(stages, n2);
  }
  initLoopDomain(f, mm);
  split(mm, "m", bm);
  split(mm, "n", bn);
  split(mm, "k", bk);
  split(mm, "m.i", bm / (4 * wgs));  // 16-row warp slices: 4 warps per warpgroup
  if (batched) parallelize(mm, "b", ParallelType::BIDz);
  parallelize(mm, "m.o", ParallelType::BIDy);
  parallelize(mm, "n.o", ParallelType::BIDx);
  parallelize(mm, "m.i.o", ParallelType::Warp);
  std::vector<std::string> order = {"m.o", "n.o", "k.o", "m.i.o", "m.i.i", "n.i", "k.i"};
  if (batched) order.insert(order.begin(), "b");
  reorder(mm, order);
  const int prefetch = batched || stages < 3 ? stages - 1 : stages - 2;
  for (auto* in : {e->inputs[0], e->inputs[1]}) {
    auto caches = f.cachesOf(in);
    TensorView* c = caches.empty() ? f.cacheAfter(in, LoadKind::TmaLoad) : caches[0];
    circularBuffer(c, stages, prefetch);
  }
  // k sharing when the tiles leave SMs idle (M, N, K and the SM count known): the cost model of the cp.async
  // schedule (k_share.cpp), k_share overriding it; split-K on the TMA pipeline without roles, stream-K on the
  // warp-specialized kernel
  KShareChoice ks;
  if (!batched && hints.m > 0 && hints.n > 0 && nk > 0 && kShareOk(target))
    ks = chooseKShare(((hints.m + bm - 1) / bm) * ((hints.n + bn - 1) / bn), nk, stages, hints.sms, bm, bn, bk,
                      streamKOk(target), hints.kShare);
  else
    chooseKShare(0, 0, stages, 0, bm, bn, bk, false, hints.kShare);  // k_share's spelling checked all the same
  if (ks.splits > 1) {
    splitK(mm, ks.splits);  // the TMA pipeline without roles, one CTA per (tile, split)
  } else if (!batched) {
    Role load{"load", 1, wgs == 2 ? 40 : 0}, mma{"mma", 4 * wgs, wgs == 2 ? 232 : 0};
    warpSpecialize(mm, {load, mma});
    if (ks.streamCtas > 0) streamK(mm, ks.streamCtas);  // both roles walk the CTA's (tile, k-range) segments
    // the TMA-store epilogue where the output is TMA-able: N known, rows a multiple of 16 bytes, one output
    const auto& outs = f.outputs();
    if (wgs == 2 && hints.n > 0 && outs.size() == 1 && hints.n * dtypeBytes(outs[0]->dtype) % 16 == 0)
      epilogueStore(mm, "tma");
  }
}

}  // namespace heddle
