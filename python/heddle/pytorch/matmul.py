"""heddle.matmul and the torch custom ops behind it.

Each distinct problem signature (dtypes, N, K, layout, epilogue) becomes one fusion and one torch
custom op `torch.ops.heddle.<name>` with a fake implementation, so it traces under torch.compile.
M (and the batch) stay symbolic: varying them does not recompile. On CUDA tensors the op launches
the heddle kernel; on CPU tensors it computes the same fusion with torch (float32), so models stay
runnable anywhere.
"""
from __future__ import annotations

import functools
import os
import threading
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import torch

from .. import _C
from ..core import aten, inputs
from ..core import torch_compat as compat
from ..core.errors import InputError, ScheduleError
from ..core.fusion import Fusion, ops_unary
from ..core.kernel import MAX_PLANS, Kernel, _vec_e_for, _vec_for, plan_table, run_table
from ..core.tma import zero_stride
from ..core.ops import ACTIVATIONS
from . import op_names
from .buckets import DEFAULT_SMS, M_BUCKETS, m_bucket  # noqa: F401 (heddle.api's names)
from .custom_ops import register_op

_DT = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32"}


@dataclass(frozen=True)
class MatmulSpec:
    dtype: str
    batched: bool
    batched_b: bool
    k: int
    n: int
    trans_a: bool
    trans_b: bool
    bias: Optional[Tuple[str, int]]          # (dtype, rank) of the bias, broadcast over rows
    residual: Optional[Tuple[str, int]]      # (dtype, rank) of a residual added after activation
    activation: Optional[str]
    alpha: Optional[float]
    out_dtype: str
    saved: Optional[str] = None              # dtype of the pre-activation as a second output (training)
    row_bias: Optional[Tuple[str, int]] = None  # (dtype, rank) of a per-row bias [M, 1] / [B, M, 1]

    def op_name(self) -> str:
        """The op's name encodes the whole spec (heddle/pytorch/op_names.py), so it can be registered from its name."""
        return op_names.encode(self.dtype, self.batched, self.batched_b, self.k, self.n, self.trans_a, self.trans_b,
                               self.bias, self.residual, self.activation, self.alpha, self.out_dtype, self.saved,
                               self.row_bias)

    def build_fusion(self) -> Fusion:
        fd = Fusion()
        k, n = self.k or "K", self.n or "N"  # a size 0 stays a symbol: such calls never reach a kernel
        a_shape = (["B"] if self.batched else []) + ([k, "M"] if self.trans_a else ["M", k])
        b_shape = (["B"] if self.batched_b else []) + ([n, k] if self.trans_b else [k, n])
        a = fd.input("a", self.dtype, a_shape)
        b = fd.input("b", self.dtype, b_shape)
        y = fd.matmul(a, b, self.trans_a, self.trans_b)
        if self.alpha is not None:
            y = y * self.alpha
        if self.bias is not None:
            y = y + fd.input("bias", self.bias[0], [n] if self.bias[1] == 1 else [1, n])
        if self.row_bias is not None:  # one value per row of the result, broadcast over its columns
            y = y + fd.input("row_bias", self.row_bias[0], (["B"] if self.row_bias[1] == 3 else []) + ["M", 1])
        pre = y
        if self.saved is not None and self.activation is None:
            raise ScheduleError(f"{self.op_name()}: a saved pre-activation needs an activation after it")
        if self.activation is not None:
            y = ops_unary(self.activation, y)
        if self.residual is not None:
            rshape = (["B"] if self.residual[1] == 3 else []) + ["M", n]
            y = y + fd.input("residual", self.residual[0], rshape)
        fd.output(y.to(self.out_dtype))
        if self.saved is not None:  # the second output: what the backward keeps (docs/scheduling.md)
            fd.output(pre.to(self.saved))
        return fd


