// heddle/heddle_sm90.cuh -- Hopper (sm_90a) device runtime: mbarriers, TMA tile loads/stores,
// proxy fences, register reconfiguration, named barriers, and the warpgroup MMA CTA-tile step.
//
// Shared-memory operand tiles (TmaTile<ROWS, COLS, T>): one pipeline stage of ROWS x COLS elements
// as stored in global memory (COLS contiguous). The tile is cut along COLS into BOXES boxes of
// BOX_COLS columns, BOX_COLS * sizeof(T) = SW bytes = the swizzle span (128, 64 or 32: the largest
// that divides a row, capped at 128). Box j holds columns [j*BOX_COLS, +BOX_COLS) of all ROWS rows
// at byte offset j*ROWS*SW, row r at r*SW inside the box, and the 16-byte chunks of every
// 1024/512/256-byte block are permuted by the TMA swizzle of that span: byte offset o is stored at
//   o ^ (((o >> 7) & (SW/16 - 1)) << 4)
// (bits [4, 4+log2(SW/16)) XOR bits [7, ...); CUTLASS calls it Swizzle<3|2|1, 4, 3>). That is what
// cp.async.bulk.tensor writes for a box of BOX_COLS x ROWS with CU_TENSOR_MAP_SWIZZLE_{SW}B, and
// what a wgmma matrix descriptor of the same swizzle mode reads, provided the stage starts on a
// 1024-byte boundary (the planner aligns Hopper tiles to 1024 bytes, so descriptors carry base
// offset 0). One TMA box per BOX_COLS columns: the host encodes tensor maps with box
// {BOX_COLS, ROWS} (innermost first) and swizzle SW.
//
// Descriptors (make_desc; PTX ISA "matrix descriptor"): 14-bit start address >> 4 (bits 0-13),
// leading byte offset >> 4 (16-29), stride byte offset >> 4 (32-45), base offset 0 (49-51),
// layout type (62-63: 1 = 128B, 2 = 64B, 3 = 32B swizzle). For an m64nNk16 step:
//   K-major operand (COLS = K, one box, SW = 2*BK bytes per row): start = stage + row0*SW + ks*32,
//     SBO = 8 rows * SW (8-row core-matrix groups), LBO unused (16).
//   MN-major operand (COLS = M or N, SW = 128, 64-element boxes): start = stage + box*ROWS*128 +
//     ks*16*128, LBO = ROWS*128 (next 64 M/N elements = next box), SBO = 1024 (next 8 k rows).
//
// MmaSm90<BM, BN, BK, NWG, COOP, A_KMAJOR, B_KMAJOR, T, WARP_BASE>: the MMA role's accumulators.
//   NWG warpgroups (warps WARP_BASE ...). COOP: the warpgroups split the BM rows of one tile
//   (WGM = BM/NWG rows each); otherwise each warpgroup owns a whole BM-row tile (ping-pong).
//   acc[fm][fn][r] is register 4*fn + r of the m64nBNk16 D fragment of m64-block fm:
//     row = wg_row0 + 64*fm + 16*(warp_in_wg) + lane/4 + 8*(r/2),  col = 8*fn + 2*(lane%4) + r%2
//   (the PTX wgmma D layout: warp w of the warpgroup owns rows 16w..16w+15). step() issues
//   BK/16 x FM wgmma.mma_async; fence()/commit()/wait<N>() order them (the kernel IR places them).
//   8-bit float operands (T, TB in {e4m3, e5m2}; TB defaults to T): BK/32 x FM m64nBNk32 steps, both
//   operands K-major; BK up to 128 (one 128-byte swizzle row). The D layout is the same.
//
// Under HEDDLE_INTERPRET every PTX primitive calls the interpreter's runtime (src/heddle/interp/rt),
// which implements TMA and wgmma from the PTX ISA definitions independently of the layout code here
// (its self-tests: tests/interp/ptx_selftest_{tma,wgmma}.cpp).
#pragma once
#include "heddle/heddle_types.cuh"
#include "heddle/heddle_math.cuh"

