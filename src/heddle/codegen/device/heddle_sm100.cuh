// heddle/heddle_sm100.cuh -- Blackwell (sm_100a) device runtime: tensor memory (tcgen05.alloc /
// relinquish / dealloc), tcgen05.mma kind::f16 / kind::f8f6f4 from shared-memory descriptors into a tensor-memory
// accumulator, tcgen05.commit onto an mbarrier, tcgen05.ld 32x32b + wait::ld, and the tcgen05 fences.
// The block-scaled kinds with tcgen05.cp of their scales: MmaSm100Mx (MXFP8), MmaSm100Nvf4 (NVFP4) and MmaSm100Mxf4
// (MXFP4) at the end.
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
template <> struct UmmaFormat<f16> { enum : bool { kF8 = false }; enum : unsigned { kCode = 0 }; };
template <> struct UmmaFormat<bf16> { enum : bool { kF8 = false }; enum : unsigned { kCode = 1 }; };
#if defined(HEDDLE_INTERPRET) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890)
template <> struct UmmaFormat<e4m3> { enum : bool { kF8 = true }; enum : unsigned { kCode = 0 }; };
template <> struct UmmaFormat<e5m2> { enum : bool { kF8 = true }; enum : unsigned { kCode = 1 }; };
#endif

// Block-scaled MMA (MXFP8, docs/fp8.md "MX formats"): tcgen05.cp.cta_group::1.32x128b.warpx4 copies 32 rows of
// 16 bytes from shared memory (a no-swizzle matrix descriptor) into 4 columns of every 32-lane quarter of tensor
// memory (PTX ISA 9.7.16.9.2); tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X reads one ue8m0
// scale per row of A and per column of B from tensor memory (9.7.16.10.7). One thread issues both: cp -> mma of
// the same thread execute in issue order (9.7.16.6.2, pipelined pair 2), and a tcgen05.commit tracks both.
__device__ __forceinline__ void cp_32x128b_warpx4(unsigned taddr, u64 sdesc) {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::tcgen05_cp_32x128b_warpx4(taddr, sdesc);
#else
  asm volatile("tcgen05.cp.cta_group::1.32x128b.warpx4 [%0], %1;\n" ::"r"(taddr), "l"(sdesc) : "memory");
#endif
}
// tcgen05.mma.cta_group::1 block-scaled, A and B from shared-memory descriptors, scales at tensor-memory addresses.
#define HEDDLE_TCGEN05_MMA_BLOCK_SCALED(KIND)                                                                       \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\ntcgen05.mma.cta_group::1." KIND                           \
               " [%0], %1, %2, %3, [%4], [%5], p;\n}\n" ::"r"(d),                                                  \
               "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(sfa), "r"(sfb), "r"(accumulate)                          \
               : "memory")
__device__ __forceinline__ void mma_mx_ss(unsigned d, u64 a_desc, u64 b_desc, unsigned idesc, unsigned sfa,
                                          unsigned sfb, int accumulate) {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::tcgen05_mma_mxf8f6f4_ss(d, a_desc, b_desc, idesc, sfa, sfb, accumulate);
#else
  HEDDLE_TCGEN05_MMA_BLOCK_SCALED("kind::mxf8f6f4.block_scale.scale_vec::1X");
#endif
}
// NVFP4: tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X -- packed e2m1 operands (K = 64 per
// instruction, 32 bytes of a row), four ue4m3 scales per row / column per instruction (one 32-bit word).
__device__ __forceinline__ void mma_nvf4_ss(unsigned d, u64 a_desc, u64 b_desc, unsigned idesc, unsigned sfa,
                                            unsigned sfb, int accumulate) {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::tcgen05_mma_mxf4nvf4_ss(d, a_desc, b_desc, idesc, sfa, sfb, accumulate);
#else
  HEDDLE_TCGEN05_MMA_BLOCK_SCALED("kind::mxf4nvf4.block_scale.scale_vec::4X");
#endif
}
// MXFP4: tcgen05.mma.cta_group::1.kind::mxf4.block_scale.scale_vec::2X -- packed e2m1 operands (K = 64 per
// instruction), two ue8m0 scales per row / column per instruction, the half word the scale factor IDs select (0 or 2;
// PTX ISA 9.7.16.10.7 table 55 and 9.7.16.10.7.2.2). DeepGEMM's sm100 SM100_MMA_MXF4_SS issues the same form.
__device__ __forceinline__ void mma_mxf4_ss(unsigned d, u64 a_desc, u64 b_desc, unsigned idesc, unsigned sfa,
                                            unsigned sfb, int accumulate) {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::tcgen05_mma_mxf4_ss(d, a_desc, b_desc, idesc, sfa, sfb, accumulate);
#else
  HEDDLE_TCGEN05_MMA_BLOCK_SCALED("kind::mxf4.block_scale.scale_vec::2X");
#endif
}
#undef HEDDLE_TCGEN05_MMA_BLOCK_SCALED
// A 512-byte blocked scale chunk as a no-swizzle K-major matrix: 8-row core matrices of 16-byte rows, 128 bytes
// apart (SBO), the constant 0b001 at bits 46-48 (PTX ISA 9.7.16.4.1 table 40). DeepGEMM's sm100 make_sf_desc
// builds the same one for its UTCCP copies (K-major, 8 x 128-bit atoms, LBO unused: one atom along K).
__device__ __forceinline__ u64 scale_chunk_desc(unsigned addr) {
  return (u64)((addr & 0x3FFFFu) >> 4) | ((u64)(128 >> 4) << 32) | (1ull << 46);
}

