// heddle/heddle_types.cuh -- scalar storage types of the heddle device runtime.
//
// Embedded as a string at build time and #include'd by generated kernels compiled with NVRTC
// (-std=c++17). It includes NO toolkit or libc header: NVRTC has none. Builtin integer types only.
//
//   f16  : IEEE binary16 bits.   bf16 : bfloat16 bits (upper half of a binary32).
//   e4m3 / e5m2 : OCP 8-bit floats (torch.float8_e4m3fn / float8_e5m2), sm_89+ and the interpreter.
//   to_float(x)       exact widening (f16, bf16, float, e4m3, e5m2).
//   from_float<T>(x)  round-to-nearest-even narrowing (f16, bf16, float); overflow -> inf,
//                     NaN -> a quiet NaN (payload not preserved). e4m3 / e5m2: cvt.rn.satfinite
//                     (overflow and inf -> the largest finite value with the sign, NaN -> NaN).
//
// Device conversions are single cvt instructions (cvt.rn.bf16.f32 needs sm_80; older arches take
// the software path). The interpreter (HEDDLE_INTERPRET, no __CUDA_ARCH__) uses the software path,
// which tests/interp/test_interp_isa.py checks against torch's float16 / bfloat16 for every f16 value and
// a sweep of binary32 values.
//
// All inline PTX in the runtime sits behind a few primitives in heddle::detail, each with an
// HEDDLE_INTERPRET branch calling the interpreter's runtime; the code calling them is the same.
#pragma once

namespace heddle {

// ---- bounded waits (HEDDLE_DEBUG=bounded_waits, runtime/debug_options.h) -----------------------------
// With HEDDLE_BOUNDED_WAIT_NS defined, every spin of the device runtime (mbar_wait, grid::wait_and_reset)
// gives up after that many nanoseconds of %globaltimer: it prints who waited on what and traps, so a
// protocol bug ends the launch with a report (the driver then returns an error for it) instead of
// hanging the GPU. Undefined (the release build): no timer is read, the loops are unchanged.
#if defined(HEDDLE_BOUNDED_WAIT_NS) && !defined(HEDDLE_INTERPRET)
namespace debug {
__device__ __forceinline__ unsigned long long globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// what: "mbarrier" (where = shared-memory address, phase = parity) or "grid flag" (where = the flag's
// low address bits, phase = the value awaited).
__device__ __noinline__ __attribute__((noreturn)) void wait_timed_out(const char* what, unsigned long long where, int phase) {
  const unsigned warp = threadIdx.x / 32;
  printf("heddle: bounded wait expired after %llu ms: block (%u,%u,%u) thread %u warp %u warpgroup %u waited on "
         "%s 0x%llx phase %d\n",
         (unsigned long long)(HEDDLE_BOUNDED_WAIT_NS) / 1000000ull, blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x,
         warp, warp / 4, what, where, phase);
  __trap();
}
}  // namespace debug
#define HEDDLE_WAIT_BEGIN const unsigned long long heddle_wait_t0_ = ::heddle::debug::globaltimer_ns();
#define HEDDLE_WAIT_CHECK(what, where, phase)                                                         \
  if (::heddle::debug::globaltimer_ns() - heddle_wait_t0_ > (unsigned long long)(HEDDLE_BOUNDED_WAIT_NS)) \
    ::heddle::debug::wait_timed_out(what, (unsigned long long)(where), (int)(phase));
#else
#define HEDDLE_WAIT_BEGIN
#define HEDDLE_WAIT_CHECK(what, where, phase)
#endif

struct f16 {
  unsigned short bits;
};
struct bf16 {
  unsigned short bits;
};
static_assert(sizeof(f16) == 2 && sizeof(bf16) == 2, "f16/bf16 must be 2-byte PODs");
// The device headers' compile-time members are enumerators (`enum : int { kBytes = ... };`), never `static
// constexpr` data members: those are variables (inline ones, C++17 [dcl.constexpr]/1), and NVVM emits each one a
// kernel instantiates as a .global object -- a symbol, its name, a relocated constant-bank slot -- though no
// instruction reads it; an enumerator names a prvalue, not an object ([dcl.enum], [expr.prim.id.unqual]), and emits
// nothing. Same values and arithmetic (a fixed underlying type promotes to it), a smaller cubin, the same machine
// code (docs/perf.md "Host costs, stop 39"; tools/cubin_compare.py; tests/codegen/test_header_enumerators.py).
template <typename T> struct IsBf16 { enum : bool { value = false }; };
template <> struct IsBf16<bf16> { enum : bool { value = true }; };

namespace detail {

__host__ __device__ __forceinline__ unsigned float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  unsigned u;
  __builtin_memcpy(&u, &x, 4);
  return u;
#endif
}

__host__ __device__ __forceinline__ float bits_float(unsigned u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  __builtin_memcpy(&x, &u, 4);
  return x;
#endif
}

// binary16 -> binary32, exact (normals, subnormals, inf, NaN).
__host__ __device__ __forceinline__ float f16_to_float_sw(unsigned short h) {
  unsigned sign = (unsigned)(h & 0x8000u) << 16;
  unsigned e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return bits_float(sign | 0x7f800000u | (m << 13));  // inf / NaN
  if (e != 0) return bits_float(sign | ((e + 112u) << 23) | (m << 13));
  if (m == 0) return bits_float(sign);
  // subnormal: m * 2^-24, normalise
  int shift = 0;
  while ((m & 0x400u) == 0) { m <<= 1; ++shift; }
  return bits_float(sign | ((unsigned)(113 - shift) << 23) | ((m & 0x3ffu) << 13));
}

// binary32 -> binary16, round to nearest even.
__host__ __device__ __forceinline__ unsigned short float_to_f16_sw(float x) {
  unsigned u = float_bits(x);
  unsigned sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return (unsigned short)(sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (a < 0x38800000u) {                                           // below 2^-14: subnormal half
    int e = (int)(a >> 23);
    if (e < 102) return (unsigned short)sign;  // < 2^-25 (2^-25 itself ties to even 0)
    unsigned m = (a & 0x7fffffu) | 0x800000u;  // value = m * 2^(e-150) = q units of 2^-24
    int shift = 126 - e;                       // 14..24
    unsigned q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return (unsigned short)(sign | q);
  }
  unsigned h = (((a >> 23) - 112u) << 10) | ((a >> 13) & 0x3ffu);
  unsigned rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // carry may step into the exponent
  return (unsigned short)(sign | h);
}

// binary32 -> bfloat16, round to nearest even.
__host__ __device__ __forceinline__ unsigned short float_to_bf16_sw(float x) {
  unsigned u = float_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}

}  // namespace detail

__device__ __forceinline__ float to_float(float x) { return x; }

__device__ __forceinline__ float to_float(bf16 x) {
  return detail::bits_float((unsigned)x.bits << 16);
}

__device__ __forceinline__ float to_float(f16 x) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
#else
  return detail::f16_to_float_sw(x.bits);
#endif
}

