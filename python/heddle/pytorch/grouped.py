"""heddle.grouped_mm: a grouped GEMM for mixture-of-experts layers, in one launch (docs/grouped.md).

    out = heddle.grouped_mm(x, w, offs, bias=None, activation=None, out_dtype=None)

x [T, K] holds the tokens sorted by expert, w [E, K, N] one weight matrix per expert (a transposed view
of an [E, N, K] tensor, w_nk.transpose(-1, -2), is read as it is stored), offs int32 [E] the group ends:
rows offs[e-1] .. offs[e] of x (offs[-1] = 0) use w[e] (torch._grouped_mm's convention); bias is [N] (shared)
or [E, N] (a row per expert, Fusion.per_expert). The kernel walks the groups on the device (no host read of
offs): that offs is non-decreasing and ends at most at T is the caller's contract, as for torch._grouped_mm;
rows past offs[E-1] are not written. CUDA tensors run the compiled kernel; CPU tensors run the printed
kernel under HEDDLE_INTERPRET=1 (heddle.interpret), else torch.
"""
from __future__ import annotations

import functools
from typing import Optional

import torch

from ..core.errors import InputError
from ..core.fusion import Fusion, ops_unary
from ..core.kernel import Kernel, _vec_for
from ..core.ops import ACTIVATIONS

_DT = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32"}


def _check(x, w, offs, bias, activation, out_dtype):
    """InputError naming the first wrong argument; else (trans_b, w as stored [E, K, N] or [E, N, K])."""
    for name, t in (("x", x), ("w", w), ("offs", offs)):
        if not isinstance(t, torch.Tensor):
            raise InputError(f"heddle.grouped_mm: {name} must be a torch.Tensor, got {type(t).__name__}")
    if x.dtype not in (torch.float16, torch.bfloat16):
        raise InputError(f"heddle.grouped_mm: x has dtype {x.dtype}; the grouped kernel takes float16 or bfloat16 "
                         "tokens (cast with .to(torch.bfloat16))")
    if w.dtype != x.dtype:
        raise InputError(f"heddle.grouped_mm: w has dtype {w.dtype} but x has {x.dtype}; give both one dtype")
    if x.dim() != 2:
        raise InputError(f"heddle.grouped_mm: x must be [T, K] (tokens sorted by expert), got shape {list(x.shape)}")
    if w.dim() != 3:
        raise InputError(f"heddle.grouped_mm: w must be [E, K, N] (one matrix per expert), got shape "
                         f"{list(w.shape)}")
    if offs.dtype != torch.int32:
        raise InputError(f"heddle.grouped_mm: offs has dtype {offs.dtype}; the group ends are int32 "
                         "(offs.to(torch.int32), as torch._grouped_mm takes them)")
    if offs.dim() != 1 or offs.shape[0] != w.shape[0]:
        raise InputError(f"heddle.grouped_mm: offs must be [E] = [{w.shape[0]}] (one group end per expert of w), "
                         f"got shape {list(offs.shape)}")
    if x.shape[1] != w.shape[1]:
        raise InputError(f"heddle.grouped_mm: x is [T, K={x.shape[1]}] but w is [E, K={w.shape[1]}, N]; the "
                         "contraction sizes must match")
    devices = {t.device for t in (x, w, offs, bias) if isinstance(t, torch.Tensor)}
    if len(devices) > 1:
        raise InputError(f"heddle.grouped_mm: the inputs are on {sorted(map(str, devices))}; move them to one device")
    if x.stride(-1) != 1 and x.shape[-1] > 1:
        raise InputError(f"heddle.grouped_mm: x's rows are not contiguous (stride {x.stride(-1)}); call .contiguous()")
    N = w.shape[2]
    if bias is not None:
        if not isinstance(bias, torch.Tensor) or list(bias.shape) not in ([N], [w.shape[0], N]):
            shape = list(bias.shape) if isinstance(bias, torch.Tensor) else type(bias).__name__
            raise InputError(f"heddle.grouped_mm: bias must be [N] = [{N}] (shared by the experts) or [E, N] = "
                             f"[{w.shape[0]}, {N}] (one row per expert), got {shape}")
        if bias.dtype not in _DT:
            raise InputError(f"heddle.grouped_mm: bias has dtype {bias.dtype}; use float16, bfloat16 or float32")
    if activation is not None and activation not in ACTIVATIONS:
        raise InputError(f"heddle.grouped_mm: activation {activation!r} is not one of {', '.join(ACTIVATIONS)}")
    if out_dtype is not None and out_dtype not in _DT:
        raise InputError(f"heddle.grouped_mm: out_dtype {out_dtype} is not float16, bfloat16 or float32")
    if w.stride(-1) == 1:
        return False, w
    if w.stride(-2) == 1:  # a transposed view of an [E, N, K] tensor: read it as stored
        return True, w.transpose(-1, -2)
    raise InputError(f"heddle.grouped_mm: w has strides {tuple(w.stride())}: neither its N nor its K axis is "
                     "contiguous; call .contiguous()")


