"""heddle kernels as torch custom ops: `torch.ops.heddle.<name>` with a real and a fake implementation.

register_op(name, input_names, run, fake)  one op (Tensor inputs -> Tensor); heddle.matmul's ops use it
kernel_op(kernel)                          a compiled Kernel as torch.ops.heddle.fusion_<hash> (Kernel.op)

The real implementation launches the kernel on CUDA tensors and computes the fusion with torch (float32)
on CPU tensors (the printed kernel on the CPU under HEDDLE_INTERPRET=1); the fake one gives the output's
shape and dtype, so the op traces under torch.compile.
"""
from __future__ import annotations

import hashlib
import threading
from typing import Dict

import torch

from ..core import inputs, torch_compat
from ..core.errors import InputError
from ..core.inputs import DTYPES, MatmulGeometry
from ..core.kernel import Kernel, set_op_factory
from .autograd import register_fusion_autograd


registering: set = set()   # op names being registered (torch.library looks them up meanwhile)


def register_op(name: str, input_names, run, fake, outputs: int = 1):
    """Register `heddle::<name>` (Tensor inputs -> Tensor, or a tuple of `outputs` tensors) with a real and a
    fake implementation."""
    ret = "Tensor" if outputs == 1 else "(" + ", ".join(["Tensor"] * outputs) + ")"
    schema = "(" + ", ".join(f"Tensor {n}" for n in input_names) + ") -> " + ret
    registering.add(name)
    try:
        op = torch.library.custom_op(f"heddle::{name}", lambda *t: run(t), mutates_args=(), schema=schema)
    finally:
        registering.discard(name)
    op.register_fake(lambda *t: fake(t))
    return op


_fusion_ops: Dict[str, object] = {}
_fusion_ops_lock = threading.Lock()


def kernel_op(kernel: Kernel):
    """The torch op of `kernel`, torch.ops.heddle.fusion_<hash of target and source>. One CustomOpDef per
    name: a second Kernel with the same source shares it (the same type as the first gets, not the
    torch.ops packet)."""
    name = "fusion_" + hashlib.sha256((kernel.target + kernel.source).encode()).hexdigest()[:12]
    with _fusion_ops_lock:
        op = _fusion_ops.get(name)
        if op is None:
            op = _fusion_ops[name] = register_op(name, [n for n, _, _ in kernel._inputs],
                                                 lambda ts: _run_any(kernel, ts), lambda ts: _fake(kernel, ts),
                                                 outputs=len(kernel._outs))
            op.__class__ = _FusionOpDef  # a missing input is heddle's InputError, not the dispatcher's
            op._heddle_inputs = tuple(n for n, _, _ in kernel._inputs)
            op._heddle_kernel = kernel.name
            register_fusion_autograd(kernel.fusion, op)   # Kernel.op trains too
    return op


class _FusionOpDef(torch_compat.custom_op_def_type()):
    """Kernel.op: the registered CustomOpDef, whose call names a missing input as heddle.InputError (the
    dispatcher's own error names the schema, not what to pass)."""

    def __call__(self, *args, **kwargs):
        names = self._heddle_inputs
        if len(args) < len(names):
            missing = [n for n in names[len(args):] if n not in kwargs]
            if missing:
                raise InputError(f"{self._heddle_kernel}: missing input{'s' if len(missing) > 1 else ''} "
                                 f"{', '.join(repr(n) for n in missing)}; Kernel.op takes the fusion's inputs "
                                 f"{', '.join(names)}, in that order (or by name)")
        return super().__call__(*args, **kwargs)


def fusion_op_error(name: str) -> str:
    """Why torch.ops.heddle.<name>, a Kernel.op op this process has not built, cannot be resolved, and what
    to do instead (docs/torch.md, "Export")."""
    return (f"torch.ops.heddle.{name} is a Kernel.op op: its name is a hash of a kernel's target and source, "
            "which does not say what to build, so it cannot be registered from its name. In this process, "
            "build the same kernel and take its op (heddle.Kernel.build(fusion, target).op) before loading the "
            "program, or write the model with heddle.matmul, whose ops register themselves by name")


def _run_any(kernel: Kernel, tensors):
    if tensors[0].device.type == "cuda":
        return kernel(*tensors)
    from ..core.interpret import interpret_mode, run_checked
    g = inputs.check(kernel.name, kernel._inputs, kernel._matmul_expr, tensors)  # the CUDA path's rules
    empty = inputs.zero_size_result(kernel.fusion, g, tensors)
    if empty is not None:
        return empty
    if interpret_mode():  # HEDDLE_INTERPRET=1: the printed kernel on the CPU (heddle/core/interpret.py)
        return run_checked(kernel, tensors)
    from ..core.reference import evaluate
    return evaluate(kernel.fusion, tensors, compute_dtype=torch.float32)


def _fake(kernel: Kernel, tensors):
    inputs.same_device(kernel.name, [n for n, _, _ in kernel._inputs], tensors)
    g = MatmulGeometry(kernel._matmul_expr, {n: t for (n, _, _), t in zip(kernel._inputs, tensors)})
    outs = tuple(tensors[0].new_empty(g.out_shape, dtype=getattr(torch, DTYPES[o.dtype])) for o in kernel._outs)
    return outs[0] if len(outs) == 1 else outs


set_op_factory(kernel_op)
