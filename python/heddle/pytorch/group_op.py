"""A matmul group (2-4 matmuls reading the same A, docs/scheduling.md "Matmul groups") as ONE torch op, and
the graph surgery that puts it in place of the nodes it computes. Shared by the torch.compile backend's
group rewrites: dynamo_gated.py (SwiGLU `act(x W1^T) * (x W3^T)`) and dynamo_merge.py (q / k / v: matmuls
sharing their input, each member its own output).

Which rewrites a graph takes depends on the device its heddle ops run on (graph_target, group_rewrites: the
rule is C++'s TargetInfo::matmulGroup, _C.target_info(t)["matmul_group"]); options={"groups": False} turns
both off.

A spec (GatedSpec, MergeSpec) names the op (the name encodes the whole spec, so torch.ops.heddle registers it
from its name in a fresh process) and builds its fusion. The op: on CUDA the group kernel (mma.sync + cp.async,
compiled per target and M bucket on first use); on CPU the fusion in float32 with torch (the printed kernel
under HEDDLE_INTERPRET=1); autograd through the fusion (Kernel.op's formula).

replace_with_group(gm, ...) inserts the op before the first member matmul and rewires every replaced node to
one of its outputs (viewed back to the node's shape with a view of the member's own chain); when it cannot
finish, every node it made is erased again: the graph is as it was.
"""
from __future__ import annotations

import operator
import threading
from typing import Dict, List, Optional, Sequence, Set, Tuple

import torch
import torch.fx as fx

from .. import _C
from ..core import inputs
from ..core.errors import ScheduleError
from ..core.inputs import DTYPES, MatmulGeometry
from ..core.kernel import Kernel, _vec_for, plan_table, run_table
from .autograd import register_fusion_autograd
from .buckets import m_bucket
from .custom_ops import register_op, registering

aten = torch.ops.aten
_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)


class GroupOp:
    """One group signature: its fusion, torch op and kernels per (target, vec, M bucket). The fusion's inputs
    are A, then the `parts` B operands, then any epilogue operands; every output is [M, N]."""

    def __init__(self, spec, input_names: Sequence[str], parts: int):
        self.spec, self.names, self.parts = spec, list(input_names), parts
        self.fusion = spec.build_fusion()
        self._decls = [(t.name, t.dtype, t.shape) for t in self.fusion.inputs]
        self._mexpr = inputs.matmul_expr(self.fusion)
        self.kernels: Dict[tuple, Kernel] = {}
        self._lock = threading.Lock()
        self._plans = plan_table()  # call signature -> the launch plan of its CUDA calls (C++)
        self.op = register_op(spec.op_name(), self.names, self.run, self.fake, outputs=len(self.fusion.outputs))
        register_fusion_autograd(self.fusion, self.op)

    def kernel(self, target: str, vec_a: int, vec_b: int, m: int, rtc: bool = True) -> Kernel:
        key = (target, vec_a, vec_b, m_bucket(m), rtc)
        if _C.target_info(target)["matmul_group"] == "none":
            raise ScheduleError(
                f"heddle op {self.spec.op_name()}: target {target} has no lowering for a matmul group (the group "
                "kernel is built for mma.sync targets: sm_80, sm_90a, sm_100a); compile the model with "
                "torch.compile(model, backend='heddle', options={'groups': False}) so that its matmuls run as "
                "separate heddle ops")
        with self._lock:
            k = self.kernels.get(key)
            if k is None:
                fd = self.spec.build_fusion()
                if vec_a < 2 or vec_b < 2:
                    for t in fd.inputs[:2]:   # A and the first B: the group's caches
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
        vec_a, vec_b = _vec_for(tensors[0]), min(_vec_for(t) for t in tensors[1:1 + self.parts])
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
        inputs.same_device(self.spec.op_name(), self.names, tensors)
        g = MatmulGeometry(self._mexpr, {n: t for (n, _, _), t in zip(self._decls, tensors)})
        outs = tuple(tensors[0].new_empty(g.out_shape, dtype=getattr(torch, DTYPES[o.dtype]))
                     for o in self.fusion.outputs)
        return outs[0] if len(outs) == 1 else outs


def graph_target(gm: fx.GraphModule) -> Optional[str]:
    """The target a graph's heddle ops run on: None for a CPU graph (torch / the interpreter runs its ops),
    else the target of its CUDA (ROCm) device (heddle.core.runtime.target_for_device), "" when heddle has none."""
    devs = [v.device for n in gm.graph.nodes if n.op == "placeholder"
            for v in [_val(n)] if isinstance(v, torch.Tensor) and v.device.type == "cuda"]
    if not devs:
        return None
    from ..core.runtime import target_for_device
    try:
        return target_for_device(devs[0])
    except ScheduleError:
        return ""


