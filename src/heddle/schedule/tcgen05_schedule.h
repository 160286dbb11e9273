// The Blackwell (sm_100a) part of a matmul schedule: the tcgen05 multi-role kernel (docs/blackwell.md).
//
// Derived by validateTcgen05Schedule from a schedule with tma_load operand caches on a target with
// MmaKind::Tcgen05 (it fills MatmulTiling::hopper with tcgen05 = true; the TMA tiles, tensor maps and
// mbarrier rings are the Hopper ones):
//   tile      bm = 128 (tcgen05.mma cta_group::1, M = 128: row i of the tile in tensor-memory lane i),
//             bn a multiple of 64 up to 256 (N of one tcgen05.mma), bk in {16, 32, 64}; 4 warps over m
//             (the epilogue warpgroup: warp w reads lanes 32*(w%4) .. +31).
//   roles     load (1 warp: one elected thread issues the TMA copies), mma (1 warp: it allocates the
//             tensor memory and one elected thread issues tcgen05.mma / tcgen05.commit), epilogue (4
//             warps = one warpgroup: tcgen05.ld, the epilogue program, stores). Warps 0-3 form the first
//             warpgroup (load, mma and two idle warps): load and mma share its register budget.
//             + cache_after(bias or residual, 'tma_load'): warp 2 is a second producer role ('<x>_load')
//             that loads the operand's [bn] slice ([bm, bn] tile) of each tile by TMA into its own ring
//             (circular_buffer(s) of that cache, default 2) read by the epilogue warpgroup.
//   stages    operand ring: circular_buffer(stages) of the caches, 2..8; accumulator ring in tensor
//             memory: the epilogue role's stages= (1 or 2; default 2 where 2 * bn columns fit in
//             TargetInfo::tmemColumns), tmemCols = the power of two >= max(32, bn * stages) allocated.
//   persistent about one CTA per SM walks the tiles in the grouped order of the Hopper kernel.
// Every rule fails with a ScheduleError naming the tensor or role, the rule and a valid alternative.
#pragma once

#include "heddle/ir/fusion.h"
#include "heddle/target/target.h"

namespace heddle {

struct MatmulTiling;
struct AutoScheduleHints;
void validateTcgen05Schedule(const Fusion& f, const TargetInfo& target, MatmulTiling& tiling);
// heddle.matmul / auto_schedule on a tcgen05 target when the operands allow TMA (schedule/tcgen05_schedule.cpp).
void autoScheduleMatmulTcgen05(Fusion& f, const TargetInfo& target, const AutoScheduleHints& hints);

}  // namespace heddle