// The TMA-store epilogue (docs/blackwell.md "The TMA-store epilogue"): 16 bytes of one thread's tile row -- the
// results y[0 .. 16/sizeof(T)) of columns c.. -- converted to T (16-bit: pack2's cvt.rn pairs; f32 as it is; e4m3 /
// e5m2, the q of a computed output scale: pack4_f8's cvt.rn.satfinite pairs, 16 codes) and
// written with one st.shared.v4.b32 at (r, c) of the 128-byte swizzled staging slot (Tile = sm90::TmaTile<rows,
// 128 / sizeof(T), T>: 16-byte unit u of row r at unit u ^ (r % 8), the TMA store's CU_TENSOR_MAP_SWIZZLE_128B
// pattern). A warp's 32 rows writing the same unit u: each 8-thread phase of the 512-byte store (rows r..r+7)
// covers units u ^ 0..7, all eight 16-byte bank groups of a 128-byte line: no bank conflict.
template <typename Tile, typename T>
__device__ __forceinline__ void stage_16(T* slot, int r, int c, const float* y) {
  unsigned w[4];
  if constexpr (sizeof(T) == 1) {
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = pack4_f8<T>(y + 4 * i);
  } else if constexpr (sizeof(T) == 2) {
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = pack2<T>(y[2 * i], y[2 * i + 1]);
  } else {
    static_assert(sizeof(T) == 4, "stage_16: 8-bit, 16-bit or f32 outputs");
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = detail::float_bits(y[i]);
  }
  char* p = reinterpret_cast<char*>(slot) + Tile::byte_offset(r, c);
#if defined(HEDDLE_INTERPRET)
  unsigned* d = reinterpret_cast<unsigned*>(p);
  d[0] = w[0];
  d[1] = w[1];
  d[2] = w[2];
  d[3] = w[3];
#else
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(sm90::smem_u32(p)), "r"(w[0]), "r"(w[1]), "r"(w[2]),
               "r"(w[3])
               : "memory");
