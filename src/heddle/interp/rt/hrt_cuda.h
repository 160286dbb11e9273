// heddle/interp/rt/hrt_cuda.h -- the CUDA language surface for a printed heddle kernel compiled by the
// host C++ compiler (the interpreter, docs/verification.md). Force-included before the printed source,
// which is compiled unchanged, with HEDDLE_INTERPRET defined: the heddle device headers then route
// every inline-asm primitive to heddle_rt (hrt_api.h) instead of PTX.
//
//   __global__ / __device__ / __host__ / __forceinline__ / __launch_bounds__ / __grid_constant__
//                       plain C++ (the launch bounds are checked by the driver, not here)
//   extern __shared__   a thread_local window of HRT_SMEM_WINDOW bytes: one per OS thread running CTAs (a
//                       cluster's CTAs share it, rank r at r * HRT_SMEM_WINDOW_BYTES: heddle::sm90::cta_smem)
//   threadIdx, blockIdx, blockDim, gridDim, __syncthreads, __cvta_generic_to_shared -> heddle_rt
//   asm / __asm__       poisoned: an inline-asm statement that no primitive replaces is a compile
//                       error naming HEDDLE_INTERPRET_NO_PRIMITIVE_FOR_INLINE_ASM_AT_LINE_<its line>,
//                       never silently skipped (the driver turns it into a clear heddle error).
//   HRT_DEFINE_ENTRY(k) after the kernel: the C entry points of hrt_abi.h for kernel k, with the
//                       parameter kinds deduced from k's own signature.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "heddle/interp/rt/hrt_abi.h"
#include "heddle/interp/rt/hrt_api.h"

#ifndef HEDDLE_INTERPRET
#define HEDDLE_INTERPRET 1
#endif

#define HRT_SMEM_WINDOW HRT_SMEM_WINDOW_TOTAL
#ifndef HRT_WAVE_SIZE  // hrt_hip.h sets the AMD target's wavefront size and HRT_AMD before including this
#define HRT_WAVE_SIZE 32
#define HRT_AMD 0
#endif

#define __global__
#define __device__
#define __host__
#ifndef __forceinline__  // (hrt_hip.h forces inlining, so findings name the printed line)
#define __forceinline__ inline
#endif
#define __launch_bounds__(...)
#ifndef __noinline__
#define __noinline__ __attribute__((noinline))
#endif
#define __grid_constant__
#define __shared__ thread_local
#define __align__(n) __attribute__((aligned(n)))

#define threadIdx (::heddle_rt::thread_idx())
#define blockIdx (::heddle_rt::block_idx())
#define blockDim (::heddle_rt::block_dim())
#define gridDim (::heddle_rt::grid_dim())
#if HRT_AMD
// HIP's __syncthreads: the workgroup release fence, s_barrier, the acquire fence (hrt_workgroup_fences.cpp)
#define __syncthreads()                                                                  \
  (::heddle_rt::amdgcn_fence_workgroup(__ATOMIC_RELEASE), ::heddle_rt::s_barrier(), \
   ::heddle_rt::amdgcn_fence_workgroup(__ATOMIC_ACQUIRE))
#else
#define __syncthreads() (::heddle_rt::syncthreads())
#endif
#define __cvta_generic_to_shared(p) (::heddle_rt::cvta_generic_to_shared(p))
// __shfl_xor_sync(mask, v, lane_mask): the butterfly shuffle (PTX shfl.sync.bfly.b32; CUDA C++ Programming
// Guide "Warp Shuffle Functions"): lane l reads v of lane l ^ lane_mask; a collective of the whole warp
// (heddle_rt::shfl_sync, mode 3). The quantize epilogue's amax over a quad uses it (docs/fp8.md).
__attribute__((always_inline)) inline float __shfl_xor_sync(unsigned mask, float v, int lane_mask, int width = 32) {
  unsigned u;
  std::memcpy(&u, &v, sizeof u);
  u = ::heddle_rt::shfl_sync(mask, u, lane_mask, width, 3);
  std::memcpy(&v, &u, sizeof v);
  return v;
}

