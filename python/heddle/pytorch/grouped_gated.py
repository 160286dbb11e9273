"""heddle.grouped_mm_gated: the gated mixture-of-experts FFN's first half, act(x @ W1_e) * (x @ W3_e), as one
grouped kernel with two accumulators (docs/grouped.md, "The gated form").

    h = heddle.grouped_mm_gated(x, w1, w3, offs, activation="silu", out_dtype=None)

x [T, K] holds the tokens sorted by expert and offs int32 [E] the group ends, as for heddle.grouped_mm; w1 and
w3 [E, K, N] (or transposed views of [E, N, K] tensors, both alike) are each expert's gate and up projections.
The result is [T, N]: row r is act(x[r] @ w1[e]) * (x[r] @ w3[e]) for r's expert e (SwiGLU with silu;
activation None gives the bilinear form). One launch: each CTA loads one x tile and both experts' w tiles per
k step into two accumulators, and the epilogue multiplies them in registers (the matmul group of
heddle's gated plain matmuls, walked over the experts). A function of its own rather than an argument of
heddle.grouped_mm: two weight tensors, and no bias (MoE FFNs have none). CUDA tensors run the compiled
kernel; CPU tensors the printed kernel under HEDDLE_INTERPRET=1, else torch.
"""
from __future__ import annotations

import functools
from typing import Optional

import torch

from ..core.errors import InputError
from ..core.fusion import Fusion, ops_unary
from ..core.kernel import Kernel, _vec_for
from . import grouped_front as front
from .grouped import _check
from .grouped_args import DTYPES as _DT
from .matmul import _dynamo_compiling

_NAME = "heddle.grouped_mm_gated"


def _check_gated(x, w1, w3, offs, activation, out_dtype):
    """InputError naming the first wrong argument; else (trans_b, w1 and w3 as stored)."""
    for name, w in (("w1", w1), ("w3", w3)):
        try:
            trans_b, _ = _check(x, w, offs, None, activation, out_dtype)
        except InputError as e:  # heddle.grouped_mm's checks, said of this weight
            msg = str(e).replace("heddle.grouped_mm: ", "").replace(" w is ", f" {name} is ")
            raise InputError(f"{_NAME}: " + (name + msg[1:] if msg.startswith("w ") else msg)) from None
    if w3.shape != w1.shape:
        raise InputError(f"{_NAME}: w3 has shape {list(w3.shape)} but w1 has {list(w1.shape)}; the gate and up "
                         "projections of each expert have one shape")
    if w3.stride(-1) != w1.stride(-1) or w3.stride(-2) != w1.stride(-2):
        raise InputError(f"{_NAME}: w1 has strides {tuple(w1.stride())} and w3 {tuple(w3.stride())}; give both one "
                         "layout ([E, K, N], or both transposed views of [E, N, K])")
    if trans_b:
        return True, w1.transpose(-1, -2), w3.transpose(-1, -2)
    return False, w1, w3


def gated_fusion(dtype: str, k: int, n: int, trans_b: bool, activation: Optional[str], out_dtype: str) -> Fusion:
    """x ["T", k], w1 and w3 ["E", k, n] (trans_b: ["E", n, k]) grouped by the ends `offs` (a launch argument
    after the inputs): act(x @ w1[e]) * (x @ w3[e]), cast to out_dtype."""
    fd = Fusion()
    x = fd.input("x", dtype, ["T", k])
    shape = ["E", n, k] if trans_b else ["E", k, n]
    w1 = fd.input("w1", dtype, shape)
    w3 = fd.input("w3", dtype, shape)
    gate = fd.grouped_matmul(x, w1, trans_b, "offs")
    up = fd.grouped_matmul(x, w3, trans_b, "offs")
    fd.output(((ops_unary(activation, gate) if activation else gate) * up).to(out_dtype))
    return fd


@functools.lru_cache(maxsize=32)
def gated_kernel(target: str, dtype: str, k: int, n: int, trans_b: bool, activation: Optional[str], out_dtype: str,
                 vec_a: int, vec_b: int, rtc: bool) -> Kernel:
    """The gated grouped kernel of one signature on `target`, lowered (and compiled with NVRTC when rtc) once."""
    fd = gated_fusion(dtype, k, n, trans_b, activation, out_dtype)
    fd.auto_schedule(target, -1, n, k)
    return Kernel.build(fd, target, vec_a=vec_a, vec_b=vec_b, rtc=rtc)


def grouped_mm_gated(x: torch.Tensor, w1: torch.Tensor, w3: torch.Tensor, offs: torch.Tensor, *,
                     activation: Optional[str] = "silu", out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """act(x[rows of e] @ w1[e]) * (x[rows of e] @ w3[e]) for every expert e in one launch; see the module."""
    if not _dynamo_compiling():  # a repeated plain eager call of a planned signature: one C++ call (grouped_front)
        out = _front(x, w1, w3, offs, activation, out_dtype)
        if out is not None:
            return out
    trans_b, s1, s3 = _check_gated(x, w1, w3, offs, activation, out_dtype)
    sig = (_DT[x.dtype], int(x.shape[1]), int(w1.shape[2]), trans_b, activation, _DT[out_dtype or x.dtype])
    tensors = [x, s1, s3, offs]
    out = front.eager(_calls, (x, w1, w3, offs, activation, out_dtype), tensors, (0, 1, 2, 3),
                      lambda: _run(sig, tensors), lambda: _device_kernel(sig, tensors))
    return out if out is not None else _run(sig, tensors)


def _device_kernel(sig: tuple, tensors) -> Optional[Kernel]:
    """The compiled gated kernel CUDA `tensors` (x, w1 and w3 as stored, offs) launch, None on other devices."""
    x = tensors[0]
    if x.device.type != "cuda":
        return None
    from ..core.runtime import target_for_device
    vec_b = min(_vec_for(tensors[1]), _vec_for(tensors[2]))
    return gated_kernel(target_for_device(x.device), *sig, _vec_for(x), vec_b, True)


def _run(sig: tuple, tensors) -> torch.Tensor:
    """The gated kernel of `sig` on `tensors`: compiled on CUDA, the printed kernel under HEDDLE_INTERPRET=1 on
    CPU tensors, else the fusion evaluated with torch."""
    k = _device_kernel(sig, tensors)
    if k is not None:
        return k(*tensors)
    x = tensors[0]
    vec_b = min(_vec_for(tensors[1]), _vec_for(tensors[2]))
    from ..core.interpret import interpret_mode
    if interpret_mode():  # the printed kernel on the CPU (heddle/core/interpret.py)
        from ..core.interpret import interpret_target, run_checked
        return run_checked(gated_kernel(interpret_target(), *sig, _vec_for(x), vec_b, False), tensors)
    from ..core.reference import evaluate
    return evaluate(gated_fusion(*sig), tensors, compute_dtype=torch.float32)


_calls = front.call_table()  # grouped_mm_gated's front (docs/grouped.md "Eager calls")
_front = _calls.fast_run
