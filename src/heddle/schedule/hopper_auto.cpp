// The automatic Hopper schedule (heddle.matmul on sm_90a when the operands allow TMA): applied
// through the same scheduling operations a user calls, so validate checks it like any other.
//
//   tile         128 x 128 x 64, two MMA warpgroups splitting it (cooperative); 128 x 256 x 64 when
//                N >= 256 and M > 128; 64 x 128 x 64 with one warpgroup for M <= 64 (decode shapes)
//   ring         4 stages (fewer when shared memory would not hold them), prefetch stages-2: one
//                wgmma group stays in flight while the next k-tile's data is awaited
//   fit          fitAutoTile (shared with sm_100a): beside the operand stages it counts the TMA-store
//                epilogue's staging chunk sD (bm x 128 bytes) and the ring of a bias / residual the user
//                cached with tma_load; n falls from 256 to 128 (to 64) where two stages would not fit
//                (a cached 4096-wide bf16 residual: 128 x 128 x 64 with 4 stages)
//   roles        {load: 1 warp, 40 registers; mma: 2 warpgroups, 232 registers} -- the load
//                warpgroup gives registers to the MMA warpgroups (setmaxnreg). One MMA warpgroup
//                (256 threads) leaves every thread 255 registers, so no budgets are set.
//   persistent   one CTA per SM walks the tiles in groups of 8 m-tiles (warp_specialize)
//   epilogue     two MMA warpgroups with N known and 16-byte output rows (one output): epilogue_store("tma")
//                -- stmatrix into shared chunks, TMA stores (passes/tma_store_epilogue.cpp)
//   batched      the TMA pipeline without roles (batched kernels are not warp-specialized yet)
//   split-K      with M, N, K and the SM count known (heddle.matmul's M buckets) and tiles filling less
//                than half the SMs: split_k(autoSplitK(...)) on the TMA pipeline without roles -- not with a
//                cached bias / residual, whose producer role needs the warp-specialized kernel
// Operands TMA cannot take (hints.tma = false: a row stride or base not 16-byte aligned) get the
// cp.async schedule instead (python/heddle/pytorch/matmul.py decides, heddle.tma checks).
#include <algorithm>

#include "heddle/schedule/schedule.h"

namespace heddle {

std::vector<TensorView*> cachedEpilogueOperands(const Fusion& f) {
  auto* e = f.findMatmul()->definition;
  std::vector<TensorView*> out;
  for (auto* in : f.inputs()) {
    auto caches = f.cachesOf(in);
    if (in != e->inputs[0] && in != e->inputs[1] && !caches.empty() && caches[0]->loadKind == LoadKind::TmaLoad)
      out.push_back(in);
  }
  return out;
}

AutoTileFit fitAutoTile(const Fusion& f, const TargetInfo& target, int bm, int bk, int widest, int maxStages,
                        int64_t epilogueBytes) {
  const auto epi = cachedEpilogueOperands(f);
  auto ringStages = [&](TensorView* in) {
    const auto& c = f.cachesOf(in)[0]->circular;
    return c.enabled() ? c.stages : 2;  // validateEpilogueTma's default
  };
  auto bytes = [&](int stages, int bn) {
    int64_t b = (int64_t)stages * (bm * bk + bk * bn) * 2 + epilogueBytes + 4096;  // + mbarriers, alignment
    for (auto* in : epi) b += (int64_t)ringStages(in) * (in->rank() == 2 ? bm : 1) * bn * dtypeBytes(in->dtype);
    return b;
  };
  AutoTileFit fit;
  for (int bn = widest; bn >= 64 && !fit.bn; bn /= 2)
    if (bytes(2, bn) <= target.smemLimit) fit.bn = bn;
  if (!fit.bn) {
    std::string rings, names;
    for (auto* in : epi) {
      const std::string sep = rings.empty() ? "" : ", ";
      rings += sep + in->name + " (cache " + f.cachesOf(in)[0]->name + ", " + std::to_string(ringStages(in)) +
               " stages of its " + (in->rank() == 2 ? "[" + std::to_string(bm) + ", 64] tile" : "[64] slice") + ")";
      names += sep + in->name;
    }
    fail<ScheduleError>("auto schedule: on ", target.name, " even a ", bm, "x64x", bk, " tile with two operand stages ",
                        "and the ring of ", rings, " needs ", bytes(2, 64), " bytes of shared memory but a block has ",
                        target.smemLimit, "; lower that ring's stages (circular_buffer) or drop cache_after(", names,
                        ") to read it from global memory");
  }
  fit.stages = maxStages;
  while (fit.stages > 2 && bytes(fit.stages, fit.bn) > target.smemLimit) --fit.stages;
  return fit;
}

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
  // the TMA-store epilogue's sD: one 128-byte-wide chunk of the tile's rows (validateEpilogueStore gives it a
  // second where that fits), kept for every tile so that epilogue_store('tma') after this schedule fits too
  const auto fit = fitAutoTile(f, target, bm, bk, bn, 4, (int64_t)bm * 128);
  bn = fit.bn;
  int stages = fit.stages;
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
  int splits = 1;
  chooseKShare(0, 0, stages, 0, bm, bn, bk, false, hints.kShare);  // k_share's spelling checked here too
  // k_share: "auto" and "split_k" take autoSplitK's S; "none" keeps one CTA per tile, and "stream_k" (not
  // built for the TMA kernels) falls back to that as well
  const bool roles = !cachedEpilogueOperands(f).empty();  // a cached bias / residual needs its producer role
  if (!batched && !roles && hints.m > 0 && hints.n > 0 && nk > 0 &&
      (hints.kShare == "auto" || hints.kShare == "split_k"))
    splits = autoSplitK(((hints.m + bm - 1) / bm) * ((hints.n + bn - 1) / bn), nk, stages, hints.sms);
  if (splits > 1) {
    splitK(mm, splits);  // the TMA pipeline without roles, one CTA per (tile, split)
  } else if (!batched) {
    Role load{"load", 1, wgs == 2 ? 40 : 0}, mma{"mma", 4 * wgs, wgs == 2 ? 232 : 0};
    warpSpecialize(mm, {load, mma});
    // the TMA-store epilogue where the output is TMA-able: N known, rows a multiple of 16 bytes, one output
    const auto& outs = f.outputs();
    if (wgs == 2 && hints.n > 0 && outs.size() == 1 && hints.n * dtypeBytes(outs[0]->dtype) % 16 == 0)
      epilogueStore(mm, "tma");
  }
}

}  // namespace heddle
