// heddle/heddle_hip_mma.cuh -- CTA-tile matmul step on AMD matrix cores, with the interface of
// MmaSm80 (zero / step / row_of / col_of, acc[FM][FN][4]) so the epilogue printer is shared.
//
// MmaAmd<BM, BN, BK, WARPS_M, WARPS_N, A_KMAJOR, B_KMAJOR, T, WAVE>, T in {f16, bf16}, f32 accumulate:
//   C[BM x BN] += A[BM x BK] * B[BK x BN] for one k-slab held in LDS (one stage, LdsTile layout):
//   A stage LdsTile<BM, BK> ((m,k) at offset(m,k)) if A_KMAJOR else LdsTile<BK, BM> ((m,k) at
//   offset(k,m)); B stage LdsTile<BN, BK> ((k,n) at offset(n,k)) if B_KMAJOR else LdsTile<BK, BN>.
//   Wavefront w owns rows [wm*WM, +WM) and cols [wn*WN, +WN), wm = w / WARPS_N, wn = w % WARPS_N,
//   as a TM x TN grid of 16x16 tiles.
//   WAVE 64 (CDNA, gfx90a / gfx942): v_mfma_f32_16x16x16{f16, bf16_1k}. Per the CDNA2/3 ISA
//     (AMD matrix instruction calculator): lane l holds A[l%16][4*(l/16) + e] and
//     B[4*(l/16) + e][l%16] for e = 0..3, and D[4*(l/16) + r][l%16] in accumulator r = 0..3.
//     acc[fm][fn][r] is tile (fm, fn) register r: FM = TM, FN = TN.
//   WAVE 32 (GFX12, gfx1200): v_wmma_f32_16x16x16_{f16, bf16}_w32 (the gfx12 encoding). Lane l
//     holds A[l%16][k(e)] and B[k(e)][l%16] with k(e) = 8*(e/4) + 4*(l/16) + e%4 for e = 0..7, and
//     D[8*(l/16) + r][l%16] in accumulator r = 0..7. acc[fm][fn][r] is register 4*(fm%2) + r of
//     tile (fm/2, fn): FM = 2*TM, FN = TN.
//   row_of / col_of give the CTA-tile row and column of acc[fm][fn][r] for a lane, so an epilogue
//   written for MmaSm80 (loops over FM, FN and r < 4) works unchanged.
// Primitives (device: clang builtins; HEDDLE_INTERPRET: heddle_rt::v_mfma_* / v_wmma_*, wave
// collectives of the interpreter's runtime): amd_detail::mfma16<T>(d, a, b), amd_detail::wmma16<T>(d, a, b).
#pragma once
#include "heddle/heddle_hip_copy.cuh"
#include "heddle/heddle_types.cuh"
// HIP only: under a CUDA compiler (NVRTC compiles every embedded header) this header is empty.
#if !defined(__CUDACC__) || defined(__HIP__)

