"""The argument checks heddle.grouped_mm and heddle.grouped_mm_masked share (docs/grouped.md): the tensors'
types and dtypes, the int32 [E] index tensor (group ends or row counts), the tokens' rows, the epilogue's
arguments, one device, and the weights' layout. Each raises an InputError naming the argument, prefixed with
the calling function's name."""
from __future__ import annotations

import torch

from ..core.errors import InputError
from ..core.ops import ACTIVATIONS

DTYPES = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32"}


def check_tokens(api: str, x, w, index_name: str, index):
    """x, w and the index tensor are tensors; x float16 / bfloat16 and w of x's dtype."""
    for name, t in (("x", x), ("w", w), (index_name, index)):
        if not isinstance(t, torch.Tensor):
            raise InputError(f"{api}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if x.dtype not in (torch.float16, torch.bfloat16):
        raise InputError(f"{api}: x has dtype {x.dtype}; the grouped kernel takes float16 or bfloat16 tokens "
                         "(cast with .to(torch.bfloat16))")
    if w.dtype != x.dtype:
        raise InputError(f"{api}: w has dtype {w.dtype} but x has {x.dtype}; give both one dtype")


def check_index(api: str, name: str, t, E: int, what: str, cast_hint: str):
    """The index tensor `name` is int32 [E], one `what` per expert."""
    if t.dtype != torch.int32:
        raise InputError(f"{api}: {name} has dtype {t.dtype}; the {what}s are int32 ({cast_hint})")
    if t.dim() != 1 or t.shape[0] != E:
        raise InputError(f"{api}: {name} must be [E] = [{E}] (one {what} per expert), got shape {list(t.shape)}")


def check_contraction(api: str, x, w, x_layout: str):
    """x's K (its last axis) is w's K, and x's rows are contiguous."""
    if x.shape[-1] != w.shape[1]:
        raise InputError(f"{api}: x is [{x_layout}, K={x.shape[-1]}] but w is [E, K={w.shape[1]}, N]; the "
                         "contraction sizes must match")
    if x.stride(-1) != 1 and x.shape[-1] > 1:
        raise InputError(f"{api}: x's rows are not contiguous (stride {x.stride(-1)}); call .contiguous()")


def check_epilogue(api: str, tensors, w, bias, activation, out_dtype):
    """One device for `tensors` and bias; bias [N] or [E, N] of a float dtype; a known activation and out_dtype."""
    devices = {t.device for t in (*tensors, bias) if isinstance(t, torch.Tensor)}
    if len(devices) > 1:
        raise InputError(f"{api}: the inputs are on {sorted(map(str, devices))}; move them to one device")
    E, N = w.shape[0], w.shape[2]
    if bias is not None:
        if not isinstance(bias, torch.Tensor) or list(bias.shape) not in ([N], [E, N]):
            shape = list(bias.shape) if isinstance(bias, torch.Tensor) else type(bias).__name__
            raise InputError(f"{api}: bias must be [N] = [{N}] (shared by the experts) or [E, N] = [{E}, {N}] "
                             f"(one row per expert), got {shape}")
        if bias.dtype not in DTYPES:
            raise InputError(f"{api}: bias has dtype {bias.dtype}; use float16, bfloat16 or float32")
    if activation is not None and activation not in ACTIVATIONS:
        raise InputError(f"{api}: activation {activation!r} is not one of {', '.join(ACTIVATIONS)}")
    if out_dtype is not None and out_dtype not in DTYPES:
        raise InputError(f"{api}: out_dtype {out_dtype} is not float16, bfloat16 or float32")


def stored_weights(api: str, w):
    """(trans_b, w as stored): [E, K, N] with N contiguous, or a transposed view of an [E, N, K] tensor."""
    if w.stride(-1) == 1:
        return False, w
    if w.stride(-2) == 1:  # a transposed view of an [E, N, K] tensor: read it as stored
        return True, w.transpose(-1, -2)
    raise InputError(f"{api}: w has strides {tuple(w.stride())}: neither its N nor its K axis is contiguous; "
                     "call .contiguous()")
