"""The graph rewrite behind heddle's torch.compile backend: matmul + epilogue chains -> heddle ops.

Input: an aten graph after aot_autograd (forward, backward or inference), traced with inductor's
decompositions except for the ops listed in WITHHELD (so the matmuls and activations are still
visible as single nodes). Matmul groups first (one op each): gated pairs (dynamo_gated.py), then matmuls
sharing their input, q / k / v (dynamo_merge.py). Then for every other matmul node (aten.mm, aten.addmm,
aten.bmm) it

  1. normalises the operands: transposes of the last two axes (aten.permute / t / transpose)
     become trans_a / trans_b, so the operands heddle reads have unit last stride;
  2. walks the chain of pointwise ops that consume *only* the running result:
       scale (mul/div by a number)  ->  bias add ([N] or [1, N]; and / or a per-row [M, 1] bias)
       ->  scale (the bias scaled too)
       ->  one activation (relu, gelu, gelu-tanh, silu, sigmoid, tanh; also written out as several
           ops: heddle.pytorch.dynamo_patterns)  ->  residual add (same shape)
     with casts and clones (identity) anywhere in between; a pre-activation that the graph also returns
     (training: saved for the backward) before a one-node activation becomes the op's second output; a
     reshape [B*S, N] -> [B, S, N] when the matmul is a Linear on a 3-D input (the operand becomes
     batched instead), and a reshape of a bmm result to more leading axes followed by scales /
     activation / casts (re-applied after the op);
     operands stored transposed without a transpose node are read from their strides;
  3. replaces the matmul and the chain with one call of the heddle op for that signature
     (heddle.pytorch.matmul.fused_matmul_op: torch.ops.heddle.mm_<dtype>_<layout>_<signature>.default).

Every call_function node gets a decision with a reason (dynamo_report.GraphReport); the backend prints it
under HEDDLE_DUMP=partition and heddle.dynamo.explain returns it. Nothing here depends on which compiler runs
the rest of the graph; decompose_leftovers() re-applies the withheld decompositions to the nodes that
were not fused, so inductor sees the graph it would have seen without heddle.

Semantics: the fused op computes the chain in float32 and rounds once, at the end; the eager graph
rounds after every op in the operand dtype. Results agree within the dtype's tolerance.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.fx as fx

from ..core import torch_compat as compat
from .dynamo_epilogue import Chain, Reject, rewrite_each
from .dynamo_patterns import ACTIVATION_OPS, DTYPE_CODES as _DT, absorb_cast_or_clone, activation_of, match_activation
from .dynamo_report import MATMUL_NAMES, MATMULS, OTHER_MATMULS, Decision, Group, GraphReport, op_label

aten = torch.ops.aten

# PyTorch's fused eval-mode fast paths (nn.TransformerEncoderLayer / nn.MultiheadAttention under no_grad)
_FASTPATH = ("_transformer_encoder_layer_fwd", "_native_multi_head_attention")
_TRANSPOSES = (aten.permute.default, aten.t.default, aten.transpose.int)
_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)
_ACTS = ACTIVATION_OPS

# Decompositions withheld from aot_autograd so the rewrite sees these ops whole (inductor decomposes
# gelu and silu into erf/exp chains, and tiny matmuls into pointwise code).
WITHHELD = (aten.gelu.default, aten.silu.default, aten.mm.default, aten.addmm.default, aten.bmm.default)

# stages of the epilogue, in heddle's order: act(alpha * mm + bias) + residual, then the cast
_MM, _BIAS, _ACT, _RES = 0, 1, 2, 3


# --------------------------------------------------------------------------------------------------
# helpers on fake values (no guards: statically_known_true never specialises a symbol)
# --------------------------------------------------------------------------------------------------
def _val(n) -> Any:
    return n.meta.get("val") if isinstance(n, fx.Node) else None


def _known_eq(a, b) -> bool:
    try:
        return compat.statically_known_true(a == b)
    except Exception:
        return False


def _same_shape(a, b) -> bool:
    return len(a) == len(b) and all(_known_eq(x, y) for x, y in zip(a, b))


def _static_int(x) -> Optional[int]:
    if isinstance(x, int):
        return x
    if isinstance(x, torch.SymInt) and compat.is_concrete_int(x):
        return int(x)
    return None


def _rows_contiguous(v) -> bool:
    return isinstance(v, torch.Tensor) and (_known_eq(v.stride(-1), 1) or _known_eq(v.shape[-1], 1))


def _cols_contiguous(v) -> bool:
    return isinstance(v, torch.Tensor) and v.dim() >= 2 and (_known_eq(v.stride(-2), 1) or _known_eq(v.shape[-2], 1))


def _fmt_shape(v) -> str:
    return "[" + ", ".join(str(s) for s in v.shape) + "]" if isinstance(v, torch.Tensor) else "?"


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _transpose_input(n: fx.Node, rank: int) -> Optional[fx.Node]:
    """The input of `n` when `n` swaps the last two axes of a rank-`rank` tensor, else None."""
    if n.op != "call_function" or n.target not in _TRANSPOSES or not isinstance(n.args[0], fx.Node):
        return None
    if n.target is aten.t.default:
        return n.args[0] if rank == 2 else None
    if n.target is aten.permute.default:
        want = [1, 0] if rank == 2 else [0, 2, 1]
        return n.args[0] if [d % rank for d in n.args[1]] == want else None
    d0, d1 = sorted(d % rank for d in n.args[1:3])
    return n.args[0] if (d0, d1) == (rank - 2, rank - 1) else None


def _operand(n: fx.Node, rank: int) -> Tuple[Optional[fx.Node], bool, List[fx.Node]]:
    """(node heddle reads, transposed?, transposes looked through) — the first node on the chain of
    last-two-axes transposes whose rows are contiguous; (None, ...) when there is none."""
    cur, trans, through = n, False, []
    for _ in range(4):
        if _rows_contiguous(_val(cur)):
            return cur, trans, through
        nxt = _transpose_input(cur, rank)
        if nxt is None:
            return None, False, through
        through.append(cur)
        cur, trans = nxt, not trans
    return None, False, through


# --------------------------------------------------------------------------------------------------
# planning one group
# --------------------------------------------------------------------------------------------------
_Reject = Reject   # the node stays with torch (dynamo_epilogue.rewrite_each records the reason)


@dataclass
class _Plan:
    root: fx.Node
    a: fx.Node
    b: fx.Node
    trans_a: bool
    trans_b: bool
    batched: bool
    batched_b: bool
    k: int
    n: int
    alpha: float = 1.0
    bias: Optional[fx.Node] = None
    residual: Optional[fx.Node] = None
    activation: Optional[str] = None
    stage: int = _MM
    chain: List[fx.Node] = field(default_factory=list)   # absorbed nodes after the root, in order
    a_view: Optional[fx.Node] = None                      # view [B*S, K] of a 3-D input (Linear)
    post_view: Optional[fx.Node] = None                   # [B*H, M, N] -> [B, H, M, N] of a bmm result
    strided: List[str] = field(default_factory=list)      # operands read transposed from their strides
    bias_scale: float = 1.0                               # a scale after the bias, applied to it in the graph
    saved: Optional[fx.Node] = None                       # the pre-activation the graph also returns (2nd output)
    row_bias: Optional[fx.Node] = None                    # a per-row bias [M, 1] (or [B, M, 1])
    looked_through: List[fx.Node] = field(default_factory=list)
    steps: List[str] = field(default_factory=list)
    stop: Optional[Tuple[fx.Node, str]] = None            # the node the chain stopped at, and why

    @property
    def final(self) -> fx.Node:
        return self.chain[-1] if self.chain else self.root


def _plan(root: fx.Node) -> _Plan:
    kind = MATMULS[root.target]
    rank = 3 if kind == "bmm" else 2
    if kind == "addmm":
        bias_arg, a_arg, b_arg = root.args[:3]
        beta, alpha = root.kwargs.get("beta", 1), root.kwargs.get("alpha", 1)
        if not (_is_number(beta) and beta == 1):
            raise _Reject(f"addmm with beta={beta}: heddle adds the bias unscaled")
        if not _is_number(alpha):
            raise _Reject(f"addmm with a non-constant alpha ({alpha})")
    else:
        bias_arg, (a_arg, b_arg), alpha = None, root.args[:2], 1
    va, vb, vout = _val(a_arg), _val(b_arg), _val(root)
    if not all(isinstance(v, torch.Tensor) for v in (va, vb, vout)):
        raise _Reject("operands carry no fake tensor metadata")
    if va.dtype not in (torch.float16, torch.bfloat16) or vb.dtype != va.dtype:
        raise _Reject(f"operands are {va.dtype} and {vb.dtype}: heddle fuses float16 / bfloat16 matmuls "
                      "(float32 matmuls stay with torch)")
    if va.device.type not in ("cpu", "cuda"):
        raise _Reject(f"operands are on {va.device}: heddle runs on CUDA (and computes a reference on CPU)")
    a, ta, thr_a = _operand(a_arg, rank)
    b, tb, thr_b = _operand(b_arg, rank)
    synth = []
    for name, arg, v, found in (("a", a_arg, va, a), ("b", b_arg, vb, b)):
        if found is not None:
            continue
        if not _cols_contiguous(v):
            raise _Reject(f"operand {name} {_fmt_shape(v)} has strides {tuple(v.stride())}: neither its rows "
                          "(last stride) nor its columns (second-to-last stride) are contiguous, and heddle reads "
                          "one of the two with unit stride; make it .contiguous() first")
        synth.append(name)   # stored transposed without a transpose node: read the strides
    if "a" in synth:
        a, ta, thr_a = a_arg, True, []
    if "b" in synth:
        b, tb, thr_b = b_arg, True, []
    sa, sb = _val(a).shape, _val(b).shape
    if synth:  # the shapes heddle reads are those of the transposed views
        sa = (*sa[:-2], sa[-1], sa[-2]) if "a" in synth else sa
        sb = (*sb[:-2], sb[-1], sb[-2]) if "b" in synth else sb
    k = _static_int(sa[-2] if ta else sa[-1])
    n = _static_int(sb[-2] if tb else sb[-1])
    if k is None:
        raise _Reject(f"the reduction size K = {sa[-2] if ta else sa[-1]} is symbolic (e.g. a weight gradient "
                      "summing over a dynamic batch): heddle compiles one kernel per K")
    if n is None:
        raise _Reject(f"N = {sb[-2] if tb else sb[-1]} is symbolic: heddle compiles one kernel per N")
    p = _Plan(root=root, a=a, b=b, trans_a=ta, trans_b=tb, batched=rank == 3, batched_b=rank == 3, k=k, n=n,
              alpha=float(alpha), looked_through=thr_a + thr_b, strided=synth)
    p.steps.append(f"{kind}({'a^T' if ta else 'a'}, {'b^T' if tb else 'b'})")
    if p.alpha != 1.0:
        p.steps.append(f"* {p.alpha:g}")
    if bias_arg is not None:
        vbias = _val(bias_arg)
        if not isinstance(vbias, torch.Tensor) or vbias.dtype not in _DT:
            raise _Reject("addmm input is not a float16/bfloat16/float32 tensor")
        if _bias_shape(vbias, p.n):
            p.bias, p.stage = bias_arg, _BIAS
            p.steps.append("+ bias")
        elif _same_shape(vbias.shape, vout.shape):
            p.residual, p.stage = bias_arg, _RES
            p.steps.append("+ residual")
        else:
            raise _Reject(f"addmm input {_fmt_shape(vbias)} is neither a row bias [{p.n}] nor a full "
                          f"{_fmt_shape(vout)} residual")
    _walk(p)
    return p


def _bias_shape(v, n) -> bool:
    return (v.dim() == 1 and _known_eq(v.shape[0], n)) or \
        (v.dim() == 2 and _known_eq(v.shape[0], 1) and _known_eq(v.shape[1], n))


def _walk(p: _Plan) -> None:
    """Absorb the chain of single-consumer pointwise ops after the matmul; where it stops, an
    activation written out as several ops (dynamo_patterns.match_activation) may continue it."""
    cur = p.root
    while True:
        users = list(cur.users)
        if len(users) == 1 and users[0].op == "call_function":
            why = _absorb(p, cur, users[0])
            if why is None:
                p.chain.append(users[0])
                cur = users[0]
                continue
            stop = (users[0], why)
        elif _keeps_pre_activation(p, cur, users):
            p.saved = cur
            p.steps.append(f"(keeps {cur.name} as a second output)")
            cur = p.chain[-1]
            continue
        elif any(u.op == "output" for u in users):
            why = "is a graph output (returned, or saved for the backward pass)"
            if len(users) > 1:
                why += f" and has {len(users) - 1} other user(s)"
            stop = (cur, f"{cur.name} {why}")
        else:
            why = f"has {len(users)} users ({', '.join(u.name for u in users)})" if users else "has no users"
            stop = (cur, f"{cur.name} {why}")
        region = match_activation(cur) if p.stage < _ACT and users else None
        if region is None:
            p.stop = stop
            if p.post_view is not None and p.chain[-1] is p.post_view:  # nothing gained: leave the view
                p.chain.pop()
                p.steps.pop()
                p.stop = (p.post_view, f"{p.post_view.name} reshapes the batched result to "
                          f"{_fmt_shape(_val(p.post_view))} and is then read by {stop[0].name} "
                          f"({op_label(stop[0])}): not a scale, activation or cast")
                p.post_view = None
            return
        p.activation, p.stage = region[0], _ACT
        p.steps.append(f"-> {region[0]} (written out: {len(region[1])} ops)")
        p.chain.extend(region[1])
        cur = region[1][-1]


def _row_bias_shape(v, vcur) -> bool:
    """[M, 1] against a [M, N] result ([B, M, 1] against [B, M, N]), N > 1."""
    return v.dim() == vcur.dim() and v.dim() in (2, 3) and _known_eq(v.shape[-1], 1) \
        and not _known_eq(vcur.shape[-1], 1) and _same_shape(v.shape[:-1], vcur.shape[:-1])


def _keeps_pre_activation(p: _Plan, cur: fx.Node, users: List[fx.Node]) -> bool:
    """Training: `cur` (alpha * mm + bias) is returned by the graph (saved for the backward) and otherwise
    read by one activation node only (through the [B*S, N] -> [B, S, N] view of a Linear on a 3-D input).
    Absorb them; `cur` becomes the op's second output (viewed back to its shape in _apply)."""
    inner = [u for u in users if u.op != "output"]
    if p.saved is not None or p.stage >= _ACT or p.post_view is not None or len(inner) != 1 \
            or len(inner) == len(users) or inner[0].op != "call_function":
        return False
    v, path = _val(cur), [inner[0]]
    if path[0].target in _VIEWS and not p.batched and len(path[0].users) == 1:
        path.append(next(iter(path[0].users)))
    if not isinstance(v, torch.Tensor) or v.dtype not in _DT or path[-1].op != "call_function" \
            or path[-1].target not in _ACTS:
        return False
    prev = cur
    for u in path:
        if _absorb(p, prev, u) is not None:
            if len(p.chain) and p.chain[-1] is path[0]:  # the view went in, the activation did not: give up
                raise _Reject(f"internal: {path[-1].name} after {path[0].name} was not absorbed")
            return False
        p.chain.append(u)
        prev = u
    return True