def grouped_fusion(dtype: str, k: int, n: int, trans_b: bool, bias: Optional[str], bias_per_expert: bool,
                   activation: Optional[str], out_dtype: str) -> Fusion:
    """The fusion of one grouped_mm signature: x ["T", k], w ["E", k, n] (trans_b: ["E", n, k]), a bias [n] or
    per expert ["E", n], the activation, the cast to out_dtype; the group ends `offs` follow the inputs."""
    fd = Fusion()
    x = fd.input("x", dtype, ["T", k])
    w = fd.input("w", dtype, ["E", n, k] if trans_b else ["E", k, n])
    y = fd.grouped_matmul(x, w, trans_b, "offs")
    if bias is not None:
        b = fd.input("bias", bias, ["E", n] if bias_per_expert else [n])
        y = y + (fd.per_expert(b) if bias_per_expert else b)
    if activation is not None:
        y = ops_unary(activation, y)
    fd.output(y.to(out_dtype))
    return fd


@functools.lru_cache(maxsize=64)
def grouped_kernel(target: str, dtype: str, k: int, n: int, trans_b: bool, bias: Optional[str], bias_per_expert: bool,
                   activation: Optional[str], out_dtype: str, vec_a: int, vec_b: int, rtc: bool,
                   tma: bool = True) -> Kernel:
    """The grouped kernel of one signature on `target` (the cp.async + mma.sync kernel; on sm_100a, when TMA can
    take x and w, the TMA + tcgen05 kernel), lowered (and compiled with NVRTC when rtc) once."""
    fd = grouped_fusion(dtype, k, n, trans_b, bias, bias_per_expert, activation, out_dtype)
    fd.auto_schedule(target, -1, n, k, tma=tma)
    return Kernel.build(fd, target, vec_a=vec_a, vec_b=vec_b, rtc=rtc)


def grouped_mm(x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor, *, bias: Optional[torch.Tensor] = None,
               activation: Optional[str] = None, out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """act(x[rows of e] @ w[e] + bias) for every expert e in one launch; see the module's docstring."""
    trans_b, stored = _check(x, w, offs, bias, activation, out_dtype)
    out_dt = _DT[out_dtype or x.dtype]
    sig = (_DT[x.dtype], int(x.shape[1]), int(w.shape[2]), trans_b, None if bias is None else _DT[bias.dtype],
           bias is not None and bias.dim() == 2, activation, out_dt)
    tensors = [x, stored] + ([bias] if bias is not None else []) + [offs]
    from ..core.tma import tma_ok
    tma = tma_ok(x) and tma_ok(stored)  # else the cp.async kernel (sm_100a: docs/grouped.md)
    if x.device.type == "cuda":
        from ..core.runtime import target_for_device
        k = grouped_kernel(target_for_device(x.device), *sig, _vec_for(x), _vec_for(stored), True, tma)
        return k(*tensors)
    from ..core.interpret import interpret_mode
    if interpret_mode():  # the printed kernel on the CPU (heddle/core/interpret.py)
        from ..core.interpret import interpret_target, run_checked
        target = interpret_target()
        k = grouped_kernel(target, *sig, _vec_for(x), _vec_for(stored), False, tma)
        return run_checked(k, tensors)
    from ..core.reference import evaluate
    fd = grouped_fusion(*sig)
    return evaluate(fd, tensors, compute_dtype=torch.float32)
