// heddle/heddle_hip_copy.cuh -- LDS tiles, global->LDS tile copies and the sync ops of the AMD
// backend (hiprtc / clang HIP; no toolkit header is included: hiprtc and hipcc provide the HIP
// built-ins, and under HEDDLE_INTERPRET every builtin and asm calls the
// interpreter's runtime function named after the ISA instruction, src/heddle/interp/rt/hrt_api.h).
//
// LdsTile<ROWS, COLS, T>: one pipeline stage, ROWS x COLS elements, row-major and linear
//   (element (r, c) at r*COLS + c). Linear because an LDS DMA instruction writes the dwords of a
//   wavefront's 64 lanes to 64 consecutive LDS dwords (M0 + 4*lane): a swizzle at 16-byte
//   granularity would split that run. The MFMA/WMMA fragment reads pay bank conflicts for it.
//
// copy_tile_async / copy_tile_sync<ROWS, COLS, VEC, THREADS, T>: the same contract as
//   heddle_copy.cuh, so the planner's thread-mapping names mean the same on both backends: copy the
//   ROWS x COLS box at (row0, col0) of a row-major global matrix (element (r, c) at g[r*ld + c],
//   nrows x ncols valid) into one LdsTile stage; the box is ROWS*COLS/VEC chunks of VEC elements in
//   row-major order; thread tid copies chunks tid, tid+THREADS, ...; elements outside the valid
//   nrows x ncols are written as zero; every stage element is written exactly once per call.
//   async (CDNA only, wave64): one LDS DMA (buffer_load_dword ... lds) per chunk, so VEC*sizeof(T)
//     is 4 bytes. Lanes of wave w in round `it` own chunks it*THREADS + 64*w + lane, i.e. 64
//     consecutive dwords starting at the wave-uniform M0 = stage + 4*(it*THREADS + 64*w): exactly
//     where the DMA puts them. The buffer resource starts at the tile origin (row0, col0), so the
//     per-lane offset ((gr-row0)*ld + gc-col0)*sizeof(T) must stay below 2 GiB; a fully
//     out-of-bounds chunk gets an offset past num_records, which the hardware returns as zero. A
//     chunk straddling the ncols edge is copied element-wise by its lane (that lane sits out the
//     DMA). Each thread issues floor(chunks / THREADS) DMA ops at least (kir::vmemOpsPerThread):
//     the vmcnt waits the planner computes count those.
//   sync: plain loads and ds_writes through registers (vector-sized when the chunk is whole).
//
// Sync ops (the planner's, see docs/backends.md). The barriers are execution barriers only: LLVM's
// AMDGPUExecutionSynchronization ("barriers only synchronize execution and do not affect the visibility
// of memory operations") -- a barrier orders memory through a workgroup release fence before its
// arrive and an acquire fence after its wait, as HIP's __syncthreads pairs them. The printer emits
// those fences on the barrier's line (`heddle::fence_release_workgroup(); heddle::block_sync();
// heddle::fence_acquire_workgroup();`), so the printed source shows every fence (docs/verification.md,
// "AMD workgroup fences"):
//   fence_release_workgroup()  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup")
//   fence_acquire_workgroup()  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup")
//   block_sync()        s_barrier (GFX12: s_barrier_signal -1 + s_barrier_wait -1)
//   wait_vmcnt<N>()     s_waitcnt vmcnt(N) (GFX12: s_wait_loadcnt N); also a compiler barrier
//   barrier_signal()    GFX12: s_barrier_signal -1 (elsewhere: block_sync())
//   barrier_wait()      GFX12: s_barrier_wait -1 (elsewhere: nothing)
#pragma once
#include "heddle/heddle_types.cuh"
// HIP only: under a CUDA compiler (NVRTC compiles every embedded header) this header is empty.
#if !defined(__CUDACC__) || defined(__HIP__)