namespace heddle {

// CUtensorMap: 128 opaque bytes encoded on the host (cuTensorMapEncodeTiled), passed to kernels as
// `const __grid_constant__ heddle::TmaDesc` parameters.
struct alignas(64) TmaDesc {
  unsigned long long opaque[16];
};

// elect.sync (PTX ISA 8.0, sm_90): a warp collective over the full membermask -- every lane of the warp
// executes it -- that is true in exactly one lane, the lowest. Printed kernels issue single-thread work
// as `if (warp == W && heddle::elect_one_sync())` (a warp-uniform branch, then one lane).
__device__ __forceinline__ bool elect_one_sync() {
#if defined(HEDDLE_INTERPRET)
  return ::heddle_rt::elect_sync(0xffffffffu);
#else
  unsigned elected = 0;
  asm volatile(
      "{\n"
      ".reg .pred P;\n"
      "elect.sync _|P, %1;\n"
      "selp.u32 %0, 1, 0, P;\n"
      "}\n"
      : "=r"(elected)
      : "r"(0xffffffffu));
  return elected != 0;
#endif
}

namespace sm90 {

using u64 = unsigned long long;

template <bool C, typename A, typename B> struct Select { using type = A; };
template <typename A, typename B> struct Select<false, A, B> { using type = B; };

__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// ---- the staged epilogue: packed pairs and stmatrix ------------------------------------------

// The pair epilogue's pieces (heddle::pairf, pack2, unpack2, load_pair, ool::*) are target-neutral: they live
// in heddle_math.cuh (the sm_80 mma.sync epilogue uses them too).

// stmatrix.sync.aligned.m8n8.x4.shared.b16 (PTX ISA 7.8, sm_90): a warp collective storing four 8x8
// matrices of 16-bit elements. Lane l gives the address of row l%8 of matrix l/8 (16 contiguous,
// 16-byte-aligned bytes) and holds in r<i> row l/4, columns 2*(l%4) and 2*(l%4)+1 of matrix i.
__device__ __forceinline__ void stmatrix_x4(void* row, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
#if defined(HEDDLE_INTERPRET)
  const unsigned regs[4] = {r0, r1, r2, r3};
  ::heddle_rt::stmatrix_sync_aligned_m8n8(4, regs, smem_u32(row));
#else
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_u32(row)), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
#endif
}

// ---- mbarriers ------------------------------------------------------------------------------

__device__ __forceinline__ void mbar_init(u64* bar, int count) {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::mbarrier_init(smem_u32(bar), count);
#else
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
#endif
}

__device__ __forceinline__ void mbar_arrive(u64* bar) {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::mbarrier_arrive(smem_u32(bar));
#else
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
#endif
}

// Arrive and add `bytes` to the transaction count of the current phase (the TMA copies that
// complete on this barrier subtract what they deliver).
__device__ __forceinline__ void mbar_arrive_expect_tx(u64* bar, unsigned bytes) {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::mbarrier_arrive_expect_tx(smem_u32(bar), bytes);
#else
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
#endif
}

// Blocks until the phase of parity `parity` has completed (try_wait.parity in a loop).
__device__ __forceinline__ void mbar_wait(u64* bar, int parity) {
  const unsigned addr = smem_u32(bar);
  unsigned done = 0;
  HEDDLE_WAIT_BEGIN
  do {
#if defined(HEDDLE_INTERPRET)
    done = ::heddle_rt::mbarrier_try_wait_parity(addr, parity) ? 1u : 0u;
#else
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
    if (!done) { HEDDLE_WAIT_CHECK("mbarrier", addr, parity) }
#endif
  } while (!done);
}

// ---- fences, registers, named barriers ------------------------------------------------------

// Orders this thread's earlier generic-proxy shared-memory accesses before later async-proxy ones
// (TMA, wgmma) that a barrier makes wait for them.
__device__ __forceinline__ void fence_proxy_async() {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::fence_proxy_async_shared_cta();
#else
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// fence.mbarrier_init.release.cluster (PTX ISA, "membar/fence": with .op_restrict = .mbarrier_init "the
// synchronizing effect of the fence only applies to the prior mbarrier.init operations executed by the same
// thread on mbarrier objects in .shared::cta state space"; sm_90, .release and .cluster only). The
// initializing thread issues it after its inits, before the barrier that publishes them (__syncthreads, or
// barrier.cluster with a cluster). Every kernel whose mbarriers the async proxy completes (TMA complete_tx,
// tcgen05.commit) emits it, the pattern of CUTLASS (include/cutlass/arch/barrier.h fence_barrier_init, called
// by PipelineTmaAsync::init_barriers for any cluster size) and DeepGEMM ("Make initialized barrier visible in
// async proxy"; the CUDA C++ Programming Guide's TMA example fenced with fence.proxy.async.shared::cta).
// PTX ISA 9.3+ states that cp.async.bulk{.tensor} and tcgen05.commit access their mbarrier operand through
// the generic proxy, so inside one CTA this is a one-instruction hardening for the ISA versions that did
// not say so; across the CTAs of a cluster it is required (the remote arrivals and multicast completions).
__device__ __forceinline__ void fence_mbarrier_init_cluster() {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::fence_mbarrier_init_release_cluster();
#else
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

template <int REGS>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(REGS >= 24 && REGS <= 256 && REGS % 8 == 0, "setmaxnreg takes 24..256, multiples of 8");
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::setmaxnreg(true, REGS);
#else
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
#endif
}

template <int REGS>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(REGS >= 24 && REGS <= 256 && REGS % 8 == 0, "setmaxnreg takes 24..256, multiples of 8");
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::setmaxnreg(false, REGS);
#else
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
#endif
}

// bar.sync id, count: the `count` threads (a multiple of 32) that use barrier `id` (1..15).
__device__ __forceinline__ void named_barrier(int id, int count) {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::bar_sync(id, count);
#else
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
#endif
}

// ---- wgmma ordering -------------------------------------------------------------------------

__device__ __forceinline__ void wgmma_fence() {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::wgmma_fence();
#else
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_commit() {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::wgmma_commit_group();
#else
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void wgmma_wait() {
  static_assert(N >= 0 && N <= 7, "wgmma.wait_group takes 0..7");
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::wgmma_wait_group(N);
#else
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

// ---- swizzled TMA tiles and descriptors -----------------------------------------------------

template <int ROWS, int COLS, typename T>
struct TmaTile {
  enum : int { kRowBytes = COLS * (int)sizeof(T) };
  enum : int { kSwizzle = kRowBytes >= 128 ? 128 : kRowBytes };  // bytes per box row
  enum : int { kBoxCols = kSwizzle / (int)sizeof(T) };
  enum : int { kBoxes = COLS / kBoxCols };
  enum : int { kBoxBytes = ROWS * kSwizzle };
  enum : int { kBytes = kBoxes * kBoxBytes };
  enum : int { kElems = ROWS * COLS };
  static_assert(kSwizzle == 32 || kSwizzle == 64 || kSwizzle == 128,
                "TmaTile: a row must be 32, 64 or a multiple of 128 bytes");
  static_assert(COLS % kBoxCols == 0, "TmaTile: COLS must be a multiple of the box width");
  static_assert(ROWS % 8 == 0 && ROWS <= 256, "TmaTile: ROWS must be a multiple of 8, at most 256 (TMA box)");
  enum : int { kLayoutType = kSwizzle == 128 ? 1 : (kSwizzle == 64 ? 2 : 3) };

  // Byte offset of logical (r, c) inside the stage (the stage starts 1024-byte aligned).
  __host__ __device__ __forceinline__ static int byte_offset(int r, int c) {
    int o = (c / kBoxCols) * kBoxBytes + r * kSwizzle + (c % kBoxCols) * (int)sizeof(T);
    return o ^ (((o >> 7) & (kSwizzle / 16 - 1)) << 4);
  }
  __host__ __device__ __forceinline__ static int offset(int r, int c) { return byte_offset(r, c) / (int)sizeof(T); }
};

// 64-bit wgmma matrix descriptor (see the header comment).
__host__ __device__ __forceinline__ u64 make_desc(unsigned smem_addr, unsigned lbo, unsigned sbo, int layout_type) {
  return (u64)((smem_addr & 0x3FFFFu) >> 4) | ((u64)((lbo & 0x3FFFFu) >> 4) << 16) |
         ((u64)((sbo & 0x3FFFFu) >> 4) << 32) | ((u64)layout_type << 62);
}

// Descriptor of the 64 (M) or N (B) x 16 (K) slab at m/n block `blk` (64 rows of M for A; unused
// for B: 0) and k step `ks` of a stage laid out as Tile, K-major or MN-major.
template <typename Tile, bool KMAJOR>
__host__ __device__ __forceinline__ u64 slab_desc(unsigned stage_addr, int blk, int ks) {
  if constexpr (KMAJOR) {
    return make_desc(stage_addr + blk * 64 * Tile::kSwizzle + ks * 32, 16, 8 * Tile::kSwizzle, Tile::kLayoutType);
  } else {
    static_assert(Tile::kSwizzle == 128, "MN-major operands use 128-byte swizzled 64-element boxes");
    return make_desc(stage_addr + blk * Tile::kBoxBytes + ks * 16 * 128, Tile::kBoxBytes, 1024, Tile::kLayoutType);
  }
}

// ---- TMA --------------------------------------------------------------------------------------

// One box of `map` at (c0 = innermost, c1[, c2]) into dst, completing on `bar` (complete_tx).
template <int RANK>
__device__ __forceinline__ void tma_load_box(void* dst, const TmaDesc* map, int c0, int c1, int c2, u64* bar) {
#if defined(HEDDLE_INTERPRET)
  const int c[3] = {c0, c1, c2};
  ::heddle_rt::cp_async_bulk_tensor_load(smem_u32(dst), map, RANK, c, smem_u32(bar));
#else
  if constexpr (RANK == 2)
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::
            "r"(smem_u32(dst)), "l"(map), "r"(c0), "r"(c1), "r"(smem_u32(bar))
        : "memory");
  else
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
        "[%5];\n" ::"r"(smem_u32(dst)),
        "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar))
        : "memory");
#endif
}

// The whole Tile at storage origin (row0, col0) [, batch]: Tile::kBoxes boxes, Tile::kBytes bytes.
template <typename Tile, int RANK, typename T>
__device__ __forceinline__ void tma_load_tile(T* dst, const TmaDesc* map, int row0, int col0, int batch, u64* bar) {
#pragma unroll
  for (int j = 0; j < Tile::kBoxes; ++j)
    tma_load_box<RANK>(reinterpret_cast<char*>(dst) + j * Tile::kBoxBytes, map, col0 + j * Tile::kBoxCols, row0,
                       batch, bar);
}

// An unswizzled ROWS x COLS box (a bias row: ROWS 1; a residual tile) at (row0, col0) of a 2-D map
// without swizzle, row-major in dst: ROWS * COLS * sizeof(T) bytes (the expect_tx count), on `bar`.
template <int ROWS, int COLS, typename T>
__device__ __forceinline__ void tma_load_plain(T* dst, const TmaDesc* map, int row0, int col0, u64* bar) {
  static_assert(ROWS >= 1 && ROWS <= 256 && COLS <= 256, "tma_load_plain: a TMA box has at most 256 per axis");
  tma_load_box<2>(dst, map, col0, row0, 0, bar);
}

// ---- thread-block clusters (sm_90; PTX ISA: mapa, mbarrier .shared::cluster, barrier.cluster, ------------
// ---- cp.async.bulk.tensor .multicast::cluster; interpreter: hrt_cluster.cpp) -------------------------------

// This CTA's rank in its cluster (%cluster_ctarank).
__device__ __forceinline__ unsigned cluster_ctarank() {
#if defined(HEDDLE_INTERPRET)
  return ::heddle_rt::cluster_ctarank();
#else
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
#endif
}

// This CTA's dynamic shared memory: `base` (the kernel's extern __shared__ array) on a GPU; under the
// interpreter, whose window holds every CTA of a cluster, rank r's part of it.
__device__ __forceinline__ unsigned char* cta_smem(unsigned char* base) {
#if defined(HEDDLE_INTERPRET)
  return base + ::heddle_rt::smem_cta_base();
#else
  return base;
#endif
}

// Arrive on the mbarrier at `bar`'s offset in the shared memory of cluster CTA `rank` (release at cluster
// scope): mapa to the shared::cluster address, then a remote arrive.
__device__ __forceinline__ void mbar_arrive_cluster(u64* bar, unsigned rank) {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::mbarrier_arrive_cluster(::heddle_rt::mapa_shared_cluster(smem_u32(bar), rank));
#else
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_u32(bar)), "r"(rank));
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
#endif
}

