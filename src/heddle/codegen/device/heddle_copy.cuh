// heddle/heddle_copy.cuh -- swizzled shared-memory tiles and global->shared tile copies.
//
// SmemTile<ROWS, COLS, T>: one pipeline stage holding ROWS x COLS elements, COLS contiguous.
//   A row is CPR = COLS*sizeof(T)/16 chunks of 16 bytes (EPC = 16/sizeof(T) elements each).
//   The tile is cut into 128-byte "lines" (8 chunks = all 32 banks); chunk q of the row-major
//   chunk order lives in line q/8 at position (q%8) ^ S(r), where S(r) = (r / RPL) % 8 and
//   RPL = max(1, 8/CPR) is the number of rows per line. S is constant within a line, so the
//   swizzle permutes chunks inside each line: a bijection on the tile that keeps every 16-byte
//   chunk contiguous and 16-byte aligned.
//   Why: an ldmatrix phase reads one 16-byte row from each of 8 consecutive tile rows
//   r0..r0+7 (r0 % 8 == 0) at the same logical chunk; with this XOR those 8 rows land in 8
//   distinct positions of a line, i.e. all 32 banks exactly once (no conflict). The linear copy
//   below writes 8 consecutive chunks per quarter warp, also one full line: conflict-free too.
//   Rules (static_assert'ed): COLS*sizeof(T) % 16 == 0; CPR in {1,2,4} or a multiple of 8;
//   ROWS*COLS*sizeof(T) % 128 == 0. The stage base must be 128-byte aligned (bank claim) and
//   16-byte aligned (correctness).
//
// copy_tile_async / copy_tile_sync<ROWS, COLS, VEC, THREADS, T>: copy the ROWS x COLS box at
//   (row0, col0) of a row-major global matrix (element (r,c) at g[r*ld + c], nrows x ncols valid)
//   into one SmemTile stage. Thread mapping: the box is ROWS*COLS/VEC chunks of VEC elements in
//   row-major order; thread tid copies chunks tid, tid+THREADS, ... Elements outside the valid
//   nrows x ncols are written as zero. Every stage element is written exactly once per call.
//   async: one cp.async per chunk (16 B: .cg, 4/8 B: .ca), src-size = valid bytes (remainder is
//   zero-filled); fully out-of-bounds chunks use src-size 0 with g as a dummy address.
//   sync: plain loads/stores, one vector access per in-bounds chunk, element-wise at the edge.
//   The data passes through registers, so at most 4 chunks (16-byte VEC) or 1 chunk (narrower)
//   are in flight per thread: a full unroll next to live accumulators spills (seen with ptxas).
//   Alignment contract (caller/codegen): g, ld and col0 keep every chunk's global address
//   VEC*sizeof(T)-aligned (g % (VEC*sizeof T) == 0, ld % VEC == 0, col0 % VEC == 0).
//   VEC*sizeof(T) in {4,8,16} (async) or {sizeof(T),4,8,16} (sync, VEC=1 allowed).
//   cp_async_commit / cp_async_wait<N> / block_sync order these copies (see the sync plan).
//
// Two builds of every primitive: NVRTC (inline PTX) and
// HEDDLE_INTERPRET (the printed kernel compiled by the host compiler against heddle's execution
// runtime, src/heddle/interp/rt/hrt_api.h: one runtime function per PTX instruction, same operands).
#pragma once
#include "heddle/heddle_types.cuh"

namespace heddle {

template <int ROWS, int COLS, typename T>
struct SmemTile {
  enum : int { kElems = ROWS * COLS };
  enum : int { kBytes = kElems * (int)sizeof(T) };
  enum : int { kEpc = 16 / (int)sizeof(T) };           // elements per 16-byte chunk
  enum : int { kCpr = COLS * (int)sizeof(T) / 16 };    // chunks per row
  enum : int { kRpl = kCpr >= 8 ? 1 : 8 / (kCpr > 0 ? kCpr : 1) };  // rows per 128 B line
  static_assert(16 % sizeof(T) == 0, "SmemTile: sizeof(T) must divide 16");
  static_assert(ROWS > 0 && COLS > 0, "SmemTile: empty tile");
  static_assert(COLS * (int)sizeof(T) % 16 == 0, "SmemTile: a row must be a multiple of 16 bytes");
  static_assert(kCpr == 1 || kCpr == 2 || kCpr == 4 || kCpr % 8 == 0,
                "SmemTile: row must be 16, 32, 64 or a multiple of 128 bytes (swizzle lines)");
  static_assert(kBytes % 128 == 0, "SmemTile: tile must be a whole number of 128-byte lines");

