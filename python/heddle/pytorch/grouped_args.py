"""The argument checks heddle.grouped_mm and heddle.grouped_mm_masked share (docs/grouped.md): the epilogue's
arguments, one device, and the weights' layout. Each raises an InputError naming the argument, prefixed with
the calling function's name."""
from __future__ import annotations

import torch

from ..core.errors import InputError
from ..core.ops import ACTIVATIONS

DTYPES = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32"}


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
