// heddle/heddle_mma_sm80.cuh -- CTA-tile matmul step for Ampere+ (sm_80): ldmatrix + mma.sync.
//
// MmaSm80<BM, BN, BK, WARPS_M, WARPS_N, A_KMAJOR, B_KMAJOR, T>, T in {f16, bf16}, f32 accumulate.
//   C[BM x BN] += A[BM x BK] * B[BK x BN] for one k-slab held in shared memory (one stage).
//   A stage: SmemTile<BM, BK> (element (m,k) at offset(m,k)) if A_KMAJOR, else SmemTile<BK, BM>
//            (element (m,k) at offset(k,m)).
//   B stage: SmemTile<BN, BK> (element (k,n) at offset(n,k)) if B_KMAJOR, else SmemTile<BK, BN>
//            (element (k,n) at offset(k,n)).
//   Warps: warp w owns rows [wm*WM, wm*WM+WM) and cols [wn*WN, wn*WN+WN) of the CTA tile, with
//   wm = w / WARPS_N, wn = w % WARPS_N, WM = BM/WARPS_M, WN = BN/WARPS_N. The warp tile is
//   FM x FN mma fragments of 16 x 8; acc[fm][fn][r] is the PTX m16n8 f32 C/D fragment:
//   row = fm*16 + lane/4 + 8*(r/2), col = fn*8 + 2*(lane%4) + r%2 (row_of / col_of add the warp
//   offset).
//   step(): for each 16-wide k step: A fragments by ldmatrix.x4 (.trans when A is m-contiguous),
//   B fragments by ldmatrix.x4 covering two n-fragments (.x2 for a trailing odd one; .trans when
//   B is n-contiguous), then FM*FN mma.sync.m16n8k16.row.col. ldmatrix matrix j of a 16x16
//   (A) or 16(k)x16(n) (B pair) block is the 8x8 sub-block the mma register j needs:
//     A: reg j = (m half j%2, k half j/2)     B pair: reg j = (n half j/2, k half j%2)
//   Lane l supplies the address of row l%8 of matrix l/8, a 16-byte chunk of the swizzled stage.
//
// Primitives (device: inline PTX; HEDDLE_INTERPRET: heddle_rt::ldmatrix_* / mma_*, warp collectives of
// the interpreter's runtime, which runs the 32 lanes of a warp in lockstep at every collective):
//   detail::ldmatrix<NUM, TRANS>(regs, addr)   detail::mma_m16n8k16<T>(d, a, b)
//   detail::smem_addr(p) -> SmemAddr (a u32 shared-window address).
#pragma once
#include "heddle/heddle_types.cuh"
#include "heddle/heddle_copy.cuh"

namespace heddle {
namespace detail {

using SmemAddr = unsigned;
__device__ __forceinline__ SmemAddr smem_addr(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}

// ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16; `addr` = this lane's row address.
template <int NUM, bool TRANS>
__device__ __forceinline__ void ldmatrix(unsigned (&r)[NUM], SmemAddr addr) {
  static_assert(NUM == 1 || NUM == 2 || NUM == 4, "ldmatrix loads 1, 2 or 4 matrices");
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::ldmatrix_sync_aligned_m8n8(NUM, TRANS, r, addr);
#else
  if constexpr (NUM == 4 && TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
  else if constexpr (NUM == 4)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
  else if constexpr (NUM == 2 && TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
  else if constexpr (NUM == 2)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
  else if constexpr (TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                 : "=r"(r[0]) : "r"(addr));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
                 : "=r"(r[0]) : "r"(addr));
#endif
}

template <typename T> struct MmaKind { enum : bool { kOk = false, kBf16 = false }; };
template <> struct MmaKind<f16> { enum : bool { kOk = true, kBf16 = false }; };
template <> struct MmaKind<bf16> { enum : bool { kOk = true, kBf16 = true }; };

template <bool C, typename A, typename B> struct Select { using type = A; };
template <typename A, typename B> struct Select<false, A, B> { using type = B; };

// d += a * b: mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 (PTX fragments).
template <typename T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4],
                                             const unsigned (&b)[2]) {
#if defined(HEDDLE_INTERPRET)
  static_assert(MmaKind<T>::kOk, "mma_m16n8k16: T must be heddle::f16 or heddle::bf16");
  ::heddle_rt::mma_sync_aligned_m16n8k16_row_col_f32(MmaKind<T>::kBf16, d, a, b);
#else
  static_assert(MmaKind<T>::kOk, "mma_m16n8k16: T must be heddle::f16 or heddle::bf16");
  if constexpr (MmaKind<T>::kBf16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// Element offset (in a stage laid out by Tile) of the row that `lane` hands to an ldmatrix of NUM
// matrices over the 16x16 block at tile (r0, c0); matrix j sits at rows r0 + 8*rb(j),
// cols c0 + 8*cb(j), with rb = j%2, cb = j/2 if ROW_FROM_BIT0, else rb = j/2, cb = j%2.
template <typename Tile, int NUM, bool ROW_FROM_BIT0>
__host__ __device__ __forceinline__ int ldm_offset(int r0, int c0, int lane) {
  int j = (lane >> 3) & (NUM - 1), i = lane & 7;
  int rb = ROW_FROM_BIT0 ? (j & 1) : (j >> 1), cb = ROW_FROM_BIT0 ? (j >> 1) : (j & 1);
  return Tile::offset(r0 + 8 * rb + i, c0 + 8 * cb);
}

}  // namespace detail

template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, bool A_KMAJOR, bool B_KMAJOR,
          typename T>
struct MmaSm80 {
  enum : int { WM = BM / WARPS_M, WN = BN / WARPS_N, FM = WM / 16, FN = WN / 8 };
  enum : int { kWarps = WARPS_M * WARPS_N, kThreads = 32 * kWarps };
  static_assert(detail::MmaKind<T>::kOk, "MmaSm80: T must be heddle::f16 or heddle::bf16");
  static_assert(WARPS_M > 0 && WARPS_N > 0, "MmaSm80: warp grid must be positive");
  static_assert(BM % (16 * WARPS_M) == 0, "MmaSm80: BM must be a multiple of 16*WARPS_M");
  static_assert(BN % (8 * WARPS_N) == 0, "MmaSm80: BN must be a multiple of 8*WARPS_N");
  static_assert(BK % 16 == 0 && BK > 0, "MmaSm80: BK must be a positive multiple of 16");
  using TileA = typename detail::Select<A_KMAJOR, SmemTile<BM, BK, T>, SmemTile<BK, BM, T>>::type;
  using TileB = typename detail::Select<B_KMAJOR, SmemTile<BN, BK, T>, SmemTile<BK, BN, T>>::type;
  enum : int { kStageElemsA = TileA::kElems, kStageElemsB = TileB::kElems };

  float acc[FM][FN][4];

  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int fm = 0; fm < FM; ++fm)
#pragma unroll
      for (int fn = 0; fn < FN; ++fn)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[fm][fn][r] = 0.0f;
  }