def _absorb(p: _Plan, cur: fx.Node, u: fx.Node) -> Optional[str]:
    """Absorb `u` (the only user of `cur`) into the plan; the reason why not, else None."""
    t = u.target
    vcur, vu = _val(cur), _val(u)
    done, why = absorb_cast_or_clone(u, p.steps)
    if done:
        return why
    if t in _VIEWS:
        return _absorb_view(p, cur, u)
    if p.post_view is not None and t is not aten.mul.Tensor and t is not aten.div.Tensor and t not in _ACTS:
        return (f"{op_label(u)} after the reshape of the batched result to {_fmt_shape(_val(p.post_view))}: "
                "after such a reshape heddle absorbs scales, activations and casts only")
    if t in (aten.mul.Tensor, aten.div.Tensor):
        other = u.args[1] if u.args[0] is cur else u.args[0]
        if t is aten.div.Tensor and u.args[0] is not cur:
            return "dividing a number by the matmul result is not a heddle epilogue"
        if isinstance(other, fx.Node):
            return (f"{'multiplying' if t is aten.mul.Tensor else 'dividing'} by a tensor ({other.name}, e.g. "
                    "gating) is not a heddle epilogue")
        if not _is_number(other):
            return f"scale by {other!r} is not a constant number"
        s = float(other) if t is aten.mul.Tensor else 1.0 / float(other)
        if p.row_bias is not None:
            return "a scale after the per-row bias: heddle scales the matmul before it"
        if p.stage == _BIAS:   # s * (mm + bias) = (s * alpha) * mm + (s * bias): the bias is scaled in the graph
            p.alpha *= s
            p.bias_scale *= s
            p.steps.append(f"* {s:g} (bias scaled too)")
            return None
        if p.stage != _MM:
            return "a scale after the activation / residual: heddle scales the matmul before them"
        p.alpha *= s
        p.steps.append(f"* {s:g}")
        return None
    if t is aten.add.Tensor:
        if u.kwargs.get("alpha", 1) != 1:
            return "add with alpha != 1"
        if u.args[0] is cur and u.args[1] is cur:
            return "adds the result to itself"
        other = u.args[1] if u.args[0] is cur else u.args[0]
        if not isinstance(other, fx.Node):
            return f"adding a scalar ({other!r}) is not a heddle epilogue"
        vo = _val(other)
        if not isinstance(vo, torch.Tensor) or vo.dtype not in _DT:
            return f"{other.name} is not a float16/bfloat16/float32 tensor"
        if not _same_shape(vu.shape, vcur.shape):
            return f"the add broadcasts the result {_fmt_shape(vcur)} to {_fmt_shape(vu)}"
        if _bias_shape(vo, p.n) and vo.dim() <= 2:
            if p.bias is not None or p.stage > _BIAS:   # (a per-row bias may come first)
                after = "another bias" if p.bias is not None else "the activation/residual"
                return f"a row-vector add after {after}: heddle adds one bias, before the activation"
            p.bias, p.stage = other, _BIAS
            p.steps.append("+ bias")
            return None
        if _row_bias_shape(vo, vcur) and p.post_view is None:
            if p.stage > _BIAS or p.row_bias is not None:
                return ("a per-row [M, 1] add after " + ("another one" if p.row_bias is not None else
                        "the activation/residual") + ": heddle adds one per-row bias, before the activation")
            p.row_bias, p.stage = other, _BIAS
            p.steps.append("+ row bias")
            return None
        if _same_shape(vo.shape, vcur.shape):
            if p.stage >= _RES:
                return "a second residual add"
            p.residual, p.stage = other, _RES
            p.steps.append("+ residual")
            return None
        return f"adds {other.name} {_fmt_shape(vo)}: neither a row bias [{p.n}] nor a full-shape residual"
    if t in _ACTS:
        act = activation_of(u)
        if p.stage >= _ACT:
            return f"{act} after " + ("another activation" if p.stage == _ACT else "the residual add")
        p.activation, p.stage = act, _ACT
        p.steps.append(f"-> {act}")
        return None
    if t in _TRANSPOSES or t in (aten.expand.default, aten.slice.Tensor, aten.select.int, aten.alias.default):
        return f"{op_label(u)} is a view of the result: it stays outside the heddle op, reading its output"
    return f"{op_label(u)} is not a heddle epilogue op"