// barrier.cluster: every (non-exited) thread of every CTA of the cluster, split into arrive and wait.
__device__ __forceinline__ void cluster_arrive() {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::barrier_cluster_arrive();
#else
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void cluster_wait() {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::barrier_cluster_wait();
#else
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void cluster_sync() {
  cluster_arrive();
  cluster_wait();
}

// One 2-D box of `map` at (c0 = innermost, c1), multicast: it lands at dst's CTA-relative offset in every
// CTA of `cta_mask` and completes its bytes on the mbarrier at bar's CTA-relative offset in each.
__device__ __forceinline__ void tma_load_box_multicast(void* dst, const TmaDesc* map, int c0, int c1, u64* bar,
                                                       unsigned short cta_mask) {
#if defined(HEDDLE_INTERPRET)
  const int c[2] = {c0, c1};
  ::heddle_rt::cp_async_bulk_tensor_load_multicast(smem_u32(dst), map, 2, c, smem_u32(bar), cta_mask);
#else
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(smem_u32(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(smem_u32(bar)), "h"(cta_mask)
      : "memory");
#endif
}

// Rank `rank`'s share of a Tile shared by the PARTS CTAs of a cluster (the lowered cluster kernels,
// passes/cluster_multicast.cpp): rows [rank * R, (rank + 1) * R) of every box, R = ROWS / PARTS, multicast to
// the CTAs of `cta_mask` at the same CTA-relative offsets, their bytes completing on each CTA's `bar`. The
// host encodes the map with box {kBoxCols, R}; R is whole 8-row swizzle atoms, so each part lands where the
// whole box would have put it (its offset is a multiple of the 8 * kSwizzle-byte swizzle period).
template <typename Tile, int PARTS, typename T>
__device__ __forceinline__ void tma_load_tile_multicast(T* dst, const TmaDesc* map, int row0, int col0, u64* bar,
                                                        unsigned rank, unsigned short cta_mask) {
  constexpr int kRows = Tile::kBoxBytes / Tile::kSwizzle / PARTS;
  static_assert(kRows % 8 == 0, "tma_load_tile_multicast: each part must be whole 8-row swizzle atoms");
#pragma unroll
  for (int j = 0; j < Tile::kBoxes; ++j)
    tma_load_box_multicast(reinterpret_cast<char*>(dst) + j * Tile::kBoxBytes + (int)rank * kRows * Tile::kSwizzle, map,
                           col0 + j * Tile::kBoxCols, row0 + (int)rank * kRows, bar, cta_mask);
}

template <int RANK>
__device__ __forceinline__ void tma_store_box(const TmaDesc* map, int c0, int c1, int c2, const void* src) {
#if defined(HEDDLE_INTERPRET)
  const int c[3] = {c0, c1, c2};
  ::heddle_rt::cp_async_bulk_tensor_store(map, RANK, c, smem_u32(src));
#else
  if constexpr (RANK == 2)
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(map),
                 "r"(c0), "r"(c1), "r"(smem_u32(src))
                 : "memory");
  else
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::"l"(map),
                 "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(src))
                 : "memory");
#endif
}

// Stores the whole Tile from shared memory to (row0, col0) [, batch]; out-of-bounds parts of a box
// are not written. Ordered by bulk_commit / bulk_wait_read.
template <typename Tile, int RANK, typename T>
__device__ __forceinline__ void tma_store_tile(const TmaDesc* map, int row0, int col0, int batch, const T* src) {
#pragma unroll
  for (int j = 0; j < Tile::kBoxes; ++j)
    tma_store_box<RANK>(map, col0 + j * Tile::kBoxCols, row0, batch,
                        reinterpret_cast<const char*>(src) + j * Tile::kBoxBytes);
}

__device__ __forceinline__ void bulk_commit() {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::cp_async_bulk_commit_group();
#else
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}

// The bulk stores of all but the N most recent groups have finished reading shared memory.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::cp_async_bulk_wait_group_read(N);
#else
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
#endif
}

}  // namespace sm90
}  // namespace heddle

