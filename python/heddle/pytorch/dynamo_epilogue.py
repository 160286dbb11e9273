"""The epilogue walk of the backend's rewrites of one product node into one heddle op (dynamo_grouped.py): from
the product, absorb the ops that consume only the running result --

    casts / identity clones anywhere  ->  + bias ([N], before the activation)  ->  one activation
    (a one-node activation, or one written out: dynamo_patterns.match_activation)

-- and record the group and a decision per node (heddle.dynamo.explain). dynamo_scaled.py walks aten._scaled_mm's
epilogue with it too (a bias given to _scaled_mm itself counts as the chain's bias).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Union

import torch
import torch.fx as fx

from .dynamo_patterns import ACTIVATION_OPS, DTYPE_CODES, absorb_cast_or_clone, activation_of, match_activation
from .dynamo_report import Decision, Group, GraphReport, op_label

aten = torch.ops.aten


class Reject(Exception):
    """The node stays with torch; the message is its decision's reason."""


@dataclass
class Chain:
    root: fx.Node
    bias: Optional[fx.Node] = None
    activation: Optional[str] = None
    chain: List[fx.Node] = field(default_factory=list)
    steps: List[str] = field(default_factory=list)
    stop: str = ""
    stop_node: Optional[fx.Node] = None    # the node the chain stopped at, if it gets an "other" decision

    @property
    def final(self) -> fx.Node:
        return self.chain[-1] if self.chain else self.root


def val(n):
    return n.meta.get("val") if isinstance(n, fx.Node) else n


def walk(c: Chain, what: str) -> None:
    """Extend c.chain from c.root as far as the epilogue goes; c.stop says why it ends. `what` names the
    product in the reasons ("grouped_mm")."""
    cur = c.chain[-1] if c.chain else c.root
    while True:
        users = list(cur.users)
        if len(users) != 1 or users[0].op != "call_function":
            c.stop = f"{cur.name} has {len(users)} users" if len(users) != 1 else f"{cur.name} is a graph output"
            return
        why = _absorb(c, cur, users[0], what)
        if why is None:
            c.chain.append(users[0])
            cur = users[0]
            continue
        region = match_activation(cur) if c.activation is None else None
        if region is None:
            c.stop = why
            return
        c.activation = region[0]
        c.steps.append(f"-> {region[0]} (written out: {len(region[1])} ops)")
        c.chain.extend(region[1])
        cur = region[1][-1]


def _absorb(c: Chain, cur: fx.Node, u: fx.Node, what: str) -> Optional[str]:
    """Absorb `u`, the only user of `cur`; the reason why not, else None."""
    done, why = absorb_cast_or_clone(u, c.steps)
    if done:
        return why
    if u.target is aten.add.Tensor and u.kwargs.get("alpha", 1) == 1:
        other = u.args[1] if u.args[0] is cur else u.args[0]
        vcur, vo = val(cur), val(other)
        if not isinstance(vo, torch.Tensor) or vo.dim() != 1 or vo.shape[0] != vcur.shape[-1] or \
                vo.dtype not in DTYPE_CODES or tuple(val(u).shape) != tuple(vcur.shape):
            return f"{u.name} adds {getattr(other, 'name', other)}: not an [N] bias"
        if c.bias is not None or c.activation is not None:
            return f"{u.name}: a second bias, or a bias after the activation"
        c.bias = other
        c.steps.append("+ bias")
        return None
    if u.target in ACTIVATION_OPS:
        if c.activation is not None:
            return f"{u.name}: a second activation"
        c.activation = activation_of(u)
        c.steps.append(f"-> {c.activation}")
        return None
    return f"{u.name} ({op_label(u)}) is not a {what} epilogue op"


def rewrite_each(roots: List[fx.Node], label: Union[str, Callable[[fx.Node], str]], rewrite: Callable[[fx.Node], tuple],
                 report: GraphReport, why: Dict[str, Decision], enabled: bool) -> None:
    """For every root: rewrite(root) -> (the Chain, the heddle op's name), or Reject with the reason; record
    the group and a decision for each node of it (`label`: the roots' op label, or a function of the root), and
    for the node the chain stopped at (c.stop_node), why it was not absorbed. A rewrite bug warns and leaves the
    node to torch."""
    for root in roots:
        label_of = label if isinstance(label, str) else label(root)
        if not enabled:
            why[root.name] = Decision(root.name, label_of, "not fused", "fusion disabled (options={'fuse': False})")
            continue
        try:
            c, op = rewrite(root)
        except Reject as e:
            why[root.name] = Decision(root.name, label_of, "not fused", str(e))
            continue
        except Exception as e:  # never break the user's model over a rewrite bug
            import warnings
            warnings.warn(f"heddle: could not fuse {root.name} ({label_of}): {type(e).__name__}: {e}; it stays "
                          "with torch")
            why[root.name] = Decision(root.name, label_of, "not fused", f"internal error: {type(e).__name__}: {e}")
            continue
        gi = len(report.groups)
        names = [root.name] + [n.name for n in c.chain]
        report.groups.append(Group(gi, root.name, names, op, " ".join(c.steps), c.stop))
        why[root.name] = Decision(root.name, label_of, "fused", f"-> {op}", gi)
        for n in c.chain:
            why[n.name] = Decision(n.name, op_label(n), "absorbed", f"into group {gi} ({op})", gi)
        s = c.stop_node
        if s is not None and s.name not in why and s.name not in names:
            why[s.name] = Decision(s.name, op_label(s), "other", f"not absorbed into group {gi}: {c.stop}")
