// heddle/heddle_sm100.cuh -- Blackwell (sm_100a) device runtime: tensor memory (tcgen05.alloc /
// relinquish / dealloc), tcgen05.mma kind::f16 / kind::f8f6f4 from shared-memory descriptors into a tensor-memory
// accumulator, tcgen05.commit onto an mbarrier, tcgen05.ld 32x32b + wait::ld, and the tcgen05 fences.
// Everything else (mbarriers, TMA, swizzled tiles, setmaxnreg, elect.sync) is heddle_sm90.cuh's.
// The PTX facts this rests on are listed in docs/blackwell.md (PTX ISA 9.7.16); nothing here has run
// on a B200: the encodings are checked by NVRTC (syntax) and by the CPU interpreter's independent
// model of them (src/heddle/interp/rt/hrt_ptx_tcgen05.h, under HEDDLE_INTERPRET), not by hardware.
//
// MmaSm100<BM, BN, BK, A_KMAJOR, B_KMAJOR, T>: BM = 128 (cta_group::1), BN a multiple of 64 up to 256.
//   Operand stages are the Hopper TmaTile layouts (1024-byte aligned, 32/64/128-byte swizzle); the
//   tcgen05 shared-memory descriptor has the wgmma descriptor's fields plus the constant 0b001 at
//   bits 46-48, and its swizzle codes at 61-63 (128B 2, 64B 4, 32B 6) are the wgmma layout types
//   (1, 2, 3 at 62-63) shifted by one bit: the same 64-bit value.
//   mma(tmem, stage, sA, sB, accumulate): BK/16 tcgen05.mma (K = 16 each; 8-bit: BK/32, below) into columns
//   [stage*BN, stage*BN + BN) of the allocation at `tmem`; the first runs with enable-input-d =
//   accumulate (0 on a tile's first k-tile: fresh columns hold no value), the others with 1.
//   Instruction descriptor (kind::f16, table 42): D f32 (1 at bits 4-5), A/B f16 0 or bf16 1 (7-9,
//   10-12), transpose A/B = MN-major (15, 16), N>>3 (17-22), M>>4 (24-28).
// MmaSm100<..., T, TB> with 8-bit operands (e4m3 / e5m2, docs/fp8.md): tcgen05.mma.cta_group::1.kind::f8f6f4,
//   K = 32 per instruction (PTX ISA 9.7.16.10.1, dense f8f6f4 shapes), BK in {32, 64, 128} (a 128-element
//   k tile is one 128-byte swizzle row), A type T and B type TB in the same table-42 fields with E4M3 0 and
//   E5M2 1 (CUTLASS UMMA::MXF8F6F4Format agrees), both operands K-major. A k step is still 32 bytes of
//   the K-major stage, so the descriptors are kind::f16's.
#pragma once
#include "heddle/heddle_math.cuh"
#include "heddle/heddle_sm90.cuh"

namespace heddle {
namespace sm100 {

using u64 = unsigned long long;

// Under HEDDLE_INTERPRET every primitive calls the execution runtime (src/heddle/interp/rt/hrt_tcgen05.cpp).
__device__ __forceinline__ void tmem_alloc(unsigned* slot, int ncols) {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::tcgen05_alloc(sm90::smem_u32(slot), ncols);
#else
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;\n" ::"r"(sm90::smem_u32(slot)),
               "r"(ncols)
               : "memory");
#endif
}
__device__ __forceinline__ void tmem_relinquish() {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::tcgen05_relinquish_alloc_permit();
#else
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void tmem_dealloc(unsigned addr, int ncols) {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::tcgen05_dealloc(addr, ncols);
#else
  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;\n" ::"r"(addr), "r"(ncols) : "memory");
#endif
}
__device__ __forceinline__ void fence_before() {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::tcgen05_fence(true);
#else
  asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void fence_after() {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::tcgen05_fence(false);
#else
  asm volatile("tcgen05.fence::after_thread_sync;\n" ::: "memory");
#endif
}

// One arrival on `bar` once every earlier tcgen05 operation of this thread has completed.
__device__ __forceinline__ void commit(u64* bar) {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::tcgen05_commit(sm90::smem_u32(bar));
#else
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];\n" ::"r"(
                   sm90::smem_u32(bar))
               : "memory");
#endif
}

// tcgen05.mma.cta_group::1 with A and B from shared-memory descriptors: kind::f16 (F8 false) or kind::f8f6f4 (F8
// true: 8-bit A / B types from the instruction descriptor, K = 32).
#define HEDDLE_TCGEN05_MMA_SS(KIND)                                                                                \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\ntcgen05.mma.cta_group::1.kind::" KIND                   \
               " [%0], %1, %2, %3, p;\n}\n" ::"r"(d),                                                              \
               "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(accumulate)                                              \
               : "memory")
template <bool F8>
__device__ __forceinline__ void mma_ss(unsigned d, u64 a_desc, u64 b_desc, unsigned idesc, int accumulate) {
#if defined(HEDDLE_INTERPRET)
  if constexpr (F8)
    ::heddle_rt::tcgen05_mma_f8f6f4_ss(d, a_desc, b_desc, idesc, accumulate);
  else
    ::heddle_rt::tcgen05_mma_f16_ss(d, a_desc, b_desc, idesc, accumulate);
#else
  if constexpr (F8)
    HEDDLE_TCGEN05_MMA_SS("f8f6f4");
  else
    HEDDLE_TCGEN05_MMA_SS("f16");
#endif
}
#undef HEDDLE_TCGEN05_MMA_SS

