"""Patterns of real models that heddle.dynamo_fuse recognises beyond single aten ops.

Activations written out. Models often spell an activation as a small pointwise graph instead of one
aten op: GPT-2's `gelu_new` is `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3))))`, BERT-style
code writes `x * 0.5 * (1 + erf(x / sqrt(2)))`, SiLU appears as `x * sigmoid(x)`. Rather than one matcher
per spelling, `match_activation(x)` takes the *unary region* of x, the pointwise nodes computed from x
and constants alone, and tries every cut of it that ends in a single node and leaves nothing else
depending on x or on the region's inner nodes. Each cut is evaluated in float64 on sample points
covering [-10, 10] and compared with heddle's activations; the first one that agrees everywhere
(atol 1e-6, well below the gelu / gelu(tanh) difference of 4.7e-4 at x = -1.5) is the activation.

    view_16 -> mul(., 0.5) ----------------------------------------------.
            -> pow(., 3) -> mul(., 0.044715) -> add(view_16, .) -> mul(., c)  -> tanh -> add(., 1) -> mul
    ==> activation gelu_tanh, nodes [mul, pow, mul, add, mul, tanh, add, mul], result: the last mul

Casts inside the region evaluate as the identity (the fused op computes the chain in float32 and
rounds once at the end, like every heddle epilogue).

Identity nodes. `aten.clone` of the running result (what eval-mode dropout and `.contiguous()` on a
contiguous tensor become) copies a tensor that heddle's op writes freshly and contiguously: it is
absorbed as the identity, so `fallback="eager"` and the inductor fallback (whose own passes remove the
clone) fuse the same chain.

Epilogue nodes both rewrites read (dynamo_fuse for mm / addmm / bmm, dynamo_scaled for the FP8 _scaled_mm):
absorb_cast_or_clone (plain casts to f16 / bf16 / f32, identity clones) and activation_of (one-node activations).
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple

import torch
import torch.fx as fx

from ..core import torch_compat as compat

aten = torch.ops.aten
prims = torch.ops.prims

_CASTS = (prims.convert_element_type.default, aten._to_copy.default)
DTYPE_CODES = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32"}   # heddle's epilogue dtypes
ACTIVATION_OPS = {aten.relu.default: "relu", aten.sigmoid.default: "sigmoid", aten.silu.default: "silu",
                  aten.gelu.default: "gelu", aten.tanh.default: "tanh"}   # one-node activations

# pointwise ops a written-out activation may use (evaluated on float64 tensors)
_POINTWISE = {
    aten.mul.Tensor, aten.add.Tensor, aten.sub.Tensor, aten.div.Tensor, aten.neg.default,
    aten.pow.Tensor_Scalar, aten.tanh.default, aten.erf.default, aten.exp.default, aten.sigmoid.default,
    aten.reciprocal.default, aten.relu.default, aten.gelu.default, aten.silu.default, aten.sqrt.default,
    aten.rsqrt.default, aten.clamp_min.default, aten.maximum.default, aten.where.self, aten.gt.Scalar,
    aten.ge.Scalar, aten.lt.Scalar, aten.mul.Scalar, aten.add.Scalar, aten.sub.Scalar, aten.div.Scalar,
} | set(_CASTS)

# heddle's activations in float64 (the same functions the reference and the device code compute)
ACTIVATIONS = {
    "relu": torch.relu,
    "gelu": lambda x: 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0))),
    "gelu_tanh": lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
    "silu": lambda x: x * torch.sigmoid(x),
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}

_SAMPLES = torch.cat([torch.linspace(-10.0, 10.0, 401, dtype=torch.float64),
                      torch.tensor([-1.5, -0.1, 0.0, 0.1, 1.5], dtype=torch.float64)])
_REFERENCE = {name: f(_SAMPLES) for name, f in ACTIVATIONS.items()}
_MAX_REGION = 24


def is_identity_clone(n: fx.Node) -> bool:
    """aten.clone of a tensor heddle writes contiguously (any memory format but channels-last)."""
    if n.op != "call_function" or n.target is not aten.clone.default:
        return False
    fmt = n.kwargs.get("memory_format", None)
    return fmt in (None, torch.contiguous_format, torch.preserve_format)


def _region(x: fx.Node) -> List[fx.Node]:
    """The pointwise nodes computed from x and constants alone, in graph order (at most _MAX_REGION)."""
    inside = {x}
    order: List[fx.Node] = []
    frontier = list(x.users)
    while frontier and len(order) < _MAX_REGION:
        grown = False
        for n in list(frontier):
            if n in inside or n.op != "call_function" or n.target not in _POINTWISE:
                frontier.remove(n)
                continue
            deps = [a for a in n.all_input_nodes]
            if all(d in inside for d in deps):
                inside.add(n)
                order.append(n)
                frontier.remove(n)
                frontier.extend(u for u in n.users if u not in inside)
                grown = True
        if not grown:
            break
    pos = {n: i for i, n in enumerate(x.graph.nodes)}
    return sorted(order, key=lambda n: pos[n])


def _ancestors(n: fx.Node, region: set, x: fx.Node) -> Optional[set]:
    seen, stack = set(), [n]
    while stack:
        c = stack.pop()
        if c in seen or c is x:
            continue
        if c not in region:
            return None
        seen.add(c)
        stack.extend(c.all_input_nodes)
    return seen


def _evaluate(x: fx.Node, nodes: List[fx.Node]) -> Optional[torch.Tensor]:
    env: Dict[fx.Node, torch.Tensor] = {x: _SAMPLES}
    for n in nodes:
        if n.target in _CASTS:
            env[n] = env[n.args[0]]
            continue
        args = fx.map_arg(n.args, lambda a: env[a])
        kwargs = fx.map_arg(n.kwargs, lambda a: env[a])
        try:
            v = n.target(*args, **kwargs)
        except Exception:
            return None
        if not isinstance(v, torch.Tensor) or v.shape != _SAMPLES.shape:
            return None
        env[n] = v.to(torch.float64) if v.is_floating_point() else v
    return env[nodes[-1]]


def match_activation(x: fx.Node) -> Optional[Tuple[str, List[fx.Node]]]:
    """(activation, region nodes in graph order, the last one giving the result) when the users of x
    compute one of heddle's activations of x and nothing else; None otherwise."""
    region = _region(x)
    if not region:
        return None
    with compat.disable_current_modes():   # backends run under dynamo's fake mode: these are real numbers
        return _match(x, region)


