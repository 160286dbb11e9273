// heddle/heddle_hip_barriers.cuh -- GFX12.5 (gfx1250) named barrier objects, the AMD counterpart of
// PTX named barriers (docs/backends.md, "Barrier objects"; LLVM AMDGPUExecutionSynchronization,
// "s_barrier GFX12" code sequences). Ids 1..16 are named barriers, 0 the NULL barrier (every op but
// join is a no-op there); the workgroup barrier -1 is heddle_hip_copy.cuh's barrier_signal/_wait.
//
//   barrier_init<ID, WAVES>()      s_barrier_init: m0[15:0] = ID, m0[31:16] = the expected count
//                                  (waves that arrive per phase)
//   barrier_join<ID>()             s_barrier_join ID: this wave may wait on ID (0: unjoin)
//   barrier_leave()                s_barrier_leave: drops the named barrier this wave joined
//   barrier_signal<ID>()           workgroup release fence, s_barrier_signal ID (arrive)
//   barrier_signal_isfirst<ID>()   the same; true in the first wave to arrive (SCC)
//   barrier_wait<ID>()             s_barrier_wait ID (waits on the barrier the wave joined last),
//                                  workgroup acquire fence
// All are scalar instructions: wave-uniform control flow only (check_uniformity). A thread that
// ends does not drop a named barrier. Under HEDDLE_INTERPRET (the CPU interpreter of the printed source,
// target gfx1250) each op calls the runtime primitive named after its instruction
// (src/heddle/interp/rt/hrt_barrier_objects.cpp: the same barrier-object model as the simulator).
//
// No compiler reachable here knows gfx1250 (clang-19 rejects the name). The instruction spellings
// are GFX12 assembler syntax: LLVM 19's assembler accepts them for gfx1200, which is what
// tests/sync/test_barrier_objects.py compiles (HEDDLE_GFX12_BARRIER_ASM); that checks the syntax and the
// inline-asm constraints, not gfx1250 encodings or behaviour. Other targets get a compile error.
#pragma once
#include "heddle/heddle_types.cuh"
// HIP only: under a CUDA compiler (NVRTC compiles every embedded header) this header is empty.
#if !defined(__CUDACC__) || defined(__HIP__)

#if defined(__gfx1250__) || defined(HEDDLE_GFX12_BARRIER_ASM)
#define HEDDLE_NAMED_BARRIERS 1
#else
#define HEDDLE_NAMED_BARRIERS 0
#endif

namespace heddle {

namespace amd_detail {
template <int ID>
__device__ __forceinline__ void named_barrier_checks() {
  static_assert(HEDDLE_NAMED_BARRIERS && ID >= 0, "heddle named barriers: gfx1250 (GFX12.5) only");
  static_assert(ID >= 0 && ID <= 16, "heddle named barriers: ids are 0 (NULL) and 1..16");
}
}  // namespace amd_detail

template <int ID, int WAVES>
__device__ __forceinline__ void barrier_init() {
  amd_detail::named_barrier_checks<ID>();
  static_assert(ID >= 1, "barrier_init: the NULL barrier (0) cannot be initialized");
  static_assert(WAVES >= 1 && WAVES <= 32, "barrier_init: a workgroup holds 1..32 wave32 waves");
#if HEDDLE_NAMED_BARRIERS
#ifdef HEDDLE_INTERPRET
  ::heddle_rt::s_barrier_init((unsigned)((WAVES << 16) | ID));
#else
  asm volatile("s_barrier_init m0" ::"{m0}"((WAVES << 16) | ID) : "memory");  // m0 as an operand: the compiler sets it
#endif
#endif
}

template <int ID>
__device__ __forceinline__ void barrier_join() {
  amd_detail::named_barrier_checks<ID>();
#if HEDDLE_NAMED_BARRIERS
#ifdef HEDDLE_INTERPRET
  ::heddle_rt::s_barrier_join(ID);
#else
  asm volatile("s_barrier_join %0" ::"n"(ID) : "memory");
#endif
#endif
}

__device__ __forceinline__ void barrier_leave() {
#if HEDDLE_NAMED_BARRIERS
#ifdef HEDDLE_INTERPRET
  ::heddle_rt::s_barrier_leave();
#else
  asm volatile("s_barrier_leave" ::: "memory");
#endif
#endif
}

template <int ID>
__device__ __forceinline__ void barrier_signal() {
  amd_detail::named_barrier_checks<ID>();
#if HEDDLE_NAMED_BARRIERS
#ifdef HEDDLE_INTERPRET
  ::heddle_rt::amdgcn_fence_workgroup(__ATOMIC_RELEASE);
  ::heddle_rt::s_barrier_signal(ID);
#else
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  asm volatile("s_barrier_signal %0" ::"n"(ID) : "memory");
#endif
#endif
}

template <int ID>
__device__ __forceinline__ bool barrier_signal_isfirst() {
  amd_detail::named_barrier_checks<ID>();
  int first = 0;
#if HEDDLE_NAMED_BARRIERS
#ifdef HEDDLE_INTERPRET
  ::heddle_rt::amdgcn_fence_workgroup(__ATOMIC_RELEASE);
  first = ::heddle_rt::s_barrier_signal_isfirst(ID) ? 1 : 0;
#else
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  asm volatile("s_barrier_signal_isfirst %1\n\ts_cselect_b32 %0, 1, 0" : "=s"(first) : "n"(ID) : "memory", "scc");
#endif
#endif
  return first != 0;
}

template <int ID>
__device__ __forceinline__ void barrier_wait() {
  amd_detail::named_barrier_checks<ID>();
#if HEDDLE_NAMED_BARRIERS
#ifdef HEDDLE_INTERPRET
  ::heddle_rt::s_barrier_wait(ID);
  ::heddle_rt::amdgcn_fence_workgroup(__ATOMIC_ACQUIRE);
#else
  asm volatile("s_barrier_wait %0" ::"n"(ID) : "memory");
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
#endif
#endif
}

}  // namespace heddle

#endif  // !__CUDACC__ || __HIP__
