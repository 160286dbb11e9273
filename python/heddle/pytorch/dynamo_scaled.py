"""The torch.compile backend's rewrite of FP8 GEMMs (an FP8 Linear) and their epilogue into heddle.scaled_mm ops.

    _scaled_mm(a, b, scale_a, scale_b, bias?, scale_result?, out_dtype?)   (torch._scaled_mm)
    _scaled_mm_v2(a, b, [scale_a], [TensorWise | RowWise], ..., bias?, out_dtype?)   (F.scaled_mm)
        -> bias add ([N]; when _scaled_mm has none)  -> one activation  -> casts
    becomes one heddle.scaled_mm op (torch.ops.heddle.smm_<signature>.default: heddle/pytorch/scaled_mm.py)

The operands must pass heddle.scaled_mm's checks (scaled_mm.scaled_spec, run on the fake tensors: 8-bit a
and b, a row-major, b column-major, K and N multiples of 16, per-tensor or per-row f32 scales); an 8-bit
output (out_dtype e4m3 / e5m2) takes no epilogue after it. A CUDA graph whose device has no FP8
tensor-core instruction (sm_80, AMD: TargetInfo's wgmma / tcgen05) keeps torch's op. Every such
node gets a decision with the reason (heddle.dynamo.explain). Semantics as dynamo_fuse: the chain is
computed in float32 and rounded once.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

import torch
import torch.fx as fx

from .. import _C
from ..core.errors import InputError
from .dynamo_patterns import ACTIVATION_OPS as _ACTS, DTYPE_CODES as _DT, absorb_cast_or_clone, activation_of, \
    match_activation
from .dynamo_report import Decision, Group, GraphReport, op_label

aten = torch.ops.aten

LABEL = "_scaled_mm"
_ARGS = ("a", "b", "scale_a", "scale_b", "bias", "scale_result", "out_dtype", "use_fast_accum")


class _Reject(Exception):
    pass


@dataclass
class _Plan:
    root: fx.Node
    args: Dict[str, object]
    bias: Optional[fx.Node] = None
    activation: Optional[str] = None
    chain: List[fx.Node] = field(default_factory=list)
    steps: List[str] = field(default_factory=list)
    stop: str = ""

    @property
    def final(self) -> fx.Node:
        return self.chain[-1] if self.chain else self.root


def _val(n):
    return n.meta.get("val") if isinstance(n, fx.Node) else n


# torch.nn.functional.scaled_mm (its recipes as ints: torch.nn.functional.ScalingType TensorWise 0, RowWise 1)
_V2 = getattr(aten, "_scaled_mm_v2", None)
V2_LABEL = "_scaled_mm_v2"
_V2_NAMES = {"self": "a", "mat2": "b", "out_dtype": "out_dtype", "output_dtype": "out_dtype"}
_SCALINGS = {0: "TensorWise", 1: "RowWise"}


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
            scales, recipe = got.get("scale_" + x) or [], list(got.get("recipe_" + x) or [])
            if len(scales) != 1 or len(recipe) != 1 or recipe[0] not in _SCALINGS:
                raise _Reject(f"scale_{x} is {len(scales)} tensor(s) with recipe {recipe}: heddle.scaled_mm takes one "
                              "TensorWise or RowWise scale per operand (block scales: docs/fp8.md)")
            if any(got.get("swizzle_" + x) or []):
                raise _Reject(f"swizzle_{x} = {got['swizzle_' + x]}: heddle reads unswizzled scales")
            got["scale_" + x] = scales[0]
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
    p = _Plan(root, _bind(root))
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
    p.bias = p.args["bias"]
    cur = p.root
    while not p.stop:
        users = list(cur.users)
        if len(users) != 1 or users[0].op != "call_function":
            p.stop = f"{cur.name} has {len(users)} users" if len(users) != 1 else f"{cur.name} is a graph output"
            break
        why = _absorb(p, cur, users[0])
        if why is None:
            p.chain.append(users[0])
            cur = users[0]
            continue
        region = match_activation(cur) if p.activation is None else None
        if region is None:
            p.stop = why
            break
        p.activation = region[0]
        p.steps.append(f"-> {region[0]} (written out: {len(region[1])} ops)")
        p.chain.extend(region[1])
        cur = region[1][-1]
    return p


def _absorb(p: _Plan, cur: fx.Node, u: fx.Node) -> Optional[str]:
    """Absorb `u`, the only user of `cur`; the reason why not, else None."""
    t, vcur, vu = u.target, _val(cur), _val(u)
    done, why = absorb_cast_or_clone(u, p.steps)
    if done:
        return why
    if t is aten.add.Tensor and u.kwargs.get("alpha", 1) == 1:
        other = u.args[1] if u.args[0] is cur else u.args[0]
        vo = _val(other)
        if not isinstance(vo, torch.Tensor) or vo.dim() != 1 or vo.shape[0] != vcur.shape[-1] or \
                vo.dtype not in _DT or tuple(vu.shape) != tuple(vcur.shape):
            return f"{u.name} adds {getattr(other, 'name', other)}: not an [N] bias"
        if p.bias is not None or p.activation is not None:
            return f"{u.name}: a second bias, or a bias after the activation"
        p.bias = other
        p.steps.append("+ bias")
        return None
    if t in _ACTS:
        act = activation_of(u)
        if p.activation is not None:
            return f"{u.name}: a second activation"
        p.activation = act
        p.steps.append(f"-> {act}")
        return None
    return f"{u.name} ({op_label(u)}) is not a scaled_mm epilogue op"


def _apply(gm: fx.GraphModule, p: _Plan, fake_mode) -> str:
    from .scaled_mm import scaled_op, scaled_spec
    a = p.args
    vfinal = _val(p.final)
    try:
        spec, vals = scaled_spec(_val(a["a"]), _val(a["b"]), _val(a["scale_a"]), _val(a["scale_b"]), _val(p.bias),
                                 a["out_dtype"] if not p.chain else vfinal.dtype, _val(a["scale_result"]),
                                 p.activation, bool(a["use_fast_accum"]))
    except InputError as e:
        raise _Reject(str(e)) from None
    target = getattr(torch.ops.heddle, scaled_op(spec).spec.op_name()).default
    g = gm.graph
    nodes = [a["a"]]
    with g.inserting_before(p.final):
        for i, (src, how) in enumerate(((a["b"], (aten.permute.default, [1, 0])),
                                        (a["scale_a"], (aten.view.default, [1])),
                                        (a["scale_b"], (aten.view.default, [1])))):
            need = i == 0 or tuple(vals[i + 1].shape) != tuple(_val(src).shape)
            nodes.append(g.create_node("call_function", how[0], (src, how[1]), name=f"heddle_{p.root.name}_{i}")
                         if need else src)
        nodes += [x for x in (p.bias,) if x is not None]
        if spec.scale_result:
            nodes.append(g.create_node("call_function", aten.view.default, (a["scale_result"], [1]),
                                       name=f"heddle_{p.root.name}_q"))
        new = g.create_node("call_function", target, tuple(nodes), name=f"heddle_{p.root.name}")
    with (fake_mode if fake_mode is not None else _null()):
        for n in nodes:
            if n.name.startswith(f"heddle_{p.root.name}_"):
                n.meta["val"] = n.target(_val(n.args[0]), n.args[1])
        new.meta["val"] = target(*[_val(n) for n in nodes])
    new.meta.update({k: v for k, v in p.root.meta.items() if k in ("stack_trace", "nn_module_stack", "seq_nr")})
    p.final.replace_all_uses_with(new)
    for node in reversed([p.root] + p.chain):
        if not node.users:
            g.erase_node(node)
    return spec.op_name()


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


def fuse_scaled(gm: fx.GraphModule, fake_mode, report: GraphReport, why: Dict[str, Decision], enabled: bool,
                target: Optional[str]) -> None:
    """Rewrite every aten._scaled_mm of `gm` with its epilogue into a heddle op (or say why not, in `why`)."""
    for root in [n for n in gm.graph.nodes if is_scaled_mm(n)]:
        label = LABEL if root.target is aten._scaled_mm.default else V2_LABEL
        if not enabled:
            why[root.name] = Decision(root.name, label, "not fused", "fusion disabled (options={'fuse': False})")
            continue
        try:
            p = _plan(root, target)
            names = [root.name] + [c.name for c in p.chain]
            labels = [label] + [op_label(c) for c in p.chain]
            op = _apply(gm, p, fake_mode)
        except _Reject as e:
            why[root.name] = Decision(root.name, label, "not fused", str(e))
            continue
        except Exception as e:  # never break the user's model over a rewrite bug
            import warnings
            warnings.warn(f"heddle: could not fuse {root.name} ({label}): {type(e).__name__}: {e}; it stays with torch")
            why[root.name] = Decision(root.name, label, "not fused", f"internal error: {type(e).__name__}: {e}")
            continue
        gi = len(report.groups)
        report.groups.append(Group(gi, names[0], names, op, " ".join(p.steps), p.stop))
        why[names[0]] = Decision(names[0], label, "fused", f"-> {op}", gi)
        for nm, lb in zip(names[1:], labels[1:]):
            why[nm] = Decision(nm, lb, "absorbed", f"into group {gi} ({op})", gi)
