"""Gated matmuls in torch graphs: SwiGLU `act(x @ W1^T) * (x @ W3^T)` (Llama, Mistral, Qwen2 MLPs, also
GELU-gated) as ONE heddle op, a matmul group (docs/scheduling.md, "Matmul groups"; docs/torch.md).

heddle.pytorch.dynamo_fuse runs find_gated + apply_gated before its per-matmul chains. The pattern:

    x2d = view(x, [B*S, H])          (one view node, or two views of the same x)
    g = mm(x2d, t(W1)) -> view [B, S, I] -> act          (silu, gelu, gelu(tanh); casts allowed)
    u = mm(x2d, t(W3)) -> view [B, S, I]
    out = mul(act(g), u)                                  (either operand order)
    ==> heddle_gated(x2d, W1, W3) -> (out [, values the graph also reads: g, u, act(g)])

Values of the chain that the graph reads elsewhere (training: the pre-activations and act(g) that the
backward keeps) become further outputs of the op, stored by the same kernel, viewed back to the node's shape.
The op and the graph surgery are heddle.pytorch.group_op's (shared with dynamo_merge.py, q / k / v).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import torch
import torch.fx as fx

from ..core.fusion import Fusion, ops_unary
from .group_op import GroupOp, group_op, replace_with_group, resolve_group

aten = torch.ops.aten
prims = torch.ops.prims
_CASTS = (prims.convert_element_type.default, aten._to_copy.default)
_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)
_DT = {torch.float16: "f16", torch.bfloat16: "bf16"}          # operands
_OUT_DT = {**_DT, torch.float32: "f32"}                        # outputs (a float32 product of casts)


def _act_of(n: fx.Node) -> Optional[str]:
    if n.op != "call_function":
        return None
    if n.target is aten.silu.default:
        return "silu"
    if n.target is aten.gelu.default:
        approx = n.kwargs.get("approximate", n.args[1] if len(n.args) > 1 else "none")
        return {"none": "gelu", "tanh": "gelu_tanh"}.get(approx)
    return None


def _back_through(n, kinds) -> Tuple[fx.Node, List[fx.Node]]:
    """Walk from n to its input through nodes of `kinds` (single-input views / casts): (source, walked)."""
    walked = []
    while isinstance(n, fx.Node) and n.op == "call_function" and n.target in kinds:
        walked.append(n)
        n = n.args[0]
    return n, walked


@dataclass(frozen=True)
class GatedSpec:
    dtype: str
    k: int
    n: int
    trans_b: bool
    activation: str
    out_dtype: str
    extra: Tuple[Tuple[str, str], ...] = ()   # further outputs: ("g" | "u" | "act", dtype)

    def op_name(self) -> str:
        """The name encodes the whole spec (GatedSpec.decode reads it back), so torch.export.load registers the
        op from its name in a fresh process (heddle.pytorch.resolver.resolve_op)."""
        kept = "".join(f"_s{what}{dt}" for what, dt in self.extra)
        return (f"gated_{self.dtype}_{self.activation}_k{self.k}_n{self.n}_{'t' if self.trans_b else 'n'}"
                f"_o{self.out_dtype}{kept}")

    @staticmethod
    def decode(name: str) -> Optional["GatedSpec"]:
        m = _NAME.fullmatch(name)
        if m is None:
            return None
        dt, act, k, n, tb, out, kept = m.groups()
        extra = tuple(_KEPT.findall(kept))
        return GatedSpec(dt, int(k), int(n), tb == "t", act, out, extra)

    def build_fusion(self) -> Fusion:
        fd = Fusion()
        x = fd.input("x", self.dtype, ["M", self.k])
        ws = [fd.input(w, self.dtype, [self.n, self.k] if self.trans_b else [self.k, self.n]) for w in ("w1", "w3")]
        g, u = (fd.matmul(x, w, False, self.trans_b) for w in ws)
        act = ops_unary(self.activation, g)
        fd.output((act * u).to(self.out_dtype))
        values = {"g": g, "u": u, "act": act}
        for what, dt in self.extra:
            fd.output(values[what].to(dt))
        return fd


_NAME = re.compile(r"gated_(f16|bf16)_(silu|gelu_tanh|gelu)_k(\d+)_n(\d+)_(t|n)_o(f16|bf16|f32)"
                   r"((?:_s(?:g|u|act)(?:f16|bf16|f32))*)")
_KEPT = re.compile(r"_s(g|u|act)(f16|bf16|f32)")


def resolve(name: str) -> bool:
    """Register torch.ops.heddle.<name> when it names a gated op (its canonical name); False if not."""
    return resolve_group(name, GatedSpec.decode, gated_op)


def gated_op(spec: GatedSpec) -> GroupOp:
    return group_op(spec, ["x", "w1", "w3"], parts=2)


# --------------------------------------------------------------------------------------------------
# the graph pattern
# --------------------------------------------------------------------------------------------------
@dataclass
class GatedPlan:
    mul: fx.Node
    mm_g: fx.Node
    mm_u: fx.Node
    x: fx.Node
    w1: fx.Node
    w3: fx.Node
    trans_b: bool
    activation: str
    act: fx.Node
    chain_g: List[fx.Node]          # views / casts from mm_g to act's input
    chain_act: List[fx.Node]        # casts from act to the mul
    chain_u: List[fx.Node]          # views / casts from mm_u to the mul
    looked_through: List[fx.Node] = field(default_factory=list)  # transposes / views of the operands

    @property
    def nodes(self) -> List[fx.Node]:
        return [self.mm_g, *self.chain_g, self.act, *self.chain_act, self.mm_u, *self.chain_u, self.mul]

    def summary(self, extra) -> str:
        b = "b^T" if self.trans_b else "b"
        s = f"gated mm(a, {b}) x 2 (one kernel): {self.activation}(g) * u"
        return s + (f" (+ {', '.join(w for w, _ in extra)} kept)" if extra else "")


def _val(n):
    return n.meta.get("val") if isinstance(n, fx.Node) else None


def _match(mul: fx.Node, _operand, _static_int) -> Optional[GatedPlan]:
    if mul.op != "call_function" or mul.target is not aten.mul.Tensor or len(mul.args) != 2:
        return None
    if not all(isinstance(a, fx.Node) for a in mul.args):
        return None
    for left, right in (mul.args, mul.args[::-1]):
        act, chain_act = _back_through(left, _CASTS)
        name = _act_of(act)
        if name is None:
            continue
        mm_g, chain_g = _back_through(act.args[0], _VIEWS + _CASTS)
        mm_u, chain_u = _back_through(right, _VIEWS + _CASTS)
        if not all(isinstance(m, fx.Node) and m.op == "call_function" and m.target is aten.mm.default
                   for m in (mm_g, mm_u)) or mm_g is mm_u:
            continue
        xg, xu = mm_g.args[0], mm_u.args[0]
        if xg is not xu:  # two views of the same tensor to the same shape
            if not (xg.target in _VIEWS and xu.target in _VIEWS and xg.args[0] is xu.args[0]
                    and list(_val(xg).shape) == list(_val(xu).shape)):
                continue
        x, trans_a, through_a = _operand(xg, 2)
        (w1, tb1, through1), (w3, tb3, through3) = _operand(mm_g.args[1], 2), _operand(mm_u.args[1], 2)
        if x is None or trans_a or w1 is None or w3 is None or tb1 != tb3 or w1 is w3:
            continue
        vx, v1, v3 = _val(x), _val(w1), _val(w3)
        if vx.dtype not in _DT or not (vx.dtype == v1.dtype == v3.dtype) or list(v1.shape) != list(v3.shape):
            continue
        if _static_int(vx.shape[-1]) is None or _static_int(_val(mm_g).shape[-1]) is None:
            continue
        if any(_val(n).dtype not in _OUT_DT for n in (mul, act, *chain_g, *chain_act, *chain_u)):
            continue
        return GatedPlan(mul, mm_g, mm_u, x, w1, w3, tb1, name, act, chain_g, chain_act, chain_u,
                         through_a + through1 + through3 + [xg] + ([xu] if xu is not xg else []))
    return None


def find_gated(gm: fx.GraphModule, operand, static_int) -> List[GatedPlan]:
    """The gated pairs of `gm`. operand(node, rank) -> (node heddle reads, transposed?, looked through) and
    static_int(size) -> int | None are dynamo_fuse's (_operand, _static_int): the same operand rules."""
    plans, used = [], set()
    for n in gm.graph.nodes:
        p = _match(n, operand, static_int)
        if p is not None and not (set(p.nodes) & used):
            plans.append(p)
            used |= set(p.nodes)
    return plans