  // acc += A_stage * B_stage over the BK slab. All 32 lanes of the warp must call it together.
  __device__ __forceinline__ void step(const T* sA, const T* sB, int warp, int lane) {
    const int m0 = (warp / WARPS_N) * WM, n0 = (warp % WARPS_N) * WN;
    const detail::SmemAddr a_base = detail::smem_addr(sA), b_base = detail::smem_addr(sB);
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned a[FM][4];
#pragma unroll
      for (int fm = 0; fm < FM; ++fm) {
        // A_KMAJOR: rows = m (j%2), cols = k (j/2).  m-major: rows = k (j/2), cols = m (j%2).
        int off = A_KMAJOR ? detail::ldm_offset<TileA, 4, true>(m0 + fm * 16, kk, lane)
                           : detail::ldm_offset<TileA, 4, false>(kk, m0 + fm * 16, lane);
        detail::ldmatrix<4, !A_KMAJOR>(a[fm], a_base + off * (int)sizeof(T));
      }
      // B n-fragments two at a time (one ldmatrix.x4), each used at once by FM mma: only 4
      // B registers stay live.
#pragma unroll
      for (int fn = 0; fn + 1 < FN; fn += 2) {
        // B_KMAJOR: rows = n (j/2), cols = k (j%2).  n-major: rows = k (j%2), cols = n (j/2).
        int off = B_KMAJOR ? detail::ldm_offset<TileB, 4, false>(n0 + fn * 8, kk, lane)
                           : detail::ldm_offset<TileB, 4, true>(kk, n0 + fn * 8, lane);
        unsigned r[4];
        detail::ldmatrix<4, !B_KMAJOR>(r, b_base + off * (int)sizeof(T));
        const unsigned b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
#pragma unroll
        for (int fm = 0; fm < FM; ++fm) {
          detail::mma_m16n8k16<T>(acc[fm][fn], a[fm], b0);
          detail::mma_m16n8k16<T>(acc[fm][fn + 1], a[fm], b1);
        }
      }
      if constexpr (FN % 2 == 1) {  // trailing n-fragment: ldmatrix.x2 (matrices = k halves)
        constexpr int fn = FN - 1;
        int off = B_KMAJOR ? detail::ldm_offset<TileB, 2, false>(n0 + fn * 8, kk, lane)
                           : detail::ldm_offset<TileB, 2, true>(kk, n0 + fn * 8, lane);
        unsigned b0[2];
        detail::ldmatrix<2, !B_KMAJOR>(b0, b_base + off * (int)sizeof(T));
#pragma unroll
        for (int fm = 0; fm < FM; ++fm) detail::mma_m16n8k16<T>(acc[fm][fn], a[fm], b0);
      }
    }
  }

  __host__ __device__ __forceinline__ static int row_of(int warp, int lane, int fm, int r) {
    return (warp / WARPS_N) * WM + fm * 16 + (lane >> 2) + ((r >> 1) << 3);
  }
  __host__ __device__ __forceinline__ static int col_of(int warp, int lane, int fn, int r) {
    return (warp % WARPS_N) * WN + fn * 8 + ((lane & 3) << 1) + (r & 1);
  }
  // A group of P matmuls (fn < FN / P): the output column, within the CTA's WARPS_N * WN / P, of
  // fragment fn of the warp's first slice; member p's element is acc[fm][fn + p * FN / P][r].
  template <int P>
  __host__ __device__ __forceinline__ static int part_col_of(int warp, int lane, int fn, int r) {
    static_assert(P >= 1 && FN % P == 0, "MmaSm80::part_col_of: the warp tile must split into P whole slices");
    return (warp % WARPS_N) * (WN / P) + fn * 8 + ((lane & 3) << 1) + (r & 1);
  }
};

}  // namespace heddle
