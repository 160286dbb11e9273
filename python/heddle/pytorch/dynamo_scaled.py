"""The torch.compile backend's rewrite of FP8 GEMMs (an FP8 Linear) and their epilogue into heddle.scaled_mm ops.

    _scaled_mm(a, b, scale_a, scale_b, bias?, scale_result?, out_dtype?)   (torch._scaled_mm)
    _scaled_mm_v2(a, b, [scale_a], [TensorWise | RowWise | BlockWise1x128 | BlockWise1x32 | BlockWise1x16],
                  [scale_b], [... | BlockWise128x128 | BlockWise1x32 | BlockWise1x16], ..., bias?, out_dtype?)
                  (F.scaled_mm)
        -> bias add ([N]; when _scaled_mm has none)  -> one activation  -> casts
    becomes one heddle.scaled_mm op (torch.ops.heddle.smm_<signature>.default: heddle/pytorch/scaled_mm.py)

The operands must pass heddle.scaled_mm's checks (scaled_mm.scaled_spec, run on the fake tensors: 8-bit a
and b, a row-major, b column-major, K and N multiples of 16, per-tensor, per-row or 128-block f32 scales:
scale_a [M, ceil(K/128)] (as given: the op makes it M-major where it is not), scale_b [ceil(K/128), ceil(N/128)]
(_scaled_mm_v2's rows padded to a multiple of 4 sliced off), transposed for the op; or MX e8m0 scales in torch's
blocked layout (SWIZZLE_32_4_4), viewed [round_up(rows, 128), round_up(K/32, 4)]; or NVFP4: float4_e2m1fn_x2 a and
b with e4m3 scales per 16 of K, blocked, viewed [round_up(rows, 128), round_up(K/16, 4)]); an 8-bit
output (out_dtype e4m3 / e5m2) takes no epilogue after it. A CUDA graph whose device has no FP8
tensor-core instruction (sm_80, AMD: TargetInfo's wgmma / tcgen05) keeps torch's op. Every such
node gets a decision with the reason (heddle.dynamo.explain). Semantics as dynamo_fuse: the chain is
computed in float32 and rounded once.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Dict, Optional

import torch
import torch.fx as fx

from .. import _C
from ..core.errors import InputError
from . import dynamo_quantize
from .dynamo_epilogue import Chain, Reject as _Reject, rewrite_each, val as _val, walk
from .dynamo_report import Decision, GraphReport

aten = torch.ops.aten

LABEL = "_scaled_mm"
_ARGS = ("a", "b", "scale_a", "scale_b", "bias", "scale_result", "out_dtype", "use_fast_accum")


@dataclass
class _Plan(Chain):
    """The epilogue chain (dynamo_epilogue.Chain) with _scaled_mm's arguments by name and the graph's target."""
    args: Dict[str, object] = field(default_factory=dict)
    target: Optional[str] = None
    quant: Optional[dynamo_quantize.Quant] = None   # the output quantized with its computed scale (out_scale)


# torch.nn.functional.scaled_mm (its recipes as ints: torch.nn.functional.ScalingType TensorWise 0, RowWise 1)
_V2 = getattr(aten, "_scaled_mm_v2", None)
V2_LABEL = "_scaled_mm_v2"
_V2_NAMES = {"self": "a", "mat2": "b", "out_dtype": "out_dtype", "output_dtype": "out_dtype"}
_SCALINGS = {0: "TensorWise", 1: "RowWise"}
_BLOCKWISE = (4, 5)  # (BlockWise1x128, BlockWise128x128): DeepGEMM's activation / weight scales
# BlockWise1x16 (NVFP4's e4m3 scales) and BlockWise1x32 (MXFP8's and MXFP4's e8m0 scales), both in the blocked
# layout (torch's to_blocked: SWIZZLE_32_4_4)
_BLOCKED, _SWIZZLE_32_4_4 = (2, 3), 1


def is_scaled_mm(n: fx.Node) -> bool:
    return n.op == "call_function" and (n.target is aten._scaled_mm.default or (_V2 is not None and n.target is _V2.default))


def _bind(root: fx.Node) -> Dict[str, object]:
    """The arguments by name: _scaled_mm's (self, mat2, scale_a, scale_b, bias, scale_result, out_dtype,
    use_fast_accum), and those of _scaled_mm_v2 mapped onto them (one TensorWise / RowWise scale per operand,
    no swizzle, the default contraction dims; anything else is refused)."""
    schema = [_V2_NAMES.get(a.name, a.name) for a in root.target._schema.arguments]
    got = dict(zip(schema, root.args))
    got.update({_V2_NAMES.get(k, k): v for k, v in root.kwargs.items()})
    if root.target is not aten._scaled_mm.default:
        for x in ("a", "b"):
            scales, recipe = got.get("scale_" + x) or [], [int(r) for r in (got.get("recipe_" + x) or [])]
            if len(scales) != 1 or len(recipe) != 1 or (recipe[0] not in _SCALINGS and recipe[0] not in _BLOCKED
                                                        and recipe[0] != _BLOCKWISE[x == "b"]):
                raise _Reject(f"scale_{x} is {len(scales)} tensor(s) with recipe {recipe}: heddle.scaled_mm takes one "
                              "TensorWise or RowWise scale per operand, BlockWise1x128 for a with BlockWise128x128 "
                              "for b, or BlockWise1x32 (MXFP8, MXFP4) / BlockWise1x16 (NVFP4, no global scale) for both "
                              "(docs/fp8.md)")
            swizzle = [int(z) for z in (got.get("swizzle_" + x) or [])]
            if swizzle != ([_SWIZZLE_32_4_4] if recipe[0] in _BLOCKED else swizzle and [0] * len(swizzle)):
                raise _Reject(f"swizzle_{x} = {swizzle} with recipe {recipe}: heddle reads unswizzled scales, and MX / "
                              "NVFP4 (BlockWise1x32 / 1x16) scales in torch's blocked layout (SWIZZLE_32_4_4)")
            got["scale_" + x] = scales[0]
        recipes = [int(got["recipe_a"][0]), int(got["recipe_b"][0])]
        if (recipes[0] in _BLOCKWISE) != (recipes[1] in _BLOCKWISE) or (recipes[0] in _BLOCKED and recipes[1] != recipes[0]):
            raise _Reject(f"recipes {recipes}: block scales come in pairs (BlockWise1x128 for a, BlockWise128x128 "
                          "for b; BlockWise1x32 or BlockWise1x16 for both)")
        if list(got.get("contraction_dim") or []):
            raise _Reject(f"contraction_dim = {got['contraction_dim']}: heddle contracts a's columns with b's rows")
    got.setdefault("use_fast_accum", False)
    return {k: got.get(k) for k in _ARGS}


def _plan(root: fx.Node, target: Optional[str]) -> _Plan:
    if target == "":
        raise _Reject("heddle has no target for this graph's device")
    if target is not None:
        info = _C.target_info(target)
        if not (info["wgmma"] or info["tcgen05"]):
            raise _Reject(f"target {target} has no 8-bit float tensor-core instruction (FP8 GEMMs need wgmma on "
                          "sm_90a or tcgen05 on sm_100a): torch's _scaled_mm runs it")
    p = _Plan(root, args=_bind(root), target=target)
    v = {k: _val(x) for k, x in p.args.items()}
    for name in ("a", "b", "scale_a", "scale_b"):
        if not isinstance(v[name], torch.Tensor):
            raise _Reject(f"{name} carries no fake tensor metadata")
    # K from either operand (a weight's is static where the activation's is not: dynamic=True)
    for what, sizes in (("K", (v["a"].shape[-1], v["b"].shape[0])), ("N", (v["b"].shape[-1],))):
        if not any(isinstance(size, int) for size in sizes):
            raise _Reject(f"{what} = {sizes[0]} is symbolic: heddle compiles one kernel per K and N")
    p.steps.append("scaled_mm(a, b) * scale_a * scale_b" + (" + bias" if v["bias"] is not None else ""))
    if v["scale_result"] is not None and target is None and v["out_dtype"] in (torch.float8_e4m3fn, torch.float8_e5m2):
        raise _Reject("scale_result on CPU tensors: torch's CPU _scaled_mm divides by it where its CUDA op (and "
                      "heddle) multiplies (pytorch/pytorch#190449), so the fused op would not match the eager graph")
    if v["out_dtype"] in (torch.float8_e4m3fn, torch.float8_e5m2):
        p.stop = "an 8-bit output takes no epilogue after it"
        return p
    p.bias = p.args["bias"]  # torch's own bias argument: a bias add after it is a second bias
    walk(p, "scaled_mm")  # dynamo_epilogue.walk: casts, an [N] bias, one activation
    q = dynamo_quantize.match(p.final)
    if q is not None and q.group == "row" and _val(p.final).shape[-1] > dynamo_quantize.ROW_MAX_N:
        p.stop = (f"per-row quantization of N = {_val(p.final).shape[-1]} columns stays with torch: heddle computes a "
                  f"row's scale inside one tile (N <= {dynamo_quantize.ROW_MAX_N} here); quantize per 1 x 128 (a view to "
                  "[M, N/128, 128]) to fuse it")
    elif q is not None:  # the output quantized with a scale computed from it: the op's (q, s) (out_scale)
        p.quant = q
        fmt = "e4m3" if q.dtype == torch.float8_e4m3fn else "e5m2"
        p.steps.append(f"-> quantize {fmt} per {q.group} (s = max(amax, 1e-4) / {dynamo_quantize.FP8_MAX[q.dtype]:g})")
        p.stop = "the quantized output and its scale are the op's outputs"
    return p


def _apply(gm: fx.GraphModule, p: _Plan, fake_mode) -> str:
    from .scaled_mm import scaled_op, scaled_spec
    a = p.args
    vfinal = _val(p.final)
    vsb = _val(a["scale_b"])
    if p.root.target is not aten._scaled_mm.default and vsb.dim() == 2:
        kb = -(-_val(a["a"]).shape[-1] // 128)  # _scaled_mm_v2's 128x128 scale_b: K-blocks padded to a multiple of 4
        if vsb.shape[0] == -(-kb // 4) * 4 and vsb.shape[0] != kb:
            vsb = vsb[:kb]
    out_dtype = p.quant.dtype if p.quant else a["out_dtype"] if not p.chain else vfinal.dtype
    try:
        spec, vals = scaled_spec(_val(a["a"]), _val(a["b"]), _val(a["scale_a"]), vsb, bias=_val(p.bias),
                                 scale_result=_val(a["scale_result"]), out_dtype=out_dtype,
                                 use_fast_accum=bool(a["use_fast_accum"]), activation=p.activation,
                                 out_scale=p.quant.group if p.quant else None)
    except InputError as e:
        raise _Reject(str(e)) from None
    if (spec.mx or spec.nv) and p.target is not None and not _C.target_info(p.target)["tcgen05"]:
        fmt, kind = ("NVFP4", "mxf4nvf4") if spec.nv else ("MXFP4", "mxf4") if spec.dtype_a == "e2m1x2" else \
            ("MX", "mxf8f6f4")
        raise _Reject(f"{fmt} scales: heddle's block-scaled kernel is sm_100a's tcgen05.mma (kind::{kind}); target "
                      f"{p.target} has none, so torch's _scaled_mm runs it")
    if spec.block and p.target is not None and not _C.target_info(p.target)["wgmma"]:
        raise _Reject(f"block scales: heddle's block-scaled kernel is sm_90a's wgmma (promotion in the MMA role); "
                      f"target {p.target} has none, so torch's _scaled_mm runs it")
    fm = scaled_op(spec)
    fm.op  # registered now (FusedMatmul.op): the graph calls it
    target = getattr(torch.ops.heddle, fm.spec.op_name()).default
    g = gm.graph
    nodes = [a["a"]]
    made = []
    with g.inserting_before(p.final):
        for i, src in enumerate((a["b"], a["scale_a"], a["scale_b"])):
            x = src
            for j, (op, args, kw) in enumerate(_steps(i, _val(src), vals[i + 1], spec)):
                x = g.create_node("call_function", op, (x,) + args, kw, name=f"heddle_{p.root.name}_{i}{'abc'[j]}")
                made.append(x)
            nodes.append(x)
        nodes += [x for x in (p.bias,) if x is not None]
        if spec.scale_result:
            made.append(g.create_node("call_function", aten.view.default, (a["scale_result"], [1]),
                                      name=f"heddle_{p.root.name}_q"))
            nodes.append(made[-1])
        new = g.create_node("call_function", target, tuple(nodes), name=f"heddle_{p.root.name}")
    with (fake_mode if fake_mode is not None else contextlib.nullcontext()):
        for n in made:
            n.meta["val"] = n.target(_val(n.args[0]), *n.args[1:], **n.kwargs)
        new.meta["val"] = target(*[_val(n) for n in nodes])
    new.meta.update({k: v for k, v in p.root.meta.items() if k in ("stack_trace", "nn_module_stack", "seq_nr")})
    if p.quant is None:
        p.final.replace_all_uses_with(new)
        gone = [p.root] + p.chain
    else:
        _outputs(g, new, p, fake_mode)
        gone = [p.root] + p.chain + p.quant.nodes
    pos = {n: i for i, n in enumerate(g.nodes)}
    for node in sorted(dict.fromkeys(gone), key=pos.get, reverse=True):
        if not node.users:
            g.erase_node(node)
    return spec.op_name()


def _outputs(g: fx.Graph, new: fx.Node, p: _Plan, fake_mode) -> None:
    """The op's (q, s) in place of the pattern's q and s (s viewed as the pattern shaped it: [M, N/128, 1] ...)."""
    import operator
    q, s = p.quant.q, p.quant.s
    with g.inserting_after(new):
        got_s = g.create_node("call_function", operator.getitem, (new, 1), name=f"{new.name}_s")
    with g.inserting_after(got_s):
        got_q = g.create_node("call_function", operator.getitem, (new, 0), name=f"{new.name}_q")
    shaped = got_s
    if tuple(_val(s).shape) != tuple(new.meta["val"][1].shape):
        with g.inserting_after(got_q):
            shaped = g.create_node("call_function", aten.view.default, (got_s, list(_val(s).shape)),
                                   name=f"{new.name}_sv")
    with (fake_mode if fake_mode is not None else contextlib.nullcontext()):
        got_q.meta["val"], got_s.meta["val"] = new.meta["val"]
        if shaped is not got_s:
            shaped.meta["val"] = got_s.meta["val"].view(list(_val(s).shape))
    q.replace_all_uses_with(got_q)
    s.replace_all_uses_with(shaped)


def _steps(i: int, src, want, spec):
    """The graph ops that turn argument `src` (the fake tensor of b, scale_a or scale_b, i = 0, 1, 2) into
    the op's operand `want` (scaled_mm.scaled_spec's): b^T; a one-element scale viewed as [1]; 128-block scales:
    scale_a as it is (the op brings it M-major, the layout of its TMA map, copying only where it is not: torch's
    BlockWise1x128 scale_a already is), scale_b's padded rows (_scaled_mm_v2: a multiple of 4) sliced off,
    transposed and made contiguous; MX (e8m0) and NVFP4 (e4m3) scales, torch's blocked bytes, viewed 2-D."""
    if i == 0:
        return [(aten.permute.default, ([1, 0],), {})]
    if spec.mx or spec.nv:  # the blocked bytes (contiguous: scaled_spec checked) as [round_up(rows, 128), kp]
        return [(aten.view.default, ([-1, want.shape[1]],), {})]
    if not spec.block:
        return [] if tuple(want.shape) == tuple(src.shape) else [(aten.view.default, ([1],), {})]
    if i == 1:
        return []
    steps = []
    rows = want.shape[1]
    if i == 2 and src.shape[0] != rows:
        steps.append((aten.slice.Tensor, (0, 0, rows), {}))
    contiguous = src.stride(0) == 1 and (rows == 1 or src.stride(1) == rows)
    steps.append((aten.permute.default, ([1, 0],), {}))
    if not contiguous:
        steps.append((aten.clone.default, (), {"memory_format": torch.contiguous_format}))
    return steps


def fuse_scaled(gm: fx.GraphModule, fake_mode, report: GraphReport, why: Dict[str, Decision], enabled: bool,
                target: Optional[str]) -> None:
    """Rewrite every aten._scaled_mm of `gm` with its epilogue into a heddle op (or say why not, in `why`)."""

    def rewrite(root):
        p = _plan(root, target)
        return p, _apply(gm, p, fake_mode)
    rewrite_each([n for n in gm.graph.nodes if is_scaled_mm(n)],
                 lambda root: LABEL if root.target is aten._scaled_mm.default else V2_LABEL, rewrite, report, why,
                 enabled)