// An operand type's tcgen05.mma kind and its A/B type code in the instruction descriptor (PTX ISA 9.7.16.4.2
// table 42): kind::f16 f16 0, bf16 1; kind::f8f6f4 e4m3 0, e5m2 1.
template <typename T> struct UmmaFormat;
template <> struct UmmaFormat<f16> { static constexpr bool kF8 = false; static constexpr unsigned kCode = 0; };
template <> struct UmmaFormat<bf16> { static constexpr bool kF8 = false; static constexpr unsigned kCode = 1; };
#if defined(HEDDLE_INTERPRET) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890)
template <> struct UmmaFormat<e4m3> { static constexpr bool kF8 = true; static constexpr unsigned kCode = 0; };
template <> struct UmmaFormat<e5m2> { static constexpr bool kF8 = true; static constexpr unsigned kCode = 1; };
#endif

// 32 consecutive columns from `addr` (lane = the warp's quarter, 32x32b: thread t gets lane + t), in
// registers once tcgen05.wait::ld returned.
__device__ __forceinline__ void tmem_load_32(unsigned addr, float (&v)[32]) {
  unsigned r[32];
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::tcgen05_ld_32x32b(32, addr, r);
  ::heddle_rt::tcgen05_wait_ld();
#else
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x32.b32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, [%32];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7]), "=r"(r[8]),
        "=r"(r[9]), "=r"(r[10]), "=r"(r[11]), "=r"(r[12]), "=r"(r[13]), "=r"(r[14]), "=r"(r[15]), "=r"(r[16]),
        "=r"(r[17]), "=r"(r[18]), "=r"(r[19]), "=r"(r[20]), "=r"(r[21]), "=r"(r[22]), "=r"(r[23]), "=r"(r[24]),
        "=r"(r[25]), "=r"(r[26]), "=r"(r[27]), "=r"(r[28]), "=r"(r[29]), "=r"(r[30]), "=r"(r[31])
      : "r"(addr)
      : "memory");
  asm volatile("tcgen05.wait::ld.sync.aligned;\n" ::: "memory");
#endif
#pragma unroll
  for (int j = 0; j < 32; ++j) v[j] = f32_bits(r[j]);
}

}  // namespace sm100

template <int BM, int BN, int BK, bool A_KMAJOR, bool B_KMAJOR, typename T, typename TB = T>
struct MmaSm100 {
  using FA = sm100::UmmaFormat<T>;
  using FB = sm100::UmmaFormat<TB>;
  static constexpr bool kF8 = FA::kF8;
  static constexpr int kK = kF8 ? 32 : 16;  // K per tcgen05.mma: kind::f8f6f4 32, kind::f16 16
  static_assert(BM == 128, "MmaSm100: cta_group::1 tcgen05.mma computes M = 128");
  static_assert(BN % 64 == 0 && BN <= 256, "MmaSm100: BN must be 64, 128, 192 or 256");
  static_assert(FB::kF8 == kF8 && sizeof(TB) == sizeof(T), "MmaSm100: A and B are both 8-bit or both 16-bit");
  static_assert(BK % kK == 0 && BK * (int)sizeof(T) <= 128,
                "MmaSm100: BK must be 16, 32 or 64 (16-bit) or 32, 64 or 128 (8-bit)");
  static_assert(!kF8 || (A_KMAJOR && B_KMAJOR), "MmaSm100: 8-bit operands are K-major");
  using TileA = typename sm90::Select<A_KMAJOR, sm90::TmaTile<BM, BK, T>, sm90::TmaTile<BK, BM, T>>::type;
  using TileB = typename sm90::Select<B_KMAJOR, sm90::TmaTile<BN, BK, T>, sm90::TmaTile<BK, BN, T>>::type;
  static constexpr int kStageElemsA = TileA::kElems, kStageElemsB = TileB::kElems;
  static constexpr unsigned kIdesc = (1u << 4) | (FA::kCode << 7) | (FB::kCode << 10) | ((A_KMAJOR ? 0u : 1u) << 15) |
                                     ((B_KMAJOR ? 0u : 1u) << 16) | ((unsigned)(BN >> 3) << 17) |
                                     ((unsigned)(BM >> 4) << 24);

  template <typename Tile, bool KMAJOR>
  __device__ __forceinline__ static sm100::u64 desc(unsigned stage_addr, int ks) {
    return sm90::slab_desc<Tile, KMAJOR>(stage_addr, 0, ks) | (1ull << 46);
  }

  // One thread: acc[stage] (+)= A_stage x B_stage over the BK slab. The stages reach the tensor core as shared
  // addresses in descriptors only, so they are taken untyped (an 8-bit B stage of another format than A's).
  __device__ __forceinline__ static void mma(unsigned tmem, int stage, const void* sA, const void* sB, int accumulate) {
    const unsigned a = sm90::smem_u32(sA), b = sm90::smem_u32(sB), d = tmem + (unsigned)(stage * BN);
#pragma unroll
    for (int ks = 0; ks < BK / kK; ++ks) {
      sm100::mma_ss<kF8>(d, desc<TileA, A_KMAJOR>(a, ks), desc<TileB, B_KMAJOR>(b, ks), kIdesc,
                         ks == 0 ? accumulate : 1);
    }
  }

  // The epilogue thread's TMEM address of its row (warp w: lanes 32*(w%4)..) in columns of `stage`.
  __device__ __forceinline__ static unsigned row_addr(unsigned tmem, int warp, int stage) {
    return tmem + ((unsigned)(32 * (warp % 4)) << 16) + (unsigned)(stage * BN);
  }
};

}  // namespace heddle
