// The Hopper (sm_90a) part of a matmul schedule: TMA loads into 1024-byte-aligned swizzled tiles,
// warpgroup MMA (wgmma), mbarrier rings, and optionally warp specialization into roles.
//
// Derived by validateRolePipelineSchedule from the user's schedule (or the auto schedule):
//   tile      bm x bn x bk with warps split over m only: warpsM/4 warpgroups share one tile,
//             each computing bm/(warpsM/4) rows (a multiple of 64: the wgmma m64 slab);
//             bn in {64, 128, 192, 256} (wgmma N), bk in {16, 32, 64}.
//   roles     (which does what: by name or, for other names, the data-flow positions in order --
//             TMA producer, MMA, epilogue; role_pipeline_schedule.cpp roleKinds)
//             none: every thread computes, thread 0 issues the TMA (docs/sync-cases.md cases 8, 9).
//             {load, mma}: a load warpgroup (one elected thread) feeds the MMA warpgroups, which
//             also run the epilogue (docs/sync-cases.md case 10). The MMA role has the tile's warpgroups
//             (cooperative: they split each tile) or twice as many (ping-pong: two tiles in
//             flight, mainloops ordered by an mbarrier token).
//             {load, mma, epilogue}: the MMA warpgroups stage accumulators in shared memory for
//             an epilogue warpgroup that stores through TMA (docs/sync-cases.md cases 11, 12).
//             + cache_after(bias, 'tma_load'): warp 1 of the load warpgroup (warp 2 on sm_100a) is a
//             second producer role that loads the bias slice of each tile by TMA into its own ring.
//   warp-specialized kernels are persistent: about one CTA per SM walks the tiles in a grouped
//   (L2-friendly) order.
#pragma once

#include <string>
#include <vector>

#include "heddle/ir/fusion.h"
#include "heddle/target/target.h"

namespace heddle {

struct PipelineRole {
  std::string name;
  enum Kind { Load, Mma, Epilogue, EpiLoad } kind = Mma;  // EpiLoad: TMA loads of an epilogue operand
  int warps = 0;                                          // as asked (the load role asks for 1 warp)
  int warpgroups = 0;                                     // padded: setmaxnreg works on whole warpgroups
  int firstWarp = 0;
  int registers = 0;  // setmaxnreg budget (0: none)
};

struct RolePipelineSchedule {
  bool enabled = false;     // tma_load caches on a wgmma target
  bool warMbarrier = true;  // no roles: WAR through empty mbarriers (case 8) or a block sync (case 9)
  bool warpSpecialized = false;
  std::vector<PipelineRole> roles;  // in thread order: load, mma, [epilogue]
  int tileWarpgroups = 1;           // warpgroups splitting one tile (warpsM / 4)
  int mmaWarpgroups = 1;            // warpgroups in the MMA role (no roles: tileWarpgroups)
  bool coop = true;                 // false: ping-pong (each MMA warpgroup owns whole tiles)
  int wgRows = 64;                  // rows one warpgroup computes
  bool persistent = false;
  int groupM = 8;         // persistent tile order: groups of groupM m-tiles
  int accStages = 0;      // 3 roles: stages of the shared accumulator ring
  bool tmaStore = false;  // the epilogue role (sm_90a) or the tcgen05 epilogue warpgroup (sm_100a, epilogue_store
                          // ("tma"), storeCols / storeStages its chunks) stores through shared memory and TMA
  int threads = 0;
  // A bias row [N] or residual [M, N] cached with cache_after(x, 'tma_load'): a second producer role
  // (EpiLoad, warp 1 of the load warpgroup -- warp 2 on sm_100a --, no registers of its own) loads its
  // [bn] slice (its [bm, bn] tile) per output tile into a ring of epiStages stages that the role
  // running the epilogue consumes (warp_specialize.cpp, tcgen05_specialize.cpp).
  std::string epiTma;  // the input tensor ("" when none)
  int epiStages = 0;
  // epilogue_store("tma") on the two-role kernel (passes/tma_store_epilogue.cpp): the MMA warpgroups stage
  // the output tile in column chunks of storeCols (one 128-byte swizzle box wide) through sD[storeStages]
  // with stmatrix, and one elected thread writes each chunk with a TMA store. Ping-pong: storeStages slots,
  // a named barrier and an issuing thread per warpgroup.
  bool mmaTmaStore = false;
  int storeCols = 0, storeStages = 0;
  // sm_100a (tcgen05_schedule.h): the tcgen05 kernel -- load warp 0, MMA warp 1 (one thread issues
  // tcgen05.mma into tensor memory), one epilogue warpgroup (warps 4-7); accStages tensor-memory
  // accumulator stages of bn columns, tmemCols columns allocated (a power of two >= 32).
  bool tcgen05 = false;
  int tmemCols = 0;
  // cluster(2, along) (schedule/cluster_schedule.cpp, passes/cluster_multicast.cpp): two CTAs of a
  // thread-block cluster compute m- (along 'm') or n-neighbouring tiles and multicast the shared operand
  // tile (B, or A), each loading half of it. 1 = no cluster.
  int cluster = 1;
  char clusterAlong = 'm';
  const PipelineRole* role(PipelineRole::Kind k) const;
};

// What each role of a warp-specialized matmul does, by name or by position (role_pipeline_schedule.cpp).
std::vector<PipelineRole::Kind> pipelineRoleKinds(const std::string& mm, const std::vector<Role>& roles);

struct MatmulTiling;
// Checks the Hopper rules and fills tiling.rolePipeline (ScheduleError naming the rule otherwise).
void validateRolePipelineSchedule(const Fusion& f, const TargetInfo& target, MatmulTiling& tiling);
// An epilogue operand cached with tma_load (epiTma, epiStages): adds its producer role (EpiLoad) on warp
// `warp` of the load warpgroup (sm_90a: 1; sm_100a: 2, warp 1 is the MMA warp), after the roles are set.
void validateEpilogueTma(const Fusion& f, MatmulTiling& tiling, int warp);

// Checks cluster(size, along) against the rest of the schedule and fills tiling.rolePipeline.cluster
// (schedule/cluster_schedule.cpp; ScheduleError naming what to drop or change otherwise).
void validateClusterSchedule(const TargetInfo& target, MatmulTiling& tiling);

}  // namespace heddle