#include "heddle/heddle_sm90_wgmma.cuh"
#include "heddle/heddle_sm90_wgmma_f8.cuh"

namespace heddle {

template <int BM, int BN, int BK, int NWG, bool COOP, bool A_KMAJOR, bool B_KMAJOR, typename T, int WARP_BASE,
          typename TB = T>
struct MmaSm90 {
  enum : int { WGM = COOP ? BM / NWG : BM };  // rows one warpgroup computes
  enum : int { FM = WGM / 64, FN = BN / 8 };
  enum : int { kThreads = 128 * NWG };
  // k elements per wgmma: 32 bytes of each operand row (m64nNk16 for 16-bit, m64nNk32 for 8-bit types)
  enum : int { KI = 32 / (int)sizeof(T) };
  enum : bool { kF8 = sizeof(T) == 1 };
  static_assert(sizeof(TB) == sizeof(T), "MmaSm90: A and B have the same element size");
  static_assert(WGM % 64 == 0 && FM >= 1, "MmaSm90: each warpgroup computes a multiple of 64 rows");
  static_assert(BN % 64 == 0 && BN <= 256, "MmaSm90: BN must be 64, 128, 192 or 256");
  static_assert(BK % KI == 0 && BK * (int)sizeof(T) <= 128, "MmaSm90: BK must be 16, 32 or 64 (8-bit: 32, 64, 128)");
  static_assert(!kF8 || (A_KMAJOR && B_KMAJOR), "MmaSm90: 8-bit operands are K-major (no wgmma transpose)");
  using TileA = typename sm90::Select<A_KMAJOR, sm90::TmaTile<BM, BK, T>, sm90::TmaTile<BK, BM, T>>::type;
  using TileB = typename sm90::Select<B_KMAJOR, sm90::TmaTile<BN, BK, TB>, sm90::TmaTile<BK, BN, TB>>::type;
  enum : int { kStageElemsA = TileA::kElems, kStageElemsB = TileB::kElems };
  enum : int { kStageBytes = TileA::kBytes + TileB::kBytes };  // per stage: the expect_tx count