template <typename T>
__device__ T from_float(float x);

template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}

template <>
__device__ __forceinline__ f16 from_float<f16>(float x) {
  f16 r;
#if defined(__CUDA_ARCH__)
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.bits) : "f"(x));
#else
  r.bits = detail::float_to_f16_sw(x);
#endif
  return r;
}

template <>
__device__ __forceinline__ bf16 from_float<bf16>(float x) {
  bf16 r;
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.bits) : "f"(x));
#else
  r.bits = detail::float_to_bf16_sw(x);
#endif
  return r;
}

// ---- 8-bit floats (sm_89+: the cvt f8x2 forms, PTX ISA "cvt"; the interpreter: hrt_fp8.cpp) ----------
// Each conversion is the two-element instruction with the other element zero: widening through binary16
// (every e4m3 / e5m2 value is exact there), narrowing with .satfinite (the only form PTX has for f32 -> f8).
#if defined(HEDDLE_INTERPRET) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890)
struct e4m3 {
  unsigned char bits;
};
struct e5m2 {
  unsigned char bits;
};
static_assert(sizeof(e4m3) == 1 && sizeof(e5m2) == 1, "e4m3/e5m2 must be 1-byte PODs");

namespace detail {
// fmt 0 = e4m3, 1 = e5m2: the low element of cvt.rn.f16x2.f8x2type, widened to f32
template <int FMT>
__device__ __forceinline__ float f8_to_float(unsigned char code) {
#if defined(HEDDLE_INTERPRET)
  return f16_to_float_sw((unsigned short)(::heddle_rt::cvt_rn_f16x2_f8x2(FMT, code) & 0xffffu));
#else
  unsigned h2;
  const unsigned short in = code;
  if (FMT == 0) asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(in));
  else asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(h2) : "h"(in));
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((unsigned short)(h2 & 0xffffu)));
  return f;
#endif
}
template <int FMT>
__device__ __forceinline__ unsigned char float_to_f8(float x) {
#if defined(HEDDLE_INTERPRET)
  return (unsigned char)(::heddle_rt::cvt_rn_satfinite_f8x2_f32(FMT, 0.0f, x) & 0xffu);
#else
  unsigned short r;
  if (FMT == 0) asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(x));
  else asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(x));
  return (unsigned char)(r & 0xffu);
#endif
}
// Two satfinite codes in 16 bits, lo in the low byte: one cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 d, hi, lo (PTX ISA
// "cvt": input a goes to the upper 8 bits of d, b to the lower; CUTLASS's NumericArrayConverter<float_e4m3_t, float, 2>
// passes source[1], source[0] the same way, element 0 in the low byte).
template <int FMT>
__device__ __forceinline__ unsigned short floats_to_f8x2(float lo, float hi) {
#if defined(HEDDLE_INTERPRET)
  return (unsigned short)::heddle_rt::cvt_rn_satfinite_f8x2_f32(FMT, hi, lo);
#else
  unsigned short r;
  if (FMT == 0) asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  else asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
#endif
}
template <typename T> struct f8_format;
template <> struct f8_format<e4m3> { enum : int { value = 0 }; };
template <> struct f8_format<e5m2> { enum : int { value = 1 }; };
}  // namespace detail

// Four consecutive results y[0..3] as satfinite T codes in one 32-bit word, y[0] in the low byte (little-endian: the
// byte order of four consecutive one-byte elements in memory); two cvt x2 instructions.
template <typename T>
__device__ __forceinline__ unsigned pack4_f8(const float* y) {
  constexpr int F = detail::f8_format<T>::value;
  return unsigned(detail::floats_to_f8x2<F>(y[0], y[1])) | (unsigned(detail::floats_to_f8x2<F>(y[2], y[3])) << 16);
}

__device__ __forceinline__ float to_float(e4m3 x) { return detail::f8_to_float<0>(x.bits); }
__device__ __forceinline__ float to_float(e5m2 x) { return detail::f8_to_float<1>(x.bits); }
template <>
__device__ __forceinline__ e4m3 from_float<e4m3>(float x) {
  return e4m3{detail::float_to_f8<0>(x)};
}
template <>
__device__ __forceinline__ e5m2 from_float<e5m2>(float x) {
  return e5m2{detail::float_to_f8<1>(x)};
}
#endif

}  // namespace heddle
