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
//   registers    the epilogue budget (epilogue_layout.h epilogueFits): beside its accumulators and ~40 registers
//                of epilogue state, an MMA thread holds the bias / residual values of one 128-byte output chunk
//                (counted per dtype and read width); "auto" leaves ping-pong (128 accumulators) for cooperative
//                and 128 x 256 for 128 x 128 where they do not fit in 232 -- an f32 residual with a 16-bit output
//                (NVRTC: the ping-pong kernel spilled 4-16 bytes), a residual read by scalar loads
//   persistent   one CTA per SM walks the tiles in groups of 8 m-tiles (warp_specialize)
//   epilogue     layout (schedule/epilogue_layout.h, hints.epilogueLayout): a fused epilogue (bias,
//                residual, activation) gets ping-pong MMA warpgroups (one warpgroup per 128 x 128 tile,
//                tiles alternating: one's epilogue overlaps the other's mainloop); a plain store the
//                cooperative pair (as does M <= 64: one 64-row tile, nothing to alternate); "pingpong" and
//                "epilogue_role" (an epilogue warpgroup behind an accumulator ring) by hand.
//                With N known and 16-byte output rows: epilogue_store("tma") -- stmatrix into shared
//                chunks, TMA stores (passes/tma_store_epilogue.cpp), for every layout and for one MMA
//                warpgroup (M <= 64) too; several outputs of one element size (training's pre-activation)
//                each stage their own chunk (the fit counts bm x 128 bytes per output)
//   batched      the same warp-specialized kernel (cooperative: "auto" keeps batched kernels off the
//                ping-pong and epilogue-role layouts), its persistent walk over batch x m-tiles x n-tiles (the
//                batch axis bound to BIDz becomes the walk's outer coordinate); no split-K
//   k sharing    with M, N, K and the SM count known (heddle.matmul's M buckets) and tiles not filling the
//                SMs: the cost model of k_share.cpp (k_share= overrides it) picks split_k(autoSplitK(...)) on
//                the TMA pipeline without roles, or stream_k(SMs) on the warp-specialized kernel
//                (cooperative: it takes precedence over the overlapped layouts) -- neither with a cached bias /
//                residual, whose producer role needs the warp-specialized kernel and which stream-K does not take
//   grouped      a grouped matmul (docs/grouped.md): 128 x 128 x 64, 4 stages (fitAutoTile), the cooperative pair
//                of MMA warpgroups under the same budgets, one tile per CTA of the grouped walk's grid, the
//                epilogue stored directly from registers with the group-end predicate (no TMA store, no k
//                sharing: autoScheduleGroupedWgmma)
//   block scales a block-scaled matmul (schedule/block_scales.cpp) takes the cooperative warp-specialized kernel
//                with bn = 64 (acc and the promotion's tmp: 32 + 32 accumulators per MMA thread; 64 + 64, bn = 128,
//                compiles without spills too but has not been timed: the GPU window's fp8_block_variants suite
//                times it) and no k sharing (each CTA's k loop starts at a promotion interval)
// Operands TMA cannot take (hints.tma = false: a row stride or base not 16-byte aligned) get the
// cp.async schedule instead (python/heddle/pytorch/matmul.py decides, heddle.tma checks).
#include <algorithm>

