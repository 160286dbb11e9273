"""What heddle's torch.compile rewrite did with one aot graph (dynamo_fuse.fuse returns it): a decision with
its reason for every call_function node, the heddle ops formed (groups) and notes; printed by the backend
under HEDDLE_DUMP=partition and returned by heddle.dynamo.explain. Also the tables of the matmul-like aten
ops the rewrite recognises (MATMULS: those it has patterns for; OTHER_MATMULS: recorded as matmuls it
leaves to torch) and the label a node gets in the report."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

import torch
import torch.fx as fx

from ..core import torch_compat as compat

aten = torch.ops.aten

MATMULS = {aten.mm.default: "mm", aten.addmm.default: "addmm", aten.bmm.default: "bmm"}
# matmul-like ops heddle sees but has no pattern for: recorded as such.
OTHER_MATMULS = {aten.baddbmm.default: "baddbmm", aten.addbmm.default: "addbmm", aten.matmul.default: "matmul",
                 aten.linear.default: "linear", aten.mv.default: "mv", aten.dot.default: "dot",
                 aten.addmv.default: "addmv", aten._scaled_mm.default: "_scaled_mm",
                 aten._grouped_mm.default: "_grouped_mm",
                 aten._transformer_encoder_layer_fwd.default: "_transformer_encoder_layer_fwd",
                 aten._native_multi_head_attention.default: "_native_multi_head_attention"}


@dataclass
class Decision:
    node: str
    op: str
    status: str          # "fused" (the matmul of a group) | "absorbed" | "not fused" | "other"
    reason: str
    group: Optional[int] = None


@dataclass
class Group:
    index: int
    root: str
    nodes: List[str]
    op: str               # heddle op name
    summary: str          # e.g. "mm(a, b^T) + bias -> gelu -> bf16"
    stop: str = ""        # why the chain ends where it does


@dataclass
class GraphReport:
    kind: str             # "forward" | "backward" | "inference"
    graph: int            # index of the graph in this process
    groups: List[Group] = field(default_factory=list)
    decisions: List[Decision] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)    # e.g. why no matmul groups were formed

    @property
    def fused(self) -> List[Decision]:
        return [d for d in self.decisions if d.status == "fused"]

    @property
    def unfused_matmuls(self) -> List[Decision]:
        return [d for d in self.decisions if d.status == "not fused" and d.op in MATMUL_NAMES]

    def decision(self, node: str) -> Decision:
        for d in self.decisions:
            if d.node == node:
                return d
        raise KeyError(node)

    def __str__(self) -> str:
        lines = [f"graph {self.graph} ({self.kind}): {len(self.groups)} heddle op(s), "
                 f"{len(self.unfused_matmuls)} matmul(s) left to torch"]
        for g in self.groups:
            lines.append(f"  [{g.index}] {g.op}: {g.summary}")
            lines.append(f"      nodes: {', '.join(g.nodes)}")
            if g.stop:
                lines.append(f"      chain ends: {g.stop}")
        shown = [d for d in self.decisions if d.status == "not fused"]
        for d in shown:
            lines.append(f"  not fused  {d.node} ({d.op}): {d.reason}")
        lines += [f"  note: {n}" for n in self.notes]
        others = [d for d in self.decisions if d.status == "other"]
        if others:
            ops = sorted({d.op for d in others})
            lines.append(f"  {len(others)} other node(s) left to the fallback compiler: {', '.join(ops)}")
        return "\n".join(lines) + "\n"


MATMUL_NAMES = set(MATMULS.values()) | set(OTHER_MATMULS.values())


def op_label(node: fx.Node) -> str:
    t = node.target
    if t in MATMULS:
        return MATMULS[t]
    if t in OTHER_MATMULS:
        return OTHER_MATMULS[t]
    if isinstance(t, compat.op_overload_type()):
        return f"{t.namespace}.{t._schema.name.split('::')[-1]}" if t.namespace != "aten" else t.__name__.split(".")[0]
    return getattr(t, "__name__", str(t))
