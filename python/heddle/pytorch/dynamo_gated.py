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
The op: on CUDA the group kernel (mma.sync + cp.async, compiled per target and M bucket on first use);
on CPU the fusion in float32 with torch; autograd through the fusion (Kernel.op's formula).
"""
from __future__ import annotations

import operator
import re
import threading
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch
import torch.fx as fx

from ..core import inputs
from ..core.fusion import Fusion, ops_unary
from ..core.inputs import DTYPES, MatmulGeometry
from ..core.kernel import Kernel, _vec_for, plan_table, run_table
from .autograd import register_fusion_autograd
from .custom_ops import register_op, registering

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
        op from its name in a fresh process (heddle.pytorch.matmul.resolve_op)."""
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
    spec = GatedSpec.decode(name)
    if spec is None or spec.op_name() != name or spec.k <= 0 or spec.n <= 0 or name in registering:
        return False   # not canonical, or torch looking the name up while it is being registered
    gated_op(spec)
    return True


class GatedMatmul:
    """One gated signature: its fusion, torch op and kernels per (target, vec, M bucket)."""

    def __init__(self, spec: GatedSpec):
        self.spec = spec
        self.fusion = spec.build_fusion()
        self._decls = [(t.name, t.dtype, t.shape) for t in self.fusion.inputs]
        self._mexpr = inputs.matmul_expr(self.fusion)
        self.kernels: Dict[tuple, Kernel] = {}
        self._lock = threading.Lock()
        self._plans = plan_table()  # call signature -> the launch plan of its CUDA calls (C++)
        self.op = register_op(spec.op_name(), ["x", "w1", "w3"], self.run, self.fake, outputs=1 + len(spec.extra))
        register_fusion_autograd(self.fusion, self.op)

    def kernel(self, target: str, vec_a: int, vec_b: int, m: int, rtc: bool = True) -> Kernel:
        from .matmul import m_bucket
        key = (target, vec_a, vec_b, m_bucket(m), rtc)
        with self._lock:
            k = self.kernels.get(key)
            if k is None:
                fd = self.spec.build_fusion()
                if vec_a < 2 or vec_b < 2:
                    for t in fd.inputs[:2]:
                        fd.cache_after(t, "plain")
                fd.auto_schedule(target, m_bucket(m) if m_bucket(m) > 0 else -1, self.spec.n, self.spec.k)
                k = self.kernels[key] = Kernel.build(fd, target, vec_a=vec_a, vec_b=vec_b, rtc=rtc, allow_spills=True)
            return k

    def run(self, tensors):
        if tensors and getattr(tensors[0], "is_cuda", False):
            out = run_table(self._plans, tensors)  # a CUDA call signature seen before: its plan
            if out is not None:
                return out
        g = inputs.check(self.spec.op_name(), self._decls, self._mexpr, tensors)
        empty = inputs.zero_size_result(self.fusion, g, tensors)
        if empty is not None:
            return empty
        vec_a, vec_b = _vec_for(tensors[0]), min(_vec_for(tensors[1]), _vec_for(tensors[2]))
        if tensors[0].device.type == "cuda":
            from ..core.runtime import target_for_device
            k = self.kernel(target_for_device(tensors[0].device), vec_a, vec_b, g.M)
            return k._launch(tensors, g, self._plans)  # checked; the plan is kept for the next such call
        from ..core.interpret import interpret_mode
        if interpret_mode():  # HEDDLE_INTERPRET=1: the printed group kernel on the CPU
            from ..core.interpret import interpret_target, run_checked
            return run_checked(self.kernel(interpret_target(), vec_a, vec_b, g.M, rtc=False), tensors)
        from ..core.reference import evaluate
        return evaluate(self.fusion, tensors, compute_dtype=torch.float32)

    def fake(self, tensors):
        inputs.same_device(self.spec.op_name(), ["x", "w1", "w3"], tensors)
        g = MatmulGeometry(self._mexpr, {n: t for (n, _, _), t in zip(self._decls, tensors)})
        outs = tuple(tensors[0].new_empty(g.out_shape, dtype=getattr(torch, DTYPES[o.dtype]))
                     for o in self.fusion.outputs)
        return outs[0] if len(outs) == 1 else outs


_ops: Dict[GatedSpec, GatedMatmul] = {}
_ops_lock = threading.Lock()


def gated_op(spec: GatedSpec) -> GatedMatmul:
    with _ops_lock:
        gm = _ops.get(spec)
        if gm is None:
            gm = _ops[spec] = GatedMatmul(spec)
        return gm


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
    g = gm.graph
    pos = {n: i for i, n in enumerate(g.nodes)}
    first = min(p.mm_g, p.mm_u, key=lambda n: pos[n])   # every value the op replaces comes after it
    with (fake_mode if fake_mode is not None else _Null()):
        val = target(_val(p.x), _val(p.w1), _val(p.w3))
    vals = val if isinstance(val, tuple) else (val,)
    x = p.x if first is p.mm_g else p.mm_u.args[0]   # the A view that precedes the first matmul
    with g.inserting_before(first):
        new = g.create_node("call_function", target, (x, p.w1, p.w3), name=f"heddle_{p.mm_g.name}_gated")
    new.meta["val"] = val
    new.meta.update({k: v for k, v in p.mm_g.meta.items() if k in ("stack_trace", "nn_module_stack", "seq_nr")})
    created = [new]  # every node made here, in order: erased again if the rewrite cannot finish

    def dims(v):
        return [str(d) for d in v.shape]

    views = [n for n in p.chain_g + p.chain_u if n.target in _VIEWS]

    def item(i, like: fx.Node) -> fx.Node:
        cur = new
        if len(vals) > 1:
            with g.inserting_before(first):
                cur = g.create_node("call_function", operator.getitem, (new, i), name=f"heddle_{p.mm_g.name}_o{i}")
            created.append(cur)
            cur.meta["val"] = vals[i]
        want = _val(like)
        if dims(want) != dims(vals[i]):
            # the chain's own view to this shape (its size arguments may be symbolic nodes): the earliest one,
            # which precedes every reader of the value replaced
            src = min((n for n in views if dims(_val(n)) == dims(want)), key=lambda n: pos[n], default=None)
            if src is None:
                raise ValueError(f"no view in the chain gives {like.name}'s shape {dims(want)}")
            with g.inserting_before(src):
                v = g.create_node("call_function", aten.view.default, (cur, src.args[1]),
                                  name=f"heddle_{p.mm_g.name}_v{i}")
            created.append(v)
            with (fake_mode if fake_mode is not None else _Null()):
                v.meta["val"] = vals[i].view(want.shape)
            cur = v
        return cur

    try:  # every replacement value first: the graph changes only once they all exist
        kept = [(node, item(i, node)) for i, (_, node) in enumerate(exported, start=1)]
        result = item(0, p.mul)
    except Exception:
        for n in reversed(created):  # users before what they use: the graph as it was
            g.erase_node(n)
        raise
    inner = set(p.nodes)
    for node, value in kept:
        node.replace_all_uses_with(value, delete_user_cb=lambda u: u not in inner)
    p.mul.replace_all_uses_with(result)
    for node in reversed(p.nodes):
        if not node.users:
            g.erase_node(node)
    for node in p.looked_through:
        if not node.users and node.graph is g:
            g.erase_node(node)
    return spec.op_name(), p.summary(exported)


class _Null:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False
