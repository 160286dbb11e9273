"""Offline compile check of the sm_80 device runtime headers with nvcc (no GPU needed).

A small multistage GEMM kernel instantiates copy_tile_{async,sync} + MmaSm80 for every A/B layout
and dtype of a tile config; nvcc -arch=sm_80 -cubin -Xptxas -v must compile it and ptxas must
report 0 spill bytes and a 0-byte stack frame (accumulators stay in registers) for every kernel.
NVRTC compile checks go through heddle's own runtime (other test files).
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEVICE_DIR = ROOT / "src" / "heddle" / "codegen" / "device"

CONFIGS = {  # name -> (BM, BN, BK, WARPS_M, WARPS_N)
    "64x64x32_2x2": (64, 64, 32, 2, 2),
    "128x128x32_2x2": (128, 128, 32, 2, 2),
    "128x256x64_4x2": (128, 256, 64, 4, 2),
    "32x192x16_1x8": (32, 192, 16, 1, 8),
}

KERNEL = r"""
#include "heddle/heddle_mma_sm80.cuh"
#include "heddle/heddle_math.cuh"
using namespace heddle;

template <int BM, int BN, int BK, int WGM, int WGN, bool AK, bool BKM, typename T, bool ASYNC, int VEC>
__global__ void __launch_bounds__(32 * WGM * WGN, 1)
gemm(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M, int N, int K,
     long long lda, long long ldb, long long ldc) {
  using Mma = MmaSm80<BM, BN, BK, WGM, WGN, AK, BKM, T>;
  constexpr int S = ASYNC ? 3 : 1, TH = Mma::kThreads;
  constexpr int RA = AK ? BM : BK, CA = AK ? BK : BM, RB = BKM ? BN : BK, CB = BKM ? BK : BN;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sA = reinterpret_cast<T*>(smem);
  T* sB = sA + S * Mma::kStageElemsA;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN, nk = (K + BK - 1) / BK;
  auto load = [&](int kt) {
    T* a = sA + (kt % S) * Mma::kStageElemsA;
    T* b = sB + (kt % S) * Mma::kStageElemsB;
    const int k0 = kt * BK;
    if constexpr (ASYNC) {
      if (kt < nk) {
        copy_tile_async<RA, CA, VEC, TH>(a, A, lda, AK ? m0 : k0, AK ? k0 : m0, AK ? M : K, AK ? K : M, tid);
        copy_tile_async<RB, CB, VEC, TH>(b, B, ldb, BKM ? n0 : k0, BKM ? k0 : n0, BKM ? N : K, BKM ? K : N, tid);
      }
      cp_async_commit();
    } else {
      copy_tile_sync<RA, CA, VEC, TH>(a, A, lda, AK ? m0 : k0, AK ? k0 : m0, AK ? M : K, AK ? K : M, tid);
      copy_tile_sync<RB, CB, VEC, TH>(b, B, ldb, BKM ? n0 : k0, BKM ? k0 : n0, BKM ? N : K, BKM ? K : N, tid);
    }
  };
  Mma mma;
  mma.zero();
  if constexpr (ASYNC) {
    for (int s = 0; s < S - 1; ++s) load(s);
  }
  for (int kt = 0; kt < nk; ++kt) {
    if constexpr (ASYNC) cp_async_wait<S - 2>();
    else load(kt);
    block_sync();
    if constexpr (ASYNC) load(kt + S - 1);
    mma.step(sA + (kt % S) * Mma::kStageElemsA, sB + (kt % S) * Mma::kStageElemsB, warp, lane);
    if constexpr (!ASYNC) block_sync();
  }
#pragma unroll
  for (int fm = 0; fm < Mma::FM; ++fm)
#pragma unroll
    for (int fn = 0; fn < Mma::FN; ++fn)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        int row = m0 + Mma::row_of(warp, lane, fm, r), col = n0 + Mma::col_of(warp, lane, fn, r);
        if (row < M && col < N) C[row * ldc + col] = from_float<T>(relu(mma.acc[fm][fn][r]));
      }
}

template <typename T>
__global__ void pointwise(const T* x, T* y, float* z, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = to_float(x[i]);
  y[i] = from_float<T>(gelu_erf(v) + gelu_tanh(v));
  z[i] = from_float<float>(silu(v) * sigmoid(v) + relu(to_float(v)));
}
template __global__ void pointwise<f16>(const f16*, f16*, float*, int);
template __global__ void pointwise<bf16>(const bf16*, bf16*, float*, int);
"""


def _nvcc():
    for cand in (os.environ.get("NVCC"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if cand and os.path.exists(cand):
            return cand
    return None


def _instantiations(cfg):
    bm, bn, bk, wm, wn = CONFIGS[cfg]
    lines = []
    for dtype in ("f16", "bf16"):
        for ak in ("true", "false"):
            for bkm in ("true", "false"):
                for asy, vec in (("true", 8), ("false", 8), ("false", 1)):
                    lines.append(
                        f"template __global__ void gemm<{bm},{bn},{bk},{wm},{wn},{ak},{bkm},{dtype},{asy},{vec}>"
                        f"(const {dtype}*, const {dtype}*, {dtype}*, int, int, int, long long, long long, long long);")
    return lines


@pytest.mark.parametrize("cfg", list(CONFIGS))
def test_sm80_kernels_compile_without_spills(tmp_path, cfg):
    nvcc = _nvcc()
    if not nvcc:
        pytest.skip("nvcc not found (set NVCC or install the CUDA toolkit)")
    inc = tmp_path / "include" / "heddle"
    inc.mkdir(parents=True)
    for hdr in DEVICE_DIR.glob("*.cuh"):
        shutil.copy(hdr, inc / hdr.name)
    inst = _instantiations(cfg)
    src = tmp_path / "k.cu"
    src.write_text(KERNEL + "\n".join(inst) + "\n")
    cmd = [nvcc, "-std=c++17", "-arch=sm_80", "-cubin", "-Xptxas", "-v", "-I", str(tmp_path / "include"),
           str(src), "-o", str(tmp_path / "k.cubin")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    log = res.stdout + res.stderr
    assert res.returncode == 0, f"nvcc failed:\n{log[-8000:]}"
    props = re.findall(r"Function properties for (\S+)\s*\n\s*(\d+) bytes stack frame, (\d+) bytes spill stores, "
                       r"(\d+) bytes spill loads", log)
    gemms = [p for p in props if "gemm" in p[0]]
    assert len(gemms) == len(inst), f"expected {len(inst)} gemm kernels in the ptxas report:\n{log[-8000:]}"
    bad = [p for p in props if p[1:] != ("0", "0", "0")]
    assert not bad, "stack frame / spills (name, stack, spill stores, spill loads): " + repr(bad)
