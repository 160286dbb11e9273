// cluster(2, along): the schedule rules of thread-block clusters with TMA multicast (docs/hopper.md
// "Clusters of 2 with TMA multicast"). Built for the sm_90a warp-specialized cooperative kernels only:
// the lowering (passes/cluster_multicast.cpp) rewrites their load -> mma ring and persistent tile walk.
#include "heddle/schedule/role_pipeline_schedule.h"
#include "heddle/schedule/schedule.h"

namespace heddle {

void validateClusterSchedule(const TargetInfo& target, MatmulTiling& t) {
  const int size = t.mm->clusterSize;
  if (size <= 1) return;
  auto& h = t.rolePipeline;
  const std::string what = "cluster(" + t.mm->name + ", 2, along='" + t.mm->clusterAlong + "')";
  if (t.loadKind != LoadKind::TmaLoad || !target.mma.has(MmaKind::Wgmma) || target.mma.has(MmaKind::Tcgen05) ||
      !h.enabled)
    fail<ScheduleError>(what, ": the CTAs of a cluster multicast TMA loads of the sm_90a warp-specialized kernels; ",
                        target.mma.has(MmaKind::Tcgen05)
                            ? "the sm_100a tcgen05 kernel does not take clusters in this build"
                            : "cache the operands with cache_after(x, 'tma_load') on sm_90a and add roles",
                        " (or drop cluster)");
  if (!h.warpSpecialized)
    fail<ScheduleError>(what,
                        ": clusters are built on the warp-specialized ring (its persistent tile walk pairs "
                        "the cluster's tiles); add warp_specialize({'load': ..., 'mma': ...}) or drop cluster");
  if (!h.coop)
    fail<ScheduleError>(what,
                        ": ping-pong MMA warpgroups walk the tiles in turns, which the cluster's paired walk "
                        "does not take in this build; use cooperative MMA warpgroups (the tile's own) or drop cluster");
  if (t.batched) fail<ScheduleError>(what, ": a batched matmul is not clustered in this build; drop cluster");
  if (t.splitK > 1 || t.streamK > 0)
    fail<ScheduleError>(what,
                        ": split-K / stream-K share the k loop among CTAs; a cluster shares an operand tile "
                        "among neighbouring tiles: drop one of them");
  if (t.parts > 1) fail<ScheduleError>(what, ": a matmul group is not clustered in this build; drop cluster");
  // the shared tile as stored (rows x cols, cols contiguous) is split in halves along its rows; each half must
  // be whole 8-row swizzle atoms so that it lands on the layout the wgmma descriptors read
  const bool alongM = t.mm->clusterAlong == "m";
  const int rows = alongM ? (t.transB ? t.bn : t.bk) : (t.transA ? t.bk : t.bm);
  if (rows % (8 * size))
    fail<ScheduleError>(what, ": the shared ", alongM ? "B" : "A", " tile has ", rows,
                        " stored rows; each CTA "
                        "loads ",
                        rows / size,
                        " of them, not whole 8-row swizzle atoms: use a larger tile or drop "
                        "cluster");
  h.cluster = size;
  h.clusterAlong = alongM ? 'm' : 'n';
}

}  // namespace heddle
