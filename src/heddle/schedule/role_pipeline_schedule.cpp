// Hopper schedule rules (see role_pipeline_schedule.h). Every rule fails with a ScheduleError that names
// the tensor or role, the rule, and a valid alternative.
#include "heddle/schedule/role_pipeline_schedule.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "heddle/schedule/register_pool.h"
#include "heddle/schedule/schedule.h"
#include "heddle/schedule/tcgen05_schedule.h"

namespace heddle {

const PipelineRole* RolePipelineSchedule::role(PipelineRole::Kind k) const {
  for (auto& r : roles)
    if (r.kind == k) return &r;
  return nullptr;
}

namespace {

// What each role does. The data flow of a warp-specialized matmul has three async positions, in
// producer-before-consumer order: the producer of the TMA-copied operand tiles, the MMA that defines
// the accumulator, the epilogue that consumes it (lower/analysis/role_graph.h). A role named for a
// position takes it (load/producer/tma, mma/math/compute/consumer, epilogue/store/output); the other
// roles take the positions left, in the order given (thread order): {"a": 1, "b": 8} is {load, mma}.
std::vector<PipelineRole::Kind> roleKinds(const std::string& mm, const std::vector<Role>& roles) {
  auto named = [](const std::string& n) -> int {
    if (n == "load" || n == "producer" || n == "tma") return PipelineRole::Load;
    if (n == "mma" || n == "math" || n == "compute" || n == "consumer") return PipelineRole::Mma;
    if (n == "epilogue" || n == "store" || n == "output") return PipelineRole::Epilogue;
    return -1;
  };
  std::vector<int> kinds;
  std::set<int> taken;
  for (auto& r : roles) {
    kinds.push_back(named(r.name));
    if (kinds.back() >= 0) taken.insert(kinds.back());
  }
  std::vector<PipelineRole::Kind> out;
  int next = PipelineRole::Load;
  for (size_t i = 0; i < roles.size(); ++i) {
    if (kinds[i] < 0) {
      while (taken.count(next)) ++next;
      if (next > PipelineRole::Epilogue)
        fail<ScheduleError>("warp_specialize(", mm, "): role '", roles[i].name,
                            "' has no work left: the matmul's "
                            "data flow has three async positions (the TMA producer of the operand tiles, the MMA "
                            "defining the accumulator, the epilogue consuming it) and the other roles take them; "
                            "drop the role or merge its warps into another");
      kinds[i] = next;
      taken.insert(next);
    }
    out.push_back((PipelineRole::Kind)kinds[i]);
  }
  return out;
}

void validateRolesWgmma(const MatmulTiling& t, RolePipelineSchedule& h, const TargetInfo& target, DType outDtype) {
  const std::string mm = t.mm->name;
  for (auto& r : t.roles)
    if (r.stages)
      fail<ScheduleError>("warp_specialize(", mm, "): role '", r.name, "' sets stages=", r.stages,
                          ", the tensor-memory "
                          "accumulator ring of the sm_100a kernel; ",
                          target.name,
                          " stages accumulators in shared "
                          "memory as they fit: drop stages=");
  if (!h.warMbarrier)
    fail<ScheduleError>("warp_specialize(", mm,
                        "): circular_buffer(war='block_sync') is for kernels without roles; "
                        "a warp-specialized ring releases its slots through empty mbarriers (drop war=)");
  PipelineRole load, mma, epi;
  int nLoad = 0, nMma = 0, nEpi = 0;
  const std::vector<PipelineRole::Kind> kinds = roleKinds(mm, t.roles);
  for (size_t i = 0; i < t.roles.size(); ++i) {
    auto& r = t.roles[i];
    PipelineRole x;
    x.name = r.name;
    x.kind = kinds[i];
    x.warps = r.warps;
    x.registers = r.registers;
    if (x.kind == PipelineRole::Load) load = x, ++nLoad;
    else if (x.kind == PipelineRole::Epilogue) epi = x, ++nEpi;
    else mma = x, ++nMma;
  }
  if (nLoad != 1 || nMma != 1 || nEpi > 1)
    fail<ScheduleError>("warp_specialize(", mm,
                        "): the roles must be one producer ('load'), one MMA role (e.g. "
                        "'mma') and optionally one 'epilogue'; got ",
                        nLoad, " producer, ", nMma, " MMA and ", nEpi, " epilogue role(s)");
  if (load.warps > 4)
    fail<ScheduleError>("warp_specialize(", mm, "): role '", load.name, "' has ", load.warps,
                        " warps; one elected "
                        "thread issues every TMA copy, so 1 warp is enough (it is padded to a warpgroup for "
                        "setmaxnreg)");
  load.warpgroups = 1;
  if (mma.warps % 4)
    fail<ScheduleError>("warp_specialize(", mm, "): role '", mma.name, "' has ", mma.warps,
                        " warps; MMA roles are whole "
                        "warpgroups (warpgroups=",
                        (mma.warps + 3) / 4, ")");
  mma.warpgroups = mma.warps / 4;
  if (mma.warpgroups == h.tileWarpgroups) {
    h.coop = true;
  } else if (mma.warpgroups == 2 * h.tileWarpgroups && h.tileWarpgroups == 1) {
    h.coop = false;  // ping-pong: each warpgroup owns whole tiles
  } else {
    fail<ScheduleError>("warp_specialize(", mm, "): role '", mma.name, "' has ", mma.warpgroups,
                        " warpgroup(s) but the "
                        "tile split gives ",
                        h.tileWarpgroups, " (", 4 * h.tileWarpgroups, " warps over m); use ", h.tileWarpgroups,
                        " (cooperative: they split each tile)",
                        h.tileWarpgroups == 1 ? " or 2 (ping-pong: two tiles in flight)" : "");
  }
  h.mmaWarpgroups = mma.warpgroups;
  h.roles.clear();
  load.firstWarp = 0;
  mma.firstWarp = 4;
  h.roles.push_back(load);
  h.roles.push_back(mma);
  if (nEpi) {
    if (!h.coop)
      fail<ScheduleError>("warp_specialize(", mm,
                          "): an epilogue role needs cooperative MMA warpgroups (each "
                          "epilogue thread drains what one MMA thread staged); give '",
                          mma.name, "' ", h.tileWarpgroups, " warpgroup(s) or drop the epilogue role");
    if (epi.warps != mma.warps)
      fail<ScheduleError>("warp_specialize(", mm, "): role '", epi.name, "' has ", epi.warps,
                          " warps; the epilogue "
                          "drains the MMA role's staged accumulators thread for thread, so it needs the same ",
                          mma.warps, " warps");
    epi.warpgroups = epi.warps / 4;
    epi.firstWarp = 4 + 4 * mma.warpgroups;
    h.roles.push_back(epi);
    h.tmaStore = true;
  }
  int wgs = 0;
  for (auto& r : h.roles) wgs += r.warpgroups;
  h.threads = 128 * wgs;
  if (h.threads > target.maxThreads)
    fail<ScheduleError>("warp_specialize(", mm, "): ", h.threads, " threads (", wgs, " warpgroups) exceed ",
                        target.name, "'s ", target.maxThreads);
  // the setmaxnreg pool: every warpgroup holds its budget (or the entry count) at the same time, out of
  // the registers the CTA was launched with (register_pool.h; Kernel.build checks ptxas's count again)
  checkRegisterPool(mm, roleBudgets(h), registerPool(h.threads));
  // accumulators live in registers: leave the rest of the budget for addresses, descriptors and the
  // epilogue (with less than ~48 spare registers ptxas spills)
  const int accRegs = (h.coop ? h.wgRows : t.bm) * t.bn / 128;
  if (mma.registers && !accumulatorsFit(accRegs, mma.registers))
    fail<ScheduleError>("warp_specialize(", mm, "): role '", mma.name, "' holds ", accRegs,
                        " accumulators per thread (", h.coop ? h.wgRows : t.bm, " x ", t.bn,
                        " per warpgroup) in a budget of ", mma.registers, " registers; give it at least ",
                        (accRegs + kSpareRegisters + 7) / 8 * 8, " registers or use a smaller tile");
  h.persistent = true;
  if (h.tmaStore) {  // accumulator ring: two stages when they fit, else one
    const int64_t operand = (int64_t)t.stages * (t.bm * t.bk + t.bk * t.bn) * dtypeBytes(t.a->dtype);
    const int64_t stageC = (int64_t)t.bm * (t.bn + 4) * 4, tileD = (int64_t)t.bm * t.bn * dtypeBytes(outDtype);
    const int64_t bars = 8 * (2 * t.stages + 4) + 1024;
    h.accStages = operand + 2 * stageC + tileD + bars <= target.smemLimit ? 2 : 1;
  }
}

// Without roles every warpgroup holds its share of the tile's accumulators under the entry cap.
void checkAccumulatorRegisters(const MatmulTiling& t, const TargetInfo& target) {
  const auto& h = t.rolePipeline;
  const int accRegs = h.wgRows * t.bn / 128;
  const int cap = entryRegisterCap(128 * h.tileWarpgroups);  // register_pool.h, shared with the sm_80 warp tiles
  if (accumulatorsFit(accRegs, cap)) return;
  std::ostringstream fix;
  for (int w = h.tileWarpgroups + 1; 128 * w <= target.maxThreads; ++w)
    if (t.bm % (64 * w) == 0 && accumulatorsFit((t.bm / w) * t.bn / 128, entryRegisterCap(128 * w))) {
      fix << "split the m tile over " << w << " warpgroups (" << 4 * w << " warps over m) or ";
      break;
    }
  int bn = t.bn;
  while (bn > 64 && !accumulatorsFit(h.wgRows * bn / 128, cap)) bn -= 64;
  fix << "use an n tile of " << bn << " (" << t.bm << "x" << bn << "x" << t.bk << ")";
  fail<ScheduleError>("schedule of ", t.mm->name, ": tile ", t.bm, "x", t.bn, " on ", h.tileWarpgroups,
                      " warpgroup(s) holds ", accRegs, " accumulators per thread (", h.wgRows, " x ", t.bn,
                      " per warpgroup) but a thread has ", cap, " registers and needs ~", kSpareRegisters,
                      " besides them (ptxas would spill); ", fix.str());
}

}  // namespace

// A bias cached with tma_load: the second producer role (role_pipeline_schedule.h epiTma).
void validateEpilogueTma(const Fusion& f, MatmulTiling& t, int warp) {
  auto& h = t.rolePipeline;
  for (auto* in : f.inputs()) {
    auto caches = f.cachesOf(in);
    if (in == t.a || in == t.b || caches.empty()) continue;
    auto* c = caches[0];
    const std::string drop = "; or drop cache_after(" + in->name + ") to read it per element from global memory";
    if (c->loadKind != LoadKind::TmaLoad)
      fail<ScheduleError>("cache ", c->name,
                          ": an epilogue operand is cached only with 'tma_load' (a producer role "
                          "loads its slice of each tile), not '",
                          loadKindName(c->loadKind), "'", drop);
    if (!h.enabled || !h.warpSpecialized)
      fail<ScheduleError>("cache ", c->name,
                          ": a TMA-loaded epilogue operand comes from a producer role through an "
                          "mbarrier ring; schedule warp_specialize({load, mma[, epilogue]}) with tma_load operands",
                          drop);
    if (!h.coop)
      fail<ScheduleError>("cache ", c->name,
                          ": a TMA-loaded epilogue operand is built for cooperative MMA warpgroups "
                          "(ping-pong warpgroups would consume its ring out of order); give the MMA role ",
                          h.tileWarpgroups, " warpgroup(s)", drop);
    if (in->rank() > 2)  // a batched matmul shares a bias row or [M, N] residual across its batch
      fail<ScheduleError>("cache ", c->name, ": TMA loads a bias row [N] or a residual [M, N] for the epilogue; ",
                          in->str(), " has rank ", in->rank(), t.batched ? " (one residual per batch)" : "", drop);
    if (!h.epiTma.empty())
      fail<ScheduleError>("cache ", c->name, ": a second TMA-loaded epilogue operand (", h.epiTma,
                          " has one); one "
                          "operand has a producer role so far",
                          drop);
    const int st = c->circular.enabled() ? c->circular.stages : 2;
    if (st > 8)
      fail<ScheduleError>("circular_buffer(", c->name, ", stages=", st, "): the ring of ", in->name,
                          " allows at most 8 stages");
    h.epiTma = in->name;
    h.epiStages = st;
    PipelineRole r;
    r.name = in->name + "_load";
    r.kind = PipelineRole::EpiLoad;
    r.warps = 1;
    r.firstWarp = warp;         // inside the load warpgroup (whose budget it shares): no warpgroup of its own
    auto at = h.roles.begin();  // the roles stay in thread order
    while (at != h.roles.end() && at->firstWarp <= warp) ++at;
    h.roles.insert(at, r);
  }
}

namespace {

// epilogue_store(kind) (role_pipeline_schedule.h mmaTmaStore). The epilogue role always stores by TMA; the
// two-role cooperative kernel does when asked ("tma"); everything else stores directly.
void validateEpilogueStore(const Fusion& f, MatmulTiling& t, const TargetInfo& target) {
  auto& h = t.rolePipeline;
  const std::string& kind = t.mm->epilogueStore;
  const std::string mm = t.mm->name;
  if (kind.empty()) return;
  const bool epiRole = h.role(PipelineRole::Epilogue) != nullptr;
  if (kind == "direct") {
    if (epiRole)
      fail<ScheduleError>("epilogue_store(", mm,
                          ", 'direct'): the epilogue role stores its tile by TMA; drop the "
                          "epilogue role (roles load and mma) for per-thread stores");
    return;
  }
  if (epiRole) return;  // "tma": what the epilogue role does anyway
  const std::string drop = "; or epilogue_store('direct')";
  if (!h.enabled || !h.warpSpecialized)
    fail<ScheduleError>("epilogue_store(", mm,
                        ", 'tma'): the TMA-store epilogue is built for the warp-specialized "
                        "sm_90a kernels (warp_specialize with tma_load operands)",
                        drop);
  // several outputs (training: the pre-activation beside D): each output has staging slots of its own, the
  // same chunks, and the elected thread stores them all in one bulk group; every output's element size
  // must be D's (one 128-byte box per output per chunk). A computed output scale (heddle.ops.quantize) stages
  // q only: s [M, groups] is stored directly by the lanes that own each row's amax (codegen/wgmma_printer.cpp)
  const auto& all = f.outputs();
  if (all.empty()) return;  // build_epilogue names it
  const bool quant = all[0]->definition && all[0]->definition->kind == OpKind::Quantize;
  const std::vector<TensorView*> outs(all.begin(), quant ? all.begin() + 1 : all.end());
  const int esz = dtypeBytes(outs[0]->dtype);
  // 8-bit outputs: a chunk is one 128-byte swizzle row of 128 one-byte columns (CUDA driver API
  // cuTensorMapEncodeTiled: boxDim[0] * elementSize <= 128 for CU_TENSOR_MAP_SWIZZLE_128B; CUTLASS's sm90
  // epilogue takes the 128-byte swizzle atom for 8-bit outputs as well), so the n tile holds whole chunks of 128
  if (esz == 1 && t.bn % 128)
    fail<ScheduleError>("epilogue_store(", mm, ", 'tma'): output ", outs[0]->name, " is ", dtypeName(outs[0]->dtype),
                        "; the TMA-store epilogue stages 8-bit outputs in chunks of 128 columns (one 128-byte swizzle "
                        "row), but the n tile is ",
                        t.bn, ": split n by a multiple of 128", drop);
  // ... and on ping-pong warpgroups a warpgroup's tile of at most 64 x 128 (64 accumulators a thread): with a whole
  // 128 x 128 tile (128) beside the 16-bit st.shared pairs NVRTC 13 spilled (16 bytes for a plain e4m3 output,
  // 80 with a computed scale; tests/codegen/test_quantize_nvrtc.py), where the direct store does not
  const int accs = t.bm * t.bn / 128;
  if (esz == 1 && !h.coop && accs > 64)
    fail<ScheduleError>("epilogue_store(", mm, ", 'tma'): output ", outs[0]->name, " is ", dtypeName(outs[0]->dtype),
                        "; the TMA-store epilogue of an 8-bit output on ping-pong warpgroups is built for a "
                        "warpgroup tile of at most 64 x 128 (64 accumulators a thread), but each warpgroup holds ",
                        t.bm, " x ", t.bn, " (", accs,
                        "; the staged pairs spill there): use bm = 64, cooperative warpgroups, or "
                        "epilogue_store('direct')",
                        drop);
  for (size_t i = 1; i < outs.size(); ++i)
    if (dtypeBytes(outs[i]->dtype) != esz)
      fail<ScheduleError>("epilogue_store(", mm, ", 'tma'): output ", outs[i]->name, " (", dtypeName(outs[i]->dtype),
                          ") and output ", outs[0]->name, " (", dtypeName(outs[0]->dtype),
                          ") differ in element size; "
                          "the staged chunks are one 128-byte box of every output. Give the outputs one element size",
                          drop);
  h.mmaTmaStore = true;
  h.storeCols = 128 / esz;  // one 128-byte swizzle box per chunk (bn is a multiple of 64; 128 for 8-bit outputs)
  const int64_t operand = (int64_t)t.stages * (t.bm * t.bk + t.bk * t.bn) * dtypeBytes(t.a->dtype);
  int64_t bias = 0;  // the TMA-loaded bias row / residual tile ring
  for (auto* in : f.inputs())
    if (in->name == h.epiTma) bias = (int64_t)h.epiStages * (in->rank() == 2 ? t.bm : 1) * t.bn * 2;
  // a chunk of every output; ping-pong: slots of their own per warpgroup
  const int64_t chunk = (int64_t)t.bm * 128 * (int64_t)outs.size() * (h.coop ? 1 : 2);
  const int64_t bars = 8 * (2 * t.stages + 2 * h.epiStages + 2) + 1024;  // + the order pair, alignment slack
  h.storeStages = operand + 2 * chunk + bias + bars <= target.smemLimit ? 2 : 1;
  if (operand + chunk + bias + bars > target.smemLimit)
    fail<ScheduleError>("epilogue_store(", mm, ", 'tma'): the operand ring (", operand,
                        " bytes) and one staging slot "
                        "of ",
                        chunk, " bytes (", outs.size(), " output(s)", h.coop ? "" : ", both warpgroups", ") exceed ",
                        target.name, "'s ", target.smemLimit,
                        " bytes of shared memory; use fewer stages or a smaller tile", drop);
}

}  // namespace

std::vector<PipelineRole::Kind> pipelineRoleKinds(const std::string& mm, const std::vector<Role>& roles) {
  return roleKinds(mm, roles);
}

void validateRolePipelineSchedule(const Fusion& f, const TargetInfo& target, MatmulTiling& t) {
  auto& h = t.rolePipeline;
  const std::string mm = t.mm->name;
  if (t.loadKind != LoadKind::TmaLoad) {
    if (!t.roles.empty())
      fail<ScheduleError>("warp_specialize(", mm,
                          "): the roles hand tiles over through mbarrier rings fed by TMA; "
                          "cache the operands with cache_after(a, 'tma_load') and cache_after(b, 'tma_load') "
                          "(or drop warp_specialize for the ",
                          loadKindName(t.loadKind), " pipeline)");
    validateEpilogueTma(f, t, 1);
    validateEpilogueStore(f, t, target);
    return;
  }
  if (target.mma.has(MmaKind::Tcgen05)) {
    return validateTcgen05Schedule(f, target, t);  // schedule/tcgen05_schedule.cpp (epilogue_store: its own rule)
  }
  if (!target.mma.has(MmaKind::Wgmma))
    fail<ScheduleError>("cache ", t.aCache->name, ": tma_load feeds the warpgroup MMA (wgmma), which ", target.name,
                        " does not have in this build (sm_90a does); use ", target.loadKindsAvailable(), " on ",
                        target.name);
  h.enabled = true;
  h.warMbarrier = t.aCache->circular.mbarrierWar;
  if (t.warpsN != 1)
    fail<ScheduleError>("schedule of ", mm, ": warps split n (", t.warpsN,
                        " warps); a warpgroup MMA computes 64-row "
                        "slabs across the whole n tile, so bind only an m split to 'warp' (4 warps per warpgroup)");
  if (t.warpsM % 4)
    fail<ScheduleError>("schedule of ", mm, ": ", t.warpsM,
                        " warps over m are not whole warpgroups; wgmma needs 4 "
                        "warps per warpgroup (split 'm.i' so that 4, 8 or 12 warps cover the m tile)");
  h.tileWarpgroups = t.warpsM / 4;
  h.mmaWarpgroups = h.tileWarpgroups;
  h.wgRows = t.bm / h.tileWarpgroups;
  if (h.wgRows % 64)
    fail<ScheduleError>("schedule of ", mm, ": m tile ", t.bm, " over ", h.tileWarpgroups, " warpgroup(s) gives ",
                        h.wgRows,
                        " rows each; a warpgroup computes multiples of 64 rows (wgmma m64): use an m "
                        "tile of ",
                        64 * h.tileWarpgroups, " or ", 128 * h.tileWarpgroups);
  if (t.bm > 256)
    fail<ScheduleError>("schedule of ", mm, ": m tile ", t.bm,
                        " exceeds the TMA box limit of 256 rows; use 256 or less");
  if (t.bn != 64 && t.bn != 128 && t.bn != 192 && t.bn != 256)
    fail<ScheduleError>("schedule of ", mm, ": n tile ", t.bn,
                        " is not a wgmma width this build issues; use 64, 128, "
                        "192 or 256");
  if (t.stages < 2)
    fail<ScheduleError>("cache ", t.aCache->name,
                        ": tma_load needs circular_buffer(stages >= 2): each stage is one "
                        "slot of the mbarrier ring");
  if (t.stages > 8)
    fail<ScheduleError>("circular_buffer(", t.aCache->name, ", stages=", t.stages,
                        "): the Hopper ring allows at most 8 "
                        "stages (wgmma.wait_group keeps at most 7 groups in flight)");
  h.threads = 128 * h.tileWarpgroups;
  if (t.roles.empty()) {
    checkAccumulatorRegisters(t, target);
  } else {
    h.warpSpecialized = true;
    validateRolesWgmma(t, h, target, f.outputs().empty() ? DType::F16 : f.outputs()[0]->dtype);
  }
  validateEpilogueTma(f, t, 1);
  validateEpilogueStore(f, t, target);
}

}  // namespace heddle
