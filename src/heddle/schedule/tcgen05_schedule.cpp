// Blackwell schedule rules and the automatic sm_100a schedule (see tcgen05_schedule.h).
#include "heddle/schedule/tcgen05_schedule.h"

#include <algorithm>

#include "heddle/schedule/register_pool.h"
#include "heddle/schedule/schedule.h"

namespace heddle {

namespace {

int powerOfTwoAtLeast(int v) {
  int p = 32;
  while (p < v) p *= 2;
  return p;
}

void validateRolesTcgen05(const MatmulTiling& t, RolePipelineSchedule& h, const TargetInfo& target) {
  const std::string mm = t.mm->name;
  const std::vector<PipelineRole::Kind> kinds = pipelineRoleKinds(mm, t.roles);
  PipelineRole load, mma, epi;
  int n[3] = {0, 0, 0};
  int accStages = 0;
  for (size_t i = 0; i < t.roles.size(); ++i) {
    auto& r = t.roles[i];
    PipelineRole x;
    x.name = r.name;
    x.kind = kinds[i];
    x.warps = r.warps;
    x.registers = r.registers;
    if (r.stages && x.kind != PipelineRole::Epilogue)
      fail<ScheduleError>("warp_specialize(", mm, "): role '", r.name, "' sets stages=", r.stages,
                          "; stages= is the "
                          "epilogue role's tensor-memory accumulator ring (1 or 2): move it there");
    if (x.kind == PipelineRole::Load) load = x;
    else if (x.kind == PipelineRole::Mma) mma = x;
    else epi = x, accStages = r.stages;
    ++n[std::min<int>(x.kind, 2)];
  }
  if (n[0] != 1 || n[1] != 1 || n[2] != 1)
    fail<ScheduleError>("warp_specialize(", mm, "): the ", target.name,
                        " tcgen05 kernel has three roles: one producer "
                        "('load', 1 warp), one MMA role ('mma', 1 warp) and one 'epilogue' (4 warps); got ",
                        n[0], " producer, ", n[1], " MMA and ", n[2], " epilogue role(s)");
  if (load.warps != 1)
    fail<ScheduleError>("warp_specialize(", mm, "): role '", load.name, "' has ", load.warps,
                        " warps; one elected "
                        "thread issues every TMA copy on ",
                        target.name, ": give it 1 warp");
  if (mma.warps != 1)
    fail<ScheduleError>("warp_specialize(", mm, "): role '", mma.name, "' has ", mma.warps, " warps; on ", target.name,
                        " one thread issues tcgen05.mma for the whole tile into tensor memory: give it 1 warp");
  if (epi.warps != 4)
    fail<ScheduleError>("warp_specialize(", mm, "): role '", epi.name, "' has ", epi.warps,
                        " warps; the epilogue reads "
                        "the ",
                        t.bm,
                        "-row accumulator from tensor memory with tcgen05.ld, warp w of a warpgroup "
                        "lanes 32*(w%4)..+31 only, so it is one warpgroup: give it 4 warps");
  if (load.registers && mma.registers && load.registers != mma.registers)
    fail<ScheduleError>("warp_specialize(", mm, "): roles '", load.name, "' (", load.registers, " registers) and '",
                        mma.name, "' (", mma.registers,
                        ") share warps 0-3, one warpgroup, and setmaxnreg sets one "
                        "budget per warpgroup: give them the same budget or leave one unset");
  if (accStages != 0 && accStages != 1 && accStages != 2)
    fail<ScheduleError>("warp_specialize(", mm, "): role '", epi.name, "' asks for ", accStages,
                        " accumulator stages; "
                        "the tensor-memory accumulator ring has 1 or 2 stages");
  const int scaleCols = mxScaleColumns(t);  // mx32 / nv16: the scale columns of every operand stage (mx_scales.cpp)
  if (!accStages) accStages = 2 * t.bn + scaleCols <= target.tmemColumns ? 2 : 1;
  if (accStages * t.bn + scaleCols > target.tmemColumns)
    fail<ScheduleError>("warp_specialize(", mm, "): ", accStages, " accumulator stages of ", t.bn, " columns",
                        scaleCols ? " and " + std::to_string(scaleCols) + " MX scale columns (" +
                                        std::to_string(t.stages) + " operand stages)"
                                  : std::string(),
                        " exceed the ", target.tmemColumns, " tensor-memory columns of ", target.name,
                        "; use stages=1 or a smaller "
                        "n tile",
                        scaleCols ? " (or fewer operand stages)" : "");
  load.firstWarp = 0;
  load.warpgroups = 1;
  if (!load.registers) load.registers = mma.registers;
  mma.firstWarp = 1;
  mma.warpgroups = 0;  // inside the load's warpgroup, whose budget it shares
  mma.registers = load.registers;
  epi.firstWarp = 4;
  epi.warpgroups = 1;
  h.roles = {load, mma, epi};
  h.accStages = accStages;
  h.tmemCols = powerOfTwoAtLeast(accStages * t.bn + scaleCols);
  h.threads = 256;
  checkRegisterPool(mm, roleBudgets(h), registerPool(h.threads));  // the setmaxnreg pool (register_pool.h)
}

// 8-bit operands (tcgen05.mma kind::f8f6f4, docs/fp8.md): K = 32 per instruction (PTX ISA 9.7.16.10.1), so
// the k tile is 32, 64 or 128 elements (a 32-, 64- or 128-byte swizzle row: the K-major stage of TmaTile);
// both operands K-major (A [M, K], B [N, K], i.e. matmul(a, b, False, True)): the layout this build lowers
// and its interpreter models, as wgmma takes 8-bit operands K-major only (PTX ISA 9.7.15.5.1).
void validateFloat8Operands(const MatmulTiling& t, const TargetInfo& target) {
  const std::string mm = t.mm->name;
  if (t.transA)
    fail<ScheduleError>("matmul ", mm, ": operand ", t.a->name, " is ", dtypeName(t.a->dtype),
                        " stored [K, M] (transposed, M-major); 8-bit operands of the ", target.name,
                        " tcgen05 kernel are K-major: pass ", t.a->name,
                        " as [M, K] (its transpose made contiguous) with transA=False");
  if (!t.transB)
    fail<ScheduleError>("matmul ", mm, ": operand ", t.b->name, " is ", dtypeName(t.b->dtype),
                        " stored [K, N] (N-major); 8-bit operands of the ", target.name,
                        " tcgen05 kernel are K-major: pass ", t.b->name,
                        " as [N, K] with transB=True (torch._scaled_mm's column-major b is that layout)");
  if (t.bk != 32 && t.bk != 64 && t.bk != 128)
    fail<ScheduleError>(
        "schedule of ", mm, ": k tile ", t.bk, " with 8-bit operands; tcgen05.mma kind::f8f6f4 ",
        "takes K = 32 per instruction and the swizzled stages 32-, 64- or 128-byte rows: use 32, 64 or ",
        "128 (128: one 128-byte swizzle row)");
}

// A grouped matmul (docs/grouped.md "sm_100a"): one CTA per (group m-tile, n tile), its tile found by the device
// walk over offs before any mbarrier init or tcgen05.alloc (lower/build/grouped_walk.h); the epilogue stores
// directly with the row predicate row < offs[e] (split-K, stream-K and clusters are refused for every grouped
// kernel in checkGroupedSchedule; the TMA-store epilogue in validateTcgen05Store). What this kernel does not
// build for a grouped matmul is refused here, naming the option.
void validateGroupedTcgen05(const RolePipelineSchedule& h) {
  if (!h.epiTma.empty())
    fail<ScheduleError>("cache_after(", h.epiTma, ", 'tma_load'): the grouped sm_100a tcgen05 kernel reads its ",
                        "epilogue operands per element (a per-expert row at the tile's expert); the bias / residual "
                        "producer role is not built for the grouped tile walk: drop that cache");
}

// epilogue_store("tma") on the tcgen05 kernel (passes/tcgen05_specialize.cpp, lower/build/staged_store.h): the
// epilogue warpgroup stages each 128-byte-wide column chunk of its tile (64 16-bit or 32 f32 columns) in sD,
// 128-byte swizzled, and thread 128 stores it with a TMA store. Two staging slots where shared memory holds them
// beside the operand ring (the MX scale chunks included) and a TMA-loaded bias / residual ring, else one; refused
// with the numbers where one does not fit. A computed output scale (heddle.ops.quantize, the only 8-bit output on
// sm_100a) stages q in chunks of 128 one-byte columns -- one 128-byte swizzle row, as on sm_90a (cuTensorMapEncodeTiled:
// boxDim[0] * elementSize <= 128 for CU_TENSOR_MAP_SWIZZLE_128B), so bn holds whole chunks of 128 -- and s [M, groups]
// is stored directly (codegen/tcgen05_printer.cpp); an MX-format output's (group="mx32") likewise, each chunk four
// whole MX blocks, its e8m0 codes stored directly. Not built: further outputs (D1); a grouped matmul's is refused
// for every kernel (checkGroupedSchedule: its M edge is the expert's, which a TMA store of D cannot clip).
void validateTcgen05Store(const Fusion& f, const TargetInfo& target, MatmulTiling& t) {
  auto& h = t.rolePipeline;
  const std::string mm = t.mm->name;
  const std::string& kind = t.mm->epilogueStore;
  const std::string drop = "; or epilogue_store('direct') (the store from the tcgen05.ld registers)";
  if (kind != "tma") return;
  const auto& outs = f.outputs();
  if (outs.empty()) return;  // build_epilogue names it
  auto quantized = [](const TensorView* o) {
    return o->definition && (o->definition->kind == OpKind::Quantize || o->definition->kind == OpKind::AmaxScale);
  };
  const bool quant = quantized(outs[0]);                                   // q staged, s direct
  if (!quant && std::any_of(outs.begin(), outs.end(), quantized)) return;  // build_epilogue names the q, s order
  if (outs.size() > (quant ? 2u : 1u))
    fail<ScheduleError>("epilogue_store(", mm, ", 'tma'): ", outs.size(),
                        " outputs; the sm_100a tcgen05 TMA-store epilogue stages D only in this build", drop);
  const int esz = dtypeBytes(outs[0]->dtype);  // 16-bit or f32; 8-bit: quantize's q only on sm_100a
  if (esz == 1 && t.bn % 128)
    fail<ScheduleError>("epilogue_store(", mm, ", 'tma'): output ", outs[0]->name, " is ", dtypeName(outs[0]->dtype),
                        "; the TMA-store epilogue stages 8-bit outputs in chunks of 128 columns (one 128-byte swizzle "
                        "row), but the n tile is ",
                        t.bn, ": split n by a multiple of 128", drop);
  h.tmaStore = true;
  h.storeCols = 128 / esz;  // one 128-byte swizzle box per chunk; bn (a multiple of 64) holds whole chunks
  const int64_t operand = (int64_t)t.stages * (t.bm * t.bk + t.bk * t.bn) * dtypeBytes(t.a->dtype);
  // an mx32 / nv16 operand stage's scale chunks: 512 bytes x chunks per 128 rows of A and of B (mx_scales.cpp)
  const int64_t mx =
      isMxScaled(t.mm) ? (int64_t)t.stages * 512 * mxKTile(t.mm->definition).chunks * (1 + t.bn / 128) : 0;
  int64_t ring = 0;  // the TMA-loaded bias row / residual tile ring
  for (auto* in : f.inputs())
    if (in->name == h.epiTma) ring = (int64_t)h.epiStages * (in->rank() == 2 ? t.bm : 1) * t.bn * dtypeBytes(in->dtype);
  const int64_t chunk = (int64_t)t.bm * 128;
  const int64_t bars = 8 * (2 * t.stages + 2 * h.epiStages + 2 * h.accStages) + 16 + 1024;  // + tmem slot, slack
  const int64_t fixed = operand + mx + ring + bars;
  h.storeStages = fixed + 2 * chunk <= target.smemLimit ? 2 : 1;
  if (fixed + chunk > target.smemLimit)
    fail<ScheduleError>("epilogue_store(", mm, ", 'tma'): the operand ring (", operand, " bytes",
                        mx ? ", " + std::to_string(mx) + " of MX scale chunks" : std::string(), ")",
                        ring ? ", the " + h.epiTma + " ring (" + std::to_string(ring) + " bytes)" : std::string(),
                        " and one staging slot of ", chunk, " bytes exceed ", target.name, "'s ", target.smemLimit,
                        " bytes of shared memory; use fewer stages or a smaller tile", drop);
}

}  // namespace

void validateTcgen05Schedule(const Fusion& f, const TargetInfo& target, MatmulTiling& t) {
  auto& h = t.rolePipeline;
  const std::string mm = t.mm->name;
  h.enabled = true;
  h.tcgen05 = true;
  h.warMbarrier = t.aCache->circular.mbarrierWar;
  if (t.roles.empty())
    fail<ScheduleError>("cache ", t.aCache->name, ": on ", target.name,
                        " tma_load feeds the warp-specialized tcgen05 "
                        "kernel; add warp_specialize({'load': 1, 'mma': 1, 'epilogue': 4}) (or use ",
                        target.loadKindsAvailable(), " for the register-MMA kernel)");
  if (!h.warMbarrier)
    fail<ScheduleError>("warp_specialize(", mm,
                        "): circular_buffer(war='block_sync') is for kernels without roles; "
                        "the tcgen05 ring releases its slots through tcgen05.commit on empty mbarriers (drop war=)");
  if (t.batched)
    fail<ScheduleError>("warp_specialize(", mm, "): batched matmuls are not lowered for ", target.name,
                        "'s tcgen05 "
                        "kernel in this build; run the batches as separate matmuls or use cp_async caches");
  if (t.splitK > 1)
    fail<ScheduleError>("split_k(", mm, "): the tcgen05 kernel is persistent over whole tiles; drop split_k");
  if (t.warpsM != 4 || t.warpsN != 1)
    fail<ScheduleError>("schedule of ", mm, ": ", t.warpsM, " x ", t.warpsN,
                        " warps over m x n; the tcgen05 tile is read "
                        "out by one epilogue warpgroup, 32 rows per warp: bind an m split of 4 warps to 'warp' "
                        "(split 'm.i' by ",
                        t.bm / 4, ") and none over n");
  if (t.bm != 128)
    fail<ScheduleError>("schedule of ", mm, ": m tile ", t.bm,
                        "; tcgen05.mma cta_group::1 computes M = 128 rows (one "
                        "per tensor-memory lane): use an m tile of 128");
  if (t.bn % 64 || t.bn < 64 || t.bn > 256)
    fail<ScheduleError>("schedule of ", mm, ": n tile ", t.bn,
                        " is not one this build issues with tcgen05.mma (N a "
                        "multiple of 64 up to 256: the swizzled TMA boxes are 64 wide); use 64, 128, 192 or 256");
  if (isFloat8(t.a->dtype) || isMxScaled(t.mm)) {
    if (isFloat8(t.a->dtype)) validateFloat8Operands(t, target);
    validateMxTcgen05(t);  // mx32 / nv16 scales (e2m1x2 operands): the k tile, bn 128 or 256 (schedule/mx_scales.cpp)
  } else if (t.bk != 16 && t.bk != 32 && t.bk != 64) {
    fail<ScheduleError>("schedule of ", mm, ": k tile ", t.bk, "; the swizzled operand stages take 16, 32 or 64");
  }
  if (t.stages < 2)
    fail<ScheduleError>("cache ", t.aCache->name,
                        ": tma_load needs circular_buffer(stages >= 2): each stage is one "
                        "slot of the mbarrier ring");
  if (t.stages > 8)
    fail<ScheduleError>("circular_buffer(", t.aCache->name, ", stages=", t.stages,
                        "): the tcgen05 operand ring allows "
                        "at most 8 stages");
  h.tileWarpgroups = 1;
  h.mmaWarpgroups = 0;
  h.wgRows = t.bm;
  h.coop = true;
  h.warpSpecialized = true;
  h.persistent = !t.grouped;  // grouped: one tile per CTA (validateGroupedTcgen05)
  validateRolesTcgen05(t, h, target);
  validateEpilogueTma(f, t, 2);  // a TMA-loaded bias / residual: its producer on warp 2 (load 0, mma 1)
  if (t.grouped) validateGroupedTcgen05(h);
  validateTcgen05Store(f, target, t);
}

// The automatic schedule (heddle.matmul on sm_100a when TMA can take the operands): 128 x 256 x 64
// where N >= 256, else 128 x 128 x 64 (8-bit operands: k tile 128, the same 128-byte rows); as many operand stages as fit (at most 6); two accumulator
// stages in tensor memory; roles {load: 1 warp, mma: 1 warp, epilogue: 4 warps}, no register budgets
// (256 threads: every thread may hold 255 registers). Batched matmuls get the cp.async schedule. An mx32 matmul
// (schedule/mx_scales.cpp) takes one accumulator stage at n = 256 (256 + the scale columns fit 512 once).
// As on sm_90a, it does not cache a bias / residual with tma_load itself; one the user cached keeps its
// producer role and ring, whose slots the stage count and the n tile leave room for (fitAutoTile, shared
// with sm_90a: 128 where 256 leaves no two operand stages, 64 where 128 leaves none).
void autoScheduleMatmulTcgen05(Fusion& f, const TargetInfo& target, const AutoScheduleHints& given) {
  auto* mm = f.findMatmul();
  auto* e = mm->definition;
  if (mm->rank() == 3) {
    AutoScheduleHints h = given;
    h.tma = false;
    return autoScheduleMatmul(f, target, h);
  }
  AutoScheduleHints hints = given;
  const Size& N = mm->shape[mm->rank() - 1];
  if (hints.n < 0 && !N.isSymbolic()) hints.n = N.value;
  // the k tile fills one 128-byte swizzle row: 64 16-bit or 128 8-bit elements (NVFP4: 128 e2m1 = 64 bytes, the
  // MmaSm100Nvf4 k tile of mxKTile)
  const int esize = dtypeBytes(e->inputs[0]->dtype);
  const bool mx = isMxScaled(mm);
  const int bm = 128, bk = mx ? mxKTile(e).bk : 128 / esize;
  // a bias / residual the user cached with tma_load keeps its ring (validateEpilogueTma): fitAutoTile counts it
  // (and the operands' element size: an 8-bit stage of bk columns has the bytes of a 16-bit one of bk / 2)
  // mx32 / nv16: each operand stage also holds its scale chunks (512 * chunks * (1 + bn/128) bytes), counted for six
  // stages
  const int chunkBytes = mx ? 512 * mxKTile(e).chunks * 3 : 0;
  const auto fit = fitAutoTile(f, target, bm, bk, hints.n >= 256 ? 256 : 128, 6, 6 * chunkBytes);
  const int bn = fit.bn, stages = fit.stages;
  initLoopDomain(f, mm);
  split(mm, "m", bm);
  split(mm, "n", bn);
  split(mm, "k", bk);
  split(mm, "m.i", bm / 4);
  parallelize(mm, "m.o", ParallelType::BIDy);
  parallelize(mm, "n.o", ParallelType::BIDx);
  parallelize(mm, "m.i.o", ParallelType::Warp);
  reorder(mm, {"m.o", "n.o", "k.o", "m.i.o", "m.i.i", "n.i", "k.i"});
  for (auto* in : {e->inputs[0], e->inputs[1]}) {
    auto caches = f.cachesOf(in);
    TensorView* c = caches.empty() ? f.cacheAfter(in, LoadKind::TmaLoad) : caches[0];
    circularBuffer(c, stages, -1);
  }
  // a grouped matmul's CTA runs one tile (validateGroupedTcgen05): one accumulator stage
  // an mx32 / nv16 128 x 256 tile: one (its 256 columns and the scale columns fit 512 once, not twice)
  const int accStages = !e->groupOffsets.empty() || (mx && bn == 256) ? 1 : 0;
  warpSpecialize(mm, {Role{"load", 1, 0, 0}, Role{"mma", 1, 0, 0}, Role{"epilogue", 4, 0, accStages}});
}

}  // namespace heddle
