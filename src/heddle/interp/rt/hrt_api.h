// heddle/interp/rt/hrt_api.h -- what the printed kernel (and the heddle device headers compiled with
// HEDDLE_INTERPRET) call in the execution runtime. One function per PTX / AMD ISA instruction or builtin,
// named after it; every one takes the operands the inline asm it replaces takes (shared-window
// addresses as 32-bit offsets, exactly as __cvta_generic_to_shared gives them on a GPU), so the
// headers' address and descriptor arithmetic runs as printed. Semantics: hrt_*.cpp, from the PTX
// ISA (docs/verification.md "The interpreter").
#pragma once
#include <stdint.h>

namespace heddle_rt {

struct Dim3 {
  unsigned x, y, z;
};

// identity of the calling GPU thread (one fiber per thread)
Dim3 thread_idx();
Dim3 block_idx();
Dim3 block_dim();
Dim3 grid_dim();

// __syncthreads / bar.sync 0
void syncthreads();
// generic -> shared window offset (__cvta_generic_to_shared); an address outside the window is a finding
uint32_t cvta_generic_to_shared(const void* p);

// sm_80: cp.async, ldmatrix, mma.sync
void cp_async_shared_global(uint32_t dst, const void* src, int cp_bytes, int src_bytes, bool cg);
void cp_async_commit_group();
void cp_async_wait_group(int n);
void ldmatrix_sync_aligned_m8n8(int num, bool trans, uint32_t* regs, uint32_t addr);
// sm_90: stmatrix.sync.aligned.m8n8.x{num}.shared.b16 (a warp collective: each lane's row address, num registers)
void stmatrix_sync_aligned_m8n8(int num, const uint32_t* regs, uint32_t addr);
void mma_sync_aligned_m16n8k16_row_col_f32(bool bf16, float* d, const uint32_t* a, const uint32_t* b);

// sm_89+: FP8 conversions (hrt_fp8.cpp); fmt 0 = e4m3, 1 = e5m2. cvt.rn.f16x2.f8x2type d, a (upper byte to
// the upper half) and cvt.rn.satfinite.f8x2type.f32 d, a, b (a to the upper byte, b to the lower)
uint32_t cvt_rn_f16x2_f8x2(int fmt, uint16_t a);
uint16_t cvt_rn_satfinite_f8x2_f32(int fmt, float a, float b);

// sm_90a: mbarriers, fences, registers, named barriers
void mbarrier_init(uint32_t bar, int count);
void mbarrier_arrive(uint32_t bar);
void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes);
bool mbarrier_try_wait_parity(uint32_t bar, int parity);
void fence_proxy_async_shared_cta();
void setmaxnreg(bool inc, int regs);
void bar_sync(int id, int count);
bool elect_sync(unsigned mask);  // a warp collective: every lane of the mask arrives; true in the lowest

// sm_90a: wgmma
void wgmma_fence();
void wgmma_commit_group();
void wgmma_wait_group(int n);
void wgmma_mma_async_ss(int n, bool bf16, float* d, uint64_t desc_a, uint64_t desc_b, int scale_d, int tnsp_a,
                        int tnsp_b);
// atype / btype: 0 f16, 1 bf16, 2 e4m3, 3 e5m2 (hrt_ptx.h WgmmaType); 8-bit: m64nNk32, tnsp must be 0
void wgmma_mma_async_ss_typed(int n, int atype, int btype, float* d, uint64_t desc_a, uint64_t desc_b, int scale_d,
                              int tnsp_a, int tnsp_b);

// sm_100a: tensor memory and tcgen05 (hrt_tcgen05.cpp). alloc / relinquish / dealloc / ld are warp
// collectives; mma and commit are issued by one thread; an mma runs (reads shared memory, writes tensor
// memory) when the commit after it lands, which then arrives once on `bar`.
void tcgen05_alloc(uint32_t slot, int ncols);
void tcgen05_relinquish_alloc_permit();
void tcgen05_dealloc(uint32_t taddr, int ncols);
void tcgen05_mma_f16_ss(uint32_t d, uint64_t desc_a, uint64_t desc_b, uint32_t idesc, int enable_input_d);
void tcgen05_mma_f8f6f4_ss(uint32_t d, uint64_t desc_a, uint64_t desc_b, uint32_t idesc, int enable_input_d);
void tcgen05_mma_mxf8f6f4_ss(uint32_t d, uint64_t desc_a, uint64_t desc_b, uint32_t idesc, uint32_t sfa, uint32_t sfb,
                             int enable_input_d);
void tcgen05_mma_mxf4nvf4_ss(uint32_t d, uint64_t desc_a, uint64_t desc_b, uint32_t idesc, uint32_t sfa, uint32_t sfb,
                             int enable_input_d);
void tcgen05_mma_mxf4_ss(uint32_t d, uint64_t desc_a, uint64_t desc_b, uint32_t idesc, uint32_t sfa, uint32_t sfb,
                        int enable_input_d);
void tcgen05_cp_32x128b_warpx4(uint32_t taddr, uint64_t sdesc);
void tcgen05_commit(uint32_t bar);
void tcgen05_ld_32x32b(int num, uint32_t taddr, uint32_t* regs);
void tcgen05_wait_ld();
void tcgen05_fence(bool before);

