// heddle/heddle_grid.cuh -- grid-level synchronisation of split-K kernels (passes/split_k.cpp,
// passes/reduce_splits.cpp; docs/hopper.md "Split-K").
//
// The S CTAs of one output tile (blockIdx.z = 0..S-1) each compute a partial accumulator tile.
// Splits z < S-1 store theirs to workspace slot (tile*(S-1) + z) and release its flag; split S-1
// acquires the S-1 flags in order, adds the partials in slot order (a fixed order: the same bits on
// every run) and applies the epilogue once.
//
//   store_partial<N, THREADS>(acc, slot, flag, tid)   this thread's N accumulator floats -> slot:
//                       element e of thread t at slot[e * THREADS + t] (coalesced; the fragment
//                       layout never matters: the same thread of the reducing CTA owns the same
//                       elements)
//   add_partials<N, THREADS>(acc, slot0, count, flag0, tid)   acc[e] += slot_j[e * THREADS + tid],
//                       j = 0..count-1 in order
//   release(flag)       one thread, after a block barrier that follows every thread's partial stores:
//                       fence.acq_rel.gpu, then a relaxed gpu-scope store of 1 (a release pattern:
//                       PTX ISA "Memory Consistency Model", release patterns)
//   wait_and_reset(flag0, count)   one thread, then a block barrier: spins on ld.acquire.gpu until each
//                       flag is 1, then stores 0 to it (the reducing CTA is each flag's only reader,
//                       so every flag is 0 again when the launch ends)
// The flags are read only by a CTA whose blockIdx.z is larger than the writer's: CTAs are
// dispatched in increasing linear index, so a waiting CTA waits only on CTAs already resident or
// done, and the wait always ends.
//
// HEDDLE_INTERPRET: the interpreter's runtime blocks the waiting thread (a flag no earlier CTA set is
// a deadlock report) and checks that every partial read was published by its flag and acquired by
// this CTA before the read (hrt_grid.cpp). The flag pointers of store_partial / add_partials exist
// for that check; the GPU code does not read them.
#pragma once

#include "heddle/heddle_types.cuh"

namespace heddle {
namespace grid {

template <int N, int THREADS>
__device__ __forceinline__ void store_partial(const float* acc, float* slot, const int* flag, int tid) {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::grid_partial(slot, flag, N * THREADS, true);
#endif
  (void)flag;
#pragma unroll
  for (int e = 0; e < N; ++e) slot[e * THREADS + tid] = acc[e];
}

template <int N, int THREADS>
__device__ __forceinline__ void add_partials(float* acc, const float* slot0, int count, const int* flag0, int tid) {
  for (int j = 0; j < count; ++j) {
    const float* slot = slot0 + (long long)j * (N * THREADS);
#if defined(HEDDLE_INTERPRET)
    ::heddle_rt::grid_partial(slot, flag0 + j, N * THREADS, false);
#endif
#pragma unroll
    for (int e = 0; e < N; ++e) acc[e] += slot[e * THREADS + tid];
  }
  (void)flag0;
}

__device__ __forceinline__ void release(int* flag) {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::grid_release(flag);
#else
  asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
  asm volatile("st.relaxed.gpu.global.b32 [%0], %1;\n" ::"l"(flag), "r"(1) : "memory");
#endif
}

__device__ __forceinline__ void wait_and_reset(int* flag0, int count) {
  for (int j = 0; j < count; ++j) {
#if defined(HEDDLE_INTERPRET)
    ::heddle_rt::grid_acquire(flag0 + j);
#else
    int v = 0;
    HEDDLE_WAIT_BEGIN
    do {
      asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(flag0 + j) : "memory");
      if (v == 0) { HEDDLE_WAIT_CHECK("grid flag", flag0 + j, 1) }
    } while (v == 0);
    asm volatile("st.relaxed.gpu.global.b32 [%0], %1;\n" ::"l"(flag0 + j), "r"(0) : "memory");
#endif
  }
}

}  // namespace grid
}  // namespace heddle
