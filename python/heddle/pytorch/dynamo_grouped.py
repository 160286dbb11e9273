"""The torch.compile backend's rewrite of grouped GEMMs (mixture-of-experts layers) into heddle.grouped_mm ops.

    _grouped_mm(x [T, K], w [E, K, N], offs [E] int32)       (torch._grouped_mm, F.grouped_mm)
        -> bias add ([N])  -> one activation  -> casts
    becomes one heddle grouped fusion (torch.ops.heddle.gmm_<signature>.default: heddle/pytorch/grouped.py)

The operands must pass heddle.grouped_mm's checks (grouped.grouped_spec, run on the fake tensors: x and w
f16 / bf16 of one dtype, x's rows contiguous, w's N or K axis contiguous: a transposed view of an [E, N, K]
weight is read as stored, static K and N). What heddle has no grouped kernel for keeps torch's op, and its
decision says why (heddle.dynamo.explain): a 3-D x (batched) or a 2-D w (the K-grouped product of a weight
gradient, x^T @ dy), no offs, torch's own bias argument, an out_dtype other than x's, a graph whose target has
no mma.sync (the grouped kernel's instruction: AMD). Semantics as dynamo_fuse: the chain is computed in float32
and rounded once.
"""
from __future__ import annotations

import contextlib
from typing import Dict, Optional

import torch
import torch.fx as fx

from .. import _C
from ..core.errors import InputError
from .dynamo_epilogue import Chain, Reject, rewrite_each, val, walk
from .dynamo_report import Decision, GraphReport

aten = torch.ops.aten
LABEL = "_grouped_mm"


def is_grouped_mm(n: fx.Node) -> bool:
    return n.op == "call_function" and n.target is aten._grouped_mm.default


def _operands(root: fx.Node, target: Optional[str]):
    """(x, w, offs) of a _grouped_mm heddle's grouped kernel takes; Reject with the reason otherwise."""
    if target == "":
        raise Reject("heddle has no target for this graph's device")
    if target is not None and "mma.sync" not in _C.target_info(target)["mma"]:
        raise Reject(f"target {target} has no mma.sync, the grouped kernel's instruction (docs/grouped.md): "
                     "torch's _grouped_mm runs it")
    got = dict(zip([a.name for a in root.target._schema.arguments], root.args))
    got.update(root.kwargs)
    x, w, offs = got.get("self"), got.get("mat2"), got.get("offs")
    vx, vw = val(x), val(w)
    if not isinstance(vx, torch.Tensor) or not isinstance(vw, torch.Tensor):
        raise Reject("x or w carries no fake tensor metadata")
    if vx.dim() != 2 or vw.dim() != 3:
        kind = {(3, 3): "a batched product (3-D x)", (2, 2): "a K-grouped product (2-D w: x^T @ dy, a weight "
                "gradient)", (3, 2): "a 3-D x with a 2-D w"}.get((vx.dim(), vw.dim()), "another layout")
        raise Reject(f"x is {vx.dim()}-D and w {vw.dim()}-D: {kind}; heddle's grouped kernel takes a 2-D x "
                     "[T, K] (tokens sorted by expert) and a 3-D w [E, K, N]")
    if offs is None:
        raise Reject("no offs: heddle's grouped kernel takes the group ends")
    if got.get("bias") is not None:
        raise Reject("torch's bias argument of _grouped_mm: heddle takes a bias add after it")
    if got.get("out_dtype") not in (None, vx.dtype):
        raise Reject(f"out_dtype={got['out_dtype']}: heddle takes a cast after the product instead")
    for what, size in (("K", vw.shape[1]), ("N", vw.shape[2])):
        if not isinstance(size, int):
            raise Reject(f"{what} = {size} is symbolic: heddle compiles one kernel per K and N")
    return x, w, offs


def _plan(root: fx.Node, target: Optional[str]) -> Chain:
    """The product's operands checked, then its epilogue (dynamo_epilogue.walk)."""
    _operands(root, target)
    c = Chain(root, steps=["grouped mm(x, w[e])"])
    walk(c, "grouped_mm")
    return c


def _apply(gm: fx.GraphModule, root: fx.Node, c: Chain, fake_mode) -> str:
    from .grouped import grouped_op, grouped_spec
    x, w, offs = _operands(root, None)
    try:
        spec, _ = grouped_spec(val(x), val(w), val(offs), val(c.bias), c.activation, val(c.final).dtype)
    except InputError as e:
        raise Reject(str(e)) from None
    grouped_op(spec)   # registered before the graph names it
    target = getattr(torch.ops.heddle, spec.op_name()).default
    g = gm.graph
    with g.inserting_before(c.final):
        stored = w
        if spec.trans_b:  # w is a transposed view of an [E, N, K] tensor: pass it as stored
            stored = g.create_node("call_function", aten.permute.default, (w, [0, 2, 1]), name=f"heddle_{root.name}_w")
        nodes = [x, stored] + ([c.bias] if c.bias is not None else []) + [offs]
        new = g.create_node("call_function", target, tuple(nodes), name=f"heddle_{root.name}")
    with (fake_mode if fake_mode is not None else contextlib.nullcontext()):
        if stored is not w:
            stored.meta["val"] = aten.permute.default(val(w), [0, 2, 1])
        new.meta["val"] = target(*[val(n) for n in nodes])
    new.meta.update({k: v for k, v in root.meta.items() if k in ("stack_trace", "nn_module_stack", "seq_nr")})
    c.final.replace_all_uses_with(new)
    for node in reversed([root] + c.chain):
        if not node.users:
            g.erase_node(node)
    return spec.op_name()


def fuse_grouped(gm: fx.GraphModule, fake_mode, report: GraphReport, why: Dict[str, Decision], enabled: bool,
                 target: Optional[str]) -> None:
    """Rewrite every aten._grouped_mm of `gm` with its epilogue into a heddle grouped op (or say why not)."""
    def rewrite(root):
        c = _plan(root, target)
        return c, _apply(gm, root, c, fake_mode)
    rewrite_each([n for n in gm.graph.nodes if is_grouped_mm(n)], LABEL, rewrite, report, why, enabled)