namespace heddle {
namespace amd_detail {

template <typename T> struct MmaKind { enum : bool { kOk = false, kBf16 = false }; };
template <> struct MmaKind<f16> { enum : bool { kOk = true, kBf16 = false }; };
template <> struct MmaKind<bf16> { enum : bool { kOk = true, kBf16 = true }; };

template <bool C, typename A, typename B> struct Select { using type = A; };
template <typename A, typename B> struct Select<false, A, B> { using type = B; };

// Accumulators live in 4-float vectors (subscriptable like float[4]): a plain array passed to the
// builtins through memcpy ends up in scratch memory.
#if defined(HEDDLE_INTERPRET)
typedef float f4 __attribute__((vector_size(16)));
#else
typedef _Float16 h4 __attribute__((ext_vector_type(4)));
typedef _Float16 h8 __attribute__((ext_vector_type(8)));
typedef short s4 __attribute__((ext_vector_type(4)));
typedef short s8 __attribute__((ext_vector_type(8)));
typedef float f4 __attribute__((ext_vector_type(4)));
typedef float f8 __attribute__((ext_vector_type(8)));
#endif

// d += a * b on a 16x16x16 tile, wave64 (CDNA MFMA). a, b: this lane's 4 elements (bits).
template <typename T>
__device__ __forceinline__ void mfma16(f4& d, const unsigned short (&a)[4], const unsigned short (&b)[4]) {
  static_assert(MmaKind<T>::kOk, "mfma16: T must be heddle::f16 or heddle::bf16");
#if defined(HEDDLE_INTERPRET)  // (the runtime refuses MFMA on a wave32 target)
  float x[4] = {d[0], d[1], d[2], d[3]};
  if constexpr (MmaKind<T>::kBf16) ::heddle_rt::v_mfma_f32_16x16x16_bf16_1k(x, a, b, x, 0, 0, 0);
  else ::heddle_rt::v_mfma_f32_16x16x16_f16(x, a, b, x, 0, 0, 0);
  for (int r = 0; r < 4; ++r) d[r] = x[r];
#elif defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
  f4 c = d;
  if constexpr (MmaKind<T>::kBf16) {
    s4 va, vb;
    __builtin_memcpy(&va, a, 8);
    __builtin_memcpy(&vb, b, 8);
    c = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(va, vb, c, 0, 0, 0);
  } else {
    h4 va, vb;
    __builtin_memcpy(&va, a, 8);
    __builtin_memcpy(&vb, b, 8);
    c = __builtin_amdgcn_mfma_f32_16x16x16f16(va, vb, c, 0, 0, 0);
  }
  d = c;
#else
  __builtin_trap();  // MFMA needs CDNA (gfx90a, gfx942)
#endif
}

// d += a * b on a 16x16x16 tile, wave32 (GFX12 WMMA). a, b: this lane's 8 elements; d: its 8 rows.
// (d0 rows 0..3 of the lane's 8, d1 rows 4..7)
template <typename T>
__device__ __forceinline__ void wmma16(f4& d0, f4& d1, const unsigned short (&a)[8], const unsigned short (&b)[8]) {
  static_assert(MmaKind<T>::kOk, "wmma16: T must be heddle::f16 or heddle::bf16");
#if defined(HEDDLE_INTERPRET)  // (the runtime refuses WMMA on a wave64 target)
  float x[8] = {d0[0], d0[1], d0[2], d0[3], d1[0], d1[1], d1[2], d1[3]};
  if constexpr (MmaKind<T>::kBf16) ::heddle_rt::v_wmma_f32_16x16x16_bf16(x, a, b, x);
  else ::heddle_rt::v_wmma_f32_16x16x16_f16(x, a, b, x);
  for (int r = 0; r < 4; ++r) {
    d0[r] = x[r];
    d1[r] = x[4 + r];
  }
#elif defined(__GFX12__)
  f8 c = __builtin_shufflevector(d0, d1, 0, 1, 2, 3, 4, 5, 6, 7);
  if constexpr (MmaKind<T>::kBf16) {
    s8 va, vb;
    __builtin_memcpy(&va, a, 16);
    __builtin_memcpy(&vb, b, 16);
    c = __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32_gfx12(va, vb, c);
  } else {
    h8 va, vb;
    __builtin_memcpy(&va, a, 16);
    __builtin_memcpy(&vb, b, 16);
    c = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(va, vb, c);
  }
  d0 = __builtin_shufflevector(c, c, 0, 1, 2, 3);
  d1 = __builtin_shufflevector(c, c, 4, 5, 6, 7);
#else
  __builtin_trap();  // this WMMA encoding needs GFX12
#endif
}

// Four consecutive 16-bit elements starting at p (8-byte aligned when CONTIG), or four with stride.
template <bool CONTIG>
__device__ __forceinline__ void load4(unsigned short* out, const unsigned short* p, int stride) {
  if constexpr (CONTIG) {
    struct alignas(8) Q { unsigned short v[4]; };
    Q q = *reinterpret_cast<const Q*>(p);
#pragma unroll
    for (int e = 0; e < 4; ++e) out[e] = q.v[e];
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e) out[e] = p[e * stride];
  }
}

// The accumulator tiles, read by the printed epilogue as acc[fm][fn][r] like MmaSm80's float
// array. The epilogue's fm loop may stay rolled (a large fused epilogue exceeds the unroller's
// budget); indexing a register array with a run-time index would move the whole array to scratch
// memory, so a read selects among the constant-index elements instead. step()/zero() use v.
template <int FM, int FN>
struct AccTiles {
  f4 v[FM][FN];
  struct Elem {
    const AccTiles* t;
    int fm, fn;
    __device__ __forceinline__ float operator[](int r) const {
      float x = 0.0f;
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
          for (int k = 0; k < 4; ++k)
            if (i == fm && j == fn && k == r) x = t->v[i][j][k];
      return x;
    }
  };
  struct Row {
    const AccTiles* t;
    int fm;
    __device__ __forceinline__ Elem operator[](int fn) const { return Elem{t, fm, fn}; }
  };
  __device__ __forceinline__ Row operator[](int fm) const { return Row{this, fm}; }
};

}  // namespace amd_detail

