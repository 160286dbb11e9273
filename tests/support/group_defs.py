"""Helpers of the matmul-group tests (tests/lower/test_matmul_group*.py): SwiGLU-style fusions (matmuls sharing A,
combined in the epilogue) and q/k/v-style horizontal merges (each member its own output)."""
import torch

import heddle
from support.matmul_defs import schedule


def group_fusion(parts=2, n=200, k=96, trans_b=True, dtype="bf16", epilogue="silu", saved=False, bias=()):
    """parts B operands w0.. multiplied by x. epilogue: 'silu' / 'gelu' / 'gelu_tanh' -> act(g) * u (parts=2);
    'merge' -> every member its own output (q/k/v), plus a bias b<p> [n] for each member p in `bias`.
    saved: g and u as further outputs (training)."""
    fd = heddle.Fusion()
    x = fd.input("x", dtype, ["M", k])
    ws = [fd.input(f"w{p}", dtype, [n, k] if trans_b else [k, n]) for p in range(parts)]
    ys = [fd.matmul(x, w, False, trans_b) for w in ws]
    if epilogue == "merge":
        for p, y in enumerate(ys):
            fd.output((y + fd.input(f"b{p}", dtype, [n]) if p in bias else y).to(dtype))
    else:
        g, u = ys
        act = {"silu": heddle.ops.silu, "gelu": heddle.ops.gelu,
               "gelu_tanh": lambda v: heddle.ops.gelu(v, approximate="tanh")}[epilogue]
        fd.output((act(g) * u).to(dtype))
        if saved:
            fd.output(g.to(dtype))
            fd.output(u.to(dtype))
    return fd, x, ws


def schedule_group(fd, x, w, bm=64, bn=64, bk=32, wm=2, wn=2, stages=3, prefetch=1, kind="cp_async"):
    """The first member's schedule (tests/support/matmul_defs.py schedule): caches on x and the first B only."""
    return schedule(fd, x, w, bm=bm, bn=bn, bk=bk, wm=wm, wn=wn, stages=stages, prefetch=prefetch, kind=kind)


def group_inputs(fd, m, seed=0):
    """Random inputs in the fusion's order; weights scaled so act(g) * u stays O(1)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for t in fd.inputs:
        shape = [m if s == "M" else s for s in t.shape]
        dt = {"bf16": torch.bfloat16, "f16": torch.float16}[t.dtype]
        scale = 0.15 if t.name.startswith("w") else 1.0
        out.append((torch.randn(*shape, generator=g) * scale).to(dt))
    return out


def reference(fd_inputs, trans_b=True, epilogue="silu", bias=()):
    """float64: act(x @ w0) * (x @ w1), or the list of x @ wp (+ bp for p in `bias`) (merge)."""
    x, *ws = (t.double() for t in fd_inputs)
    ws, bs = ws[:len(ws) - len(bias)], dict(zip(bias, ws[len(ws) - len(bias):]))
    ys = [x @ (w.T if trans_b else w) for w in ws]
    if epilogue == "merge":
        return [y + bs[p] if p in bs else y for p, y in enumerate(ys)]
    act = {"silu": torch.nn.functional.silu, "gelu": torch.nn.functional.gelu,
           "gelu_tanh": lambda v: torch.nn.functional.gelu(v, approximate="tanh")}[epilogue]
    return act(ys[0]) * ys[1]