def group_rewrites(target: Optional[str]) -> Tuple[bool, bool, str]:
    """(gated pairs?, merges?, why not) for a graph whose heddle ops run on `target` (None: CPU, both).
    C++ says how the target lowers a group (TargetInfo::matmulGroup):
      best    both (sm_80: a single matmul takes mma.sync + cp.async too)
      weaker  gated pairs only (sm_90a, sm_100a: the group kernel is mma.sync + cp.async, a single matmul gets
              TMA + wgmma / tcgen05). A merge would trade that pipeline for reading A once: q / k / v stay
              separate ops. A gated pair keeps its op: it stores act(g) * u once instead of g and u going
              through memory to a product kernel, and saves a kernel (unmeasured against the TMA pair).
      none    neither (AMD targets refuse a group: ScheduleError); every matmul gets its own op."""
    if target is None:
        return True, True, ""
    kind = _C.target_info(target)["matmul_group"] if target else "none"
    if kind == "best":
        return True, True, ""
    if kind == "weaker":
        return True, False, (f"no merged groups on {target}: a group runs mma.sync + cp.async, each matmul alone "
                             "TMA + its target's MMA")
    return False, False, f"no matmul groups on {target or 'this device'}: it has no lowering for them"


_ops: Dict[object, GroupOp] = {}
_ops_lock = threading.Lock()


def group_op(spec, input_names: Sequence[str], parts: int) -> GroupOp:
    """The op of `spec`, registered on first use (one per spec in the process)."""
    with _ops_lock:
        op = _ops.get(spec)
        if op is None:
            op = _ops[spec] = GroupOp(spec, input_names, parts)
        return op


def resolve_group(name: str, decode, make) -> bool:
    """Register torch.ops.heddle.<name> when decode(name) gives a spec whose canonical name it is (make(spec)
    registers the op); False if not."""
    spec = decode(name)
    if spec is None or spec.op_name() != name or spec.k <= 0 or spec.n <= 0 or name in registering:
        return False   # not canonical, or torch looking the name up while it is being registered
    make(spec)
    return True


def _val(n):
    return n.meta.get("val") if isinstance(n, fx.Node) else None


class _Null:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


def replace_with_group(gm: fx.GraphModule, target, args: List[fx.Node], members: List[fx.Node],
                       outputs: List[Tuple[fx.Node, List[fx.Node]]], inner: Set[fx.Node],
                       looked_through: List[fx.Node], fake_mode, name: str) -> None:
    """Put one call of `target(*args)` before the first of `members` (the matmul nodes) and make output i
    stand for outputs[i][0] (for every reader outside `inner`, the nodes the op computes), viewed back to its
    shape with a view node of outputs[i][1] (that node's chain) where the shapes differ. Then erase what is no
    longer read. Raises (with the graph as it was) when it cannot finish."""
    g = gm.graph
    pos = {n: i for i, n in enumerate(g.nodes)}
    first = min(members, key=lambda n: pos[n])   # every value the op replaces comes after it
    late = [a.name for a in args if pos[a] > pos[first]]
    if late:
        raise ValueError(f"{', '.join(late)} computed after {first.name}: the group op cannot go before it")
    with (fake_mode if fake_mode is not None else _Null()):
        val = target(*(_val(a) for a in args))
    vals = val if isinstance(val, tuple) else (val,)
    with g.inserting_before(first):
        new = g.create_node("call_function", target, tuple(args), name=name)
    new.meta["val"] = val
    new.meta.update({k: v for k, v in first.meta.items() if k in ("stack_trace", "nn_module_stack", "seq_nr")})
    created = [new]  # every node made here, in order: erased again if the rewrite cannot finish

    def dims(v):
        return [str(d) for d in v.shape]

    def item(i, like: fx.Node, chain: List[fx.Node]) -> fx.Node:
        cur = new
        if len(vals) > 1:
            with g.inserting_before(first):
                cur = g.create_node("call_function", operator.getitem, (new, i), name=f"{name}_o{i}")
            created.append(cur)
            cur.meta["val"] = vals[i]
        want = _val(like)
        if dims(want) != dims(vals[i]):
            # the chain's own view to this shape (its size arguments may be symbolic nodes): the earliest one,
            # which precedes every reader of the value replaced
            views = [n for n in chain if n.op == "call_function" and n.target in _VIEWS]
            src = min((n for n in views if dims(_val(n)) == dims(want)), key=lambda n: pos[n], default=None)
            if src is None:
                raise ValueError(f"no view in the chain gives {like.name}'s shape {dims(want)}")
            with g.inserting_before(src):
                v = g.create_node("call_function", aten.view.default, (cur, src.args[1]), name=f"{name}_v{i}")
            created.append(v)
            with (fake_mode if fake_mode is not None else _Null()):
                v.meta["val"] = vals[i].view(want.shape)
            cur = v
        return cur

    try:  # every replacement value first: the graph changes only once they all exist
        values = [(node, item(i, node, chain)) for i, (node, chain) in enumerate(outputs)]
    except Exception:
        for n in reversed(created):  # users before what they use: the graph as it was
            g.erase_node(n)
        raise
    for node, value in values:
        node.replace_all_uses_with(value, delete_user_cb=lambda u: u not in inner)
    order = sorted(inner, key=lambda n: pos[n])
    for node in reversed(order):
        if not node.users:
            g.erase_node(node)
    for node in looked_through:
        if not node.users and node.graph is g:
            g.erase_node(node)
