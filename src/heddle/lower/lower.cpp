// THE ordered pass list. Each pass lives in passes/<name>.cpp with a header showing the IR before
// and after; each runs once, in this order, and can be dumped and timed (HEDDLE_DUMP=passes).
//
//   validate_schedule   Fusion + schedule attributes      -> MatmulTiling (or ScheduleError)
//   build_matmul_loops  MatmulTiling                      -> kernel IR: serial k loop of TileLoad/MmaStep
//   build_epilogue      Fusion exprs after the matmul     -> per-element epilogue program
//   split_k             split_k(S): k loop per blockIdx.z -> k-tiles [z*nk/S, (z+1)*nk/S), grid z = S
//   stream_k            stream_k(G): k loop over KS from skkt -> persistent grid x <= G sharing tiles x k-tiles
//   warp_specialize     Hopper roles (sm_90a)             -> one branch per role, persistent tiles, mbarrier rings
//   tma_store_epilogue  MMA role's direct epilogue store  -> stmatrix chunks in sD + TMA stores (epilogue_store("tma"))
//   vectorize_epilogue_reads  vec_e=2, pair epilogue     -> its global operands read in aligned column pairs
//   stream_k_roles      stream_k(G) with roles (sm_90a)   -> both roles walk the CTA's (tile, k-range) segments; fixup
//   cluster_multicast   cluster(2, along): the ring        -> paired tile walk, shared tile multicast, remote releases
//   tcgen05_specialize  Blackwell roles (sm_100a)         -> load warp, tcgen05 MMA warp, epilogue warpgroup; TMEM ring
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

#include "heddle/sync/plan.h"

namespace heddle {

const std::vector<Pass>& passList() {
  static const std::vector<Pass> list = {
      {"validate_schedule", passes::validateSchedule},
      {"build_matmul_loops", passes::buildMatmulLoops},
      {"build_epilogue", passes::buildEpilogue},
      {"split_k", passes::splitK},
      {"stream_k", passes::streamK},
      {"warp_specialize", passes::warpSpecialize},
      {"tma_store_epilogue", passes::tmaStoreEpilogue},
      {"vectorize_epilogue_reads", passes::vectorizeEpilogueReads},
      {"stream_k_roles", passes::streamKRoles},
      {"cluster_multicast", passes::clusterMulticast},
      {"tcgen05_specialize", passes::tcgen05Specialize},
      {"circular_buffer", passes::circularBuffer},
      {"tma_pipeline", passes::tmaPipeline},
      {"fence_mbarrier_init", passes::fenceMbarrierInit},
      {"plan_smem", passes::planSmem},
      {"insert_syncs", passes::insertSyncs},
      {"reduce_splits", passes::reduceSplits},
      {"stream_k_fixup", passes::streamKFixup},
      {"check_uniformity", passes::checkUniformity},
  };
  return list;
}

std::unique_ptr<LowerContext> lower(const Fusion& f, const TargetInfo& t, const LowerOptions& o) {
  auto ctx = std::unique_ptr<LowerContext>(new LowerContext{f, t, o, {}, {}, {}});
  std::string before = ctx->kernel.str();
  for (auto& p : passList()) {
    auto t0 = std::chrono::steady_clock::now();
    p.run(*ctx);
    auto t1 = std::chrono::steady_clock::now();
    ctx->kernel.renumber();
    sync::stampPass(ctx->kernel, p.name);  // every sync-plan entry names the pass that placed it
    PassRecord r;
    r.name = p.name;
    r.ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    if (o.dumpPasses) {
      std::string after = ctx->kernel.str();
      r.changed = after != before;
      r.irAfter = r.changed ? after : "(unchanged)\n";
      before = after;
    }
    ctx->passes.push_back(std::move(r));
  }
  return ctx;
}

namespace passes {
// validate_schedule: reads the schedule attributes off the tensors; nothing else may read them.
void validateSchedule(LowerContext& c) {
  c.tiling = validateMatmulSchedule(c.fusion, c.target, c.options.vecA, c.options.vecB);
}
}  // namespace passes

}  // namespace heddle