// __float_as_uint / __uint_as_float: the bit reinterpretations of CUDA's math API ("Type Casting Intrinsics"; a
// mov.b32 in PTX). The MX-format output's e8m0 code reads the amax's exponent field with them (docs/fp8.md).
__attribute__((always_inline)) inline unsigned __float_as_uint(float v) {
  unsigned u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}
__attribute__((always_inline)) inline float __uint_as_float(unsigned u) {
  float v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

// C linkage: the printed kernels are extern "C", so clang gives their block-scope `extern __shared__
// heddle_smem[]` declaration C linkage too
extern "C" {
alignas(1024) thread_local unsigned char heddle_smem[HRT_SMEM_WINDOW];
}

// The stub reads the runtime's argument array: not the kernel's memory, so not instrumented.
#define HRT_NOT_INSTRUMENTED __attribute__((no_sanitize_thread, noinline))

namespace heddle_rt {
namespace entry {

template <typename P>
constexpr int kind_of() {
  using T = std::remove_cv_t<std::remove_reference_t<P>>;
  if constexpr (std::is_pointer_v<T>) return HRT_PTR;
  else if constexpr (std::is_same_v<T, int>) return HRT_I32;
  else if constexpr (std::is_same_v<T, long long> || std::is_same_v<T, long>) return HRT_I64;
  else if constexpr (std::is_same_v<T, float>) return HRT_F32;
  else if constexpr (std::is_class_v<T> && sizeof(T) == 128) return HRT_TENSORMAP;
  else return HRT_OTHER;
}

template <typename... P>
HRT_NOT_INSTRUMENTED int describe(void (*)(P...), hrt_param* out, int max) {
  const hrt_param ps[] = {{kind_of<P>(), (int)sizeof(std::remove_cv_t<std::remove_reference_t<P>>)}..., {0, 0}};
  const int n = (int)sizeof...(P);
  for (int i = 0; i < n && i < max; ++i) out[i] = ps[i];
  return n;
}

template <typename... P, std::size_t... I>
HRT_NOT_INSTRUMENTED void invoke(void (*f)(P...), void* const* argv, std::index_sequence<I...>) {
  f(*reinterpret_cast<std::remove_cv_t<std::remove_reference_t<P>>*>(argv[I])...);
}

template <typename... P>
HRT_NOT_INSTRUMENTED void invoke(void (*f)(P...), void* const* argv) {
  invoke(f, argv, std::index_sequence_for<P...>{});
}

}  // namespace entry
}  // namespace heddle_rt

#define HRT_STR2(x) #x
#define HRT_STR(x) HRT_STR2(x)
#define HRT_DEFINE_ENTRY(k)                                                                           \
  extern "C" const char* hrt_kernel_name(void) { return HRT_STR(k); }                                 \
  extern "C" HRT_NOT_INSTRUMENTED int hrt_describe(hrt_param* p, int max) { return ::heddle_rt::entry::describe(&k, p, max); } \
  extern "C" HRT_NOT_INSTRUMENTED void hrt_kernel_invoke(void* const* argv) { ::heddle_rt::entry::invoke(&k, argv); }      \
  extern "C" unsigned char* hrt_kernel_smem(void) { return heddle_smem; }                             \
  extern "C" int hrt_kernel_wave(void) { return HRT_WAVE_SIZE; }                                      \
  extern "C" int hrt_kernel_amd(void) { return HRT_AMD; }

// Last: system headers above may use asm for symbol renaming; the printed kernel and heddle's headers may not.
// The poison carries the line of the statement (__LINE__ expands where `asm` is written).
#define HRT_ASM_POISON2(l) HEDDLE_INTERPRET_NO_PRIMITIVE_FOR_INLINE_ASM_AT_LINE_##l
#define HRT_ASM_POISON(l) HRT_ASM_POISON2(l)
#define asm HRT_ASM_POISON(__LINE__)
#define __asm__ HRT_ASM_POISON(__LINE__)
#define __asm HRT_ASM_POISON(__LINE__)