  float acc[FM][FN][4];
  int scale_d;  // 0 until the first k step of a tile: that wgmma overwrites instead of accumulating

  // Starts a tile at zero without writing the accumulator registers: ordinary instructions that
  // define wgmma accumulators make ptxas serialise the wgmma pipeline (C7515), so the first
  // wgmma of the tile runs with scale-d = 0 instead. A tile must run at least one k step (the
  // launch refuses K = 0).
  __device__ __forceinline__ void zero() { scale_d = 0; }

  // Keeps the compiler from moving accumulator accesses across wgmma fences and waits.
  __device__ __forceinline__ void fence_operands() {
#if !defined(HEDDLE_INTERPRET)  // a compiler-only fence
#pragma unroll
    for (int fm = 0; fm < FM; ++fm)
#pragma unroll
      for (int fn = 0; fn < FN; ++fn)
#pragma unroll
        for (int r = 0; r < 4; ++r) asm volatile("" : "+f"(acc[fm][fn][r])::"memory");
#endif
  }

  // wgmma.fence: registers written by ordinary instructions (zero, the previous tile's epilogue)
  // are ordered before the next wgmma that accumulates into them.
  __device__ __forceinline__ void fence() {
    fence_operands();
    sm90::wgmma_fence();
  }
  __device__ __forceinline__ void commit() { sm90::wgmma_commit(); }
  template <int N>
  __device__ __forceinline__ void wait() {
    sm90::wgmma_wait<N>();
    fence_operands();
  }