def _absorb_view(p: _Plan, cur: fx.Node, u: fx.Node) -> Optional[str]:
    """[B*S, N] -> [B, S, N] after a Linear on a 3-D input: read the 3-D input as a batched operand."""
    vu = _val(u)
    if p.batched and p.a_view is None and p.post_view is None and vu.dim() >= 3 and p.stage == _MM \
            and _same_shape(vu.shape[-2:], _val(cur).shape[-2:]):
        p.post_view = u   # a 4-D matmul's result: scales / activations / casts may follow (re-viewed after)
        p.steps.append(f"(viewed as {_fmt_shape(vu)})")
        return None
    if p.batched or p.a_view is not None:
        return f"reshape of a batched result to {_fmt_shape(vu)}"
    if vu.dim() != 3 or not _known_eq(vu.shape[-1], p.n):
        return f"reshape to {_fmt_shape(vu)}: only [B*S, N] -> [B, S, N] is absorbed"
    if p.trans_a or p.a.op != "call_function" or p.a.target not in _VIEWS:
        return f"reshape to {_fmt_shape(vu)}: operand a is not a reshaped 3-D tensor"
    x = p.a.args[0]
    vx = _val(x)
    if not isinstance(vx, torch.Tensor) or vx.dim() != 3 or not _rows_contiguous(vx) \
            or not _same_shape(vx.shape[:2], vu.shape[:2]):
        return f"reshape to {_fmt_shape(vu)} does not match operand a's 3-D source {_fmt_shape(vx)}"
    if p.residual is not None:
        return "reshape after a 2-D residual add"
    if p.row_bias is not None:
        return "reshape after a 2-D per-row bias add"
    p.a_view, p.a, p.batched = p.a, x, True
    p.steps.append("(batched over the 3-D input)")
    return None


