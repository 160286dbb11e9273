// heddle/interp/rt/hrt_api.h -- what the printed kernel (and the heddle device headers compiled with
// HEDDLE_INTERPRET) call in the execution runtime. One function per PTX instruction or CUDA builtin,
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
void mma_sync_aligned_m16n8k16_row_col_f32(bool bf16, float* d, const uint32_t* a, const uint32_t* b);

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

// sm_90a: TMA (cp.async.bulk.tensor) and bulk groups
void cp_async_bulk_tensor_load(uint32_t dst, const void* map, int rank, const int* coords, uint32_t bar);
void cp_async_bulk_tensor_store(const void* map, int rank, const int* coords, uint32_t src);
void cp_async_bulk_commit_group();
void cp_async_bulk_wait_group_read(int n);

// grid level (split-K, heddle_grid.cuh; hrt_grid.cpp): gpu-scope flags between CTAs, and the partial tiles
// they publish (store: this thread wrote `floats` floats at `slot`, published by `flag`; !store: it reads them)
void grid_release(int* flag);
void grid_acquire(int* flag);
void grid_partial(const float* slot, const int* flag, int floats, bool store);

// warp shuffles
unsigned shfl_sync(unsigned mask, unsigned v, int src, int width, int mode);  // mode 0 idx, 1 up, 2 down, 3 xor

}  // namespace heddle_rt