  // acc += A_stage x B_stage over the BK slab: BK/KI k steps x FM m64 blocks, each one
  // wgmma.mma_async.m64nBNk16 (8-bit: m64nBNk32; a K-major step is 32 bytes either way, so the
  // descriptors of slab_desc serve both). All 128 threads of the warpgroup call it together.
  __device__ __forceinline__ void step(const T* sA, const TB* sB, int warp, int lane) {
    (void)lane;
    const int wg = COOP ? (warp - WARP_BASE) / 4 : 0;
    const unsigned a = sm90::smem_u32(sA), b = sm90::smem_u32(sB);
#pragma unroll
    for (int ks = 0; ks < BK / KI; ++ks) {
      const sm90::u64 db = sm90::slab_desc<TileB, B_KMAJOR>(b, 0, ks);
#pragma unroll
      for (int fm = 0; fm < FM; ++fm) {
        const sm90::u64 da = sm90::slab_desc<TileA, A_KMAJOR>(a, wg * FM + fm, ks);
        if constexpr (kF8)
          sm90::WgmmaSS8<BN, T, TB>::run(&acc[fm][0][0], da, db, ks == 0 ? scale_d : 1);
        else
          sm90::WgmmaSS<BN, T>::template run<A_KMAJOR ? 0 : 1, B_KMAJOR ? 0 : 1>(&acc[fm][0][0], da, db,
                                                                                 ks == 0 ? scale_d : 1);
      }
    }
    scale_d = 1;
  }