# --------------------------------------------------------------------------------------------------
# applying
# --------------------------------------------------------------------------------------------------
def _spec(p: _Plan, out_dtype):
    from .matmul import MatmulSpec
    vb, vr, vrow = _val(p.bias), _val(p.residual), _val(p.row_bias)
    return MatmulSpec(dtype=_DT[_val(p.a).dtype], batched=p.batched, batched_b=p.batched_b, k=p.k, n=p.n,
                      trans_a=p.trans_a, trans_b=p.trans_b,
                      bias=None if vb is None else (_DT[vb.dtype], vb.dim()),
                      residual=None if vr is None else (_DT[vr.dtype], vr.dim()),
                      activation=p.activation, alpha=None if p.alpha == 1.0 else p.alpha,
                      out_dtype=_DT[out_dtype], saved=None if p.saved is None else _DT[_val(p.saved).dtype],
                      row_bias=None if vrow is None else (_DT[vrow.dtype], vrow.dim()))


def _apply(gm: fx.GraphModule, p: _Plan, fake_mode) -> str:
    from .matmul import fused_matmul_op
    final = p.final
    vfinal = _val(final)
    spec = _spec(p, vfinal.dtype)
    fused_matmul_op(spec).op  # registered now: the graph calls it
    name = spec.op_name()
    target = getattr(torch.ops.heddle, name).default
    g = gm.graph
    ops = [p.a, p.b]
    for i, which in enumerate(("a", "b")):
        if which in p.strided:   # stored transposed: hand heddle the transposed view (contiguous rows)
            d = _val(ops[i]).dim()   # a permute: inductor lowers it (its graph has no transpose.int left)
            perm = list(range(d - 2)) + [d - 1, d - 2]
            with g.inserting_before(final):
                t = g.create_node("call_function", aten.permute.default, (ops[i], perm),
                                  name=f"heddle_{p.root.name}_{which}T")
            with (fake_mode if fake_mode is not None else _nullcontext()):
                t.meta["val"] = _val(ops[i]).permute(perm)
            ops[i] = t
    bias = p.bias
    if bias is not None and p.bias_scale != 1.0:
        with g.inserting_before(final):
            bias = g.create_node("call_function", aten.mul.Tensor, (p.bias, p.bias_scale),
                                 name=f"heddle_{p.root.name}_bias")
        with (fake_mode if fake_mode is not None else _nullcontext()):
            bias.meta["val"] = aten.mul.Tensor(_val(p.bias), p.bias_scale)
    args = ops + [t for t in (bias, p.row_bias, p.residual) if t is not None]   # the fusion's input order
    vals = [_val(x) for x in args]
    with (fake_mode if fake_mode is not None else _nullcontext()):
        mm_val = target(*vals)
        out_val = mm_val if p.saved is None else mm_val[0]
        if p.post_view is not None:
            out_val = aten.view.default(out_val, list(vfinal.shape))
    bad_saved = p.saved is not None and p.a_view is None and not _same_shape(mm_val[1].shape, _val(p.saved).shape)
    if out_val.dtype != vfinal.dtype or not _same_shape(out_val.shape, vfinal.shape) or bad_saved:
        for n in [a for a in args if a.name.startswith(f"heddle_{p.root.name}_")]:
            g.erase_node(n)   # the transposed / scaled operands made above
        raise _Reject(f"internal: heddle op gives {_fmt_shape(out_val)} {out_val.dtype}, the chain "
                      f"{_fmt_shape(vfinal)} {vfinal.dtype}")
    with g.inserting_before(final):
        new = g.create_node("call_function", target, tuple(args), name=f"heddle_{p.root.name}")
    new.meta.update({k: v for k, v in p.root.meta.items() if k in ("stack_trace", "nn_module_stack", "source_fn_stack",
                                                                    "seq_nr", "original_aten", "from_node")})
    new.meta["val"] = mm_val
    if p.saved is not None:  # (output, pre-activation): the graph's other readers of the latter take item 1
        import operator
        with g.inserting_before(final):
            pre = g.create_node("call_function", operator.getitem, (new, 1), name=f"heddle_{p.root.name}_pre")
            new = g.create_node("call_function", operator.getitem, (new, 0), name=f"heddle_{p.root.name}_out")
        pre.meta["val"], new.meta["val"] = mm_val[1], mm_val[0]
        absorbed = set(p.chain)
        if p.a_view is not None:  # the kept value is the 2-D [B*S, N] matmul result: view it back
            with g.inserting_before(final):
                pre = g.create_node("call_function", aten.view.default, (pre, [p.a_view.args[1][0], p.n]),
                                    name=f"heddle_{p.root.name}_pre2d")
            with (fake_mode if fake_mode is not None else _nullcontext()):
                pre.meta["val"] = mm_val[1].reshape(_val(p.saved).shape)
        p.saved.replace_all_uses_with(pre, delete_user_cb=lambda u: u not in absorbed)
    if p.post_view is not None:
        with g.inserting_before(final):
            new = g.create_node("call_function", aten.view.default, (new, p.post_view.args[1]),
                                name=f"heddle_{p.root.name}_view")
        new.meta["val"] = out_val
    final.replace_all_uses_with(new)
    for node in reversed([p.root] + p.chain):
        if not node.users:
            g.erase_node(node)
    for node in [p.a_view] + p.looked_through:
        if node is not None and not node.users and node.graph is g:
            try:
                g.erase_node(node)
            except Exception:
                pass
    return name


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