  // Element offset of logical (r, c) inside the stage.
  __host__ __device__ __forceinline__ static int offset(int r, int c) {
    int q = r * kCpr + c / kEpc;           // logical chunk, row-major
    int s = (r / kRpl) & 7;                // constant within a 128-byte line
    return (q ^ s) * kEpc + (c % kEpc);
  }
};

namespace detail {

template <int BYTES> struct Word;
template <> struct Word<2> { unsigned short v; };
template <> struct Word<4> { unsigned int v; };
template <> struct alignas(8) Word<8> { unsigned int v[2]; };
template <> struct alignas(16) Word<16> { unsigned int v[4]; };

template <int BYTES>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem, int src_bytes) {
  static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async moves 4, 8 or 16 bytes");
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::cp_async_shared_global((unsigned)__cvta_generic_to_shared(smem), gmem, BYTES, src_bytes, BYTES == 16);
#else
  unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  if constexpr (BYTES == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
                 "r"(src_bytes) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(s), "l"(gmem),
                 "n"(BYTES), "r"(src_bytes) : "memory");
  }
#endif
}

template <int BYTES>
__device__ __forceinline__ void copy_sync(void* smem, const void* gmem) {
  *reinterpret_cast<Word<BYTES>*>(smem) = *reinterpret_cast<const Word<BYTES>*>(gmem);
}

template <int BYTES>
__device__ __forceinline__ void zero_sync(void* smem) {
  Word<BYTES> z = {};
  *reinterpret_cast<Word<BYTES>*>(smem) = z;
}

// Shared chunk-walk of both copies: calls f(smem_elem_ptr, global_elem_ptr, valid_elems).
// UNROLL bounds how many chunks the compiler may overlap: the async copy holds no data in
// registers (full unroll); the sync copy holds each chunk in registers between load and store, so
// a full unroll next to live accumulators would spill.
// Tile: the stage's layout; the ROWS x COLS box lands at (dr0, dc0) of it (a part: copy_part_*).
template <int ROWS, int COLS, int VEC, int THREADS, int UNROLL, typename T, typename Tile, typename F>
__device__ __forceinline__ void for_each_chunk(T* smem, const T* g, long long ld, int row0,
                                               int col0, int nrows, int ncols, int tid, F f,
                                               int dr0 = 0, int dc0 = 0) {
  static_assert(COLS % VEC == 0, "copy_tile: VEC must divide COLS");
  static_assert(Tile::kEpc % VEC == 0, "copy_tile: a VEC chunk must not straddle 16 bytes");
  static_assert(THREADS > 0, "copy_tile: THREADS must be positive");
  constexpr int kPerRow = COLS / VEC, kChunks = ROWS * kPerRow;
  constexpr int kIters = (kChunks + THREADS - 1) / THREADS;
  constexpr int kGroup = UNROLL < kIters ? UNROLL : kIters;  // chunks overlapped per group
#pragma unroll 1
  for (int it0 = 0; it0 < kIters; it0 += kGroup) {
#pragma unroll
    for (int u = 0; u < kGroup; ++u) {
      const int it = it0 + u;
      const int i = tid + it * THREADS;
      if ((kIters % kGroup != 0 && it >= kIters) || (kChunks % THREADS != 0 && i >= kChunks)) break;
      int r = i / kPerRow, c = (i % kPerRow) * VEC;
      int gr = row0 + r, gc = col0 + c;
      int valid = gr < nrows ? ncols - gc : 0;
      valid = valid < 0 ? 0 : (valid > VEC ? VEC : valid);
      const T* src = valid > 0 ? g + (long long)gr * ld + gc : g;
      f(smem + Tile::offset(dr0 + r, dc0 + c), src, valid);
    }
  }
}

}  // namespace detail

