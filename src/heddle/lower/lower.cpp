// THE ordered pass list. Each pass lives in passes/<name>.cpp with a header showing the IR before
// and after; each runs at most once, in this order, when its `when` holds (a predicate over the context
// as the earlier passes left it, with the same condition in words), and can be dumped and timed
// (HEDDLE_DUMP=passes: which passes ran, which were skipped and why). No pass gates itself.
//
//   validate_schedule   Fusion + schedule attributes      -> MatmulTiling (or ScheduleError)
//   build_matmul_loops  MatmulTiling                      -> kernel IR: serial k loop of TileLoad/MmaStep
//   build_epilogue      Fusion exprs after the matmul     -> per-element epilogue program
//   split_k             split_k(S): k loop per blockIdx.z -> k-tiles [z*nk/S, (z+1)*nk/S), grid z = S
//   stream_k            stream_k(G): k loop over KS from skkt -> persistent grid x <= G sharing tiles x k-tiles
//   block_scale_ring    block-scaled matmul's k loop      -> + TMA load of the k-tile's scale_a [BM] into sSA (the operand ring)
//   mx_scale_ring       mx32 / nv16 matmul's k loop       -> + TMA loads of the k-tile's scale chunks into sSFA, sSFB (the ring)
//   warp_specialize     Hopper roles (sm_90a)             -> one branch per role, persistent tiles, mbarrier rings
//   block_scale_promotion  block-scaled matmul's MMA role -> wgmma into tmp per promotion interval, wait, tmp * scales -> acc
//   tma_store_epilogue  MMA role's direct epilogue store  -> stmatrix chunks in sD + TMA stores (epilogue_store("tma"))
//   vectorize_epilogue_reads  vec_e=2, pair epilogue     -> its global operands read in aligned column pairs
//   stream_k_roles      stream_k(G) with roles (sm_90a)   -> both roles walk the CTA's (tile, k-range) segments; fixup
//   cluster_multicast   cluster(2, along): the ring        -> paired tile walk, shared tile multicast, remote releases
//   tcgen05_specialize  Blackwell roles (sm_100a)         -> load warp, tcgen05 MMA warp, epilogue warpgroup; TMEM ring
//                                                            (epilogue_store("tma"): chunks through sD + TMA stores)
//   circular_buffer     serial k loop                     -> prologue / main / epilogue clones + commits
//   tma_pipeline        Hopper TMA loop without roles     -> full/empty mbarrier ring, wgmma waits (cases 8, 9)
//   fence_mbarrier_init init blocks of async-proxy barriers -> + fence.mbarrier_init.release.cluster after the inits
//   plan_smem           buffers                           -> offsets, aliasing, limit check
//   insert_syncs        kernel IR without syncs           -> block syncs + cp.async waits, SyncPlan
//   reduce_splits       split-K epilogue                  -> partials through the workspace behind grid flags
//   stream_k_fixup      stream-K one-segment body         -> segment walk, running sums CTA to CTA behind grid flags
//   check_uniformity    kernel IR with syncs              -> unchanged (or refused: a collective in a divergent branch)
#include "heddle/lower/lower.h"

#include <chrono>
#include <cstdio>
#include <cstring>

#include "heddle/sync/plan.h"