def _fake_mode(gm: fx.GraphModule):
    vals = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    return compat.detect_fake_mode([v for v in vals if isinstance(v, torch.Tensor)])


_graph_counter = [0]


def fuse(gm: fx.GraphModule, kind: str, enabled: bool = True, groups: bool = True) -> GraphReport:
    """Rewrite `gm` in place; return the decisions for every call_function node. groups=False: no matmul groups."""
    _graph_counter[0] += 1
    report = GraphReport(kind=kind, graph=_graph_counter[0])
    fake_mode = _fake_mode(gm)
    why: Dict[str, Decision] = {}
    if enabled:  # matmul groups first: gated pairs (dynamo_gated.py), q / k / v (dynamo_merge.py)
        _fuse_groups(gm, fake_mode, report, why, groups)
    roots = [n for n in gm.graph.nodes if n.op == "call_function" and n.target in MATMULS]
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target in OTHER_MATMULS:
            label = OTHER_MATMULS[n.target]
            reason = (f"PyTorch's fused fast path aten.{label} hides its matmuls from heddle; turn it off with "
                      "torch.backends.mha.set_fastpath_enabled(False) to fuse them") if label in _FASTPATH \
                else f"heddle has no pattern for aten.{label}"
            why[n.name] = Decision(n.name, label, "not fused", reason)
    from .dynamo_scaled import fuse_scaled, is_scaled_mm   # FP8: torch._scaled_mm / F.scaled_mm and their epilogue
    if any(is_scaled_mm(n) for n in gm.graph.nodes):
        from .group_op import graph_target
        fuse_scaled(gm, fake_mode, report, why, enabled, graph_target(gm))
    from .dynamo_grouped import fuse_grouped, is_grouped_mm   # MoE: torch._grouped_mm and its epilogue
    if any(is_grouped_mm(n) for n in gm.graph.nodes):
        from .group_op import graph_target
        fuse_grouped(gm, fake_mode, report, why, enabled, graph_target(gm))
    def rewrite(root: fx.Node):
        p = _plan(root)
        op = _apply(gm, p, fake_mode)
        stop_node, stop = p.stop if p.stop else (None, "")
        return Chain(root, chain=p.chain, steps=p.steps, stop=stop, stop_node=stop_node), op

    rewrite_each(roots, lambda root: MATMULS[root.target], rewrite, report, why, enabled)
    gm.graph.lint()
    gm.recompile()
    # every call_function node of the original graph gets a line
    seen = set()
    for d in why.values():
        report.decisions.append(d)
        seen.add(d.node)
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.name not in seen and not _is_heddle(n):
            report.decisions.append(Decision(n.name, op_label(n), "other", "not matmul-like"))
    return report