  // Promotion of a block-scaled matmul (docs/fp8.md "Block scales and promotion"): after the wgmma of one
  // promotion interval into `t` retired (wait<0>), acc = (first ? 0 : acc) + t.acc * sa[row - m0] *
  // sb[col / 128, kb] in f32 on the CUDA cores: sa is the operand ring's scale_a slot of the interval's last
  // k-tile (the tile's BM rows of k-block kb, landed by TMA with the slot's A and B: block_scale_ring.cpp), sb
  // row-major [ceil(N/128), kblocks] in global memory; rows >= M and columns >= N get scale 0 (their values
  // are never stored). The kernel then calls t.zero(): the next interval's first wgmma overwrites t.
  // scale_b: one load per 128-column block the tile can touch (NBLK: one when BN divides 128, the tile starting
  // at a multiple of BN; a block past N clamped to the last), all issued together with no branch around them,
  // each element picking its block by selects. A load per
  // element under its own `col < N` branch serialised 32 global-load latencies per promotion: 2.3x the
  // unscaled kernel's time at the same tile (the third GPU window, H200, docs/perf.md).
  // The loads of the next interval's scale_b (k-block kb + 1 of the same column blocks) are issued at the end of
  // this promotion into sb_next, keyed by (column block, k-block), so their latency hides behind the next
  // interval's wgmma instead of following its wait<0> (DeepGEMM's sm90 kernel likewise reads its scales before
  // the wgmma wait). scale_b depends only on the key, so a matching key is the right value; the first promotion
  // of an accumulation (first = 1) always loads, so the key is never read before this thread wrote it.
  enum : int { NBLK = 128 % BN == 0 ? 1 : (BN + 127) / 128 + 1 };  // scale_b column blocks a tile can touch
  float sb_next[NBLK];
  int sb_key;
  __device__ __forceinline__ void promote(const MmaSm90& t, const float* sa, const float* __restrict__ sb,
                                          int M, int N, int kblocks, int m0, int n0, int kb, int first, int warp,
                                          int lane) {
    const int b0 = n0 / 128, blast = (N - 1) / 128, key = b0 * kblocks + kb;
    const bool have = !first && key == sb_key;  // warp-uniform: prefetched by this thread's previous promotion
    // scale_b of column block j of the tile (a block past N clamped to the last) and k-block k
    auto sb_at = [&](int j, int k) { return sb[(long long)(b0 + j < blast ? b0 + j : blast) * kblocks + k]; };
    float sbv[NBLK];
#pragma unroll
    for (int j = 0; j < NBLK; ++j) sbv[j] = have ? sb_next[j] : sb_at(j, kb);
#pragma unroll
    for (int fm = 0; fm < FM; ++fm)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + row_of(warp, lane, fm, 2 * h);
        const float sav = sa[row - m0];  // inside the slot's BM values for every row: no branch around it
        const float ra = row < M ? sav : 0.f;
#pragma unroll
        for (int fn = 0; fn < FN; ++fn)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const int col = n0 + col_of(warp, lane, fn, 2 * h + c);
            float sbc = sbv[0];
#pragma unroll
            for (int j = 1; j < NBLK; ++j) sbc = col >= (b0 + j) * 128 ? sbv[j] : sbc;
            const float s = col < N ? ra * sbc : 0.f;
            float& d = acc[fm][fn][2 * h + c];
            d = (first ? 0.f : d) + t.acc[fm][fn][2 * h + c] * s;
          }
      }
    if (kb + 1 < kblocks) {  // the next interval's values, in flight during its wgmma
#pragma unroll
      for (int j = 0; j < NBLK; ++j) sb_next[j] = sb_at(j, kb + 1);
      sb_key = key + 1;
    }
  }

  __host__ __device__ __forceinline__ static int row_of(int warp, int lane, int fm, int r) {
    const int w = warp - WARP_BASE;
    return (COOP ? (w / 4) * WGM : 0) + 64 * fm + 16 * (w % 4) + (lane >> 2) + ((r >> 1) << 3);
  }
  __host__ __device__ __forceinline__ static int col_of(int warp, int lane, int fn, int r) {
    (void)warp;
    return fn * 8 + ((lane & 3) << 1) + (r & 1);
  }
};

}  // namespace heddle