def _exported(p: GatedPlan) -> List[Tuple[str, fx.Node]]:
    """(value, node) for each chain node other code reads: its value becomes a further output."""
    inner = set(p.nodes)
    out = []
    for what, nodes in (("g", [p.mm_g, *p.chain_g]), ("act", [p.act, *p.chain_act]), ("u", [p.mm_u, *p.chain_u])):
        for n in nodes:
            if any(u not in inner for u in n.users):
                out.append((what, n))
    return out


def apply_gated(gm: fx.GraphModule, p: GatedPlan, fake_mode) -> Tuple[str, str]:
    """Replace the pattern by one heddle op; returns (op name, summary)."""
    exported = _exported(p)
    spec = GatedSpec(dtype=_DT[_val(p.x).dtype], k=int(_val(p.x).shape[-1]), n=int(_val(p.mm_g).shape[-1]),
                     trans_b=p.trans_b, activation=p.activation, out_dtype=_OUT_DT[_val(p.mul).dtype],
                     extra=tuple((w, _OUT_DT[_val(n).dtype]) for w, n in exported))
    gated_op(spec)
    target = getattr(torch.ops.heddle, spec.op_name()).default
    pos = {n: i for i, n in enumerate(gm.graph.nodes)}
    x = p.x if pos[p.mm_g] < pos[p.mm_u] else p.mm_u.args[0]   # the A view that precedes the first matmul
    chain = p.chain_g + p.chain_u
    replace_with_group(gm, target, [x, p.w1, p.w3], [p.mm_g, p.mm_u],
                       [(p.mul, chain)] + [(node, chain) for _, node in exported], set(p.nodes), p.looked_through,
                       fake_mode, f"heddle_{p.mm_g.name}_gated")
    return spec.op_name(), p.summary(exported)
