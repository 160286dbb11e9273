"""Builders of the grouped matmul tests (tests/grouped/, the grouped mutation families, the GPU window's grouped
families): a scheduled grouped fusion (the sm_80 cp.async kernel, the sm_100a tcgen05 kernel), ragged group
ends, its inputs and a float64 reference computed expert by expert (independent of heddle.reference)."""
import torch

import heddle
from support.matmul_defs import schedule
from support.tcgen05_defs import roles
from support.wgmma_defs import schedule_sm90

_DT = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}

# Group ends (offs) against 64-row tiles, each pattern with the cases issue 33 names: an empty group (an end
# equal to the one before), one-row groups, a group spanning many tiles, groups ending mid-tile, T not a
# multiple of the tile; the first group empty and the last one empty too.
RAGGED = {
    "mixed": [0, 1, 131, 131, 190, 191, 250],        # empty, one row, 3 tiles (2 whole + 3 rows), mid-tile ends
    "one_rows": [1, 2, 3, 3, 4],                     # every group one row (or none): T = 4 < one tile
    "many_tiles": [0, 300, 300],                     # one group of 5 tiles (4 whole + 44 rows), empty around it
    "tile_edges": [64, 128, 129, 192, 192],          # ends on tile edges and one past it
}

# The same cases against the sm_100a kernel's 128-row tiles (tcgen05.mma M = 128).
RAGGED_128 = {
    "mixed": [0, 1, 131, 131, 300, 301, 390],        # empty, one row, 2 tiles (mid-tile end), 2 tiles, T % 128 != 0
    "one_rows": [1, 2, 3, 3, 4],                     # every group one row (or none): T = 4 < one tile
    "many_tiles": [0, 520, 520],                     # one group of 5 tiles (4 whole + 8 rows), empty around it
    "tile_edges": [128, 256, 257, 384, 384],         # ends on tile edges and one past it
}


def grouped_fusion(n=72, k=96, dtype="bf16", trans_b=False, epilogue="bias_gelu", out="bf16"):
    """x ["T", k] times w ["E", k, n] (trans_b: ["E", n, k]) grouped by the ends `offs`, then the epilogue:
    "bias_gelu" (a shared bias [n], gelu), "silu", "none"."""
    fd = heddle.Fusion()
    x = fd.input("x", dtype, ["T", k])
    w = fd.input("w", dtype, ["E", n, k] if trans_b else ["E", k, n])
    y = fd.grouped_matmul(x, w, trans_b)
    if epilogue == "bias_gelu":
        y = heddle.ops.gelu(y + fd.input("bias", dtype, [n]))
    elif epilogue == "silu":
        y = heddle.ops.silu(y)
    fd.output(y.to(out))
    return fd, x, w


def scheduled(bm=64, bn=64, bk=32, stages=3, prefetch=-1, **kw):
    """A grouped fusion with the cp.async + mma.sync schedule of the tests (2 x 2 warps)."""
    fd, x, w = grouped_fusion(**kw)
    schedule(fd, x, w, bm=bm, bn=bn, bk=bk, wm=2, wn=2, stages=stages, prefetch=prefetch)
    return fd


def scheduled_tcgen05(bn=64, bk=16, stages=2, acc_stages=1, **kw):
    """A grouped fusion with the sm_100a TMA + tcgen05 schedule (tile 128 x bn x bk, roles load / mma /
    epilogue with acc_stages tensor-memory accumulator stages)."""
    fd, x, w = grouped_fusion(**kw)
    schedule_sm90(fd, x, w, bm=128, bn=bn, bk=bk, wgs=1, stages=stages, roles=roles(acc_stages))
    return fd


def grouped_inputs(fd, ends, seed=0, tokens=None):
    """[x, w, (bias), offs] for `fd` with group ends `ends` (T = tokens, default ends[-1])."""
    g = torch.Generator().manual_seed(seed)
    T = ends[-1] if tokens is None else tokens
    sizes = {"T": T, "E": len(ends)}
    out = []
    for t in fd.inputs:
        shape = [sizes.get(s, s) for s in t.shape]
        out.append((torch.randn(shape, generator=g) * 0.5).to(_DT[t.dtype]))
    out.append(torch.tensor(ends, dtype=torch.int32))
    return out


def reference(x, w, offs, trans_b=False, bias=None, activation=None):
    """float64, expert by expert: rows offs[e-1] .. offs[e] of x times w[e], + bias, activation."""
    out = torch.zeros(x.shape[0], w.shape[-2] if trans_b else w.shape[-1], dtype=torch.float64)
    start = 0
    for e, end in enumerate(offs.tolist()):
        we = w[e].double().t() if trans_b else w[e].double()
        out[start:end] = x[start:end].double() @ we
        start = end
    if bias is not None:
        out = out + bias.double()
    if activation == "gelu":
        out = torch.nn.functional.gelu(out)
    elif activation == "silu":
        out = torch.nn.functional.silu(out)
    return out


def small_grouped_mm_case(seed=7):
    """heddle.grouped_mm's small case: x [100, 64], w_nk [4, 48, 64] ([E, N, K]; pass its [E, K, N] view), a
    shared bias [48], group ends [0, 37, 37, 100] (an empty group) and the float64 reference of silu(x @ w + b)."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(100, 64, generator=g) * 0.5).to(torch.bfloat16)
    w_nk = (torch.randn(4, 48, 64, generator=g) * 0.5).to(torch.bfloat16)
    bias = torch.randn(48, generator=g).to(torch.bfloat16)
    offs = torch.tensor([0, 37, 37, 100], dtype=torch.int32)
    return x, w_nk, bias, offs, reference(x, w_nk, offs, trans_b=True, bias=bias, activation="silu")
