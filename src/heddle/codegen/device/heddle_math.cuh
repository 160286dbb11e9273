// heddle/heddle_math.cuh -- scalar epilogue activations, all in float.
//
// Uses the erff / tanhf / expf builtins (declared by NVRTC without any header; under
// HEDDLE_INTERPRET they come from <cmath>, included by the interpreter's runtime).
//
//   relu(x)      = x < 0 ? 0 : x            (NaN propagates, like torch.relu)
//   gelu_erf(x)  = 0.5 x (1 + erf(x / sqrt 2))
//   gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//   silu(x)      = x / (1 + exp(-x))         (-> -0 for large negative x, no NaN)
//   sigmoid(x)   = 1 / (1 + exp(-x))
//   tanh(x)      = tanhf(x)
//   f32_bits(b)  = the float whose IEEE bits are b (inf, NaN constants of the epilogue)
//
// The pair epilogue: the epilogue program on two
// adjacent columns of one accumulator-fragment row at once -- the sm_80 mma.sync fragment (c0,c1 / c2,c3)
// and the sm_90a wgmma fragment hold such pairs. Target-neutral: every CUDA target and the interpreter use it.
//   pairf                     the pair program's register type {x = column c, y = column c+1}
//   pack2<T>(lo, hi)          a 16-bit pair in one 32-bit word, lo in the lower half (one cvt.rn.*x2.f32)
//   unpack2(first)            a 16-bit pair read as one 32-bit word (`first` at an even element)
//   load_pair(first)          a global pair in one load: 32 bits of a 16-bit pair, 64 of an f32 pair (vec_e=2)
//   pair_aligned(p, ld, n)    whether every pair of an output (row stride ld, n columns) is whole and aligned
//   pack_pair<T>(v)           a result pair held for its store (16-bit T: packed by pack2; f32: as it is)
//   store_pair(p, v, vec, second)  one 32-bit (16-bit T) / 64-bit (f32) store of the held pair when `vec`
//                             (pair_aligned), else p[0] and, when `second`, p[1]
//   ool::gelu_erf(v) ...      the transcendental activations on a pair, out of line (one copy per kernel)
#pragma once
#include "heddle/heddle_types.cuh"

