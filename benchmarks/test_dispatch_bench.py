"""Host dispatch overhead per call on a GPU (skipped without one): a tiny heddle.matmul through the
torch custom op, the same kernel called directly, torch.mm on the same operands and an empty torch
custom op, each timed over many calls.

host time per call: the host clock around `calls` calls with no synchronisation inside the loop (the
GPU is idle at the start and a tiny kernel runs faster than it is launched, so the loop measures
what the caller pays); with the GPU: the same loop closed by a device synchronisation.
"""
from __future__ import annotations

import time

import pytest
import torch

import heddle
from heddle import bench

pytestmark = pytest.mark.gpu

M, N, K = 16, 64, 64


def _host_loop(fn, calls=200, repeats=15):
    host, dev = [], []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter_ns()
        torch.cuda.synchronize()
        t2 = time.perf_counter_ns()
        host.append((t1 - t0) / 1e3 / calls)
        dev.append((t2 - t0) / 1e3 / calls)
    return bench.summarize(host, unit="us"), bench.summarize(dev, unit="us")


@pytest.mark.quick
def test_dispatch_overhead(recorder):
    a = bench.random_tensor((M, K), torch.bfloat16, "cuda")
    b = bench.random_tensor((K, N), torch.bfloat16, "cuda")
    ref = a.double() @ b.double()
    bench.validate(heddle.matmul(a, b), ref, what="tiny heddle.matmul")
    fm = next(fm for fm in heddle.api._ops.values() if (fm.spec.k, fm.spec.n, fm.spec.activation) == (K, N, None)
              and fm.spec.bias is None and fm.spec.dtype == "bf16" and not fm.spec.trans_b)
    k = fm.kernel_for([a, b], heddle.runtime.target_for_device(a.device))

    @torch.library.custom_op("heddle_bench::noop_cuda", mutates_args=())
    def noop(x: torch.Tensor) -> torch.Tensor:
        return x.new_empty(0)

    calls = {
        "heddle_matmul": (lambda: heddle.matmul(a, b), "heddle.matmul (eager: its plan table, then the launch)"),
        "kernel_call": (lambda: k(a, b), "heddle Kernel called directly (no custom op)"),
        "torch_mm": (lambda: torch.mm(a, b), "torch.mm (cuBLAS)"),
        "custom_op_empty": (lambda: noop(a), "empty torch custom op"),
    }
    tm = _triton()
    if tm is not None:  # Triton's launcher: the same problem through its JIT-function call (one fixed config)
        bench.validate(tm.matmul_with(a, b), ref, what="tiny Triton matmul")
        calls["triton_launch"] = (lambda: tm.matmul_with(a, b), "Triton matmul (its Python launcher + launch)")
    for step, (fn, what) in calls.items():
        for _ in range(20):
            fn()
        host, dev = _host_loop(fn)
        recorder.add("gpu", {"suite": "dispatch", "step": step, "what": what, "stats": host.to_dict(),
                             "device_inclusive": dev.to_dict(), "shape": f"{M}x{N}x{K}", "status": "ok"})


def _triton():
    """benchmarks/triton_matmul.py when triton is importable, else None."""
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        import triton_matmul as tm
    except ImportError:
        return None
    return tm if tm.available else None
