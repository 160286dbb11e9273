"""The cp.async kernels of the kernel-IR simulator tests (tests/sim/test_simulator.py), shared with
test_simulator_mutation.py, test_simulator_consan.py and tests/lower/test_short_trips.py: small tiles
(32x32x16, warps 2x1 = 64 threads), every circular-buffer plan, ragged inputs."""
import torch

import heddle


LAYOUTS = {"NN": (False, False), "NT": (False, True), "TN": (True, False), "TT": (True, True)}
PLANS = [(s, p) for s in (2, 3, 4) for p in range(s)]          # every circular-buffer plan
EXTRA = [(1, 0, "cp_async"), (1, 0, "plain"), (2, 0, "plain"), (2, 1, "plain"), (3, 1, "plain")]
M, N = 37, 45
BK = 16
_DT = {"f16": torch.float16, "bf16": torch.bfloat16}


def make_fusion(stages, prefetch, layout="NN", kind="cp_async", dtype="f16", warps=(2, 1), tile=(32, 32, BK)):
    ta, tb = LAYOUTS[layout]
    fd = heddle.Fusion()
    a = fd.input("a", dtype, ["K", "M"] if ta else ["M", "K"])
    b = fd.input("b", dtype, ["N", "K"] if tb else ["K", "N"])
    bias = fd.input("bias", dtype, ["N"])
    y = fd.matmul(a, b, trans_a=ta, trans_b=tb)
    fd.output(heddle.ops.gelu(y + bias).to(dtype))
    bm, bn, bk = tile
    mm = fd.schedule()
    mm.split("m", bm).split("n", bn).split("k", bk).split("m.i", bm // warps[0]).split("n.i", bn // warps[1])
    mm.parallelize("m.o", "BIDy").parallelize("n.o", "BIDx").parallelize("m.i.o", "warp").parallelize("n.i.o", "warp")
    mm.reorder(["m.o", "n.o", "k.o", "m.i.o", "n.i.o", "m.i.i", "n.i.i", "k.i"])
    for t in (a, b):
        c = fd.cache_after(t, kind)
        if stages > 1:
            c.circular_buffer(stages, prefetch)
    return fd


def _padded(rows, cols, dt, g):
    # leading dimension padded to a multiple of 8 (+8), so vec-8 copies stay aligned and the
    # simulator sees a non-trivial ld
    ld = (cols + 7) // 8 * 8 + 8
    return torch.randn(rows, ld, generator=g).to(dt)[:, :cols]


def make_inputs(layout, K, dtype="f16", seed=0, m=M, n=N):
    ta, tb = LAYOUTS[layout]
    g = torch.Generator().manual_seed(seed)
    dt = _DT[dtype]
    a = _padded(K, m, dt, g) if ta else _padded(m, K, dt, g)
    b = _padded(n, K, dt, g) if tb else _padded(K, n, dt, g)
    return [a, b, torch.randn(n, generator=g).to(dt)]


def trip_counts(stages):
    # the shortest loops (1 and s-1 k-tiles, below the stage count), the first two full pipelines and
    # a long one
    s = max(stages, 1)
    return tuple(sorted({1, max(1, s - 1), s, s + 1, 3 * s + 1}))


def ragged_k(trips):
    return trips * BK - 3  # ceil(K / BK) == trips, last k-tile partly zero-filled


def lowered_plan(stages, prefetch, layout="NN", kind="cp_async", dtype="f16", **kw):
    return make_fusion(stages, prefetch, layout, kind, dtype, **kw).lower("sm_80")