template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, bool A_KMAJOR, bool B_KMAJOR, typename T, int WAVE>
struct MmaAmd {
  enum : int { WM = BM / WARPS_M, WN = BN / WARPS_N, TM = WM / 16, TN = WN / 16 };
  enum : int { kRegs = WAVE == 64 ? 4 : 8, kElems = kRegs };  // accumulators / operand elements per lane
  enum : int { FM = TM * kRegs / 4, FN = TN };
  enum : int { kWarps = WARPS_M * WARPS_N, kThreads = WAVE * kWarps };
  static_assert(WAVE == 64 || WAVE == 32, "MmaAmd: wave64 (MFMA) or wave32 (WMMA)");
  static_assert(amd_detail::MmaKind<T>::kOk, "MmaAmd: T must be heddle::f16 or heddle::bf16");
  static_assert(WARPS_M > 0 && WARPS_N > 0, "MmaAmd: wavefront grid must be positive");
  static_assert(BM % (16 * WARPS_M) == 0 && BN % (16 * WARPS_N) == 0, "MmaAmd: wave tiles are multiples of 16x16");
  static_assert(BK % 16 == 0 && BK > 0, "MmaAmd: BK must be a positive multiple of 16");
  using TileA = typename amd_detail::Select<A_KMAJOR, LdsTile<BM, BK, T>, LdsTile<BK, BM, T>>::type;
  using TileB = typename amd_detail::Select<B_KMAJOR, LdsTile<BN, BK, T>, LdsTile<BK, BN, T>>::type;
  enum : int { kStageElemsA = TileA::kElems, kStageElemsB = TileB::kElems };

  amd_detail::AccTiles<FM, FN> acc;  // acc[fm][fn][r] reads, as MmaSm80's float acc[FM][FN][4]

  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int fm = 0; fm < FM; ++fm)
#pragma unroll
      for (int fn = 0; fn < FN; ++fn)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc.v[fm][fn][r] = 0.0f;
  }

  // The lane's operand elements of the 16-wide k step at kk: group g of 4 consecutive k values
  // starts at k = kk + 4*(lane/16) (wave64) or kk + 8*g + 4*(lane/16) (wave32, g = 0, 1).
  __device__ __forceinline__ static int kFirst(int lane, int g) {
    return WAVE == 64 ? 4 * (lane >> 4) : 8 * g + 4 * ((lane >> 4) & 1);
  }

  // acc += A_stage * B_stage over the BK slab. All lanes of the wavefront call it together.
  __device__ __forceinline__ void step(const T* sA, const T* sB, int warp, int lane) {
    const int m0 = (warp / WARPS_N) * WM, n0 = (warp % WARPS_N) * WN;
    const unsigned short* pa = reinterpret_cast<const unsigned short*>(sA);
    const unsigned short* pb = reinterpret_cast<const unsigned short*>(sB);
    constexpr int kGroups = kElems / 4;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned short a[TM][kElems], b[TN][kElems];
#pragma unroll
      for (int tm = 0; tm < TM; ++tm) {
        const int m = m0 + tm * 16 + (lane & 15);
#pragma unroll
        for (int g = 0; g < kGroups; ++g) {
          const int k = kk + kFirst(lane, g);
          if constexpr (A_KMAJOR) amd_detail::load4<true>(a[tm] + 4 * g, pa + TileA::offset(m, k), 1);
          else amd_detail::load4<false>(a[tm] + 4 * g, pa + TileA::offset(k, m), TileA::offset(1, 0));
        }
      }
#pragma unroll
      for (int tn = 0; tn < TN; ++tn) {
        const int n = n0 + tn * 16 + (lane & 15);
#pragma unroll
        for (int g = 0; g < kGroups; ++g) {
          const int k = kk + kFirst(lane, g);
          if constexpr (B_KMAJOR) amd_detail::load4<true>(b[tn] + 4 * g, pb + TileB::offset(n, k), 1);
          else amd_detail::load4<false>(b[tn] + 4 * g, pb + TileB::offset(k, n), TileB::offset(1, 0));
        }
      }
#pragma unroll
      for (int tm = 0; tm < TM; ++tm)
#pragma unroll
        for (int tn = 0; tn < TN; ++tn) {
          if constexpr (WAVE == 64) amd_detail::mfma16<T>(acc.v[tm][tn], a[tm], b[tn]);
          else amd_detail::wmma16<T>(acc.v[2 * tm][tn], acc.v[2 * tm + 1][tn], a[tm], b[tn]);
        }
    }
  }

  __host__ __device__ __forceinline__ static int row_of(int warp, int lane, int fm, int r) {
    const int m0 = (warp / WARPS_N) * WM;
    return WAVE == 64 ? m0 + fm * 16 + 4 * (lane >> 4) + r
                      : m0 + (fm >> 1) * 16 + 8 * ((lane >> 4) & 1) + 4 * (fm & 1) + r;
  }
  __host__ __device__ __forceinline__ static int col_of(int warp, int lane, int fn, int /*r*/) {
    return (warp % WARPS_N) * WN + fn * 16 + (lane & 15);
  }
};

}  // namespace heddle

#endif  // !__CUDACC__ || __HIP__
