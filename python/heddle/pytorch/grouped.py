"""heddle.grouped_mm: a grouped GEMM for mixture-of-experts layers, in one launch (docs/grouped.md).

    out = heddle.grouped_mm(x, w, offs, bias=None, activation=None, out_dtype=None)

x [T, K] holds the tokens sorted by expert, w [E, K, N] one weight matrix per expert (a transposed view
of an [E, N, K] tensor, w_nk.transpose(-1, -2), is read as it is stored), offs int32 [E] the group ends:
rows offs[e-1] .. offs[e] of x (offs[-1] = 0) use w[e] (torch._grouped_mm's convention); bias is [N] (shared)
or [E, N] (a row per expert, Fusion.per_expert). The kernel walks the groups on the device (no host read of
offs): that offs is non-decreasing and ends at most at T is the caller's contract, as for torch._grouped_mm;
rows past offs[E-1] are not written. CUDA tensors run the compiled kernel; CPU tensors run the printed
kernel under HEDDLE_INTERPRET=1 (heddle.interpret), else torch. On sm_90a the kernel is the warp-specialized
TMA + wgmma one when x and w meet TMA's rules (16-byte rows and bases: heddle.tma), else the cp.async +
mma.sync one. Each signature is a torch custom op with a fake implementation and a backward (the second half
of this file).
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, replace
from typing import Dict, Optional

import torch

from ..core.errors import InputError
from ..core.fusion import Fusion, ops_unary
from ..core.kernel import Kernel, _vec_for
from ..core.ops import ACTIVATIONS
from ..core.reference import _UNARY
from ..core.tma import tma_ok
from . import grouped_front as front
from .custom_ops import register_op
from .grouped_args import DTYPES as _DT
from .grouped_args import check_contraction, check_epilogue, check_index, check_tokens, stored_weights
from .matmul import _dynamo_compiling


def _check(x, w, offs, bias, activation, out_dtype):
    """InputError naming the first wrong argument; else (trans_b, w as stored [E, K, N] or [E, N, K])."""
    api = "heddle.grouped_mm"
    check_tokens(api, x, w, "offs", offs)
    if x.dim() != 2:
        raise InputError(f"{api}: x must be [T, K] (tokens sorted by expert), got shape {list(x.shape)}")
    if w.dim() != 3:
        raise InputError(f"{api}: w must be [E, K, N] (one matrix per expert), got shape {list(w.shape)}")
    check_index(api, "offs", offs, w.shape[0], "group end", "offs.to(torch.int32), as torch._grouped_mm takes them")
    check_contraction(api, x, w, "T")
    check_epilogue("heddle.grouped_mm", (x, w, offs), w, bias, activation, out_dtype)
    return stored_weights("heddle.grouped_mm", w)


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
    """The grouped kernel of one signature on `target` (the auto schedule: TMA + wgmma on sm_90a, TMA + tcgen05
    on sm_100a when `tma`, the operands meeting TMA's rules; else cp.async + mma.sync), lowered (and compiled
    with NVRTC when rtc) once."""
    fd = grouped_fusion(dtype, k, n, trans_b, bias, bias_per_expert, activation, out_dtype)
    fd.auto_schedule(target, -1, n, k, tma=tma)
    return Kernel.build(fd, target, vec_a=vec_a, vec_b=vec_b, rtc=rtc)


def grouped_mm(x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor, *, bias: Optional[torch.Tensor] = None,
               activation: Optional[str] = None, out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """act(x[rows of e] @ w[e] + bias) for every expert e in one launch; see the module's docstring. It runs
    as the torch custom op of its signature (torch.ops.heddle.gmm_..., below), which has a fake implementation
    and a backward."""
    if not _dynamo_compiling():
        # a plain eager call like an earlier planned one (the same arguments, the same tensor signatures; offs by
        # its signature, never its values): one C++ call through the kernel's plan, else None: the checks below
        out = _front(x, w, offs, bias, activation, out_dtype)
        if out is not None:
            return out
    return grouped_call(x, w, offs, bias, activation, out_dtype)


def device_kernel(sig: tuple, tensors) -> Optional[Kernel]:
    """The compiled grouped kernel CUDA `tensors` (run_signature's) launch, None on other devices."""
    x, stored = tensors[0], tensors[1]
    if x.device.type != "cuda":
        return None
    from ..core.runtime import target_for_device
    tma = tma_ok(x) and tma_ok(stored) and x.shape[1] > 0  # the TMA kernel runs at least one k-tile
    return grouped_kernel(target_for_device(x.device), *sig, _vec_for(x), _vec_for(stored), True, tma)


def run_signature(sig: tuple, tensors) -> torch.Tensor:
    """The grouped kernel of signature `sig` (grouped_kernel's arguments after the target) on `tensors` = x, w
    as stored ([E, K, N], or [E, N, K] when sig's trans_b), the bias if any, offs: the compiled kernel on CUDA
    tensors, the printed kernel under HEDDLE_INTERPRET=1 on CPU tensors, else the fusion evaluated with torch."""
    k = device_kernel(sig, tensors)
    if k is not None:
        return k(*tensors)
    x, stored = tensors[0], tensors[1]
    tma = tma_ok(x) and tma_ok(stored) and x.shape[1] > 0  # the TMA kernel runs at least one k-tile
    from ..core.interpret import interpret_mode
    if interpret_mode():  # the printed kernel on the CPU (heddle/core/interpret.py)
        from ..core.interpret import interpret_target, run_checked
        target = interpret_target()
        k = grouped_kernel(target, *sig, _vec_for(x), _vec_for(stored), False, tma)
        return run_checked(k, list(tensors))
    from ..core.reference import evaluate
    fd = grouped_fusion(*sig)
    return evaluate(fd, list(tensors), compute_dtype=torch.float32)


# ----------------------------------------------------------------------------------------------------
# the torch custom ops
# ----------------------------------------------------------------------------------------------------
# heddle.grouped_mm as torch custom ops, one per signature, with a fake implementation and a backward.
#
#     torch.ops.heddle.gmm_<dtype>_k<K>_n<N>_<t|n>[_B<dtype><e|s>][_A<act>]_o<dtype>(x, w, [bias], offs)
#
# w is passed as stored ([E, K, N]; `t`: [E, N, K], read transposed), the bias is per expert (`e`, [E, N]) or
# shared (`s`, [N]). The real implementation is grouped.run_signature (the compiled kernel on CUDA, the printed
# kernel under HEDDLE_INTERPRET=1 on CPU tensors, else torch); the fake one gives [T, N] in the output dtype,
# so the op traces under torch.compile (the backend's aten._grouped_mm rewrite emits these ops:
# heddle/pytorch/dynamo_grouped.py).
#
# The backward (y = act(z), z[r] = x[r] @ w[e] + bias for the rows r of expert e; rows at or past offs[E-1]
# belong to no expert, their output is undefined and their gradients are zero):
#
#     dz = act'(z) * dy            z recomputed by the grouped op itself (float32 output), rows past the end zeroed
#     dx = grouped_mm(dz, w^T)     a grouped matmul: the same op family on the transposed view of the weights
#     dw[e] = x_e^T @ dz_e         a K-grouped product, which heddle has no kernel for: computed with torch as
#                                  (x * m_e)^T @ dz for each expert e, m_e the [T, 1] mask of e's rows (from offs
#                                  with torch.searchsorted on the device: no host read of offs, no sync). Cost: E
#                                  dense [K, T] x [T, N] products (E times the flops of the grouped product) and a
#                                  [T, K] masked copy of x per expert.
#     dbias[e] = sum of dz_e over its rows (a one-hot [E, T] x [T, N] product), a shared bias: sum of dz over rows
#
# Matmuls in the operands' dtype, the pointwise parts in float32, gradients in each input's dtype.

_TORCH = {v: k for k, v in _DT.items()}


@dataclass(frozen=True)
class GroupedSpec:
    """One grouped_mm signature (grouped.grouped_kernel's arguments after the target)."""
    dtype: str
    k: int
    n: int
    trans_b: bool
    bias: Optional[str]
    bias_per_expert: bool
    activation: Optional[str]
    out_dtype: str

    def sig(self) -> tuple:
        return (self.dtype, self.k, self.n, self.trans_b, self.bias, self.bias_per_expert, self.activation,
                self.out_dtype)

    def op_name(self) -> str:
        parts = ["gmm", self.dtype, f"k{self.k}", f"n{self.n}", "t" if self.trans_b else "n"]
        if self.bias is not None:
            parts.append("B" + self.bias + ("e" if self.bias_per_expert else "s"))
        if self.activation is not None:
            parts.append("A" + self.activation.replace("_", ""))
        parts.append("o" + self.out_dtype)
        return "_".join(parts)

    def input_names(self):
        return ["x", "w"] + (["bias"] if self.bias is not None else []) + ["offs"]


def decode(name: str) -> Optional[GroupedSpec]:
    """The spec GroupedSpec.op_name() wrote as `name`, or None."""
    toks = name.split("_")
    if len(toks) < 6 or toks[0] != "gmm" or toks[1] not in ("f16", "bf16") or toks[4] not in ("t", "n"):
        return None
    k, n, out = toks[2], toks[3], toks[-1]
    if k[:1] != "k" or not k[1:].isdigit() or n[:1] != "n" or not n[1:].isdigit() or out[:1] != "o" \
            or out[1:] not in _TORCH:
        return None
    f = dict(bias=None, bias_per_expert=False, activation=None)
    acts = {a.replace("_", ""): a for a in ACTIVATIONS}
    for t in toks[5:-1]:
        if t[:1] == "B" and t[-1:] in ("e", "s") and t[1:-1] in _TORCH:
            f["bias"], f["bias_per_expert"] = t[1:-1], t[-1] == "e"
        elif t[:1] == "A" and t[1:] in acts:
            f["activation"] = acts[t[1:]]
        else:
            return None
    spec = GroupedSpec(toks[1], int(k[1:]), int(n[1:]), toks[4] == "t", out_dtype=out[1:], **f)
    return spec if spec.op_name() == name else None


def resolve(name: str) -> bool:
    """Register torch.ops.heddle.<name> from a grouped op's name (torch.export.load in a fresh process: the
    resolver of heddle/pytorch/resolver.py); False when it names none."""
    spec = decode(name)
    if spec is None:
        return False
    grouped_op(spec)
    return True


_ops: Dict[GroupedSpec, object] = {}
_lock = threading.Lock()


def grouped_op(spec: GroupedSpec):
    """torch.ops.heddle.<spec.op_name()>, registered (with its fake implementation and backward) once."""
    op = _ops.get(spec)
    if op is None:
        with _lock:
            op = _ops.get(spec)
            if op is None:
                op = register_op(spec.op_name(), spec.input_names(), lambda ts: _run(spec, ts),
                                 lambda ts: _fake(spec, ts))
                _register_autograd(spec, op)
                _ops[spec] = op
    return op


def grouped_spec(x, w, offs, bias=None, activation=None, out_dtype=None):
    """heddle.grouped_mm's checks (InputError naming the argument), then (the spec, the op's tensors: x, w as
    stored, the bias if any, offs). Reads only metadata, so it runs on fake tensors too."""
    trans_b, stored = _check(x, w, offs, bias, activation, out_dtype)
    spec = GroupedSpec(_DT[x.dtype], int(x.shape[1]), int(w.shape[2]), trans_b,
                       None if bias is None else _DT[bias.dtype], bias is not None and bias.dim() == 2,
                       activation, _DT[out_dtype or x.dtype])
    return spec, [x, stored] + ([bias] if bias is not None else []) + [offs]


def grouped_call(x, w, offs, bias=None, activation=None, out_dtype=None) -> torch.Tensor:
    """Every check, then a plain eager call without the op layer (keyed in grouped_mm's front when it launched
    through a plan), anything else (traced, compiled, a mode, a gradient to record) through the custom op."""
    spec, tensors = grouped_spec(x, w, offs, bias, activation, out_dtype)
    name = _op_name(*spec.sig())
    pick = (0, 1, 3, 2) if bias is not None else (0, 1, 2)  # the op's x, w as stored, bias, offs in the call
    out = front.eager(_calls, (x, w, offs, bias, activation, out_dtype), tensors, pick,
                      lambda: run_signature(spec.sig(), tensors), lambda: device_kernel(spec.sig(), tensors))
    return out if out is not None else getattr(torch.ops.heddle, name)(*tensors)


_calls = front.call_table()  # grouped_mm's front (docs/grouped.md "Eager calls"), a table of its own
_front = _calls.fast_run


def _op_name(*sig) -> str:
    """Registers the op of a signature on first use; under torch.compile it runs once at trace time and the
    name is a constant of the graph (as heddle.matmul's _op_name)."""
    spec = GroupedSpec(*sig)
    grouped_op(spec)
    return spec.op_name()


# torch.compiler.assume_constant_result(_op_name), spelled as the mark it sets (importing torch._dynamo costs
# `import heddle` over a second: heddle/pytorch/matmul.py)
_op_name._dynamo_marked_constant = True


def _run(spec: GroupedSpec, tensors):
    x, stored = tensors[0], tensors[1]
    # the kernel reads x's rows and w's stored inner axis contiguously (grouped._check's rules, which a
    # compiled graph's inputs need not keep)
    fixed = [x if x.stride(-1) == 1 or x.shape[-1] == 1 else x.contiguous(),
             stored if stored.stride(-1) == 1 or stored.shape[-1] == 1 else stored.contiguous()]
    return run_signature(spec.sig(), fixed + list(tensors[2:]))


def _fake(spec: GroupedSpec, tensors):
    from ..core import inputs
    inputs.same_device("heddle.grouped_mm", spec.input_names(), tensors)
    x, stored = tensors[0], tensors[1]
    want = [spec.n, spec.k] if spec.trans_b else [spec.k, spec.n]
    if x.dim() != 2 or x.shape[1] != spec.k or stored.dim() != 3 or list(stored.shape[1:]) != want:
        raise InputError(f"heddle.grouped_mm ({spec.op_name()}): x is {list(x.shape)} and w {list(stored.shape)}; "
                         f"this op takes x [T, {spec.k}] and w [E, {want[0]}, {want[1]}]")
    return x.new_empty((x.shape[0], spec.n), dtype=_TORCH[spec.out_dtype])


def _register_autograd(spec: GroupedSpec, op) -> None:
    has_bias = spec.bias is not None

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, grad):
        saved = ctx.saved_tensors
        x, stored, offs = saved[0], saved[1], saved[-1]
        bias = saved[2] if has_bias else None
        need = ctx.needs_input_grad
        T, E = x.shape[0], stored.shape[0]
        rows = torch.arange(T, device=x.device, dtype=offs.dtype)
        expert = torch.searchsorted(offs, rows, right=True)         # the expert of each row, E past the end
        inside = (expert < E).unsqueeze(-1)                          # [T, 1]: rows of some expert
        gf = torch.where(inside, grad.float(), 0.0)
        if spec.activation is not None:
            pre = replace(spec, activation=None, out_dtype="f32")   # z, recomputed by the grouped kernel
            z = torch.where(inside, grouped_op(pre)(*saved), 0.0)
            with torch.enable_grad():
                zz = z.detach().requires_grad_(True)
                dz, = torch.autograd.grad(_UNARY[spec.activation](zz), zz, gf)
        else:
            dz = gf
        dz_lp = dz.to(x.dtype)
        grads = [None] * len(saved)
        if need[0]:  # dx = dz @ w[e]^T: the grouped op on the other reading of the stored weights
            back = GroupedSpec(spec.dtype, spec.n, spec.k, not spec.trans_b, None, False, None, spec.dtype)
            grads[0] = torch.where(inside, grouped_op(back)(dz_lp, stored, offs), 0.0).to(x.dtype)
        if need[1]:  # dw[e] = x_e^T @ dz_e, one masked dense product per expert (see the module docstring)
            dw = torch.stack([(x * (expert == e).unsqueeze(-1).to(x.dtype)).t() @ dz_lp for e in range(E)])
            grads[1] = (dw.transpose(-1, -2) if spec.trans_b else dw).contiguous().to(stored.dtype)
        if has_bias and need[2]:
            if spec.bias_per_expert:
                onehot = (expert.unsqueeze(0) == torch.arange(E, device=x.device).unsqueeze(-1)).float()
                grads[2] = (onehot @ dz).to(bias.dtype)                # [E, T] x [T, N]
            else:
                grads[2] = dz.sum(0).to(bias.dtype)
        return tuple(grads)

    op.register_autograd(backward, setup_context=setup_context)
