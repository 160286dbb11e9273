"""Horizontal merge in torch graphs: matmuls that read the same input (attention's q / k / v projections) as
ONE heddle op, a matmul group whose members each store their own output (docs/scheduling.md "Matmul groups",
docs/torch.md). A is read once per tile for all members.

heddle.pytorch.dynamo_fuse runs find_merges + apply_merge after the gated pairs (dynamo_gated.py) and before
its per-matmul chains. The pattern, per member (dynamo_fuse's own plan of the matmul decides what it absorbs):

    x2d = view(x, [B*S, H])                     (one node, or views / casts of the same x to the same shape)
    q = mm(x2d, t(Wq))  or  addmm(bq, x2d, t(Wq))  [+ bq]  [-> view [B, S, Nq]]  [-> cast]
    k = ...(x2d, t(Wk)) ...,  v = ...(x2d, t(Wv)) ...
    ==> heddle_merged(x2d, Wq, Wk, Wv, bq, bk, bv) -> (q, k, v)   (each [M, N], viewed back to its node's shape)

Members: matmuls (mm / addmm, rank 2) whose chain is at most a bias [N] (each member its own, or none), the
[B*S, N] -> [B, S, N] view and casts; B operands of one shape, dtype and layout (the group's rule: a CTA
computes the same columns of every member). 2 to 4 members per op (more: groups of 4). A matmul whose chain
holds more (a scale, an activation, a residual) is left to its own heddle op, which fuses that chain.

GQA (Mistral, Llama / Qwen2 with fewer key-value heads): k and v have N = kv_heads * head_dim, q has
heads * head_dim. Only members of equal N are merged (k with v; q alone): the group kernel splits each warp's
accumulator columns evenly among its members, so members of different N would need a column split per
member (and tiles that hold columns of some members only) that the group lowering does not have; a q / kv
pair would read A once instead of twice, which for q / k / v is the part that an unequal split would add.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import torch
import torch.fx as fx

from ..core.fusion import Fusion
from .group_op import GroupOp, group_op, replace_with_group, resolve_group

aten = torch.ops.aten
prims = torch.ops.prims
_CASTS = (prims.convert_element_type.default, aten._to_copy.default)
_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)
_DT = {torch.float16: "f16", torch.bfloat16: "bf16"}          # operands
_OUT_DT = {**_DT, torch.float32: "f32"}                        # outputs and biases
MAX_MEMBERS = 4                                                # the group's limit (C++: a matmul group)


@dataclass(frozen=True)
class MergeSpec:
    dtype: str
    k: int
    n: int
    trans_b: bool
    members: Tuple[Tuple[Optional[Tuple[str, int]], str], ...]   # per member: (bias (dtype, rank) or None, out dtype)

    def op_name(self) -> str:
        """The name encodes the whole spec (MergeSpec.decode reads it back): torch.export.load registers the op
        from its name in a fresh process (heddle.pytorch.resolver.resolve_op)."""
        mem = "".join(f"_m{'' if b is None else f'B{b[0]}r{b[1]}'}o{o}" for b, o in self.members)
        return f"merged_{self.dtype}_k{self.k}_n{self.n}_{'t' if self.trans_b else 'n'}{mem}"

    @staticmethod
    def decode(name: str) -> Optional["MergeSpec"]:
        m = _NAME.fullmatch(name)
        if m is None:
            return None
        dt, k, n, tb, mem = m.groups()
        members = tuple((None if bdt == "" else (bdt, int(rank)), out) for bdt, rank, out in _MEMBER.findall(mem))
        return MergeSpec(dt, int(k), int(n), tb == "t", members)

    @property
    def input_names(self) -> List[str]:
        return ["x"] + [f"w{i}" for i in range(len(self.members))] + \
            [f"bias{i}" for i, (b, _) in enumerate(self.members) if b is not None]

    def build_fusion(self) -> Fusion:
        fd = Fusion()
        x = fd.input("x", self.dtype, ["M", self.k])
        ws = [fd.input(f"w{i}", self.dtype, [self.n, self.k] if self.trans_b else [self.k, self.n])
              for i in range(len(self.members))]
        ys = [fd.matmul(x, w, False, self.trans_b) for w in ws]
        for i, (b, _) in enumerate(self.members):
            if b is not None:
                ys[i] = ys[i] + fd.input(f"bias{i}", b[0], [self.n] if b[1] == 1 else [1, self.n])
        for y, (_, out) in zip(ys, self.members):
            fd.output(y.to(out))
        return fd


_NAME = re.compile(r"merged_(f16|bf16)_k(\d+)_n(\d+)_(t|n)((?:_m(?:B(?:f16|bf16|f32)r[12])?o(?:f16|bf16|f32)){2,4})")
_MEMBER = re.compile(r"_m(?:B(f16|bf16|f32)r([12]))?o(f16|bf16|f32)")


def merged_op(spec: MergeSpec) -> GroupOp:
    return group_op(spec, spec.input_names, parts=len(spec.members))


def resolve(name: str) -> bool:
    """Register torch.ops.heddle.<name> when it names a merged group op (its canonical name); False if not."""
    return resolve_group(name, MergeSpec.decode, merged_op)


# --------------------------------------------------------------------------------------------------
# the graph pattern
# --------------------------------------------------------------------------------------------------
@dataclass
class Member:
    root: fx.Node                 # mm / addmm
    a: fx.Node                    # the 2-D A the matmul reads
    a_walked: List[fx.Node]       # views / casts from `a` back to the shared source (a first)
    b: fx.Node
    bias: Optional[fx.Node]
    chain: List[fx.Node]          # nodes after the root that the op computes too (bias add, view, casts)
    looked_through: List[fx.Node]  # B's transposes

    @property
    def final(self) -> fx.Node:
        return self.chain[-1] if self.chain else self.root


@dataclass
class MergePlan:
    members: List[Member]
    trans_b: bool

    @property
    def nodes(self) -> List[fx.Node]:
        return [n for m in self.members for n in [m.root, *m.chain]]

    def summary(self) -> str:
        b = "b^T" if self.trans_b else "b"
        each = ", ".join(m.root.name + (" + bias" if m.bias is not None else "") for m in self.members)
        return f"merged mm(a, {b}) x {len(self.members)} (one kernel, an output each): {each}"


def _val(n):
    return n.meta.get("val") if isinstance(n, fx.Node) else None


def _dims(v) -> Tuple[str, ...]:
    return tuple(str(d) for d in v.shape)


def _member(root: fx.Node, plan: Callable) -> Optional[Tuple[tuple, Member]]:
    """(group key, member) when `root` can join a merge: its own chain (dynamo_fuse's plan) is at most a bias,
    the 3-D view and casts."""
    if root.op != "call_function" or root.target not in (aten.mm.default, aten.addmm.default):
        return None
    p = plan(root)
    if p is None or p.trans_a or p.strided or p.alpha != 1.0 or p.bias_scale != 1.0 or p.activation is not None \
            or p.residual is not None or p.row_bias is not None or p.saved is not None or p.post_view is not None:
        return None
    a = root.args[1] if root.target is aten.addmm.default else root.args[0]
    if (p.a_view if p.a_view is not None else p.a) is not a:
        return None
    va, vb, vfinal = _val(a), _val(p.b), _val(p.chain[-1] if p.chain else root)
    if va.dtype not in _DT or va.dim() != 2 or vb.dim() != 2 or vfinal.dtype not in _OUT_DT:
        return None
    if p.bias is not None and _val(p.bias).dtype not in _OUT_DT:
        return None
    src, walked = a, []
    while src.op == "call_function" and src.target in _VIEWS + _CASTS:
        walked.append(src)
        src = src.args[0]
    key = (src, tuple((n.target, _dims(_val(n)), _val(n).dtype) for n in walked), p.trans_b, _dims(vb), vb.dtype)
    return key, Member(root, a, walked, p.b, p.bias, list(p.chain), list(p.looked_through))


def find_merges(gm: fx.GraphModule, plan: Callable) -> List[MergePlan]:
    """The merges of `gm`: members grouped by their shared input and B's shape / dtype / layout, in graph order,
    up to MAX_MEMBERS per group. plan(root) -> dynamo_fuse's plan of that matmul, or None when it has none."""
    groups: Dict[tuple, List[Member]] = {}
    for n in gm.graph.nodes:
        found = _member(n, plan)
        if found is not None:
            groups.setdefault(found[0], []).append(found[1])
    plans = []
    for key, members in groups.items():
        for i in range(0, len(members), MAX_MEMBERS):
            part = members[i:i + MAX_MEMBERS]
            if len(part) >= 2 and len({m.b for m in part}) == len(part):   # no B twice (the group's rule)
                plans.append(MergePlan(part, key[2]))
    return plans


def apply_merge(gm: fx.GraphModule, p: MergePlan, fake_mode) -> Tuple[str, str]:
    """Replace the members by one heddle op; returns (op name, summary)."""
    m0 = p.members[0]
    spec = MergeSpec(dtype=_DT[_val(m0.a).dtype], k=int(_val(m0.a).shape[-1]),
                     n=int(_val(m0.b).shape[0 if p.trans_b else 1]), trans_b=p.trans_b,
                     members=tuple((None if m.bias is None else (_OUT_DT[_val(m.bias).dtype], _val(m.bias).dim()),
                                    _OUT_DT[_val(m.final).dtype]) for m in p.members))
    merged_op(spec)
    target = getattr(torch.ops.heddle, spec.op_name()).default
    pos = {n: i for i, n in enumerate(gm.graph.nodes)}
    first = min(p.members, key=lambda m: pos[m.root])
    args = [first.a] + [m.b for m in p.members] + [m.bias for m in p.members if m.bias is not None]
    # B's transposes, and the other members' views / casts of the shared input: erased when no longer read
    looked = [n for m in p.members for n in m.looked_through + (m.a_walked if m is not first else [])]
    replace_with_group(gm, target, args, [m.root for m in p.members], [(m.final, m.chain) for m in p.members],
                       set(p.nodes), looked, fake_mode, f"heddle_{m0.root.name}_merged")
    return spec.op_name(), p.summary()