namespace heddle {

// A float from its bits: how the printer spells epilogue constants without a literal (inf, NaN).
__host__ __device__ __forceinline__ float f32_bits(unsigned int bits) {
  union { unsigned int u; float f; } x;
  x.u = bits;
  return x.f;
}

__device__ __forceinline__ float relu(float x) { return x < 0.0f ? 0.0f : x; }

__device__ __forceinline__ float gelu_erf(float x) {
  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

__device__ __forceinline__ float gelu_tanh(float x) {
  const float k = 0.79788456080286536f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__device__ __forceinline__ float tanh(float x) { return tanhf(x); }

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

#ifndef __noinline__
#define __noinline__ __attribute__((noinline))
#endif
// Two adjacent output elements in one 32-bit register, the lower column in the lower half (the layout
// stmatrix and a little-endian 32-bit store write): one cvt.rn.{bf16x2,f16x2}.f32 on the device (it packs
// its first source into the upper half).
template <typename T>
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  static_assert(sizeof(T) == 2, "pack2: 16-bit element types only");
  unsigned r;
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
  if constexpr (IsBf16<T>::value)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
  r = (unsigned)from_float<T>(lo).bits | ((unsigned)from_float<T>(hi).bits << 16);
#endif
  return r;
}

// Two adjacent columns of one fragment row: the pair epilogue's register type (one pair program).
struct pairf {
  float x, y;
};

// An f32 pair as one 8-byte access (load_pair, store_pair).
struct alignas(8) f32x2 {
  float x, y;
};

// A 16-bit pair read as one 32-bit word (`first` at an even element index).
template <typename T>
__device__ __forceinline__ pairf unpack2(const T& first) {
  const unsigned w = *reinterpret_cast<const unsigned*>(&first);
  T lo, hi;
  lo.bits = (unsigned short)(w & 0xffffu);
  hi.bits = (unsigned short)(w >> 16);
  return {to_float(lo), to_float(hi)};
}

// Two adjacent columns of a global epilogue operand in one load (vec_e=2; passes/vectorize_epilogue_reads.cpp):
// 32 bits of a 16-bit pair, 64 bits of an f32 pair. `first` is pair-aligned: the launch checked the operand's
// base and strides, and the printed column is even.
template <typename T>
__device__ __forceinline__ pairf load_pair(const T* first) {
  if constexpr (sizeof(T) == 2) {
    return unpack2(*first);
  } else {
    static_assert(sizeof(T) == 4, "load_pair: 16-bit or f32 operands");
    const f32x2 v = *reinterpret_cast<const f32x2*>(first);
    return {v.x, v.y};
  }
}

// Whether the pair stores of an output p (row stride ld, N columns) may each be one store: ld and N even
// (every pair at an even column is whole and starts aligned in every row) and p aligned to a pair (4
// bytes for 16-bit T, 8 for f32). Uniform over the kernel: the epilogue computes it once.
template <typename T>
__device__ __forceinline__ bool pair_aligned(const T* p, long long ld, int n) {
  return ((ld | n) & 1) == 0 && (reinterpret_cast<unsigned long long>(p) & (2 * sizeof(T) - 1)) == 0;
}

// A result pair held for its store: a 16-bit pair packed in one 32-bit word (pack2), an f32 pair as it is.
template <typename T> struct pair_reg { using type = unsigned; };
template <> struct pair_reg<float> { using type = pairf; };
template <typename T>
__device__ __forceinline__ typename pair_reg<T>::type pack_pair(pairf v) {
  if constexpr (sizeof(T) == 2) return pack2<T>(v.x, v.y);
  else if constexpr (sizeof(T) == 1)  // e4m3 / e5m2 (satfinite): the two codes in the low 16 bits, x first
    return unsigned(from_float<T>(v.x).bits) | (unsigned(from_float<T>(v.y).bits) << 8);
  else return v;
}

// Stores the pair v (pack_pair<T>) at p: one 32-bit store of the packed 16-bit pair (64-bit of an f32 pair)
// when `vec` (pair_aligned: the pair is whole and aligned), else p[0], and p[1] only when `second` (its
// column is inside the output).
template <typename T>
__device__ __forceinline__ void store_pair(T* p, typename pair_reg<T>::type v, bool vec, bool second) {
  if constexpr (sizeof(T) == 2) {
    if (vec) {
      *reinterpret_cast<unsigned*>(p) = v;
      return;
    }
    p[0].bits = (unsigned short)(v & 0xffffu);
    if (second) p[1].bits = (unsigned short)(v >> 16);
  } else if constexpr (sizeof(T) == 1) {
    if (vec) {
      *reinterpret_cast<unsigned short*>(p) = (unsigned short)v;
      return;
    }
    p[0].bits = (unsigned char)(v & 0xffu);
    if (second) p[1].bits = (unsigned char)(v >> 8);
  } else {
    static_assert(sizeof(T) == 4, "store_pair: 16-bit or f32 outputs");
    if (vec) {
      *reinterpret_cast<f32x2*>(p) = f32x2{v.x, v.y};
      return;
    }
    p[0] = v.x;
    if (second) p[1] = v.y;
  }
}

// The transcendental activations on a pair, out of line: one copy per kernel that every fragment pair
// calls, so the epilogue's code (and NVRTC + ptxas time) does not grow with the accumulator count.
namespace ool {
static __device__ __noinline__ pairf gelu_erf(pairf v) { return {heddle::gelu_erf(v.x), heddle::gelu_erf(v.y)}; }
static __device__ __noinline__ pairf gelu_tanh(pairf v) { return {heddle::gelu_tanh(v.x), heddle::gelu_tanh(v.y)}; }
static __device__ __noinline__ pairf silu(pairf v) { return {heddle::silu(v.x), heddle::silu(v.y)}; }
static __device__ __noinline__ pairf sigmoid(pairf v) { return {heddle::sigmoid(v.x), heddle::sigmoid(v.y)}; }
static __device__ __noinline__ pairf tanh(pairf v) { return {heddle::tanh(v.x), heddle::tanh(v.y)}; }
}  // namespace ool

}  // namespace heddle