namespace heddle {

template <int ROWS, int COLS, typename T>
struct LdsTile {
  enum : int { kElems = ROWS * COLS };
  enum : int { kBytes = kElems * (int)sizeof(T) };
  static_assert(ROWS > 0 && COLS > 0, "LdsTile: empty tile");
  static_assert(COLS * (int)sizeof(T) % 16 == 0, "LdsTile: a row must be a multiple of 16 bytes");
  __host__ __device__ __forceinline__ static int offset(int r, int c) { return r * COLS + c; }
};

namespace amd_detail {

template <int BYTES> struct Word;
template <> struct Word<2> { unsigned short v; };
template <> struct Word<4> { unsigned int v; };
template <> struct alignas(8) Word<8> { unsigned int v[2]; };
template <> struct alignas(16) Word<16> { unsigned int v[4]; };

template <int BYTES>
__device__ __forceinline__ void copy_sync(void* lds, const void* g) {
  *reinterpret_cast<Word<BYTES>*>(lds) = *reinterpret_cast<const Word<BYTES>*>(g);
}

template <int BYTES>
__device__ __forceinline__ void zero_sync(void* lds) {
  Word<BYTES> z = {};
  *reinterpret_cast<Word<BYTES>*>(lds) = z;
}

#ifdef HEDDLE_INTERPRET
struct i32x4 { int x, y, z, w; };
__device__ __forceinline__ int readfirstlane(int v) { return ::heddle_rt::v_readfirstlane_b32(v); }
#else
typedef int i32x4 __attribute__((ext_vector_type(4)));
typedef __attribute__((address_space(3))) void* lds_ptr;
// llvm.amdgcn.raw.buffer.load.lds(rsrc, lds base (M0), size, voffset, soffset, imm offset, aux)
extern "C" __device__ void heddle_raw_buffer_load_lds(i32x4 rsrc, lds_ptr lds, int size, int voffset, int soffset,
                                                      int offset, int aux) __asm("llvm.amdgcn.raw.buffer.load.lds");
__device__ __forceinline__ int readfirstlane(int v) { return __builtin_amdgcn_readfirstlane(v); }
#endif
constexpr unsigned kOutOfRange = 0x80000000u;  // num_records; offsets >= it read as zero

// The base is wave-uniform (the tile origin); readfirstlane keeps the descriptor in SGPRs, where
// the instruction needs it (otherwise the compiler wraps the DMA in a waterfall loop).
__device__ __forceinline__ i32x4 buffer_resource(const void* base) {
  unsigned long long p = (unsigned long long)base;
  i32x4 r;
  r.x = readfirstlane((int)(unsigned)p);
  r.y = readfirstlane((int)(unsigned)(p >> 32) & 0xffff);  // stride 0: raw (byte offsets)
  r.z = (int)kOutOfRange;
  r.w = 0x00020000;  // GFX9 dword 3: 32-bit data format, no swizzle
  return r;
}

// One dword of the wave's LDS DMA: the data of `src` (or zero when `in_range` is false) lands at
// lds_wave_base + 4*lane once the op retires (vmcnt).
__device__ __forceinline__ void lds_dma_dword(void* lds_wave_base, const void* tile_base, unsigned byte_offset,
                                              bool in_range, int lane, int round) {
#if defined(HEDDLE_INTERPRET)
  (void)lane;
  (void)round;
  const unsigned m0 = (unsigned)readfirstlane((int)(unsigned)__cvta_generic_to_shared(lds_wave_base));  // LDS offset
  const i32x4 r = buffer_resource(tile_base);
  const int rsrc[4] = {r.x, r.y, r.z, r.w};
  ::heddle_rt::buffer_load_dword_lds(rsrc, m0, 4, (int)(in_range ? byte_offset : kOutOfRange), 0, 0, 0);
#else
  (void)lane;
  (void)round;
  unsigned m0 = (unsigned)(unsigned long long)(lds_ptr)lds_wave_base;
  m0 = __builtin_amdgcn_readfirstlane(m0);  // wave-uniform by construction; make it scalar
  heddle_raw_buffer_load_lds(buffer_resource(tile_base), (lds_ptr)(unsigned long long)m0, 4,
                             (int)(in_range ? byte_offset : kOutOfRange), 0, 0, 0);
#endif
}

}  // namespace amd_detail

template <int ROWS, int COLS, int VEC, int THREADS, typename T>
__device__ __forceinline__ void copy_tile_sync(T* lds, const T* g, long long ld, int row0, int col0, int nrows,
                                               int ncols, int tid) {
  constexpr int kBytes = VEC * (int)sizeof(T), kElem = (int)sizeof(T);
  static_assert(kBytes == kElem || kBytes == 4 || kBytes == 8 || kBytes == 16,
                "copy_tile_sync: VEC*sizeof(T) must be sizeof(T), 4, 8 or 16 bytes");
  static_assert(COLS % VEC == 0, "copy_tile_sync: VEC must divide COLS");
  constexpr int kPerRow = COLS / VEC, kChunks = ROWS * kPerRow, kIters = (kChunks + THREADS - 1) / THREADS;
#pragma unroll 1
  for (int it = 0; it < kIters; ++it) {
    const int i = tid + it * THREADS;
    if (kChunks % THREADS != 0 && i >= kChunks) break;
    const int r = i / kPerRow, c = (i % kPerRow) * VEC, gr = row0 + r, gc = col0 + c;
    int valid = gr < nrows ? ncols - gc : 0;
    valid = valid < 0 ? 0 : (valid > VEC ? VEC : valid);
    T* dst = lds + LdsTile<ROWS, COLS, T>::offset(r, c);
    const T* src = g + (long long)gr * ld + gc;
    if (valid == VEC) {
      amd_detail::copy_sync<kBytes>(dst, src);
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        if (e < valid) amd_detail::copy_sync<kElem>(dst + e, src + e);
        else amd_detail::zero_sync<kElem>(dst + e);
      }
    }
  }
}