def _fuse_groups(gm: fx.GraphModule, fake_mode, report: GraphReport, why: Dict[str, Decision], on: bool) -> None:
    """Matmul groups (one heddle op for 2-4 matmuls reading the same A): SwiGLU-style gated pairs
    (dynamo_gated.py), then q / k / v (dynamo_merge.py): those the graph's target lowers (group_op.group_rewrites)."""
    from . import dynamo_gated, dynamo_merge, group_op
    gated, merged, note = group_op.group_rewrites(group_op.graph_target(gm)) if on else \
        (False, False, "no matmul groups (options={'groups': False})")
    report.notes += [note] if note else []

    import warnings

    def plan(root):   # a matmul's own chain; a rewrite bug in it is reported by the per-matmul pass
        try:
            return _plan(root)
        except Exception:
            return None
    for what, find, apply in (
            ("the gated pair", lambda: dynamo_gated.find_gated(gm, _operand, _static_int) if gated else [],
             dynamo_gated.apply_gated),
            ("the merged group", lambda: dynamo_merge.find_merges(gm, plan) if merged else [], dynamo_merge.apply_merge)):
        try:
            found = find()
        except Exception as e:  # never break the user's model over a rewrite bug: the matmuls go on alone
            warnings.warn(f"heddle: could not look for {what}s: {type(e).__name__}: {e}; matmuls are fused one by one")
            continue
        for p in found:
            names, labels = [n.name for n in p.nodes], [op_label(n) for n in p.nodes]
            try:
                op, summary = apply(gm, p, fake_mode)
            except Exception as e:  # never break the user's model over a rewrite bug: the matmuls go on alone
                mms = ", ".join(n for n, lb in zip(names, labels) if lb in MATMUL_NAMES)
                warnings.warn(f"heddle: could not fuse {what} {mms}: {type(e).__name__}: {e}; "
                              "they are fused one by one")
                continue
            gi = len(report.groups)
            report.groups.append(Group(gi, names[0], names, op, summary))
            for nm, lb in zip(names, labels):
                first = nm == names[0]
                why[nm] = Decision(nm, lb, "fused" if first else "absorbed", f"-> {op}" if first else
                                   f"into group {gi} ({op})", gi)


