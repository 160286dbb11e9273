// heddle/interp/rt/hrt_tmem_shadow.h -- tensor memory's race shadow and the ordering of the tcgen05 fences
// (hrt_tmem_shadow.cpp), called by the tcgen05 primitives (hrt_tcgen05.cpp). Internal to the runtime.
#pragma once
#include "heddle/interp/rt/hrt_core.h"

namespace heddle_rt {

// tcgen05.alloc by `tid` (synchronous): every lane of columns [col, col + ncols) is defined, at tid's clock.
void tmem_shadow_alloc(int tid, uint32_t col, int ncols, const void* pc);
// tcgen05.dealloc by `tid` (synchronous): a write of every lane of the columns, checked with tid's clock.
void tmem_shadow_dealloc(int tid, uint32_t col, int ncols, const void* pc);
// tcgen05.mma issued by `tid` (asynchronous): writes (and reads, when accumulating) lanes 0-127 of columns
// [col, col + ncols), checked with tid's tcgen05 view; the write is its MMA engine's, at the ordinal of tid's
// next tcgen05.commit, which only that commit's mbarrier arrival publishes.
void tmem_shadow_mma(int tid, uint32_t col, int ncols, const void* pc);
void tmem_shadow_mma_read(int tid, uint32_t col, int ncols, const void* pc);  // a block-scaled MMA's scale columns
// tcgen05.ld by `tid` (asynchronous): reads lane `lane`, columns [col, col + ncols), checked with tid's
// tcgen05 view; the read stays unpublished until tid's next fence::before_thread_sync or tcgen05.commit.
void tmem_shadow_ld(int tid, uint32_t lane, uint32_t col, int ncols, const void* pc);
// tcgen05.commit by `tid`: its implicit fence::before_thread_sync; returns the MMA-engine ordinal its
// arrival publishes (the value of the agent Cta::agent_tc(tid) in the arrival's clock).
Clock tmem_shadow_commit(int tid);
// tcgen05.fence::before_thread_sync (before = true) / ::after_thread_sync by `tid`.
void tmem_shadow_fence(int tid, bool before);

}  // namespace heddle_rt