template <int ROWS, int COLS, int VEC, int THREADS, typename T>
__device__ __forceinline__ void copy_tile_async(T* lds, const T* g, long long ld, int row0, int col0, int nrows,
                                                int ncols, int tid) {
  constexpr int kWave = 64, kElem = (int)sizeof(T);
  static_assert(VEC * (int)sizeof(T) == 4, "copy_tile_async (LDS DMA): a chunk is one dword (VEC*sizeof(T) == 4)");
  static_assert(THREADS % kWave == 0, "copy_tile_async (LDS DMA): whole wave64 wavefronts");
  static_assert(COLS % VEC == 0 && COLS / VEC >= 2,
                "copy_tile_async: at least two chunks per row, so no wavefront is all edge chunks");
  constexpr int kPerRow = COLS / VEC, kChunks = ROWS * kPerRow, kIters = (kChunks + THREADS - 1) / THREADS;
  const int wave = tid / kWave, lane = tid % kWave;
  const T* base = g + (long long)row0 * ld + col0;
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int i = tid + it * THREADS;
    if (kChunks % THREADS != 0 && i >= kChunks) break;
    const int r = i / kPerRow, c = (i % kPerRow) * VEC, gr = row0 + r, gc = col0 + c;
    int valid = gr < nrows ? ncols - gc : 0;
    valid = valid < 0 ? 0 : (valid > VEC ? VEC : valid);
    if (valid == VEC || valid == 0) {
      const unsigned off = (unsigned)(((long long)r * ld + c) * kElem);
      amd_detail::lds_dma_dword(lds + (it * THREADS + wave * kWave) * VEC, base, off, valid == VEC, lane, it);
    } else {  // the ncols edge cuts this chunk: element-wise, this lane only
      T* dst = lds + LdsTile<ROWS, COLS, T>::offset(r, c);
      const T* src = g + (long long)gr * ld + gc;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        if (e < valid) amd_detail::copy_sync<kElem>(dst + e, src + e);
        else amd_detail::zero_sync<kElem>(dst + e);
      }
    }
  }
}

template <int N>
__device__ __forceinline__ void wait_vmcnt() {
  static_assert(N >= 0 && N <= 63, "wait_vmcnt: the counter holds 0..63");
#if defined(__GFX12__) && defined(HEDDLE_INTERPRET)
  ::heddle_rt::s_wait_loadcnt(N);
#elif defined(__GFX12__)
  asm volatile("s_wait_loadcnt %0" ::"n"(N) : "memory");
#else
  // GFX9 s_waitcnt: vmcnt[3:0], expcnt[6:4] = 7 and lgkmcnt[11:8] = 15 (no wait), vmcnt[5:4] at [15:14]
  constexpr int kSimm16 = (N & 15) | (7 << 4) | (15 << 8) | ((N >> 4) << 14);
#ifdef HEDDLE_INTERPRET
  ::heddle_rt::s_waitcnt(kSimm16);  // (the runtime decodes the fields itself)
#else
  __builtin_amdgcn_s_waitcnt(kSimm16);
  asm volatile("" ::: "memory");
#endif
#endif
}

__device__ __forceinline__ void fence_release_workgroup() {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::amdgcn_fence_workgroup(__ATOMIC_RELEASE);
#else
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
#endif
}

__device__ __forceinline__ void fence_acquire_workgroup() {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::amdgcn_fence_workgroup(__ATOMIC_ACQUIRE);
#else
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
#endif
}

__device__ __forceinline__ void block_sync() {
#if defined(HEDDLE_INTERPRET)
  ::heddle_rt::s_barrier();
#else
  __builtin_amdgcn_s_barrier();
#endif
}

__device__ __forceinline__ void barrier_signal() {
#if defined(__GFX12__) && defined(HEDDLE_INTERPRET)
  ::heddle_rt::s_barrier_signal(-1);
#elif defined(__GFX12__)
  __builtin_amdgcn_s_barrier_signal(-1);
#else  // no split barrier: a full barrier here orders at least as much (barrier_wait is then a no-op)
  block_sync();
#endif
}

__device__ __forceinline__ void barrier_wait() {
#if defined(__GFX12__) && defined(HEDDLE_INTERPRET)
  ::heddle_rt::s_barrier_wait(-1);
#elif defined(__GFX12__)
  __builtin_amdgcn_s_barrier_wait(-1);
#endif
}

}  // namespace heddle

#endif  // !__CUDACC__ || __HIP__
