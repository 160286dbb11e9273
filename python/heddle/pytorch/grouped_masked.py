"""heddle.grouped_mm_masked: a grouped GEMM in the masked layout (DeepGEMM's decode layout), one launch
(docs/grouped.md, "The masked layout").

    out = heddle.grouped_mm_masked(x, w, counts, bias=None, activation=None, out_dtype=None)

x [E, max_tokens, K] holds each expert's tokens in a slab of its own, w [E, K, N] one weight matrix per expert
(a transposed view of an [E, N, K] tensor is read as it is stored), counts int32 [E] the rows of each slab
that are tokens: rows r < counts[e] of x[e] use w[e], the rest are padding. out is [E, max_tokens, N]; its
padding rows are not written (undefined, as in DeepGEMM). bias is [N] (shared) or [E, N] (a row per expert).
A function of its own rather than a layout flag of heddle.grouped_mm: the shapes of x and out and the
meaning of the int32 argument (a count per expert, not cumulative group ends) all differ. The kernel reads
counts on the device (no host sync); a count above max_tokens is clamped to it, a count <= 0 is an empty
expert. CUDA tensors run the compiled kernel; CPU tensors the printed kernel under HEDDLE_INTERPRET=1, else
torch.
"""
from __future__ import annotations

import functools
from typing import Optional

import torch

from ..core.errors import InputError
from ..core.fusion import Fusion, ops_unary
from ..core.kernel import Kernel, _vec_for
from . import grouped_front as front
from .grouped_args import DTYPES as _DT
from .grouped_args import check_contraction, check_epilogue, check_index, check_tokens, stored_weights
from .matmul import _dynamo_compiling

_NAME = "heddle.grouped_mm_masked"


def _check_tensors(x, w, counts):
    check_tokens(_NAME, x, w, "counts", counts)
    if x.dim() != 3:
        raise InputError(f"{_NAME}: x must be [E, max_tokens, K] (a slab of rows per expert), got shape "
                         f"{list(x.shape)}; tokens sorted by expert [T, K] are heddle.grouped_mm's layout")
    if w.dim() != 3 or w.shape[0] != x.shape[0]:
        raise InputError(f"{_NAME}: w must be [E, K, N] with x's E = {x.shape[0]}, got shape {list(w.shape)}")
    check_index(_NAME, "counts", counts, x.shape[0], "row count", "counts.to(torch.int32)")
    check_contraction(_NAME, x, w, "E, max_tokens")


def _check(x, w, counts, bias, activation, out_dtype):
    """InputError naming the first wrong argument; else (trans_b, w as stored [E, K, N] or [E, N, K])."""
    _check_tensors(x, w, counts)
    check_epilogue(_NAME, (x, w, counts), w, bias, activation, out_dtype)
    return stored_weights(_NAME, w)


def masked_fusion(dtype: str, k: int, n: int, trans_b: bool, bias: Optional[str], bias_per_expert: bool,
                  activation: Optional[str], out_dtype: str) -> Fusion:
    """The fusion of one grouped_mm_masked signature: x ["E", "max_tokens", k], w ["E", k, n] (trans_b:
    ["E", n, k]), a bias [n] or per expert ["E", 1, n] (it broadcasts over the slab's rows), the activation,
    the cast to out_dtype; the row counts `counts` follow the inputs."""
    fd = Fusion()
    x = fd.input("x", dtype, ["E", "max_tokens", k])
    w = fd.input("w", dtype, ["E", n, k] if trans_b else ["E", k, n])
    y = fd.masked_grouped_matmul(x, w, trans_b, "counts")
    if bias is not None:
        y = y + fd.input("bias", bias, ["E", 1, n] if bias_per_expert else [n])
    if activation is not None:
        y = ops_unary(activation, y)
    fd.output(y.to(out_dtype))
    return fd


@functools.lru_cache(maxsize=64)
def masked_kernel(target: str, dtype: str, k: int, n: int, trans_b: bool, bias: Optional[str], bias_per_expert: bool,
                  activation: Optional[str], out_dtype: str, vec_a: int, vec_b: int, rtc: bool) -> Kernel:
    """The masked-layout kernel of one signature on `target` (the batched cp.async + mma.sync kernel), lowered
    (and compiled with NVRTC when rtc) once."""
    fd = masked_fusion(dtype, k, n, trans_b, bias, bias_per_expert, activation, out_dtype)
    fd.auto_schedule(target, -1, n, k)
    return Kernel.build(fd, target, vec_a=vec_a, vec_b=vec_b, rtc=rtc)


def grouped_mm_masked(x: torch.Tensor, w: torch.Tensor, counts: torch.Tensor, *, bias: Optional[torch.Tensor] = None,
                      activation: Optional[str] = None, out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """act(x[e, :counts[e]] @ w[e] + bias) for every expert e in one launch; see the module's docstring."""
    if not _dynamo_compiling():  # a repeated plain eager call of a planned signature: one C++ call (grouped_front)
        out = _front(x, w, counts, bias, activation, out_dtype)
        if out is not None:
            return out
    trans_b, stored = _check(x, w, counts, bias, activation, out_dtype)
    per_expert = bias is not None and bias.dim() == 2
    sig = (_DT[x.dtype], int(x.shape[2]), int(w.shape[2]), trans_b, None if bias is None else _DT[bias.dtype],
           per_expert, activation, _DT[out_dtype or x.dtype])
    tensors = [x, stored] + ([bias.unsqueeze(1) if per_expert else bias] if bias is not None else []) + [counts]
    pick = (0, 1, 3, 2) if bias is not None else (0, 1, 2)  # x, w as stored, bias (a view), counts in the call
    out = front.eager(_calls, (x, w, counts, bias, activation, out_dtype), tensors, pick,
                      lambda: _run(sig, tensors), lambda: _device_kernel(sig, tensors))
    return out if out is not None else _run(sig, tensors)


def _device_kernel(sig: tuple, tensors) -> Optional[Kernel]:
    """The compiled masked-layout kernel CUDA `tensors` (x, w as stored, the bias, counts) launch, None on other
    devices."""
    x = tensors[0]
    if x.device.type != "cuda":
        return None
    from ..core.runtime import target_for_device
    return masked_kernel(target_for_device(x.device), *sig, _vec_for(x), _vec_for(tensors[1]), True)


def _run(sig: tuple, tensors) -> torch.Tensor:
    """The masked-layout kernel of `sig` on `tensors`: compiled on CUDA, the printed kernel under
    HEDDLE_INTERPRET=1 on CPU tensors, else the fusion evaluated with torch."""
    k = _device_kernel(sig, tensors)
    if k is not None:
        return k(*tensors)
    x = tensors[0]
    from ..core.interpret import interpret_mode
    if interpret_mode():  # the printed kernel on the CPU (heddle/core/interpret.py)
        from ..core.interpret import interpret_target, run_checked
        k = masked_kernel(interpret_target(), *sig, _vec_for(x), _vec_for(tensors[1]), False)
        return run_checked(k, tensors)
    from ..core.reference import evaluate
    return evaluate(masked_fusion(*sig), tensors, compute_dtype=torch.float32)


_calls = front.call_table()  # grouped_mm_masked's front (docs/grouped.md "Eager calls")
_front = _calls.fast_run