def _match(x: fx.Node, region: List[fx.Node]) -> Optional[Tuple[str, List[fx.Node]]]:
    rset = set(region)
    for end in region:
        if not isinstance(end.meta.get("val"), torch.Tensor) or not end.meta["val"].is_floating_point():
            continue
        sub = _ancestors(end, rset, x)
        if sub is None or not set(x.users) <= sub:
            continue
        if any(u not in sub for n in sub if n is not end for u in n.users):
            continue  # an inner value is needed elsewhere
        nodes = [n for n in region if n in sub]
        y = _evaluate(x, nodes)
        if y is None or not y.is_floating_point():
            continue
        for name, f in ACTIVATIONS.items():
            if torch.allclose(y, _REFERENCE[name], rtol=1e-6, atol=1e-6):
                return name, nodes
    return None


def absorb_cast_or_clone(u: fx.Node, steps: List[str]) -> Tuple[bool, Optional[str]]:
    """(True, None) for a plain cast to float16 / bfloat16 / float32 (noted in `steps`) or an identity clone,
    (True, why not) for another cast or a node without tensor metadata, (False, None) for anything else."""
    if not isinstance(u.meta.get("val"), torch.Tensor):
        return True, f"{u.name} has no tensor metadata"
    if is_identity_clone(u):
        return True, None
    if u.target not in _CASTS:
        return False, None
    dt = u.args[1] if u.target is prims.convert_element_type.default else u.kwargs.get("dtype")
    extra = set(u.kwargs) - {"dtype"} if u.target is aten._to_copy.default else set()
    if extra:
        return True, f"_to_copy with {sorted(extra)} is not a plain cast"
    if dt not in DTYPE_CODES:
        return True, f"cast to {dt}: heddle outputs float16, bfloat16 or float32"
    steps.append(f"-> {DTYPE_CODES[dt]}")
    return True, None


def activation_of(u: fx.Node) -> str:
    """heddle's name of a one-node activation (ACTIVATION_OPS): gelu's approximate="tanh" is gelu_tanh."""
    if u.target is aten.gelu.default:
        approx = u.kwargs.get("approximate", u.args[1] if len(u.args) > 1 else "none")
        return "gelu" if approx == "none" else "gelu_tanh"
    return ACTIVATION_OPS[u.target]
