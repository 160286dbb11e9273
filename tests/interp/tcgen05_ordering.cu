// A one-CTA tcgen05 kernel written by hand for the interpreter's tcgen05 ordering model
// (interp/rt/hrt_tmem_shadow.cpp, tests/interp/test_tcgen05_ordering.py), independent of heddle's printer: the PTX
// ISA's canonical patterns (9.7.16.6.4.4) around one tensor-memory accumulator stage reused every tile.
//
//   thread 0 (the MMA thread), per tile t: [t > 0: wait accEmpty], fence::after, mma, commit -> accFull
//   warps 4-7 (readers), per tile t: wait accFull, fence::after, tcgen05.ld, wait::ld, fence::before,
//                                      arrive accEmpty
//
// Operands are all-ones bf16 tiles (every swizzle of them is all ones), so each of the 128 x 64 accumulator
// cells is 16 (K = 16, enable-input-d = 0) and out[t][row] = 16. Each MUTANT line is edited by the test.
#include "heddle/heddle_types.cuh"
#include "heddle/heddle_copy.cuh"
#include "heddle/heddle_sm100.cuh"

using Mma = heddle::MmaSm100<128, 64, 16, true, true, heddle::bf16>;

extern "C" __global__ void tcgen05_ordering(float* out, int tiles) {
  extern __shared__ __align__(1024) unsigned char heddle_smem[];
  heddle::bf16* sA = reinterpret_cast<heddle::bf16*>(heddle_smem);         // 128 x 16: 4096 bytes
  heddle::bf16* sB = reinterpret_cast<heddle::bf16*>(heddle_smem + 4096);  // 64 x 16: 2048 bytes
  unsigned long long* accFull = reinterpret_cast<unsigned long long*>(heddle_smem + 6144);
  unsigned long long* accEmpty = accFull + 1;
  unsigned* slot = reinterpret_cast<unsigned*>(heddle_smem + 6160);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  for (int i = tid; i < 6144 / 4; i += blockDim.x) reinterpret_cast<unsigned*>(heddle_smem)[i] = 0x3F803F80u;
  heddle::sm90::fence_proxy_async();  // the operands are read by the async proxy
  if (tid == 0) {
    heddle::sm90::mbar_init(accFull, 1);
    heddle::sm90::mbar_init(accEmpty, 128);
    heddle::sm90::fence_mbarrier_init_cluster();
  }
  if (warp == 1) {
    heddle::sm100::tmem_alloc(slot, 64);
    heddle::sm100::tmem_relinquish();
  }
  heddle::block_sync();
  if (tid == 0) {
    for (int t = 0; t < tiles; ++t) {
      if (t > 0) heddle::sm90::mbar_wait(accEmpty, (t - 1) & 1);  // MUTANT:mma_wait
      heddle::sm100::fence_after();  // MUTANT:mma_after (t = 0: after the barrier that follows the alloc)
      Mma::mma(slot[0], 0, sA, sB, 0);
      heddle::sm100::commit(accFull);  // MUTANT:commit
    }
  } else if (warp >= 4) {
    for (int t = 0; t < tiles; ++t) {
      heddle::sm90::mbar_wait(accFull, t & 1);
      heddle::sm100::fence_after();  // MUTANT:ld_after
      float v[32];
      heddle::sm100::tmem_load_32(Mma::row_addr(slot[0], warp, 0), v);
      out[t * 128 + 32 * (warp % 4) + lane] = v[lane];
      heddle::sm100::fence_before();  // MUTANT:ld_before
      heddle::sm90::mbar_arrive(accEmpty);
    }
  }
  heddle::block_sync();
  if (warp == 1) heddle::sm100::tmem_dealloc(slot[0], 64);
}