class FusedMatmul:
    """One problem signature: its fusion, its torch op, and its compiled kernels per (target, vec)."""

    _k_share = "auto"

    @property
    def k_share(self) -> str:
        """How the kernels of small-M buckets share the k loop: "auto" (the cost model of
        schedule/k_share.cpp), "split_k", "stream_k" or "none"; set on an op to override the model."""
        return self._k_share

    @k_share.setter
    def k_share(self, mode: str):
        self._k_share = mode
        self._eager.clear()  # the eager plans launch kernels chosen under the old setting
        _calls.clear()       # and heddle.matmul's front holds them too

    _epilogue_layout = "auto"

    @property
    def epilogue_layout(self) -> str:
        """The sm_90a warp-specialized layout of the epilogue (schedule/epilogue_layout.h): "auto" (ping-pong
        MMA warpgroups for a fused epilogue, cooperative for a plain store), "cooperative", "pingpong" or
        "epilogue_role"; set on an op to override the default."""
        return self._epilogue_layout

    @epilogue_layout.setter
    def epilogue_layout(self, layout: str):
        self._epilogue_layout = layout
        self._eager.clear()  # the eager plans launch kernels chosen under the old setting

    def __init__(self, spec: MatmulSpec):
        self.spec = spec
        self.fusion = spec.build_fusion()
        self._decls = [(t.name, t.dtype, t.shape) for t in self.fusion.inputs]
        self._mexpr = inputs.matmul_expr(self.fusion)
        self.kernels: Dict[tuple, Kernel] = {}
        self._eager = plan_table()  # call signature -> the launch plan its CUDA calls take (C++)
        self.compiles = 0
        self._lock = threading.Lock()
        self._op = None  # registered with torch on first use by the op layer (the `op` property)

    @property
    def op(self):
        """This signature's torch custom op, torch.ops.heddle.<name>, registered on first use: by the op layer
        (heddle.matmul's calls that need it: autograd, torch.compile, modes), by torch.ops.heddle's resolver
        (heddle/pytorch/resolver.py: a lookup by name, torch.export.load, a cached compiled graph) or by the
        dynamo rewrite. A plain eager call, and FusedMatmul.kernel, never register it: torch.library's
        custom_op costs about 2 ms per op (docs/torch.md, "When ops register")."""
        op = self._op
        if op is None:
            with _register_lock:
                op = self._op
                if op is None:
                    op = self._op = self._make_op()
        return op

    @property
    def op_registered(self) -> bool:
        """Whether `op` has been registered with torch in this process."""
        return self._op is not None

    def _make_op(self):
        """The op of this signature (heddle.scaled_mm's signatures register theirs without a backward)."""
        return _register_op(self)

    def interpret_target(self) -> str:
        """The target the printed kernel is lowered for under HEDDLE_INTERPRET=1 (heddle/core/interpret.py)."""
        from ..core.interpret import interpret_target
        return interpret_target()

    def kernel(self, target: str, vec_a: int, vec_b: int, m: int = -1, rtc: bool = True, sms: int = 0,
               tma: bool = True, vec_e: int = 1) -> Kernel:
        """The kernel for M bucket m_bucket(m) (m < 0: the largest bucket), compiled once on first use. M stays
        a run-time argument: every M of a bucket runs the same kernel. sms: the SM count the bucket's
        split-K choice fills (0: the current device's, else DEFAULT_SMS). tma=False: no TMA kernel (an operand
        whose batch stride is 0, heddle.tma.broadcast_batch). vec_e=2: the bias / residual suit reads of two
        columns per load (core/kernel.py _vec_e_for)."""
        bucket = m_bucket(m)
        sms = 0 if self.spec.batched else (sms or _sm_count())  # batched: no split-K, the SM count plays no part
        # the k sharing depends on the SM count
        key = (target, vec_a, vec_b, rtc, bucket, sms, self.k_share, self.epilogue_layout, tma, vec_e)
        k = self.kernels.get(key)
        if k is None:
            with self._lock:
                k = self.kernels.get(key)
                if k is None:
                    fd = self.schedule(target, vec_a, vec_b, bucket, sms, tma, vec_e)
                    # heddle chose this schedule: a spill is heddle's to fix, so the call still runs (warned)
                    k = Kernel.build(fd, target, vec_a=vec_a, vec_b=vec_b, rtc=rtc, allow_spills=True, vec_e=vec_e)
                    if _spills(k) and self.epilogue_layout == "auto":
                        # the epilogue budget (schedule/epilogue_layout.h) should have kept it off: the next
                        # candidate, cooperative MMA warpgroups (the lighter epilogue), where that one is clean
                        fd = self.schedule(target, vec_a, vec_b, bucket, sms, tma, vec_e, layout="cooperative")
                        k2 = Kernel.build(fd, target, vec_a=vec_a, vec_b=vec_b, rtc=rtc, allow_spills=True,
                                          vec_e=vec_e)
                        k = k if _spills(k2) else k2
                    _warn_if_spills(k)
                    self.kernels[key] = k
                    self.compiles += 1
        return k

    def schedule(self, target: str, vec_a: int, vec_b: int, bucket: int, sms: int = 0, tma: bool = True,
                 vec_e: int = 1, layout: Optional[str] = None) -> Fusion:
        """The fusion scheduled for M bucket `bucket` (M_BUCKETS; -1 = larger): the automatic schedule told
        M <= bucket, so small M gets 64-row tiles and, when the tiles fill less than half the SMs, split-K.
        layout: the sm_90a epilogue layout (default: the op's epilogue_layout)."""
        if vec_a < 2 or vec_b < 2:  # layouts cp.async cannot take: synchronous copies
            return _plain_schedule(self.spec, target)
        fd = self.spec.build_fusion()
        # Hopper: TMA needs 16-byte rows and bases, i.e. 8-element copies (heddle/core/tma.py)
        fd.auto_schedule(target, bucket, self.spec.n, self.spec.k, tma=tma and vec_a >= 8 and vec_b >= 8,
                         sms=0 if self.spec.batched else (sms or _sm_count()), k_share=self.k_share,
                         epilogue_layout=layout or self.epilogue_layout, epilogue_pairs=vec_e == 2)
        return fd

    def describe(self, target: str, vec_a: int = 8, vec_b: int = 8, sms: int = 0, vec_e: int = 2) -> str:
        """The kernel choice per M bucket, one line each (deterministic; nothing is compiled)."""
        lines = []
        for b in M_BUCKETS + (-1,):
            fd = self.schedule(target, vec_a, vec_b, b, sms, vec_e=vec_e)
            low = fd.lower(target, vec_a, vec_b, vec_e=vec_e)
            line = f"M {'<= ' + str(b) if b > 0 else '> ' + str(M_BUCKETS[-1])}: {low.name}: {low.schedule}"
            t = low.tile
            if b > 0 and not self.spec.batched and vec_a >= 2 and vec_b >= 2:
                # the k sharing of the cp.async and the sm_90a TMA kernels: the cost model's numbers
                # (schedule/k_share.cpp; 4 stages weigh as any fewer: autoSplitK keeps max(4, stages) k-tiles)
                tiles = -(-b // t["bm"]) * -(-self.spec.n // t["bn"])
                line += "; " + _C.Fusion.k_share_plan(tiles, -(-self.spec.k // t["bk"]), 4, sms or _sm_count(),
                                                      t["bm"], t["bn"], t["bk"], mode=self.k_share,
                                                      target=target)[2]
            lines.append(line)
        return "\n".join(lines)

    def kernel_for(self, tensors, target: str, rtc: bool = True, sms: Optional[int] = None) -> Kernel:
        """The kernel for these operands (their alignment classes and M bucket): the tuned config under
        HEDDLE_AUTOTUNE=1, else the automatic schedule. rtc=False: lowered only, never tuned (the interpreter);
        sms: the SM count the k sharing fills (default: the operands' device's)."""
        vec_a, vec_b, vec_e = _vec_for(tensors[0]), _vec_for(tensors[1]), _vec_e_for(tensors[2:])
        a = tensors[0]
        m = int(a.shape[-1] if self.spec.trans_a else a.shape[-2])
        if rtc and os.environ.get("HEDDLE_AUTOTUNE", "0") not in ("", "0") and _autotune().enabled():
            batch = int(a.shape[0]) if self.spec.batched else 1
            return _autotune().matmul_kernel(self, target, vec_a, vec_b, m, batch, vec_e=vec_e)
        if sms is None:
            sms = _sms_of(a.get_device()) if a.is_cuda else 0
        return self.kernel(target, vec_a, vec_b, m, rtc=rtc, sms=sms, tma=not _broadcast_batch(tensors), vec_e=vec_e)

    def _check(self, tensors):
        """The same rules on every device (heddle/core/inputs.py): (geometry, torch's answer for an empty
        problem or None)."""
        g = inputs.check(f"heddle.matmul ({self.spec.op_name()})", self._decls, self._mexpr, tensors)
        return g, inputs.zero_size_result(self.fusion, g, tensors)

    def _launch_cuda(self, tensors, g, table=None):
        """(the kernel chosen for these CUDA tensors, its output), launched; checked by _check. table: where
        the launch's plan is also remembered (the eager table)."""
        from ..core.runtime import target_for_device
        k = self.kernel_for(tensors, target_for_device(tensors[0].device))
        return k, k._launch(tensors, g, table)  # checked against the same inputs (the kernel's fusion is ours)

    def run(self, tensors):
        """The op's implementation: a CUDA call signature checked and launched before goes through its plan,
        anything else through the full path."""
        if tensors and getattr(tensors[0], "is_cuda", False):
            out = run_table(self._eager, tensors)
            if out is not None:
                return out
        return self.full(tensors)

    def full(self, tensors):
        """The path of a call no plan takes: checks, then the kernel's launch on CUDA tensors (its plan kept for
        the next call of this signature; a split-K or stream-K plan takes its stream's workspace), the interpreted
        kernel under HEDDLE_INTERPRET=1, else torch. run (the op) comes here when its plan table misses;
        heddle.matmul's plain eager calls come here directly when `planned` missed, without the op layer."""
        # a negative view's memory holds its negation: resolved here (torch's dispatcher does it for the op,
        # not for an eager call), and the plan tables' signatures refuse it, so such a call always comes here
        tensors = inputs.materialize(tensors)
        g, empty = self._check(tensors)
        if empty is not None:
            return empty
        a = tensors[0]
        if a.device.type == "cuda":
            return self._launch_cuda(tensors, g, self._eager)[1]
        from ..core.interpret import interpret_mode
        if interpret_mode():  # HEDDLE_INTERPRET=1: the printed kernel on the CPU (heddle/core/interpret.py)
            from ..core.interpret import run_checked
            return run_checked(self.kernel_for(tensors, self.interpret_target(), rtc=False, sms=DEFAULT_SMS), tensors)
        from ..core.reference import evaluate
        return evaluate(self.fusion, tensors, compute_dtype=torch.float32)

    def planned(self, tensors):
        """The launch of a call signature seen before, when the call is a plain eager one on the tensors'
        side (exactly torch.Tensor, none requiring grad under grad mode: eager_call_ok's per-tensor rules,
        checked in C++ while the signature is read; CUDA tensors, since only their launches leave plans);
        None otherwise. The caller has checked the rest of eager_call_ok (not compiling, no mode)."""
        grad = torch.is_grad_enabled()
        out = self._eager.call(tensors, torch.Tensor, grad)  # one C++ call: signature, stream, output, launch
        if out is not None:
            return out
        try:
            index = tensors[0].get_device()
        except (AttributeError, TypeError, IndexError):  # not tensors: the full path says what is wrong
            return None
        # a CUDA device that is not the current one: run_table makes it current (CPU tensors: call() tried)
        return run_table(self._eager, tensors, torch.Tensor, grad) if index >= 0 else None

    def fake(self, tensors):
        inputs.same_device("heddle.matmul", [n for n, _, _ in self._decls], tensors)
        a = tensors[0]
        M = a.shape[-1] if self.spec.trans_a else a.shape[-2]
        shape = ((a.shape[0],) if self.spec.batched else ()) + (M, self.spec.n)
        dt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
        out = a.new_empty(shape, dtype=dt[self.spec.out_dtype])
        return out if self.spec.saved is None else (out, a.new_empty(shape, dtype=dt[self.spec.saved]))


def _sm_count() -> int:
    """The current CUDA device's SM count, else DEFAULT_SMS."""
    try:
        if torch.cuda.is_available():
            return _sms_of(torch.cuda.current_device())
    except Exception:  # noqa: BLE001 -- no usable device: the default stands in
        pass
    return DEFAULT_SMS


def _broadcast_batch(tensors) -> bool:
    """An operand whose batches are one matrix (batch stride 0): TMA maps are not promised to take it."""
    # a broadcast batch (tma.broadcast_batch) is a zero stride too, as are expand()ed rows: no TMA map
    return zero_stride(tensors[0]) or zero_stride(tensors[1])


@functools.lru_cache(maxsize=None)
def _sms_of(index: int) -> int:
    return int(torch.cuda.get_device_properties(index).multi_processor_count)


def _autotune():
    from ..tuning import autotune
    return autotune


def _plain_schedule(spec: MatmulSpec, target: str) -> Fusion:
    fd = spec.build_fusion()
    for t in fd.inputs[:2]:
        fd.cache_after(t, "plain")
    fd.auto_schedule(target, -1, spec.n, spec.k)
    return fd


_ops: Dict[MatmulSpec, FusedMatmul] = {}
_ops_lock = threading.Lock()
# FusedMatmul.op's registration (torch.library looks the name up meanwhile: the resolver answers "not yet",
# custom_ops.registering, so the same thread does not come back here)
_register_lock = threading.RLock()


def _register_op(fm: FusedMatmul):
    names = ["a", "b"] + [t.name for t in fm.fusion.inputs[2:]]
    name = fm.spec.op_name()
    op = register_op(name, names, fm.run, fm.fake, outputs=1 if fm.spec.saved is None else 2)
    from .autograd import register_matmul_autograd
    register_matmul_autograd(fm, op)   # heddle.matmul trains in eager mode too
    return op


def fused_matmul_op(spec: MatmulSpec) -> FusedMatmul:
    """The FusedMatmul of `spec`, one per process; its torch op registers on first use (FusedMatmul.op)."""
    fm = _ops.get(spec)
    if fm is not None:
        return fm
    with _ops_lock:
        fm = _ops.get(spec)
        if fm is None:
            fm = FusedMatmul(spec)
            _ops[spec] = fm
        return fm


def matmul(a: torch.Tensor, b: torch.Tensor, *, bias: Optional[torch.Tensor] = None,
           activation: Optional[str] = None, residual: Optional[torch.Tensor] = None,
           alpha: Optional[float] = None, trans_a: bool = False, trans_b: bool = False,
           out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """act(alpha * (a @ b) + bias) + residual in one kernel, with a schedule heddle picks itself.

    trans_a: `a` holds A^T ([K, M]); trans_b: `b` holds B^T ([N, K]) — e.g. a Linear weight.
    activation: relu | gelu | gelu_tanh | silu | sigmoid | tanh.
    """
    if not _dynamo_compiling():
        # a plain eager call like an earlier planned one (same arguments, same tensor signatures): one C++
        # call, CallTable.run (no mode, grad rule, signature, lookup, output, pack, launch); else None. Under
        # dynamo's trace the branch folds away; other tracers (make_fx, non-strict export) run it with fake
        # tensors (subclasses, never keyed) under a mode (the table's mode check): both take the full path.
        out = _front(a, b, bias, residual, activation, alpha, trans_a, trans_b, out_dtype)
        if out is not None:
            return out
    name, args = _op_and_args(a, b, bias, activation, residual, alpha, trans_a, trans_b, out_dtype)
    if not (torch.compiler.is_compiling() or _modes_active()):
        fm = _by_name[name]
        out = fm.planned(args)  # a plain eager call whose tensors' signature this op planned: one C++ call
        if out is None and eager_call_ok(args):  # not planned yet: no op layer, the plan tables just missed
            out = fm.full(args)
        if out is not None:  # keyed by the whole call when it launched through a plan (the next call's front)
            _calls.adopt((a, b, bias, residual, activation, alpha, trans_a, trans_b, out_dtype), fm._eager)
            return out
    return getattr(torch.ops.heddle, _registered(name))(*args)


# torch.compiler.is_dynamo_compiling, held here: one Python call returning False in eager (is_compiling makes two,
# about 0.1 us more), folded to True by dynamo like is_compiling
_dynamo_compiling = torch.compiler.is_dynamo_compiling


def _op_and_args(a, b, bias, activation, residual, alpha, trans_a, trans_b, out_dtype):
    """heddle.matmul's checks, then (the name of its op, the op's tensor arguments). Every eager call runs
    it: each tensor attribute is read once."""
    dt_a, dt_b = _dtype_code("a", a), _dtype_code("b", b)
    dt_bias = None if bias is None else _dtype_code("bias", bias)
    dt_res = None if residual is None else _dtype_code("residual", residual)
    if out_dtype is not None and out_dtype not in _DT:
        raise InputError(f"heddle.matmul: out_dtype={out_dtype} is not supported; use torch.float16, "
                         "torch.bfloat16 or torch.float32")
    if alpha is not None and (isinstance(alpha, bool) or not isinstance(alpha, (int, float))):
        raise InputError(f"heddle.matmul: alpha={alpha!r} must be a Python number")
    if dt_a == "f32" or dt_b != dt_a:
        raise InputError(f"heddle.matmul: operands are {a.dtype} and {b.dtype}; both must be float16 or both "
                         "bfloat16 (cast float32 operands first)")
    if activation is not None and activation not in ACTIVATIONS:
        raise InputError(f"heddle.matmul: activation '{activation}' is not one of {', '.join(ACTIVATIONS)}")
    sa, sb = a.shape, b.shape
    ra, rb = len(sa), len(sb)
    if ra not in (2, 3) or rb not in (2, 3):
        raise InputError(f"heddle.matmul: operands need rank 2 or 3, got {ra} and {rb}")
    k = sa[-2] if trans_a else sa[-1]
    n, kb = (sb[-2], sb[-1]) if trans_b else (sb[-1], sb[-2])
    if k != kb:
        raise InputError(f"heddle.matmul: a gives K={k} but b gives K={kb}")
    name = _op_name(dt_a, ra == 3, rb == 3, int(k), int(n), trans_a, trans_b,
                    dt_bias, 0 if bias is None else bias.dim(), dt_res, 0 if residual is None else residual.dim(),
                    activation, None if alpha is None else float(alpha), dt_a if out_dtype is None else _DT[out_dtype])
    if bias is None:
        return name, [a, b] if residual is None else [a, b, residual]
    return name, [a, b, bias] if residual is None else [a, b, bias, residual]


def _dtype_code(name: str, t) -> str:
    """heddle's code of a tensor argument's dtype (f16, bf16, f32); InputError for anything else."""
    if not isinstance(t, torch.Tensor):
        raise InputError(f"heddle.matmul: '{name}' is a {type(t).__name__}, not a torch.Tensor")
    code = _DT.get(t.dtype)
    if code is None:
        raise InputError(f"heddle.matmul: '{name}' has dtype {t.dtype}; heddle takes float16, bfloat16 or "
                         f"float32 {name} tensors — cast it first")
    return code


def eager_call_ok(tensors, device_type: str = "cuda") -> bool:
    """True when the custom op would do nothing but run its implementation: not tracing or compiling
    (no dynamo, no dispatch or function mode such as FakeTensorMode or make_fx, no functorch transform),
    plain tensors on `device_type`, and no gradient to record. Then heddle.matmul skips the op layer."""
    if torch.compiler.is_compiling() or _modes_active():
        return False
    grad = torch.is_grad_enabled()
    on_device = _ON_DEVICE.get(device_type)  # t.is_cuda: a bool, where t.device builds a device object
    for t in tensors:
        if type(t) is not torch.Tensor or (grad and t.requires_grad) or \
                not (getattr(t, on_device) if on_device else t.device.type == device_type):
            return False
    return True


_ON_DEVICE = {"cuda": "is_cuda", "cpu": "is_cpu"}


# torch's queries for dispatch modes, function modes and functorch transforms (each true when one is active;
# always true on a torch without them: every call goes through the op): heddle.core.torch_compat
_MODE_QUERIES = compat.mode_queries()


def _modes_active() -> bool:
    q = _MODE_QUERIES
    return bool(q[0]() or q[1]() or q[2]())


def _op_name(dtype, batched, batched_b, k, n, trans_a, trans_b, bias_dt, bias_rank, res_dt, res_rank,
             activation, alpha, out_dtype) -> str:
    """Registers the op for this signature on first use; under torch.compile it runs once at trace
    time and the name is a constant of the graph. Eager calls cost one dict lookup on a flat tuple."""
    key = (dtype, batched, batched_b, k, n, trans_a, trans_b, bias_dt, bias_rank, res_dt, res_rank,
           activation, alpha, out_dtype)
    name = _op_names.get(key)
    if name is None:
        spec = MatmulSpec(dtype=dtype, batched=batched, batched_b=batched_b, k=k, n=n, trans_a=trans_a,
                          trans_b=trans_b, bias=None if bias_dt is None else (bias_dt, bias_rank),
                          residual=None if res_dt is None else (res_dt, res_rank), activation=activation,
                          alpha=alpha, out_dtype=out_dtype)
        fm = fused_matmul_op(spec)
        name = spec.op_name()
        _by_name[name] = fm
        _op_names[key] = name
    return name


def _registered(name: str) -> str:
    """`name`, its torch op registered (FusedMatmul.op): heddle.matmul's calls through the op layer. Under
    torch.compile it runs once at trace time (a constant of the graph, like _op_name)."""
    _by_name[name].op
    return name


_op_names: Dict[tuple, str] = {}
_by_name: Dict[str, FusedMatmul] = {}  # op name -> its FusedMatmul (the eager path)


def call_table(python_reads: bool = False):
    """heddle.matmul's front (docs/runtime.md, "Eager calls"): a repeated plain eager call -> the plan its op's
    table holds for its tensors; torch.Tensor operands by signature, dtypes by identity, the rest by value.
    Tensors read through ATen where heddle._C_aten serves this torch, else (or python_reads) through Python."""
    return _C.runtime.CallTable(torch.empty, MAX_PLANS, exact_type=torch.Tensor, identity_types=[torch.dtype],
                                blockers=_MODE_QUERIES, grad_enabled=torch.is_grad_enabled,
                                current_device=compat.cuda_current_device(), raw_stream=compat.cuda_raw_stream(),
                                aten=None if python_reads else aten.access())


_calls = call_table()
_front = _calls.fast_run  # _calls.run as a builtin bound to the table: no pybind11 dispatch per call
# torch.compiler.assume_constant_result(_op_name), spelled as the mark it sets: the decorator imports
# torch._dynamo (over a second of import time), which `import heddle` must not pay (docs/torch.md)
_op_name._dynamo_marked_constant = True
_registered._dynamo_marked_constant = True


def _spills(k: Kernel) -> bool:
    st = getattr(k.binary, "stats", None) if k.binary is not None else None
    return st is not None and bool(st.spill_stores or st.spill_loads)


def _warn_if_spills(k: Kernel) -> None:
    st = getattr(k.binary, "stats", None) if k.binary is not None else None
    if _spills(k):
        import warnings
        warnings.warn(f"heddle: the automatic schedule's kernel {k.name} spills {st.spill_stores} bytes of stores "
                      f"at {st.registers} registers; it runs, slower than it should (please report it; "
                      f"HEDDLE_AUTOTUNE=1 picks among non-spilling configs)", RuntimeWarning, stacklevel=3)