// copy_part_async / copy_part_sync<TROWS, TCOLS, ROWS, COLS, VEC, THREADS>: as copy_tile_*, for the
//   ROWS x COLS box at (dr0, dc0) of a TROWS x TCOLS SmemTile stage (a matmul group fills B's stage with
//   one part per member and warp column; dc0 % 8 == 0 keeps every chunk inside its 16 bytes).
template <int TROWS, int TCOLS, int ROWS, int COLS, int VEC, int THREADS, typename T>
__device__ __forceinline__ void copy_part_async(T* smem, int dr0, int dc0, const T* g, long long ld, int row0,
                                                int col0, int nrows, int ncols, int tid) {
  constexpr int kBytes = VEC * (int)sizeof(T);
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16,
                "copy_tile_async: VEC*sizeof(T) must be 4, 8 or 16 bytes");
  static_assert(ROWS <= TROWS && COLS <= TCOLS, "copy_part_async: the box must fit the stage");
  detail::for_each_chunk<ROWS, COLS, VEC, THREADS, (1 << 30), T, SmemTile<TROWS, TCOLS, T>>(
      smem, g, ld, row0, col0, nrows, ncols, tid,
      [](T* s, const T* src, int valid) { detail::cp_async<kBytes>(s, src, valid * (int)sizeof(T)); }, dr0, dc0);
}

template <int TROWS, int TCOLS, int ROWS, int COLS, int VEC, int THREADS, typename T>
__device__ __forceinline__ void copy_part_sync(T* smem, int dr0, int dc0, const T* g, long long ld, int row0,
                                               int col0, int nrows, int ncols, int tid) {
  constexpr int kBytes = VEC * (int)sizeof(T);
  constexpr int kElem = (int)sizeof(T);
  static_assert(kBytes == kElem || kBytes == 4 || kBytes == 8 || kBytes == 16,
                "copy_tile_sync: VEC*sizeof(T) must be sizeof(T), 4, 8 or 16 bytes");
  static_assert(ROWS <= TROWS && COLS <= TCOLS, "copy_part_sync: the box must fit the stage");
  detail::for_each_chunk<ROWS, COLS, VEC, THREADS, (kBytes == 16 ? 4 : 1), T, SmemTile<TROWS, TCOLS, T>>(
      smem, g, ld, row0, col0, nrows, ncols, tid, [](T* s, const T* src, int valid) {
        if (valid == VEC) {
          detail::copy_sync<kBytes>(s, src);
        } else {
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            if (e < valid) detail::copy_sync<kElem>(s + e, src + e);
            else detail::zero_sync<kElem>(s + e);
          }
        }
      }, dr0, dc0);
}

template <int ROWS, int COLS, int VEC, int THREADS, typename T>
__device__ __forceinline__ void copy_tile_async(T* smem, const T* g, long long ld, int row0,
                                                int col0, int nrows, int ncols, int tid) {
  copy_part_async<ROWS, COLS, ROWS, COLS, VEC, THREADS>(smem, 0, 0, g, ld, row0, col0, nrows, ncols, tid);
}

template <int ROWS, int COLS, int VEC, int THREADS, typename T>
__device__ __forceinline__ void copy_tile_sync(T* smem, const T* g, long long ld, int row0,
                                               int col0, int nrows, int ncols, int tid) {
  copy_part_sync<ROWS, COLS, ROWS, COLS, VEC, THREADS>(smem, 0, 0, g, ld, row0, col0, nrows, ncols, tid);
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::cp_async_commit_group();
#else
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  static_assert(N >= 0, "cp_async_wait: N must be >= 0");
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::cp_async_wait_group(N);
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

__device__ __forceinline__ void block_sync() {
  __syncthreads();
}

}  // namespace heddle
