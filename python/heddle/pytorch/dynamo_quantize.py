"""The torch.compile backend's capture of an FP8 quantization written out after a `_scaled_mm` (and its epilogue):
the output quantized with a scale computed from its own values, as the next FP8 layer takes its input
(DeepGEMM's 1 x 128 activation scales, or one per row), becomes the op's computed output scale
(heddle.scaled_mm(..., out_scale="1x128" | "row"): docs/fp8.md "Computed output scales").

    y                                         the epilogue's end: [M, N] (bf16 / f16 / f32)
    x = y [-> float32] [-> view [M, N/128, 128]]
    s = (abs(x) -> amax(-1, keepdim) [-> float32] -> clamp(min=1e-4)) / F
    q = (x [-> float32]) / s [-> clamp(-F, F)] -> float8 [-> view [M, N]]

with F the format's largest finite value (448 e4m3, 57344 e5m2): heddle.ops.quantize's definition exactly,
DeepGEMM's floor of 1e-4 included, so only that form is taken (another floor or constant changes the numbers
and stays with torch). q and s may be read anywhere; every other node of the pattern must be read only by
the pattern. As everywhere in the backend, the fused op computes in float32 and rounds once: where the eager
graph takes amax of y rounded to bf16, the op takes it of the unrounded value.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

import torch
import torch.fx as fx

from .dynamo_epilogue import val

aten = torch.ops.aten
prims = torch.ops.prims

FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}
FLOOR = 1e-4  # heddle.ops.quantize's (DeepGEMM's) amax floor
GROUP = 128
ROW_MAX_N = 128  # per row: a row's scale is computed inside one tile, and the automatic tile is >= 128 wide


@dataclass
class Quant:
    dtype: torch.dtype       # the 8-bit format of q
    group: str               # "1x128" | "row" (scaled_mm's out_scale)
    q: fx.Node               # the node whose value is q ([M, N])
    s: fx.Node               # the node whose value is s ([M, N/128, 1], [M, 1] ...: the op's scale viewed so)
    nodes: List[fx.Node]     # every node of the pattern (absorbed), q and s included


def _only_user(n: fx.Node) -> Optional[fx.Node]:
    users = list(n.users)
    return users[0] if len(users) == 1 and users[0].op == "call_function" else None


def _cast_dtype(n: Optional[fx.Node]):
    """The dtype a plain cast node casts to (aten._to_copy with only a dtype, or prims.convert_element_type)."""
    if n is None or n.op != "call_function":
        return None
    if n.target is aten._to_copy.default and set(n.kwargs) == {"dtype"} and len(n.args) == 1:
        return n.kwargs["dtype"]
    if n.target is prims.convert_element_type.default and len(n.args) == 2 and not n.kwargs:
        return n.args[1]
    return None


def _cast_to(n: Optional[fx.Node], dtypes) -> bool:
    return _cast_dtype(n) in dtypes


def _clamp(n: Optional[fx.Node]):
    """(lo, hi, the last node) of a clamp written as clamp(x, lo[, hi]) or clamp_min / clamp_max (either order,
    one each), else None; a bound not given is None."""
    if n is None or n.kwargs:
        return None
    if n.target is aten.clamp.default:
        lo, hi = (list(n.args[1:]) + [None, None])[:2]
        return _scalar(lo) if lo is not None else None, _scalar(hi) if hi is not None else None, n
    one = {aten.clamp_min.default: 0, aten.clamp_max.default: 1}
    if n.target not in one or len(n.args) != 2:
        return None
    bounds = [None, None]
    bounds[one[n.target]] = _scalar(n.args[1])
    nxt = _only_user(n)
    if nxt is not None and nxt.target in one and one[nxt.target] != one[n.target] and len(nxt.args) == 2 \
            and not nxt.kwargs:
        bounds[one[nxt.target]] = _scalar(nxt.args[1])
        return bounds[0], bounds[1], nxt
    return bounds[0], bounds[1], n


def _scalar(x) -> Optional[float]:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def match(final: fx.Node) -> Optional[Quant]:
    """The quantization pattern (module docstring) reading `final`, else None."""
    vy = val(final)
    if not isinstance(vy, torch.Tensor) or vy.dim() != 2 or not all(isinstance(d, int) for d in vy.shape[1:]):
        return None
    n_cols = vy.shape[1]
    nodes: List[fx.Node] = []
    x = final
    u = _only_user(x)
    if _cast_to(u, (torch.float32,)):          # y -> float32 before the view and both branches
        nodes.append(u)
        x = u
        u = _only_user(x)
    group = "row"
    # the view's result shape (its fake value): [M, N/128, 128] however it was written (-1 included)
    if u is not None and u.target in (aten.view.default, aten.reshape.default) and n_cols % GROUP == 0 and \
            val(u) is not None and list(val(u).shape)[1:] == [n_cols // GROUP, GROUP]:
        nodes.append(u)
        x, group = u, "1x128"
    users = list(x.users)
    if len(users) != 2:
        return None
    ab = next((w for w in users if w.target is aten.abs.default), None)
    other = next((w for w in users if w is not ab), None)
    if ab is None or other is None:
        return None
    # s = clamp(amax(abs(x), -1, keepdim), min=1e-4) [as float32] / F
    am = _only_user(ab)
    last = val(x).dim() - 1
    if am is None or am.target is not aten.amax.default or len(am.args) < 3 or am.args[2] is not True or \
            [d % (last + 1) for d in am.args[1]] != [last]:
        return None
    chain = [ab, am]
    c = _only_user(am)
    if _cast_to(c, (torch.float32,)):
        chain.append(c)
        c = _only_user(c)
    floor = _clamp(c)
    if floor is None or floor[:2] != (FLOOR, None):
        return None
    chain += [c] if floor[2] is c else [c, floor[2]]
    s = _only_user(floor[2])
    if s is None or s.target is not aten.div.Tensor or s.args[0] is not c or _scalar(s.args[1]) is None:
        return None
    # q = (x [as float32]) / s [clamp(-F, F)] -> float8 [view [M, N]]
    d = other
    qnodes = []
    if _cast_to(d, (torch.float32,)):
        qnodes.append(d)
        d = _only_user(d)
    if d is None or d.target is not aten.div.Tensor or d.args[0] is not (qnodes[-1] if qnodes else x) or d.args[1] is not s:
        return None
    qnodes.append(d)
    q = _only_user(d)
    sat = _clamp(q)
    if sat is not None:
        clamps = [q] if sat[2] is q else [q, sat[2]]
        q = _only_user(sat[2])
    if not _cast_to(q, tuple(FP8_MAX)):
        return None
    dtype = _cast_dtype(q)
    fmax = FP8_MAX[dtype]
    if _scalar(s.args[1]) != fmax:
        return None
    if sat is not None:
        if sat[:2] != (-fmax, fmax):
            return None
        qnodes += clamps
    qnodes.append(q)
    if group == "1x128":  # q back to [M, N]
        back = _only_user(q)
        if back is None or back.target not in (aten.view.default, aten.reshape.default) or val(back) is None or \
                list(val(back).shape)[1:] != [n_cols]:
            return None
        qnodes.append(back)
        q = back
    if val(s).dtype != torch.float32:
        return None
    for n in nodes + chain + qnodes[:-1]:   # the pattern's inner nodes: read by the pattern only
        if any(w not in nodes + chain + qnodes + [s] for w in n.users):
            return None
    return Quant(dtype, group, q, s, nodes + chain + [s] + qnodes)