#endif
}

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
  enum : bool { kF8 = FA::kF8 };
  enum : int { kK = kF8 ? 32 : 16 };  // K per tcgen05.mma: kind::f8f6f4 32, kind::f16 16
  static_assert(BM == 128, "MmaSm100: cta_group::1 tcgen05.mma computes M = 128");
  static_assert(BN % 64 == 0 && BN <= 256, "MmaSm100: BN must be 64, 128, 192 or 256");
  static_assert(FB::kF8 == kF8 && sizeof(TB) == sizeof(T), "MmaSm100: A and B are both 8-bit or both 16-bit");
  static_assert(BK % kK == 0 && BK * (int)sizeof(T) <= 128,
                "MmaSm100: BK must be 16, 32 or 64 (16-bit) or 32, 64 or 128 (8-bit)");
  static_assert(!kF8 || (A_KMAJOR && B_KMAJOR), "MmaSm100: 8-bit operands are K-major");
  using TileA = typename sm90::Select<A_KMAJOR, sm90::TmaTile<BM, BK, T>, sm90::TmaTile<BK, BM, T>>::type;
  using TileB = typename sm90::Select<B_KMAJOR, sm90::TmaTile<BN, BK, T>, sm90::TmaTile<BK, BN, T>>::type;
  enum : int { kStageElemsA = TileA::kElems, kStageElemsB = TileB::kElems };
  enum : unsigned { kIdesc = (1u << 4) | (FA::kCode << 7) | (FB::kCode << 10) | ((A_KMAJOR ? 0u : 1u) << 15) |
                             ((B_KMAJOR ? 0u : 1u) << 16) | ((unsigned)(BN >> 3) << 17) |
                             ((unsigned)(BM >> 4) << 24) };

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

// MmaSm100Mx<BN, T, TB>: the MXFP8 GEMM step (tcgen05.mma kind::mxf8f6f4.block_scale.scale_vec::1X), BM = 128, BK =
// 128: one k tile is four K = 32 instructions and four ue8m0 scale blocks of 32, the bytes of one 512-byte chunk
// of the cuBLAS / torch "blocked" scale layout per 128 rows (byte r0*16 + r1*4 + c: row r1*32 + r0, k-block c;
// torch.testing._internal.common_quantized.to_blocked). tcgen05.cp.32x128b.warpx4 puts row r of a chunk in lane
// r of each lane quarter, columns +0..3, so row i's scale is lane i%32, column i/32, byte c: instruction c of the
// k tile selects it with the scale factor IDs (A at idesc bits 29-30, B at 4-5).
//   Instruction descriptor (PTX ISA 9.7.16.4.2 table 43, kind::mxf8f6f4; CUTLASS's
//   UMMA::InstrDescriptorBlockScaled has the same fields): B SF id 4-5, A/B type 7-9 / 10-12 (E4M3 0, E5M2 1),
//   N>>3 17-22, scale type UE8M0 1 at 23, M>>7 27-28, A SF id 29-30; D is f32 (no D-type field), K-major.
//   Tensor memory per ring stage: kColsA = 4 columns of A scales, kColsB = BN/32 of B scales. A copy must not
//   overwrite scales an earlier MMA still reads (mma -> cp is not a pipelined pair, 9.7.16.6.2), so each operand
//   stage has its own scale columns: the stage's tcgen05.commit -> empty -> TMA -> full chain orders the reuse.
template <int BN, typename T, typename TB = T>
struct MmaSm100Mx : MmaSm100<128, BN, 128, true, true, T, TB> {
  using Base = MmaSm100<128, BN, 128, true, true, T, TB>;
  static_assert(Base::kF8, "MmaSm100Mx: MXFP8 operands are e4m3 / e5m2");
  static_assert(BN % 128 == 0, "MmaSm100Mx: BN is 128 or 256 (whole 128-row scale chunks of B)");
  enum : int { kColsA = 4, kColsB = BN / 32 };
  enum : int { kScaleBytesA = 512, kScaleBytesB = 512 * (BN / 128) };  // shared bytes per stage
  enum : unsigned { kIdesc = (Base::FA::kCode << 7) | (Base::FB::kCode << 10) | ((unsigned)(BN >> 3) << 17) |
                             (1u << 23) | (1u << 27) };
  __device__ __forceinline__ static unsigned idesc(int c) { return kIdesc | ((unsigned)c << 4) | ((unsigned)c << 29); }
  // One thread: copy the stage's scales (shared -> tensor memory columns sf + stage*(kColsA + kColsB)), then
  // acc[acc_stage] (+)= (A * sA) x (B * sB) over the k tile. The copies precede the MMAs in issue order.
  __device__ __forceinline__ static void mma(unsigned tmem, unsigned sf, int acc_stage, int stage, const void* sA,
                                             const void* sB, const void* sSFA, const void* sSFB, int accumulate) {
    const unsigned tsa = sf + (unsigned)(stage * (kColsA + kColsB)), tsb = tsa + kColsA;
    sm100::cp_32x128b_warpx4(tsa, sm100::scale_chunk_desc(sm90::smem_u32(sSFA)));
#pragma unroll
    for (int q = 0; q < BN / 128; ++q) sm100::cp_32x128b_warpx4(tsb + 4u * q, sm100::scale_chunk_desc(sm90::smem_u32(sSFB) + 512u * q));
    const unsigned a = sm90::smem_u32(sA), b = sm90::smem_u32(sB), d = tmem + (unsigned)(acc_stage * BN);
#pragma unroll
    for (int c = 0; c < 4; ++c)
      sm100::mma_mx_ss(d, Base::template desc<typename Base::TileA, true>(a, c),
                       Base::template desc<typename Base::TileB, true>(b, c), idesc(c), tsa, tsb, c == 0 ? accumulate : 1);
  }
};

