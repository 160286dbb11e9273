// A hand-written HIP kernel (one wave64, gfx942) for the interpreter's AMD ISA model (tests/interp/test_interp_isa.py):
// the misuse checks of the former host emulation of heddle_hip_copy.cuh / heddle_hip_mma.cuh, run through the
// interpreter's model of each instruction (src/heddle/interp/rt/hrt_amdgcn.cpp). Each scenario must be refused:
//   0 nonuniform_m0   lanes of one buffer_load_dword ... lds pass different M0 (the LDS base of the wave)
//   1 divergence      lane 3 skips an MFMA
//   2 dma_oob         an LDS DMA whose source dword lies past the end of `in` (n words)
#include "heddle/heddle_types.cuh"
#include "heddle/heddle_hip_copy.cuh"
#include "heddle/heddle_hip_mma.cuh"
#ifndef __align__
#define __align__(n) __attribute__((aligned(n)))
#endif

extern "C" __global__ void isa_checks_amd(int scenario, const float* in, float* out, int n) {
  extern __shared__ __align__(16) unsigned char heddle_smem[];
  const int lane = threadIdx.x % 64;
  if (scenario == 0) {
    const heddle::amd_detail::i32x4 r = heddle::amd_detail::buffer_resource(in);
    const int rsrc[4] = {r.x, r.y, r.z, r.w};
    const unsigned m0 = lane == 1 ? 256u : 0u;  // not made wave-uniform (the header's readfirstlane skipped)
    ::heddle_rt::buffer_load_dword_lds(rsrc, m0, 4, 4 * lane, 0, 0, 0);
    heddle::wait_vmcnt<0>();
  } else if (scenario == 1) {
    heddle::amd_detail::f4 d = {0.0f, 0.0f, 0.0f, 0.0f};
    const unsigned short a[4] = {0, 0, 0, 0}, b[4] = {0, 0, 0, 0};
    if (lane != 3) heddle::amd_detail::mfma16<heddle::f16>(d, a, b);
    out[threadIdx.x] = d[0];
  } else if (scenario == 2) {
    heddle::amd_detail::lds_dma_dword(heddle_smem, in, 4u * (unsigned)(n + lane), true, lane, 0);
    heddle::wait_vmcnt<0>();
  }
}
