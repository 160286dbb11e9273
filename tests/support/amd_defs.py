"""The AMD kernels of the simulator tests (tests/sim/test_amd_simulator.py), shared with
tests/lower/test_short_trips.py: a small matmul lowered for a gfx target, and its operands."""
import torch

from support.matmul_defs import matmul_fusion, schedule


def small(target, kind, stages, warps, layout="NN", dtype="f16", epilogue="none", prefetch=-1):
    fd, a, b = matmul_fusion(m="M", n=64, k="K", layout=layout, dtype=dtype, epilogue=epilogue)
    schedule(fd, a, b, bm=64, bn=64, bk=32, wm=warps[0], wn=warps[1], stages=stages, prefetch=prefetch, kind=kind)
    return fd.lower(target)


def operands(m, k, n, layout="NN", dtype=torch.float16, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(dtype)
    b = torch.randn(k, n, generator=g).to(dtype)
    return [a.t().contiguous() if layout[0] == "T" else a, b.t().contiguous() if layout[1] == "T" else b]
