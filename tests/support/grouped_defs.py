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


def grouped_fusion(n=72, k=96, dtype="bf16", trans_b=False, epilogue="bias_gelu", out="bf16", masked=False):
    """x ["T", k] times w ["E", k, n] (trans_b: ["E", n, k]) grouped by the ends `offs`, then the epilogue:
    "bias_gelu" (a shared bias [n], gelu), "silu", "none". masked: x ["E", "Mt", k] in the masked layout (row
    counts `counts`), the bias one row per expert ["E", 1, n]."""
    fd = heddle.Fusion()
    x = fd.input("x", dtype, ["E", "Mt", k] if masked else ["T", k])
    w = fd.input("w", dtype, ["E", n, k] if trans_b else ["E", k, n])
    y = fd.masked_grouped_matmul(x, w, trans_b) if masked else fd.grouped_matmul(x, w, trans_b)
    if epilogue == "bias_gelu":
        y = heddle.ops.gelu(y + fd.input("bias", dtype, ["E", 1, n] if masked else [n]))
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


def _epilogue(out, bias, activation):
    """+ bias, then the activation (gelu, silu or None), in float64."""
    if bias is not None:
        out = out + bias.double()
    if activation == "gelu":
        return torch.nn.functional.gelu(out)
    return torch.nn.functional.silu(out) if activation == "silu" else out


def reference(x, w, offs, trans_b=False, bias=None, activation=None):
    """float64, expert by expert: rows offs[e-1] .. offs[e] of x times w[e], + bias, activation."""
    out = torch.zeros(x.shape[0], w.shape[-2] if trans_b else w.shape[-1], dtype=torch.float64)
    start = 0
    for e, end in enumerate(offs.tolist()):
        we = w[e].double().t() if trans_b else w[e].double()
        out[start:end] = x[start:end].double() @ we
        start = end
    return _epilogue(out, bias, activation)


# Row counts of the masked layout against 64-row tiles and a slab of max_tokens = 130 rows (3 m tiles): the
# cases issue 33 names for decode -- empty experts (count 0), one row, a full slab, counts ending mid-tile and
# on a tile edge -- and a count past the slab (200: clamped to max_tokens by the kernel).
MASKED_TOKENS = 130
MASKED = {
    "mixed": [0, 1, 130, 37, 64, 0],
    "clamped": [200, 65, 0, 128],
}


def masked_fusion(n=72, k=96, **kw):
    """x ["E", "Mt", k] times w ["E", k, n] in the masked layout (row counts `counts`), then grouped_fusion's
    epilogue (its bias per expert ["E", 1, n])."""
    return grouped_fusion(n, k, masked=True, **kw)


def masked_scheduled(**kw):
    """A masked-layout fusion with the schedule of `scheduled`."""
    return scheduled(masked=True, **kw)


def masked_inputs(fd, counts, seed=0, max_tokens=MASKED_TOKENS):
    """[x, w, (bias), counts] for `fd` with row counts `counts` (E = len(counts))."""
    g = torch.Generator().manual_seed(seed)
    sizes = {"Mt": max_tokens, "E": len(counts)}
    out = [(torch.randn([sizes.get(s, s) for s in t.shape], generator=g) * 0.5).to(_DT[t.dtype]) for t in fd.inputs]
    out.append(torch.tensor(counts, dtype=torch.int32))
    return out


def masked_reference(x, w, counts, trans_b=False, bias=None, activation=None):
    """float64, expert by expert: rows r < min(counts[e], max_tokens) of x[e] times w[e], + bias, activation;
    the padding rows NaN (never stored: the interpreter's NaN-filled output matches NaN there)."""
    out = torch.full((x.shape[0], x.shape[1], w.shape[-2] if trans_b else w.shape[-1]), float("nan"),
                     dtype=torch.float64)
    for e, c in enumerate(counts.tolist()):
        c = min(max(c, 0), x.shape[1])
        we = w[e].double().t() if trans_b else w[e].double()
        out[e, :c] = x[e, :c].double() @ we
    return _epilogue(out, bias, activation)


def small_grouped_mm_case(seed=7):
    """heddle.grouped_mm's small case: x [100, 64], w_nk [4, 48, 64] ([E, N, K]; pass its [E, K, N] view), a
    shared bias [48], group ends [0, 37, 37, 100] (an empty group) and the float64 reference of silu(x @ w + b)."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(100, 64, generator=g) * 0.5).to(torch.bfloat16)
    w_nk = (torch.randn(4, 48, 64, generator=g) * 0.5).to(torch.bfloat16)
    bias = torch.randn(48, generator=g).to(torch.bfloat16)
    offs = torch.tensor([0, 37, 37, 100], dtype=torch.int32)
    return x, w_nk, bias, offs, reference(x, w_nk, offs, trans_b=True, bias=bias, activation="silu")