// MmaSm100Nvf4<BN>: the NVFP4 GEMM step (tcgen05.mma kind::mxf4nvf4.block_scale.scale_vec::4X), BM = 128, a k tile of
// 128 e2m1 elements = 64 bytes a row (64-byte swizzle), two K = 64 instructions. One ue4m3 scale per 16 elements:
// one 512-byte blocked chunk per 128 rows and instruction (128 rows x 4 blocks of 16), copied by
// tcgen05.cp.32x128b.warpx4 to 4 columns: row i's four scales are the word of lane i%32, column i/32 (scale factor
// IDs 0: scale_vec::4X takes the whole word, PTX ISA 9.7.16.10.7.2.3). Instruction c reads A's scales at
// tsa + 4c and B's at tsb + c*BN/32.
//   Instruction descriptor (PTX ISA 9.7.16.4.2 table 44, kind::mxf4nvf4; CUTLASS's
//   UMMA::InstrDescriptorBlockScaled): A type E2M1 = 1 at 7-9, B type 1 at 10-11, N>>3 at 17-22, scale type
//   UE4M3 = 0 at 23, M>>7 at 27-28, K bit 31 = 0 (dense K = 64). Scale columns per stage as MmaSm100Mx's.
//   Operand bytes: two e2m1 per byte, element 2j in the low nibble (9.7.16.10.4.6: packed, no padding).
template <int BN>
struct MmaSm100Nvf4 {
  static_assert(BN % 128 == 0 && BN <= 256, "MmaSm100Nvf4: BN is 128 or 256 (whole 128-row scale chunks of B)");
  using TileA = sm90::TmaTile<128, 64, unsigned char>;  // 128 x 128 e2m1
  using TileB = sm90::TmaTile<BN, 64, unsigned char>;
  enum : int { kColsA = 8, kColsB = 2 * (BN / 32) };
  enum : int { kScaleBytesA = 1024, kScaleBytesB = 1024 * (BN / 128) };  // shared bytes per stage
  enum : unsigned { kIdesc = (1u << 7) | (1u << 10) | ((unsigned)(BN >> 3) << 17) | (1u << 27) };
  // sSFA: the two chunks of the k tile (instruction 0, 1); sSFB: per 128 rows of B the same two chunks.
  __device__ __forceinline__ static void mma(unsigned tmem, unsigned sf, int acc_stage, int stage, const void* sA,
                                             const void* sB, const void* sSFA, const void* sSFB, int accumulate) {
    const unsigned tsa = sf + (unsigned)(stage * (kColsA + kColsB)), tsb = tsa + kColsA;
    const unsigned fa = sm90::smem_u32(sSFA), fb = sm90::smem_u32(sSFB);
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      sm100::cp_32x128b_warpx4(tsa + 4u * c, sm100::scale_chunk_desc(fa + 512u * c));
#pragma unroll
      for (int q = 0; q < BN / 128; ++q)
        sm100::cp_32x128b_warpx4(tsb + (unsigned)(c * (BN / 32)) + 4u * q,
                                 sm100::scale_chunk_desc(fb + 1024u * q + 512u * c));
    }
    const unsigned a = sm90::smem_u32(sA), b = sm90::smem_u32(sB), d = tmem + (unsigned)(acc_stage * BN);
#pragma unroll
    for (int c = 0; c < 2; ++c)
      sm100::mma_nvf4_ss(d, sm90::slab_desc<TileA, true>(a, 0, c) | (1ull << 46),
                         sm90::slab_desc<TileB, true>(b, 0, c) | (1ull << 46), kIdesc, tsa + 4u * c,
                         tsb + (unsigned)(c * (BN / 32)), c == 0 ? accumulate : 1);
  }
  __device__ __forceinline__ static unsigned row_addr(unsigned tmem, int warp, int stage) {
    return tmem + ((unsigned)(32 * (warp % 4)) << 16) + (unsigned)(stage * BN);
  }
};

