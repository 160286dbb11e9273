"""Helpers of the interpreter tests (tests/interp/test_interpret_*.py): kernels of every family heddle
generates, built through the public scheduling API, and their inputs."""
import shutil

import pytest
import torch

import heddle
from support.wgmma_defs import build as build_sm90
from support.wgmma_defs import inputs
from support.matmul_defs import matmul_fusion, schedule

needs_cxx = pytest.mark.skipif(not (shutil.which("g++") or shutil.which("clang++")),
                               reason="no host C++ compiler (g++ or clang++) to build the interpreter")


def sm80(stages=3, prefetch=-1, layout="NN", dtype="bf16", kind="cp_async", n=200, k=32 * 5, epilogue="bias_gelu",
         batched=False, bm=64, bn=64, bk=32):
    """A cp.async (or plain-load) sm_80 kernel: 2x2 warps, ragged N by default."""
    fd, a, b = matmul_fusion(n=n, k=k, dtype=dtype, layout=layout, epilogue=epilogue, batched=batched)
    schedule(fd, a, b, bm=bm, bn=bn, bk=bk, wm=2, wn=2, stages=stages, prefetch=prefetch, kind=kind)
    return fd


def sm90(variant, stages=3, prefetch=1, **kw):
    """pipeline | block_sync | coop | pingpong | 3role (tests/support/wgmma_defs.py), small tiles."""
    return build_sm90(variant, stages=stages, prefetch=prefetch, **kw)


def amd(kind="async_lds", stages=3, prefetch=-1, layout="NN", dtype="f16", warps=(2, 1), n=72, k=104,
        epilogue="bias_gelu", batched=False, bm=64, bn=64, bk=32):
    """An AMD matmul (LDS DMA "async_lds" on CDNA, register-staged "plain" loads anywhere): ragged N
    (72 against 64-wide tiles) and ragged K (104 against 32-deep slabs) by default."""
    fd, a, b = matmul_fusion(n=n, k=k, dtype=dtype, layout=layout, epilogue=epilogue, batched=batched)
    schedule(fd, a, b, bm=bm, bn=bn, bk=bk, wm=warps[0], wn=warps[1], stages=stages, prefetch=prefetch, kind=kind)
    return fd


def kernel(fd, target):
    """Lowered only: the interpreter needs the printed source, not an NVRTC binary."""
    return heddle.Kernel.build(fd, target, rtc=False)


__all__ = ["needs_cxx", "sm80", "sm90", "amd", "kernel", "inputs", "torch"]