#include "heddle/schedule/epilogue_layout.h"
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
  const int64_t elem = dtypeBytes(f.findMatmul()->definition->inputs[0]->dtype);  // 1: e4m3 / e5m2
  auto ringStages = [&](TensorView* in) {
    const auto& c = f.cachesOf(in)[0]->circular;
    return c.enabled() ? c.stages : 2;  // validateEpilogueTma's default
  };
  auto bytes = [&](int stages, int bn) {
    int64_t b = (int64_t)stages * (bm * bk + bk * bn) * elem + epilogueBytes + 4096;  // + mbarriers, alignment
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

namespace {
constexpr int kMmaRegisters = 232;  // the MMA role's setmaxnreg budget (the load warpgroup keeps 40)
}  // namespace

void autoScheduleMatmulWgmma(Fusion& f, const TargetInfo& target, const AutoScheduleHints& given) {
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
  const std::string layout = chooseEpilogueLayout(f, hints.epilogueLayout, hints.epiPairs);  // spelling checked too
  const auto& outs = f.outputs();
  const int outBytes = outs.empty() ? 2 : dtypeBytes(outs[0]->dtype);
  // the outputs take TMA: N known, 16-byte rows, and (several outputs: training's pre-activation) one element
  // size, each output staged in chunks of its own (passes/tma_store_epilogue.cpp)
  bool sameSize = true;
  for (auto* o : outs) sameSize &= dtypeBytes(o->dtype) == outBytes;
  // (8-bit outputs: stored directly, the TMA-store epilogue stages 16-bit or f32 chunks)
  const bool tmaAble = hints.n > 0 && !outs.empty() && sameSize && outBytes > 1 && hints.n * outBytes % 16 == 0;
  const int64_t nOut = std::max<int64_t>(1, (int64_t)outs.size());
  // "auto" leaves decode-sized M (one 64-row tile per n column: nothing to alternate) on one warpgroup
  const bool smallM = hints.m >= 0 && hints.m <= 64;
  // the epilogue budget (epilogue_layout.h epilogueFits): a ping-pong warpgroup holds a whole 128 x 128 tile's
  // 128 accumulators in kMmaRegisters, beside a chunk's operands -- "auto" takes the cooperative layout where
  // they do not fit (an f32 residual with 16-bit outputs, or a residual read by scalar loads: ptxas spilled)
  const bool autoLayout = hints.epilogueLayout == "auto";
  const bool ppFits = epilogueFits(f, 128, 128, kMmaRegisters, outBytes, hints.epiPairs);
  // block scales: the cooperative layout only (block_scales.cpp refuses the epilogue role; a ping-pong warpgroup's
  // 64 x 128 share of a tile would hold twice 64 accumulators per thread)
  const bool blockScaled = e->scaleKind != ScaleKind::None;
  const bool pp =
      !batched && !blockScaled && layout == "pingpong" && !(smallM && autoLayout) && (ppFits || !autoLayout);
  const bool er = !batched && !blockScaled && layout == "epilogue_role";
  if (batched && hints.epilogueLayout != "auto" && layout != "cooperative")
    fail<ScheduleError>("auto schedule: epilogue_layout = '", layout,
                        "' is not built into the automatic schedule of a "
                        "batched matmul (it takes cooperative MMA warpgroups); use 'auto' or 'cooperative', or "
                        "schedule warp_specialize by hand");
  if (blockScaled && !autoLayout && layout != "cooperative")
    fail<ScheduleError>("auto schedule: epilogue_layout = '", layout, "' is not built with block scales (", mm->name,
                        " is block-scaled: the promotion runs in cooperative MMA warpgroups); use 'auto' "
                        "or 'cooperative'");
  if (er && !tmaAble)
    fail<ScheduleError>(
        "auto schedule: epilogue_layout = 'epilogue_role' stores the tile by TMA, which needs N "
        "known and 16-byte output rows (N = ",
        hints.n, ", ", outs.size(),
        " output(s)); "
        "use 'pingpong' or 'cooperative'");
  if (er && outs.size() > 1)
    fail<ScheduleError>(
        "auto schedule: epilogue_layout = 'epilogue_role' stages one output tile (sD) for its TMA "
        "store, but this fusion has ",
        outs.size(),
        " outputs; use 'pingpong' or 'cooperative' (the "
        "MMA warpgroups stage every output)");
  // the k tile is one 128-byte swizzle row of each operand: 64 16-bit elements, 128 8-bit ones (the FP8
  // tiling: 128x128x128 or 128x256x128 with 4 stages where shared memory holds them, as the bf16 tiles)
  int bm = 128, bn = 128, bk = isFloat8(e->inputs[0]->dtype) ? 128 : 64, wgs = 2;
  if (smallM) {
    bm = 64;
    wgs = 1;
  }
  // a residual read by scalar loads (!epiPairs) keeps 128 x 128: at 128 x 256 its loads spill (NVRTC: 4 bytes);
  // so does any epilogue whose chunk operands do not fit beside the 128 accumulators of a cooperative
  // warpgroup's 64 x 256 share (epilogueFits)
  const bool scalarResidual = !hints.epiPairs && matrixEpilogueOperand(f);
  const bool wideFits = epilogueFits(f, 64, 128, kMmaRegisters, outBytes, hints.epiPairs);
  if (hints.n >= 256 && bm == 128 && !(hints.m >= 0 && hints.m <= 128) && !scalarResidual && wideFits) bn = 256;
  // the TMA-store epilogue's sD: one 128-byte-wide chunk of the tile's rows (validateEpilogueStore gives it a
  // second where that fits), kept for every tile so that epilogue_store('tma') after this schedule fits too
  // block scales: 128 x 128 tiles (64 x 128 per warpgroup, acc and the promotion's tmp within the MMA role's
  // registers: block_scales.cpp) where they still fill the SMs, else 128 x 64 / 64 x 64. The third GPU window
  // (H200, 4096x7168x2048): 128 x 128 in 213-219 us, 128 x 64 in 244-254 us (docs/perf.md)
  if (blockScaled)
    bn = !smallM && hints.m > 0 && hints.n > 0 && hints.sms > 0 &&
                 ((hints.m + 127) / 128) * ((hints.n + 127) / 128) >= hints.sms
             ? 128
             : 64;
  const auto fit = fitAutoTile(f, target, bm, bk, bn, 4, (int64_t)bm * 128 * nOut);
  bn = fit.bn;
  int stages = fit.stages;
  const int64_t nk = hints.k >= 0 ? (hints.k + bk - 1) / bk : -1;
  // k sharing when the tiles leave SMs idle (M, N, K and the SM count known): the cost model of the cp.async
  // schedule (k_share.cpp), k_share overriding it; split-K on the TMA pipeline without roles, stream-K on the
  // cooperative warp-specialized kernel (so it takes precedence over the overlapped epilogue layouts)
  KShareChoice ks;
  const bool cached = !cachedEpilogueOperands(f).empty();  // a cached bias / residual needs its producer role
  if (!batched && !cached && !blockScaled && hints.m > 0 && hints.n > 0 && nk > 0 && kShareOk(target))
    ks = chooseKShare(((hints.m + bm - 1) / bm) * ((hints.n + bn - 1) / bn), nk, stages, hints.sms, bm, bn, bk,
                      streamKOk(target) && (hints.epilogueLayout == "auto" || layout == "cooperative"), hints.kShare);
  else chooseKShare(0, 0, stages, 0, bm, bn, bk, false, hints.kShare);  // k_share's spelling checked all the same
  // the overlapped layouts where the k loop is not shared (an explicit layout keeps stream-K off above)
  const bool overlap = ks.splits == 1 && ks.streamCtas == 0;
  const bool usePP = pp && overlap, useER = er && overlap;
  if (usePP || useER) {  // one warpgroup computes a whole tile of at most 128 x 128 accumulators
    wgs = 1;
    // the epilogue role's accumulator stage sC (f32) and output tile sD; ping-pong: one sD chunk per warpgroup
    const int64_t staging =
        useER ? (int64_t)bm * (128 + 4) * 4 + (int64_t)bm * 128 * outBytes : 2 * (int64_t)bm * 128 * nOut;
    const auto fit1 = fitAutoTile(f, target, bm, bk, 128, 4, staging);
    bn = fit1.bn;
    stages = fit1.stages;
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
  const int prefetch = stages < 3 ? stages - 1 : stages - 2;
  for (auto* in : {e->inputs[0], e->inputs[1]}) {
    auto caches = f.cachesOf(in);
    TensorView* c = caches.empty() ? f.cacheAfter(in, LoadKind::TmaLoad) : caches[0];
    circularBuffer(c, stages, prefetch);
  }
  if (ks.splits > 1) {
    splitK(mm, ks.splits);  // the TMA pipeline without roles, one CTA per (tile, split)
  } else if (useER) {       // an epilogue warpgroup as wide as the MMA warpgroup; it stores by TMA
    warpSpecialize(mm, {Role{"load", 1, 40}, Role{"mma", 4, kMmaRegisters}, Role{"epilogue", 4, kMmaRegisters}});
  } else {
    const bool budgets = wgs == 2 || usePP;  // more than 256 threads: the producer hands registers to the MMA
    Role load{"load", 1, budgets ? 40 : 0}, mma{"mma", usePP ? 8 : 4 * wgs, budgets ? kMmaRegisters : 0};
    warpSpecialize(mm, {load, mma});
    if (ks.streamCtas > 0) streamK(mm, ks.streamCtas);  // both roles walk the CTA's (tile, k-range) segments
    // the TMA-store epilogue where the outputs are TMA-able: N known, rows a multiple of 16 bytes, one element size
    // (one MMA warpgroup too: M <= 64 stages its 64-row tile the same way instead of 128 bounds-checked stores)
    if (tmaAble) epilogueStore(mm, "tma");
  }
}

void autoScheduleGroupedWgmma(Fusion& f, const TargetInfo& target) {
  auto* mm = f.findMatmul();
  auto* e = mm->definition;
  const int bm = 128, bk = 64, wgs = 2;
  const auto fit = fitAutoTile(f, target, bm, bk, 128, 4, 0);  // no staged output: direct stores
  initLoopDomain(f, mm);
  split(mm, "m", bm);
  split(mm, "n", fit.bn);
  split(mm, "k", bk);
  split(mm, "m.i", bm / (4 * wgs));  // 16-row warp slices: 4 warps per warpgroup
  parallelize(mm, "m.o", ParallelType::BIDy);
  parallelize(mm, "n.o", ParallelType::BIDx);
  parallelize(mm, "m.i.o", ParallelType::Warp);
  reorder(mm, {"m.o", "n.o", "k.o", "m.i.o", "m.i.i", "n.i", "k.i"});
  const int prefetch = fit.stages < 3 ? fit.stages - 1 : fit.stages - 2;
  for (auto* in : {e->inputs[0], e->inputs[1]}) {
    auto caches = f.cachesOf(in);
    circularBuffer(caches.empty() ? f.cacheAfter(in, LoadKind::TmaLoad) : caches[0], fit.stages, prefetch);
  }
  warpSpecialize(mm, {Role{"load", 1, 40}, Role{"mma", 4 * wgs, kMmaRegisters}});
}

}  // namespace heddle