// MmaSm100Mxf4<BN>: the MXFP4 GEMM step (tcgen05.mma kind::mxf4.block_scale.scale_vec::2X), BM = 128, a k tile of 128
// e2m1 = 64 bytes a row (MmaSm100Nvf4's operand tiles), two K = 64 instructions. One ue8m0 scale per 32 elements: the
// k tile's four scales of a row are one 512-byte blocked chunk per 128 rows (MmaSm100Mx's chunk), copied once to 4
// columns; instruction c reads the half word 2c of the row's word (scale factor IDs 2c: PTX ISA 9.7.16.10.7.2.2,
// "SFA_ID specifies the half word offset", 0 or 2). Instruction descriptor (PTX ISA 9.7.16.4.2 table 44, kind::mxf4;
// CUTLASS's UMMA::InstrDescriptorBlockScaled, MXF4Format::E2M1 = 1, ScaleFormat::UE8M0 = 1): A / B type E2M1 = 1 at
// 7-9 / 10-11, N>>3 17-22, scale type UE8M0 = 1 at 23, M>>7 27-28, B SF id 4-5, A SF id 29-30, K bit 31 = 0 (K = 64).
template <int BN>
struct MmaSm100Mxf4 {
  static_assert(BN % 128 == 0 && BN <= 256, "MmaSm100Mxf4: BN is 128 or 256 (whole 128-row scale chunks of B)");
  using TileA = sm90::TmaTile<128, 64, unsigned char>;  // 128 x 128 e2m1
  using TileB = sm90::TmaTile<BN, 64, unsigned char>;
  enum : int { kColsA = 4, kColsB = BN / 32 };
  enum : int { kScaleBytesA = 512, kScaleBytesB = 512 * (BN / 128) };  // shared bytes per stage
  enum : unsigned { kIdesc = (1u << 7) | (1u << 10) | ((unsigned)(BN >> 3) << 17) | (1u << 23) | (1u << 27) };
  __device__ __forceinline__ static unsigned idesc(int c) {
    return kIdesc | ((unsigned)(2 * c) << 4) | ((unsigned)(2 * c) << 29);
  }
  // sSFA: the k tile's chunk; sSFB: per 128 rows of B its chunk (512 bytes apart).
  __device__ __forceinline__ static void mma(unsigned tmem, unsigned sf, int acc_stage, int stage, const void* sA,
                                             const void* sB, const void* sSFA, const void* sSFB, int accumulate) {
    const unsigned tsa = sf + (unsigned)(stage * (kColsA + kColsB)), tsb = tsa + kColsA;
    sm100::cp_32x128b_warpx4(tsa, sm100::scale_chunk_desc(sm90::smem_u32(sSFA)));
#pragma unroll
    for (int q = 0; q < BN / 128; ++q)
      sm100::cp_32x128b_warpx4(tsb + 4u * q, sm100::scale_chunk_desc(sm90::smem_u32(sSFB) + 512u * q));
    const unsigned a = sm90::smem_u32(sA), b = sm90::smem_u32(sB), d = tmem + (unsigned)(acc_stage * BN);
#pragma unroll
    for (int c = 0; c < 2; ++c)
      sm100::mma_mxf4_ss(d, sm90::slab_desc<TileA, true>(a, 0, c) | (1ull << 46),
                         sm90::slab_desc<TileB, true>(b, 0, c) | (1ull << 46), idesc(c), tsa, tsb,
                         c == 0 ? accumulate : 1);
  }
  __device__ __forceinline__ static unsigned row_addr(unsigned tmem, int warp, int stage) {
    return tmem + ((unsigned)(32 * (warp % 4)) << 16) + (unsigned)(stage * BN);
  }
};

}  // namespace heddle
