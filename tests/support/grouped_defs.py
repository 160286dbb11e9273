"""Builders of the grouped matmul tests (tests/grouped/, the grouped mutation family, the GPU window's grouped
family): a scheduled grouped fusion, ragged group ends, its inputs and a float64 reference computed expert by
expert (independent of heddle.reference)."""
import torch

import heddle
from support.matmul_defs import schedule
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


def per_expert_fusion():
    """x ["T", 96] times w ["E", 96, 72] plus a per-expert bias ["E", 72] (Fusion.per_expert), unscheduled."""
    fd = heddle.Fusion()
    x = fd.input("x", "bf16", ["T", 96])
    w = fd.input("w", "bf16", ["E", 96, 72])
    y = fd.grouped_matmul(x, w) + fd.per_expert(fd.input("bias", "bf16", ["E", 72]))
    fd.output(y.to("bf16"))
    return fd, x, w


def scheduled(bm=64, bn=64, bk=32, stages=3, prefetch=-1, **kw):
    """A grouped fusion with the cp.async + mma.sync schedule of the tests (2 x 2 warps)."""
    fd, x, w = grouped_fusion(**kw)
    schedule(fd, x, w, bm=bm, bn=bn, bk=bk, wm=2, wn=2, stages=stages, prefetch=prefetch)
    return fd


def scheduled_sm90(bm=64, bn=64, bk=16, stages=3, prefetch=1, **kw):
    """A grouped fusion with the sm_90a warp-specialized TMA + wgmma schedule (roles load and mma, cooperative):
    one MMA warpgroup per 64 rows of the tile, the load warpgroup giving registers to two of them."""
    fd, x, w = grouped_fusion(**kw)
    wgs = bm // 64
    roles = ({"load": {"warps": 1, "registers": 40}, "mma": {"warpgroups": 2, "registers": 232}} if wgs == 2
             else {"load": 1, "mma": {"warpgroups": 1}})
    schedule_sm90(fd, x, w, bm=bm, bn=bn, bk=bk, wgs=wgs, stages=stages, prefetch=prefetch, roles=roles)
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