def _is_heddle(n: fx.Node) -> bool:
    t = n.target
    return isinstance(t, compat.op_overload_type()) and t.namespace == "heddle"


# --------------------------------------------------------------------------------------------------
# re-decomposing what was withheld and not fused (inductor path)
# --------------------------------------------------------------------------------------------------
def decompose_leftovers(gm: fx.GraphModule, table) -> int:
    """Replace each remaining WITHHELD node by its decomposition from `table` (inductor's), traced with
    make_fx on the node's fake values. Returns how many nodes were decomposed; a node whose
    decomposition cannot be traced is left as is (inductor then calls the aten kernel)."""
    fake_mode = _fake_mode(gm)
    g, count = gm.graph, 0
    for node in list(g.nodes):
        if node.op != "call_function" or node.target not in WITHHELD or node.target not in table:
            continue
        decomp = table[node.target]
        flat, spec = compat.tree_flatten((node.args, node.kwargs))
        pos = [i for i, x in enumerate(flat) if isinstance(x, fx.Node)]
        vals = [_val(flat[i]) for i in pos]
        if not all(isinstance(v, torch.Tensor) for v in vals):
            continue
        target = node.target

        def fn(*xs, flat=flat, pos=pos, spec=spec, decomp=decomp, target=target):
            f = list(flat)
            for i, x in zip(pos, xs):
                f[i] = x
            args, kwargs = compat.tree_unflatten(f, spec)
            out = decomp(*args, **kwargs)
            return target(*args, **kwargs) if out is NotImplemented else out

        try:
            with (fake_mode if fake_mode is not None else _nullcontext()):
                sub = compat.make_fx(fn, decomposition_table=table, tracing_mode="real")(*vals)
        except Exception:
            continue
        if any(s.op == "get_attr" for s in sub.graph.nodes):
            continue  # constants would need copying; leave this node to inductor's fallback
        env: Dict[fx.Node, Any] = {}
        phs = [s for s in sub.graph.nodes if s.op == "placeholder"]
        for ph, i in zip(phs, pos):
            env[ph] = flat[i]
        out = None
        with g.inserting_before(node):
            for s in sub.graph.nodes:
                if s.op == "placeholder":
                    continue
                if s.op == "output":
                    out = fx.map_arg(s.args[0], lambda x: env[x])
                    continue
                c = g.node_copy(s, lambda x: env[x])
                for key in ("stack_trace", "nn_module_stack", "seq_nr", "original_aten", "from_node"):
                    if key in node.meta:
                        c.meta.setdefault(key, node.meta[key])
                env[s] = c
        if not isinstance(out, fx.Node):
            continue
        node.replace_all_uses_with(out)
        g.erase_node(node)
        count += 1
    if count:
        g.lint()
        gm.recompile()
    return count