namespace heddle {

namespace {

// The `when` of each pass (one predicate per condition; the words are the dump's).
bool always(const LowerContext&) { return true; }
const RolePipelineSchedule& roles(const LowerContext& c) { return c.tiling.rolePipeline; }

const When kAlways{"always", always};
const When kSplitKSchedule{"split-K schedules (split_k(S), S > 1)",
                           [](const LowerContext& c) { return c.tiling.splitK > 1; }};
const When kStreamKSchedule{"stream-K schedules (stream_k(G))",
                            [](const LowerContext& c) { return c.tiling.streamK > 0; }};
const When kWgmmaRoles{"role-pipeline kernels with wgmma (warp_specialize, not tcgen05)", [](const LowerContext& c) {
                         return roles(c).enabled && roles(c).warpSpecialized && !roles(c).tcgen05;
                       }};
const When kBlockScales{"block-scaled matmuls (block128: their role-pipeline wgmma kernel)", [](const LowerContext& c) {
                          return c.tiling.mm->definition->scaleKind == ScaleKind::Block128;
                        }};
const When kMxScales{"mx32- and nv16-scaled matmuls (MXFP8, MXFP4, NVFP4: their tcgen05 role-pipeline kernel)",
                     [](const LowerContext& c) { return isMxScaled(c.tiling.mm); }};
const When kTmaStore{"epilogue_store(\"tma\") from the MMA role",
                     [](const LowerContext& c) { return roles(c).mmaTmaStore; }};
const When kPairReads{"vec_e != 1 (2: epilogue operands read in column pairs; others refused)",
                      [](const LowerContext& c) { return c.options.vecE != 1; }};
const When kStreamKRoles{"stream-K role-pipeline kernels",
                         [](const LowerContext& c) { return c.kernel.streamK > 0 && roles(c).warpSpecialized; }};
const When kCluster{"cluster(2, along) schedules", [](const LowerContext& c) { return roles(c).cluster > 1; }};
const When kTcgen05Roles{"role-pipeline kernels with tcgen05 MMA",
                         [](const LowerContext& c) { return roles(c).enabled && roles(c).tcgen05; }};
const When kMbarrierRings{"wgmma / tcgen05 kernels (TMA loads into mbarrier rings)",
                          [](const LowerContext& c) { return roles(c).enabled; }};
const When kUnplannedSyncs{"kernels whose syncs no builder placed (not the mbarrier rings, built with theirs)",
                           [](const LowerContext& c) { return !c.kernel.syncsPlanned; }};
const When kSplitKKernel{"split-K kernels", [](const LowerContext& c) { return c.kernel.splitK > 1; }};
const When kStreamKBlock{"stream-K kernels without roles",
                         [](const LowerContext& c) { return c.kernel.streamK > 0 && !roles(c).warpSpecialized; }};

}  // namespace

const std::vector<Pass>& passList() {
  static const std::vector<Pass> list = {
      {"validate_schedule", kAlways, passes::validateSchedule},
      {"build_matmul_loops", kAlways, passes::buildMatmulLoops},
      {"build_epilogue", kAlways, passes::buildEpilogue},
      {"split_k", kSplitKSchedule, passes::splitK},
      {"stream_k", kStreamKSchedule, passes::streamK},
      {"block_scale_ring", kBlockScales, passes::blockScaleRing},
      {"mx_scale_ring", kMxScales, passes::mxScaleRing},
      {"warp_specialize", kWgmmaRoles, passes::warpSpecialize},
      {"block_scale_promotion", kBlockScales, passes::blockScalePromotion},
      {"tma_store_epilogue", kTmaStore, passes::tmaStoreEpilogue},
      {"vectorize_epilogue_reads", kPairReads, passes::vectorizeEpilogueReads},
      {"stream_k_roles", kStreamKRoles, passes::streamKRoles},
      {"cluster_multicast", kCluster, passes::clusterMulticast},
      {"tcgen05_specialize", kTcgen05Roles, passes::tcgen05Specialize},
      {"circular_buffer", kAlways, passes::circularBuffer},
      {"tma_pipeline", kMbarrierRings, passes::tmaPipeline},
      {"fence_mbarrier_init", kAlways, passes::fenceMbarrierInit},
      {"plan_smem", kAlways, passes::planSmem},
      {"insert_syncs", kUnplannedSyncs, passes::insertSyncs},
      {"reduce_splits", kSplitKKernel, passes::reduceSplits},
      {"stream_k_fixup", kStreamKBlock, passes::streamKFixup},
      {"check_uniformity", kAlways, passes::checkUniformity},
      {"drop_unused_lets", kAlways, passes::dropUnusedLets},
  };
  return list;
}

void requireWhen(const LowerContext& c, const char* name) {
  for (auto& p : passList()) {
    if (std::strcmp(p.name, name) != 0) continue;
    if (!p.when.holds(c))
      fail<HeddleError>(name, ": called on ", c.kernel.name, ", but it runs only for ", p.when.text);
    return;
  }
  fail<HeddleError>("requireWhen: no pass named ", name);
}

std::unique_ptr<LowerContext> lower(const Fusion& f, const TargetInfo& t, const LowerOptions& o) {
  auto ctx = std::unique_ptr<LowerContext>(new LowerContext{f, t, o, {}, {}, {}});
  std::string before = ctx->kernel.str();
  for (auto& p : passList()) {
    PassRecord r;
    r.name = p.name;
    r.when = p.when.text;
    r.ran = p.when.holds(*ctx);
    if (r.ran) {
      auto t0 = std::chrono::steady_clock::now();
      p.run(*ctx);
      auto t1 = std::chrono::steady_clock::now();
      ctx->kernel.renumber();
      sync::stampPass(ctx->kernel, p.name);  // every sync-plan entry names the pass that placed it
      r.ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    }
    if (o.dumpPasses) {
      std::string after = ctx->kernel.str();  // measured for a skipped pass too: it must say unchanged
      r.changed = after != before;
      r.irAfter = r.changed ? after : "(unchanged)\n";
      before = after;
    }
    ctx->passes.push_back(std::move(r));
  }
  return ctx;
}

std::string passDump(const LowerContext& c) {
  std::string out;
  for (auto& r : c.passes) {
    if (!r.ran) {
      out += "--- skipped " + r.name + " (runs when: " + r.when + ")\n";
      continue;
    }
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.3f", r.ms);
    out += "--- after " + r.name + " (" + ms + " ms; runs when: " + r.when + ")\n" + r.irAfter;
  }
  return out;
}

namespace passes {
// validate_schedule: reads the schedule attributes off the tensors; nothing else may read them.
void validateSchedule(LowerContext& c) {
  c.tiling = validateMatmulSchedule(c.fusion, c.target, c.options.vecA, c.options.vecB);
}
}  // namespace passes

}  // namespace heddle