// sm_90a: TMA (cp.async.bulk.tensor) and bulk groups
void cp_async_bulk_tensor_load(uint32_t dst, const void* map, int rank, const int* coords, uint32_t bar);
void cp_async_bulk_tensor_store(const void* map, int rank, const int* coords, uint32_t src);
void cp_async_bulk_commit_group();
void cp_async_bulk_wait_group_read(int n);

// sm_90: thread-block clusters (hrt_cluster.cpp). The CTAs of a cluster run together; rank r's shared
// memory is window bytes [r * HRT_SMEM_WINDOW_BYTES, ...), so a shared::cta address of rank r is a window
// offset in that range and a shared::cluster address (mapa) is the same kind of offset in the target's.
uint32_t cluster_ctarank();                                  // %cluster_ctarank
uint32_t cluster_nctarank();                                 // %cluster_nctarank
uint32_t smem_cta_base();                                    // the calling CTA's first window byte
uint32_t mapa_shared_cluster(uint32_t addr, uint32_t rank);  // mapa.shared::cluster.u32
void mbarrier_arrive_cluster(uint32_t cluster_addr);         // mbarrier.arrive.release.cluster.shared::cluster.b64
void fence_mbarrier_init_release_cluster();                  // fence.mbarrier_init.release.cluster
void barrier_cluster_arrive();                               // barrier.cluster.arrive.release
void barrier_cluster_wait();                                 // barrier.cluster.wait.acquire
// cp.async.bulk.tensor...multicast::cluster: the box lands at dst's CTA-relative offset in every CTA of
// ctaMask and completes its bytes on the mbarrier at bar's CTA-relative offset in each of them
void cp_async_bulk_tensor_load_multicast(uint32_t dst, const void* map, int rank, const int* coords, uint32_t bar,
                                         uint16_t cta_mask);

// grid level (split-K, heddle_grid.cuh; hrt_grid.cpp): gpu-scope flags between CTAs, and the partial tiles
// they publish (store: this thread wrote `floats` floats at `slot`, published by `flag`; !store: it reads them)
void grid_release(int* flag);
void grid_acquire(int* flag);
void grid_partial(const float* slot, const int* flag, int floats, bool store);

// warp shuffles
unsigned shfl_sync(unsigned mask, unsigned v, int src, int width, int mode);  // mode 0 idx, 1 up, 2 down, 3 xor

// ---- AMD (CDNA3 ISA for gfx90a / gfx942, RDNA4 ISA for gfx1200; semantics in hrt_amdgcn.cpp) --------
// LDS addresses are 32-bit offsets into the shared window (what an address-space-3 pointer holds).
// s_barrier: every live wave of the workgroup (a wave that has ended no longer counts)
void s_barrier();
// GFX12 split barrier: signal the barrier `id` (-1: the workgroup barrier), then wait for its phase
void s_barrier_signal(int id);
void s_barrier_wait(int id);
// GFX12.5 (gfx1250) named barrier objects, ids 1..16 (0: the NULL barrier); s_barrier_signal / _wait
// above take them too. m0 of s_barrier_init: [15:0] the id, [31:16] the expected count in waves.
// Semantics (the AMDGPU execution-synchronization model) in hrt_barrier_objects.cpp.
void s_barrier_init(uint32_t m0);
void s_barrier_join(int id);
void s_barrier_leave();
bool s_barrier_signal_isfirst(int id);
// GFX9 s_waitcnt with its 16-bit immediate (vmcnt[3:0] | expcnt[6:4] | lgkmcnt[11:8] | vmcnt[5:4]
// at [15:14]); GFX12 s_wait_loadcnt. Both are wave instructions: every lane of the wave executes them.
void s_waitcnt(int simm16);
void s_wait_loadcnt(int n);
// buffer_load_dword ... lds (llvm.amdgcn.raw.buffer.load.lds): rsrc is the 128-bit buffer resource,
// m0 the LDS base; the lane's dword lands at m0 + offset + 4 * lane once the op retires (vmcnt).
void buffer_load_dword_lds(const int32_t rsrc[4], uint32_t m0, int size, int voffset, int soffset, int offset, int aux);
// v_readfirstlane_b32: the value of the wave's first active lane (heddle passes wave-uniform values;
// the instruction that needs them scalar, the LDS DMA, checks that every lane agrees)
int32_t v_readfirstlane_b32(int32_t v);
// __builtin_amdgcn_fence(order, "workgroup"): ordering in the interpreter comes from the barriers;
// counted as an event so the scheduler may switch threads here
void amdgcn_fence_workgroup(int order);
// wave64 MFMA (d, a, b, c, cbsz, abid, blgp): D = A * B + C on a 16x16x16 tile, 4 elements per lane
void v_mfma_f32_16x16x16_f16(float* d, const uint16_t* a, const uint16_t* b, const float* c, int cbsz, int abid, int blgp);
void v_mfma_f32_16x16x16_bf16_1k(float* d, const uint16_t* a, const uint16_t* b, const float* c, int cbsz, int abid,
                                 int blgp);
// wave32 GFX12 WMMA (d, a, b, c): D = A * B + C on a 16x16x16 tile, 8 elements per lane
void v_wmma_f32_16x16x16_f16(float* d, const uint16_t* a, const uint16_t* b, const float* c);
void v_wmma_f32_16x16x16_bf16(float* d, const uint16_t* a, const uint16_t* b, const float* c);

}  // namespace heddle_rt
