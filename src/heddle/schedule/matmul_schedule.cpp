// The matmul schedule: reading tiles out of the matmul tensor's loop domain, checking every rule
// against the target, and the automatic schedule heddle.matmul uses.
#include <algorithm>
#include <sstream>

#include "heddle/schedule/epilogue_layout.h"
#include "heddle/schedule/register_pool.h"
#include "heddle/schedule/schedule.h"
#include "heddle/schedule/tcgen05_schedule.h"

namespace heddle {

namespace {

struct RootAxes {
  const IterDomain* block = nullptr;  // bound to BID*
  const IterDomain* warp = nullptr;   // bound to warp
  int blockPos = -1, warpPos = -1;
};

RootAxes rootAxes(const TensorView* mm, const std::string& root) {
  RootAxes r;
  for (int i = 0; i < mm->domain.size(); ++i) {
    auto& d = mm->domain.axes[i];
    if (d.root != root) continue;
    if (d.parallel == ParallelType::BIDx || d.parallel == ParallelType::BIDy || d.parallel == ParallelType::BIDz) {
      r.block = &d;
      r.blockPos = i;
    } else if (d.parallel == ParallelType::Warp) {
      r.warp = &d;
      r.warpPos = i;
    } else if (d.parallel == ParallelType::TIDx || d.parallel == ParallelType::TIDy ||
               d.parallel == ParallelType::TIDz) {
      fail<ScheduleError>("schedule of ", mm->name, ": axis '", d.name, "' is bound to ", parallelName(d.parallel),
                          "; the matmul's threads are organised as warps over the tile: bind the warp-tile axis with "
                          "'warp' instead");
    }
  }
  return r;
}

// The widths of `axis` ('m' or 'n' tile) nearest to `w` that keep a multiple of `step` (the warp
// split) and rows the target accepts: "64 or 128".
std::string nearestRowWidths(const TargetInfo& target, int w, int step, int elemBytes) {
  std::string s;
  for (int x = (w / step) * step; x >= step; x -= step)
    if (target.smemRowOk((long)x * elemBytes)) {
      s = std::to_string(x);
      break;
    }
  for (int x = (w / step + 1) * step; x <= 4 * w + 256; x += step)
    if (target.smemRowOk((long)x * elemBytes)) return s.empty() ? std::to_string(x) : s + " or " + std::to_string(x);
  return s;
}

// Shared-memory operand tiles: the contiguous dimension of each stage is a row (TargetInfo::smemRowOk).
// A stage of a is bm x bk (layout N) or bk x bm (T); b is bk x bn (N) or bn x bk (T).
void checkSmemRows(const MatmulTiling& t, const TargetInfo& target, int elemBytes) {
  // Rows along k (bk in {16, 32, 64}) always fit; only rows along the m or n tile can fail.
  struct Op {
    TensorView* cache;
    bool alongTile;
    const char* axis;
    int width, step;
  };
  Op ops[] = {{t.aCache, t.transA, "m", t.transA ? t.bm : t.bk, 16 * t.warpsM},
              {t.bCache, !t.transB, "n", !t.transB ? t.bn : t.bk, 16 * t.warpsN}};
  for (auto& o : ops) {
    if (target.smemRowOk((long)o.width * elemBytes)) continue;
    fail<ScheduleError>("schedule of ", t.mm->name, ": tile ", t.bm, "x", t.bn, "x", t.bk, " (layout ",
                        t.transA ? "T" : "N", t.transB ? "T" : "N", ") gives cache ", o.cache->name, " rows of ",
                        o.width, " elements (", o.width * elemBytes, " bytes); ", target.name,
                        "'s swizzled shared-memory tiles take rows of 16, 32 or 64 bytes or a multiple of ",
                        target.smemSwizzleLine, " bytes: use an ", o.axis, " tile of ",
                        nearestRowWidths(target, o.width, o.step, elemBytes));
  }
}

// A matmul group (Fusion::matmuls): the further members' B tiles fill column slices of B's cache, loaded
// like it; each warp's n range splits into one slice per member (mma.sync fragments of 8 columns).
void validateMatmulGroup(const Fusion& f, const TargetInfo& target, MatmulTiling& t) {
  t.mms = f.matmuls();
  for (auto* m : t.mms) t.bs.push_back(m->definition->inputs[1]);
  t.parts = (int)t.mms.size();
  if (t.parts == 1) return;
  std::string names;
  for (auto* m : t.mms) names += (names.empty() ? "" : ", ") + m->name;
  const std::string what = "matmul group (" + names + ")";
  for (size_t p = 1; p < t.bs.size(); ++p)
    if (!f.cachesOf(t.bs[p]).empty())
      fail<ScheduleError>(what, ": ", t.bs[p]->name, " has a cache of its own (", f.cachesOf(t.bs[p])[0]->name,
                          "); the group's B tiles share ", t.bCache->name, " (the first member's): drop cache_after(",
                          t.bs[p]->name, ")");
  if (t.loadKind == LoadKind::TmaLoad || !t.roles.empty())
    fail<ScheduleError>(what, ": one kernel for the group is built with cp.async (or plain) caches and mma.sync; ",
                        target.name,
                        "'s TMA + wgmma path (cache kind tma_load, warp_specialize) does not take a group "
                        "yet: use cache_after(",
                        t.a->name, ", 'cp_async') and cache_after(", t.b->name,
                        ", 'cp_async') without roles, or split the group into separate fusions");
  if (target.matmulGroup() == GroupLowering::None)
    fail<ScheduleError>(what, ": target ", target.name,
                        " has no lowering for a matmul group in this build (the "
                        "group is lowered for mma.sync targets: sm_80, sm_90a, sm_100a); split it into separate "
                        "fusions");
  if (t.splitK > 1) fail<ScheduleError>(what, ": split_k does not take a matmul group; drop split_k(", t.mm->name, ")");
  if (t.streamK > 0)
    fail<ScheduleError>(what, ": stream_k does not take a matmul group; drop stream_k(", t.mm->name, ")");
  const int wn = t.bn / t.warpsN;
  if (wn % (8 * t.parts))
    fail<ScheduleError>(what, ": each warp's ", wn, " accumulator columns (n tile ", t.bn, " over ", t.warpsN,
                        " warps) split into ", t.parts,
                        " slices of whole 8-column mma fragments, one per member; "
                        "use an n tile whose warp tile is a multiple of ",
                        8 * t.parts);
}

// The mma.sync kernels (sm_80, and sm_90a with cp.async): each thread holds its warp tile's f32 accumulators,
// (bm / warpsM) x (bn / warpsN) / 32, under the __launch_bounds__ cap -- the rule of the sm_90a warpgroup tiles
// (register_pool.h accumulatorsFit), checked here so that such a tile is refused before a multi-second compile
// that would spill.
void checkWarpTileRegisters(const MatmulTiling& t, const TargetInfo& target) {
  const int wm = t.bm / t.warpsM, wn = t.bn / t.warpsN, lanes = t.warpSize;
  const int acc = wm * wn / lanes, cap = entryRegisterCap(t.threads());
  if (accumulatorsFit(acc, cap)) return;
  std::ostringstream fix;
  for (int f = 2; f <= 8 && !fix.tellp(); f *= 2)  // more warps over m (then n): smaller warp tiles
    for (auto [m, n] : {std::make_pair(t.warpsM * f, t.warpsN), std::make_pair(t.warpsM, t.warpsN * f)}) {
      const int threads = lanes * m * n;
      if (threads > target.maxThreads || t.bm % (16 * m) || t.bn % (16 * n)) continue;
      if (!accumulatorsFit((t.bm / m) * (t.bn / n) / lanes, entryRegisterCap(threads))) continue;
      fix << "bind " << m << " x " << n << " warps over m x n (warp tile " << t.bm / m << "x" << t.bn / n << ", "
          << (t.bm / m) * (t.bn / n) / lanes << " accumulators) or ";
      break;
    }
  int bm = t.bm, bn = t.bn;
  auto halves = [](int x, int warps) { return x % (32 * warps) == 0; };  // half still a multiple of 16 per warp
  while (!accumulatorsFit((bm / t.warpsM) * (bn / t.warpsN) / lanes, cap)) {
    const bool n = halves(bn, t.warpsN) && (bn / t.warpsN >= bm / t.warpsM || !halves(bm, t.warpsM));
    if (!n && !halves(bm, t.warpsM)) break;
    (n ? bn : bm) /= 2;
  }
  fix << "use a smaller tile (" << bm << "x" << bn << "x" << t.bk << " on the same warps)";
  fail<ScheduleError>("schedule of ", t.mm->name, ": warp tile ", wm, "x", wn, " (m tile ", t.bm, " over ", t.warpsM,
                      " warp(s), n tile ", t.bn, " over ", t.warpsN, ") holds ", acc, " f32 accumulators per thread (",
                      wm, " x ", wn, " / ", lanes, " lanes) but a thread of this ", t.threads(), "-thread kernel has ",
                      cap, " registers and needs ~", kSpareRegisters, " besides them (ptxas would spill); ", fix.str());
}

}  // namespace

std::string tileShapeProblem(const MatmulTiling& t, const TargetInfo& target, int bm, int bn) {
  if (bm % (16 * t.warpsM) || bn % (16 * t.warpsN)) return "warp tiles are not multiples of 16";
  const int elemBytes = dtypeBytes(t.a->dtype);
  if (t.loadKind == LoadKind::TmaLoad) {
    const int wgs = std::max(1, t.warpsM / 4);
    if (bm > 256 || bm % (64 * wgs)) return "a warpgroup computes multiples of 64 rows";
    if (bn != 64 && bn != 128 && bn != 192 && bn != 256) return "not a wgmma width";
    return "";
  }
  if (!target.smemRowOk((long)(t.transA ? bm : t.bk) * elemBytes) ||
      !target.smemRowOk((long)(!t.transB ? bn : t.bk) * elemBytes))
    return "shared-memory rows the swizzled tiles do not take";
  return "";
}

// A grouped matmul runs on the cp.async + mma.sync kernel (every NVIDIA target), on a wgmma target on the
// warp-specialized TMA + wgmma kernel, or on sm_100a on the TMA + tcgen05 kernel (its grouped rules:
// validateGroupedTcgen05, schedule/tcgen05_schedule.cpp), one CTA per (group m-tile, n tile) in each; what none
// does yet is refused here, naming the option (docs/grouped.md, "Not done yet"). The wgmma role pipeline's own
// options are checked after validateRolePipelineSchedule (checkGroupedRoles).
static void checkGroupedSchedule(MatmulTiling& t, const Expr& e, const TargetInfo& target) {
  t.grouped = true;
  t.batchedB = true;
  t.groupOffsets = e.groupOffsets;
  t.groupMasked = e.groupMasked;
  const std::string mm = t.mm->name;
  const bool tma = t.loadKind == LoadKind::TmaLoad || !t.roles.empty();
  if (tma && e.groupMasked)
    fail<ScheduleError>("grouped matmul ", mm,
                        ": the masked layout runs on the cp.async + mma.sync kernel only; "
                        "cache the operands with 'cp_async' and drop warp_specialize (docs/grouped.md)");
  if (t.loadKind == LoadKind::TmaLoad && t.roles.empty() && !target.mma.has(MmaKind::Tcgen05))
    fail<ScheduleError>("grouped matmul ", mm,
                        ": its TMA kernel is the warp-specialized one (the TMA pipeline without roles does not walk "
                        "the groups); add warp_specialize({\"load\": 1, \"mma\": {\"warpgroups\": 2}}) (roles "
                        "load and mma, docs/grouped.md) or cache the operands with 'cp_async'");
  if (t.mm->epilogueStore == "tma")
    fail<ScheduleError>("epilogue_store(", mm,
                        ", 'tma'): a grouped matmul stores with predicated direct stores (row < the group's end: "
                        "a TMA store of the tile would write the next group's rows); drop epilogue_store or use "
                        "'direct'");
  if (t.splitK > 1 || t.streamK > 0)
    fail<ScheduleError>("grouped matmul ", mm, ": ", t.splitK > 1 ? "split_k" : "stream_k",
                        " shares a tile's k loop among CTAs, which the grouped tile walk does not do; drop it");
  if (t.mm->clusterSize > 1)
    fail<ScheduleError>("grouped matmul ", mm, ": cluster(", t.mm->clusterSize,
                        ") is not supported by the grouped tile walk; drop it");
}

// The warp-specialized wgmma grouped kernel (lower/build/grouped_walk.h): one tile per CTA, cooperative MMA
// warpgroups storing from registers with the row predicate, the operands' TMA loads only.
static void checkGroupedRoles(const MatmulTiling& t) {
  const auto& h = t.rolePipeline;
  if (!t.grouped || !h.warpSpecialized) return;
  const std::string mm = t.mm->name;
  if (h.role(PipelineRole::Epilogue))
    fail<ScheduleError>("warp_specialize(", mm,
                        "): an epilogue role stores the tile with TMA, but a grouped matmul stores with predicated "
                        "direct stores (row < the group's end); use the roles load and mma");
  if (!h.coop)
    fail<ScheduleError>("warp_specialize(", mm,
                        "): ping-pong MMA warpgroups alternate tiles, but the grouped kernel gives each CTA one "
                        "tile; give the mma role 4 warps per 64 rows of the tile (cooperative)");
  if (!h.epiTma.empty())
    fail<ScheduleError>("cache_after(", h.epiTma,
                        ", 'tma_load'): the grouped kernel reads its epilogue operands per element (a per-expert "
                        "row is the tile's expert's); drop that cache");
}

MatmulTiling validateMatmulSchedule(const Fusion& f, const TargetInfo& target, int vecA, int vecB) {
  MatmulTiling t;
  t.warpSize = target.warpSize;
  t.mm = f.findMatmul();
  if (!t.mm) fail<ScheduleError>("this fusion has no matmul; heddle lowers a matmul with its epilogue");
  auto* mm = t.mm;
  if (mm->domain.empty())
    fail<ScheduleError>("matmul tensor ", mm->name,
                        " is not scheduled: tile it (split/parallelize/cache_after/"
                        "circular_buffer) or use heddle.matmul / Fusion.auto_schedule()");
  auto* e = mm->definition;
  t.a = e->inputs[0];
  t.b = e->inputs[1];
  t.transA = e->transA;
  t.transB = e->transB;
  t.batched = mm->rank() == 3;
  t.batchedB = t.b->rank() == 3;
  validateOperandTypes(f, target);  // schedule/operand_types.cpp: before any tiling rule
  validateBlockScales(f, target);   // schedule/block_scales.cpp

  auto M = rootAxes(mm, "m"), N = rootAxes(mm, "n");
  if (!M.block || !N.block)
    fail<ScheduleError>("schedule of ", mm->name, ": axes ", mm->domain.str(), " bind ", (!M.block ? "no m" : "no n"),
                        " tile to a block index; split 'm' and 'n' by the tile size and bind the outer parts to BIDy "
                        "and BIDx");
  if (M.block->parallel == ParallelType::BIDz || N.block->parallel == ParallelType::BIDz)
    fail<ScheduleError>("schedule of ", mm->name,
                        ": BIDz is reserved for the batch axis 'b'; bind m and n tiles to "
                        "BIDy/BIDx");
  t.bm = (int)M.block->factor;
  t.bn = (int)N.block->factor;
  t.swapBlocks = M.block->parallel == ParallelType::BIDx;
  if (t.batched) {
    int b = mm->domain.find("b");
    if (b < 0 || mm->domain.axes[b].parallel != ParallelType::BIDz)
      fail<ScheduleError>("schedule of ", mm->name, ": the batch axis 'b' must be bound to BIDz (parallelize(",
                          mm->name, ", 'b', 'BIDz'))");
  }
  // k: exactly one serial outer axis (the pipelined loop) of constant inner extent
  int kPos = -1;
  for (int i = 0; i < mm->domain.size(); ++i) {
    auto& d = mm->domain.axes[i];
    if (d.root == "k" && d.factor > 1) {
      if (kPos >= 0)
        fail<ScheduleError>("schedule of ", mm->name, ": k is split more than once (", mm->domain.str(),
                            "); split 'k' once by the k-tile (16, 32 or 64)");
      kPos = i;
    }
  }
  if (kPos < 0)
    fail<ScheduleError>("schedule of ", mm->name,
                        ": 'k' is not split; split it by the k-tile (16, 32 or 64), the "
                        "outer part becomes the pipelined loop");
  t.bk = (int)mm->domain.axes[kPos].factor;
  // 8-bit wgmma / tcgen05: k = 32 per instruction, a k-tile row of at most 128 bytes (e2m1x2 bytes too: the NVFP4
  // kernel's own k tile, schedule/mx_scales.cpp validateMxTcgen05)
  if (isFloat8(t.a->dtype) || t.a->dtype == DType::E2M1X2) {
    if (t.bk != 32 && t.bk != 64 && t.bk != 128)
      fail<ScheduleError>("schedule of ", mm->name, ": k-tile ", t.bk, " of ", dtypeName(t.a->dtype),
                          " operands is not supported: the 8-bit MMAs (wgmma, tcgen05 kind::f8f6f4) step k by 32 and a "
                          "swizzled row holds 128 "
                          "bytes; use 32, 64 or 128");
  } else if (t.bk != 16 && t.bk != 32 && t.bk != 64) {
    fail<ScheduleError>("schedule of ", mm->name, ": k-tile ", t.bk,
                        " is not supported by the tensor-core path; use "
                        "16, 32 or 64");
  }
  if (kPos < M.blockPos || kPos < N.blockPos)
    fail<ScheduleError>("schedule of ", mm->name, ": the k loop '", mm->domain.axes[kPos].name,
                        "' is outside a block axis in ", mm->domain.str(), "; reorder so block axes come first");
  t.warpsM = M.warp ? (int)M.warp->extent : 1;
  t.warpsN = N.warp ? (int)N.warp->extent : 1;
  for (auto* w : {M.warp, N.warp})
    if (w && w->factor * w->extent != (w == M.warp ? t.bm : t.bn))
      fail<ScheduleError>("schedule of ", mm->name, ": warp axis '", w->name,
                          "' does not split the block tile; split "
                          "the tile's inner axis ('",
                          w->root, ".i') and bind its outer part to 'warp'");
  if ((M.warp && M.warpPos < kPos) || (N.warp && N.warpPos < kPos))
    fail<ScheduleError>("schedule of ", mm->name, ": a warp axis is outside the k loop in ", mm->domain.str(),
                        "; warps split the tile inside the k loop: reorder the k-tile loop before the warp axes");
  if (t.bm % (16 * t.warpsM) != 0)
    fail<ScheduleError>("schedule of ", mm->name, ": m tile ", t.bm, " over ", t.warpsM,
                        " warps gives warp tiles that "
                        "are not multiples of 16 rows (mma m16n8k16); use an m tile divisible by ",
                        16 * t.warpsM);
  if (t.bn % (16 * t.warpsN) != 0)
    fail<ScheduleError>("schedule of ", mm->name, ": n tile ", t.bn, " over ", t.warpsN,
                        " warps gives warp tiles that "
                        "are not multiples of 16 columns; use an n tile divisible by ",
                        16 * t.warpsN);
  if (t.threads() > target.maxThreads)
    fail<ScheduleError>("schedule of ", mm->name, ": ", t.threads(), " threads per block exceed ", target.name, "'s ",
                        target.maxThreads, "; use fewer warps");

  // caches and circular buffering
  auto ac = f.cachesOf(t.a), bc = f.cachesOf(t.b);
  if (ac.empty() || bc.empty())
    fail<ScheduleError>("schedule of ", mm->name, ": operand ", (ac.empty() ? t.a->name : t.b->name),
                        " has no shared-memory cache; call cache_after(", (ac.empty() ? t.a->name : t.b->name),
                        ", 'cp_async') (or 'plain'/'tma_load')");
  t.aCache = ac[0];
  t.bCache = bc[0];
  if (t.aCache->loadKind != t.bCache->loadKind)
    fail<ScheduleError>("schedule of ", mm->name, ": caches ", t.aCache->name, " (", loadKindName(t.aCache->loadKind),
                        ") and ", t.bCache->name, " (", loadKindName(t.bCache->loadKind),
                        ") are filled in the same k loop with different load kinds; use one kind for both");
  t.loadKind = t.aCache->loadKind;
  if ((isFloat8(t.a->dtype) || t.a->dtype == DType::E2M1X2) &&
      t.loadKind != LoadKind::TmaLoad)  // wgmma / tcgen05 read 8-bit operands from swizzled tiles
    fail<ScheduleError>("cache ", t.aCache->name, ": ", dtypeName(t.a->dtype),
                        " operands are loaded by TMA into the "
                        "swizzled tiles 8-bit wgmma reads; use cache_after(",
                        t.a->name, ", 'tma_load') and cache_after(", t.b->name, ", 'tma_load') (load kind ",
                        loadKindName(t.loadKind), " is for 16-bit operands)");
  if (t.loadKind == LoadKind::CpAsync && !target.cpAsync)
    fail<ScheduleError>("cache ", t.aCache->name, ": load kind cp_async is not available on ", target.name, "; use ",
                        target.loadKindsAvailable());
  if (t.loadKind == LoadKind::AsyncLds && !target.asyncLds)
    fail<ScheduleError>("cache ", t.aCache->name, ": load kind async_lds (AMD LDS DMA) is not available on ",
                        target.name, "; use ", target.loadKindsAvailable());
  if (t.loadKind == LoadKind::TmaLoad) {
    if (!target.tma)
      fail<ScheduleError>("cache ", t.aCache->name,
                          ": load kind tma_load needs a target with the tensor copy engine "
                          "(sm_90a or newer); ",
                          target.name, " has none: use ", target.loadKindsAvailable());
    for (auto* c : {t.aCache, t.bCache})
      for (auto& d : c->domain.axes)
        if (d.parallel == ParallelType::TIDx || d.parallel == ParallelType::TIDy || d.parallel == ParallelType::Warp)
          fail<ScheduleError>("cache ", c->name, ": a TMA load is issued by one elected thread; its axis '", d.name,
                              "' is bound to ", parallelName(d.parallel),
                              ", which would issue it from many threads. "
                              "Leave the cache's axes serial");
  }
  auto& ca = t.aCache->circular;
  auto& cb = t.bCache->circular;
  if (ca.enabled() != cb.enabled() || (ca.enabled() && (ca.stages != cb.stages || ca.prefetch != cb.prefetch)))
    fail<ScheduleError>("circular_buffer: ", t.aCache->name, " (stages=", ca.stages, ", prefetch=", ca.prefetch,
                        ") and ", t.bCache->name, " (stages=", cb.stages, ", prefetch=", cb.prefetch,
                        ") are buffered across the same k loop with different options; give both the same "
                        "stages and prefetch");
  if (ca.enabled()) {
    t.stages = ca.stages;
    t.prefetch = ca.prefetch;
  }
  const int elemBytes = dtypeBytes(t.a->dtype);
  for (auto [v, opt] : {std::make_pair(vecA, "vec_a"), std::make_pair(vecB, "vec_b")})
    if (v != 1 && v != 2 && v != 4 && v != 8)
      fail<ScheduleError>("validate(", mm->name, ", ", opt, "=", v,
                          "): a copy moves 1, 2, 4 or 8 elements (at most "
                          "16 bytes, a power of two); use ",
                          opt,
                          "=8 for 16-byte aligned operands or the largest "
                          "power of two dividing the leading dimension");
  if (t.loadKind == LoadKind::CpAsync || t.loadKind == LoadKind::AsyncLds) {
    for (auto [v, c] : {std::make_pair(vecA, t.aCache), std::make_pair(vecB, t.bCache)})
      if (v < 2)
        fail<InputError>(
            "cache ", c->name, ": ",
            t.loadKind == LoadKind::AsyncLds ? "LDS DMA copies 4-byte dwords" : "cp.async copies at least 4 bytes",
            ", but the layout of ", c->cacheOf->name,
            " only allows 2-byte accesses (its leading dimension or base is not 4-byte aligned); use "
            "load kind 'plain' or pad the leading dimension to a multiple of 8 elements");
  }
  t.vecA = vecA;
  t.vecB = vecB;
  if (t.loadKind != LoadKind::TmaLoad) checkSmemRows(t, target, elemBytes);
  if (!mm->roles.empty()) {
    if (!target.mma.has(MmaKind::Wgmma) && !target.mma.has(MmaKind::Tcgen05))
      fail<ScheduleError>("warp_specialize(", mm->name,
                          "): warp specialization needs mbarrier pipelines (sm_90a or "
                          "newer); ",
                          target.name, " runs the k loop with all warps: drop warp_specialize");
  }
  t.roles = mm->roles;
  if (mm->splitK > 1) {
    if (!target.gridFlags)
      fail<ScheduleError>("split_k(", mm->name, "): target ", target.name,
                          " has no grid-level flags in this build "
                          "(split-K needs gpu-scope release/acquire); drop split_k");
    if (t.batched)
      fail<ScheduleError>("split_k(", mm->name,
                          "): a batched matmul puts the batch on blockIdx.z, which split-K "
                          "needs for the splits; drop split_k or run the batches as separate matmuls");
    if (!mm->roles.empty())
      fail<ScheduleError>("split_k(", mm->name,
                          "): split-K runs on the kernels without roles (one CTA per tile and "
                          "split); drop warp_specialize, or drop split_k");
  }
  t.splitK = mm->splitK;
  if (mm->streamK > 0) {
    if (!target.gridFlags)
      fail<ScheduleError>("stream_k(", mm->name, "): target ", target.name,
                          " has no grid-level flags in this build "
                          "(stream-K needs gpu-scope release/acquire); drop stream_k");
    if (mm->splitK > 1)
      fail<ScheduleError>("stream_k(", mm->name, "): stream-K and split_k(", mm->splitK,
                          ") both share the k loop "
                          "among CTAs; keep one of them");
    if (t.batched)
      fail<ScheduleError>("stream_k(", mm->name,
                          "): stream-K walks the tiles of one matmul; a batched matmul is "
                          "not supported: drop stream_k or run the batches as separate matmuls");
    if (target.mma.has(MmaKind::Tcgen05))
      fail<ScheduleError>("stream_k(", mm->name,
                          "): the sm_100a tcgen05 kernel is persistent over whole tiles in this "
                          "build; drop stream_k");
    if (t.loadKind == LoadKind::TmaLoad && mm->roles.empty())
      fail<ScheduleError>("stream_k(", mm->name,
                          "): on the TMA / wgmma kernels stream-K runs on the warp-specialized "
                          "persistent kernel: add warp_specialize({load, mma}), or use split_k on the pipeline without "
                          "roles");
    if (t.swapBlocks)
      fail<ScheduleError>("stream_k(", mm->name,
                          "): stream-K numbers the tiles itself (m tile-major); drop the "
                          "m-tiles-on-blockIdx.x binding");
  }
  t.streamK = mm->streamK;
  if (!e->groupOffsets.empty()) checkGroupedSchedule(t, *e, target);
  if (t.loadKind != LoadKind::TmaLoad && target.mma.has(MmaKind::MmaSync)) checkWarpTileRegisters(t, target);
  validateMatmulGroup(f, target, t);
  validateRolePipelineSchedule(f, target, t);                   // schedule/role_pipeline_schedule.cpp
  if (!target.mma.has(MmaKind::Tcgen05)) checkGroupedRoles(t);  // tcgen05's: validateGroupedTcgen05
  if (t.streamK > 0) checkStreamKRoles(t);                      // schedule/k_share.cpp
  validateClusterSchedule(target, t);                           // schedule/cluster_schedule.cpp
  validateBlockScaleTiling(t);                                  // schedule/block_scales.cpp
  return t;
}

void autoScheduleMatmul(Fusion& f, const TargetInfo& target, const AutoScheduleHints& given) {
  auto* mm = f.findMatmul();
  if (!mm) fail<ScheduleError>("auto schedule: this fusion has no matmul");
  validateOperandTypes(f, target);
  if (target.mma.has(MmaKind::Mfma) || target.mma.has(MmaKind::Wmma))
    return autoScheduleMatmulMfmaWmma(f, target, given);  // schedule/mfma_wmma_schedule.cpp
  const int parts = (int)f.matmuls().size();  // a matmul group: mma.sync with cp.async (validateMatmulGroup)
  // a grouped matmul: the TMA + wgmma kernel on a wgmma target, the TMA + tcgen05 kernel on sm_100a (operands
  // TMA takes), else the cp.async + mma.sync kernel on every NVIDIA target (docs/grouped.md)
  const bool grouped = !mm->definition->groupOffsets.empty();
  if (grouped && !target.mma.has(MmaKind::MmaSync))
    fail<ScheduleError>("auto schedule: the grouped matmul ", mm->name, " runs on the mma.sync kernel, which ",
                        target.name, " lacks; use an NVIDIA target (sm_80 or newer)");
  if (target.mma.has(MmaKind::Wgmma) && given.tma && grouped && parts == 1 &&
      !mm->definition->groupMasked) {  // the warp-specialized grouped kernel (gated pair, masked: mma.sync)
    auto ca = f.cachesOf(mm->definition->inputs[0]);
    if (ca.empty() || ca[0]->loadKind == LoadKind::TmaLoad) return autoScheduleGroupedWgmma(f, target);
  }
  if (target.mma.has(MmaKind::Wgmma) && given.tma && !grouped &&
      parts == 1) {  // Hopper: TMA + wgmma + roles, unless a cache asks otherwise
    auto* e = mm->definition;
    auto ca = f.cachesOf(e->inputs[0]);
    if (ca.empty() || ca[0]->loadKind == LoadKind::TmaLoad) return autoScheduleMatmulWgmma(f, target, given);
  }
  if (target.mma.has(MmaKind::Tcgen05) && given.tma && parts == 1 &&
      !mm->definition->groupMasked) {  // Blackwell: TMA + tcgen05 + roles (schedule/tcgen05_schedule.cpp)
    auto ca = f.cachesOf(mm->definition->inputs[0]);
    if (ca.empty() || ca[0]->loadKind == LoadKind::TmaLoad) return autoScheduleMatmulTcgen05(f, target, given);
  }
  if (!target.mma.has(MmaKind::MmaSync))
    fail<ScheduleError>("auto schedule: target ", target.name, " has no lowering for its matrix cores in this build");
  int bm = 128, bn = 128, bk = 32, wm = 2, wn = 2, stages = 4;
  AutoScheduleHints hints = given;  // concrete sizes of the definition fill the hints left open
  {
    auto* e = mm->definition;
    auto* a = e->inputs[0];
    int r = a->rank();
    const Size& K = e->transA ? a->shape[r - 2] : a->shape[r - 1];
    const Size& M = mm->shape[mm->rank() - 2];
    if (hints.k < 0 && !K.isSymbolic()) hints.k = K.value;
    if (hints.m < 0 && !M.isSymbolic()) hints.m = M.value;
  }
  if (hints.m >= 0 && hints.m <= 64) {  // skinny M (decode-like): narrower m tile, wider n
    bm = 64;
    wm = 1;
    wn = 4;
  }
  if (parts == 3) bn = 192;  // q/k/v: each warp's n range splits into 3 slices of whole 8-column fragments
  // an f32 output holds each row block's results as pairs of floats (16 pairs x 2 registers) beside the 128
  // accumulators of a 64 x 64 warp tile; with a residual read by scalar loads (each value and its address) that
  // is 230-255 registers (NVRTC: an f32 residual spilled 76 bytes): 8 warps (2 x 4) halve the warp tile
  const auto& outs = f.outputs();
  if (bm == 128 && wn == 2 && parts == 1 && !hints.epiPairs && !outs.empty() && dtypeBytes(outs[0]->dtype) == 4 &&
      matrixEpilogueOperand(f))
    wn = 4;
  auto* mmExpr = mm->definition;
  auto existing = f.cachesOf(mmExpr->inputs[0]);
  if (!existing.empty() && existing[0]->loadKind == LoadKind::Plain) {
    // synchronous copies hold their data in registers on the way: halve the accumulator tile
    bm = 64;
  }
  if (hints.k >= 0 && hints.k < (int64_t)bk * stages) stages = std::max<int>(2, (int)((hints.k + bk - 1) / bk));
  warpTiledNest(f, mm, bm, bn, bk, wm, wn);
  auto* e = mm->definition;
  for (auto* in : {e->inputs[0], e->inputs[1]}) {
    auto caches = f.cachesOf(in);
    TensorView* c = caches.empty() ? f.cacheAfter(in, LoadKind::CpAsync) : caches[0];
    if (hints.k < 0 || (hints.k + bk - 1) / bk >= stages) circularBuffer(c, stages, -1);
  }
  if (mm->rank() == 2 && parts == 1 && !grouped && kShareOk(target) && hints.m > 0 && hints.n > 0 &&
      hints.k > 0) {  // too few tiles: split-K or stream-K
    // (a matmul group shares no k loop: validateMatmulGroup; a target without grid flags runs neither)
    auto c = chooseKShare(((hints.m + bm - 1) / bm) * ((hints.n + bn - 1) / bn), (hints.k + bk - 1) / bk, stages,
                          hints.sms, bm, bn, bk, streamKOk(target), hints.kShare);
    if (c.splits > 1) splitK(mm, c.splits);
    if (c.streamCtas > 0) streamK(mm, c.streamCtas);
  } else if (hints.kShare != "auto" && hints.kShare != "none") {
    chooseKShare(0, 0, stages, 0, bm, bn, bk, false, hints.kShare);  // the mode's spelling is checked all the same
  }
}

}  // namespace heddle
