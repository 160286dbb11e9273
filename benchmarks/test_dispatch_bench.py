"""Host dispatch overhead per call on a GPU (skipped without one): a tiny heddle.matmul through the
torch custom op, the same kernel called directly, torch.mm on the same operands and an empty torch
custom op, each timed over many calls; then calls as a loop makes them (inputs rotating over three sets,
the previous output kept alive, so no output comes back at the last one's address): the device's own
kernel (sm_90a on Hopper) and a split-K decode shape, with how many of the calls took the full path.

host time per call: the host clock around `calls` calls with no synchronisation inside the loop (the
GPU is idle at the start and a tiny kernel runs faster than it is launched, so the loop measures
what the caller pays); with the GPU: the same loop closed by a device synchronisation.

Without a GPU, test_dispatch_host_cpu runs benchmarks/dispatch_cpu.py against the stand-in libcuda
(tests/fake_cuda/libcuda_fake.c: a cuLaunchKernel that returns at once): the host work of a repeated
heddle.matmul call (sm_80) and of repeated Kernel calls (sm_80, sm_90a, sm_90a split-K) down to the driver
call, the full path they replace, and in each process an empty torch custom op and a C++ aten op as anchors;
in the sm_90a process also repeated heddle.scaled_mm calls (per-tensor, per-row, 128-block scales) through their
front, their checks, and torch._scaled_mm's CPU op, and repeated grouped calls (grouped_mm, grouped_mm_gated,
grouped_mm_masked) through their fronts beside the path before them. test_scaled_mm_dispatch (GPU) times heddle.scaled_mm beside
torch._scaled_mm, test_grouped_dispatch (GPU) the grouped calls beside torch._grouped_mm.
"""
from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
import time

import pytest
import torch

import heddle
from heddle import bench

M, N, K = 16, 64, 64
HERE = os.path.dirname(os.path.abspath(__file__))


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


@pytest.mark.gpu
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
    _rotating_rows(recorder, a.device)


def _rotating(fn, sets):
    """A call of fn on the next input set, its output kept until the call after next (a loop's)."""
    keep = collections.deque(maxlen=2)
    turn = [0]

    def call():
        keep.append(fn(*sets[turn[0] % len(sets)]))
        turn[0] += 1
    return call


def _rotating_loop(fn, sets):
    """_host_loop of fn called as a loop calls it (_rotating), after 20 warm-up calls."""
    call = _rotating(fn, sets)
    for _ in range(20):
        call()
    return _host_loop(call)


def _rotating_rows(recorder, device):
    """heddle.matmul and its kernel called directly as a loop calls them, on the tiny shape (the device's own
    kernel: sm_90a on Hopper, TMA maps over every operand) and on a split-K decode shape."""
    target = heddle.runtime.target_for_device(device)
    for label, (m, n, k, trans_b) in {"": (M, N, K, False), "_split_k": (16, 1024, 4096, True)}.items():
        sets = [(bench.random_tensor((m, k), torch.bfloat16, "cuda"),
                 bench.random_tensor((n, k) if trans_b else (k, n), torch.bfloat16, "cuda")) for _ in range(3)]
        a, b = sets[0]
        ref = a.double() @ (b.double().t() if trans_b else b.double())
        bench.validate(heddle.matmul(a, b, trans_b=trans_b), ref, what=f"heddle.matmul {m}x{n}x{k}")
        fm = next(fm for fm in heddle.api._ops.values() if (fm.spec.k, fm.spec.n, fm.spec.trans_b) == (k, n, trans_b)
                  and fm.spec.bias is None and fm.spec.activation is None and fm.spec.dtype == "bf16")
        kern = fm.kernel_for([a, b], target)
        if label and not kern.lowered.needs_workspace:
            recorder.add("gpu", {"suite": "dispatch", "step": "kernel_call" + label, "status": "skipped",
                                 "reason": f"{kern.name} shares no k loop on this device"})
            continue
        for step, fn, what in (("heddle_matmul", lambda x, w: heddle.matmul(x, w, trans_b=trans_b), "heddle.matmul"),
                               ("kernel_call", kern, "heddle Kernel called directly")):
            call = _rotating(fn, sets)
            for _ in range(20):
                call()
            before = kern.full_path_calls
            host, dev = _host_loop(call)
            recorder.add("gpu", {"suite": "dispatch", "step": f"{step}{label}_rotating",
                                 "what": f"{what} ({kern.name}), inputs rotating over 3 sets, the previous output "
                                         f"kept alive; full-path calls in the timed loop: "
                                         f"{kern.full_path_calls - before}",
                                 "stats": host.to_dict(), "device_inclusive": dev.to_dict(),
                                 "shape": f"{m}x{n}x{k}", "status": "ok"})


@pytest.mark.gpu
def test_scaled_mm_dispatch(recorder):
    """heddle.scaled_mm called as a loop calls it (inputs rotating over three sets, the previous output kept), per
    tensor, per row and with 128-block scales in the layouts its kernel reads as given (docs/fp8.md "Eager calls"),
    beside torch._scaled_mm on the same operands: x [16, 256] e4m3 @ W^T [256, 256] + bias, bf16 out (the decode
    shape where the window found every eager FP8 call host-bound)."""
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("no FP8 GEMM on this GPU")
    sys.path.insert(0, HERE)
    from dispatch_cpu import scaled_operands
    for kind in ("tensor", "row", "block"):
        sets = [tuple(t.cuda() for t in s) for s in scaled_operands(kind, 16, 256, 256)]
        for s in sets:  # the CPU set's layouts, kept on the device (.cuda() keeps a dense tensor's strides)
            assert s[1].stride(0) == 1 and (kind != "block" or (s[2].stride(0) == 1 and s[3].stride(0) == 1))
        try:
            heddle.scaled_mm(*sets[0])
        except heddle.HeddleError as e:  # e.g. no FP8 kernel for this device
            recorder.add("gpu", {"suite": "dispatch", "step": f"scaled_mm_{kind}", "status": "skipped",
                                 "reason": str(e).splitlines()[0]})
            continue
        fns = {"scaled_mm": (heddle.scaled_mm, "heddle.scaled_mm")}
        a, b, sa, sb, bias = sets[0]
        tb = None if kind == "block" else bias  # torch's blockwise path takes no bias

        def torch_op(a, b, sa, sb, bias):
            return torch._scaled_mm(a, b, sa, sb, bias=tb, out_dtype=torch.bfloat16)
        try:  # torch's op, where this torch and GPU take the scales (block scales: torch 2.9+ on sm_90)
            torch_op(*sets[0])
            fns["torch_scaled_mm"] = (torch_op, "torch._scaled_mm" + (" (no bias)" if tb is None else ""))
        except (RuntimeError, ValueError, NotImplementedError) as e:
            recorder.add("gpu", {"suite": "dispatch", "step": f"torch_scaled_mm_{kind}", "status": "skipped",
                                 "reason": str(e).splitlines()[0]})
        for step, (fn, what) in fns.items():
            host, dev = _rotating_loop(fn, sets)
            recorder.add("gpu", {"suite": "dispatch", "step": f"{step}_{kind}_rotating",
                                 "what": f"{what}, {kind} scales, inputs rotating over 3 sets, the previous output "
                                         "kept alive", "stats": host.to_dict(), "device_inclusive": dev.to_dict(),
                                 "shape": "16x256x256", "status": "ok"})


@pytest.mark.gpu
def test_grouped_dispatch(recorder):
    """heddle.grouped_mm, grouped_mm_gated and grouped_mm_masked called as a loop calls them (inputs and offs /
    counts rotating over three sets of one signature, the previous output kept; docs/grouped.md "Eager calls"),
    beside torch._grouped_mm on grouped_mm's x, w and offs (no bias, no activation): dispatch_cpu.grouped_sets'
    MoE decode shapes. Each row says whether the call was keyed in its front."""
    sys.path.insert(0, HERE)
    from dispatch_cpu import grouped_sets

    from heddle.pytorch import grouped, grouped_gated, grouped_masked
    calls = {"mm": (lambda x, w, offs, b: heddle.grouped_mm(x, w, offs, bias=b, activation="silu"), grouped),
             "gated": (heddle.grouped_mm_gated, grouped_gated),
             "masked": (lambda x, w, counts, b: heddle.grouped_mm_masked(x, w, counts, bias=b), grouped_masked)}
    for kind, (fn, module) in calls.items():
        sets = [tuple(t.cuda() for t in s) for s in grouped_sets(kind)]  # .cuda() keeps w's transposed strides
        fns = {f"grouped_{kind}": (fn, f"heddle.grouped_mm{'' if kind == 'mm' else '_' + kind}")}
        if kind == "mm":
            try:  # torch's op, where this torch and GPU have it (bf16 on sm_90)
                torch._grouped_mm(*sets[0][:2], offs=sets[0][2])
                fns["torch_grouped_mm"] = (lambda x, w, offs, b: torch._grouped_mm(x, w, offs=offs),
                                           "torch._grouped_mm (no bias, no activation)")
            except (RuntimeError, ValueError, NotImplementedError) as e:
                recorder.add("gpu", {"suite": "dispatch", "step": "torch_grouped_mm", "status": "skipped",
                                     "reason": str(e).splitlines()[0]})
        for step, (f, what) in fns.items():
            host, dev = _rotating_loop(f, sets)
            keyed = f"; keyed in its front: {len(module._calls) > 0}" if step.startswith("grouped") else ""
            recorder.add("gpu", {"suite": "dispatch", "step": f"{step}_rotating",
                                 "what": f"{what}, inputs and offs rotating over 3 sets, the previous output kept "
                                         f"alive{keyed}", "stats": host.to_dict(), "device_inclusive": dev.to_dict(),
                                 "shape": "x " + "x".join(map(str, sets[0][0].shape)) + ", 8 experts, K = N = 256",
                                 "status": "ok"})


def test_dispatch_host_cpu(recorder, tmp_path):
    """The host work of repeated eager calls through their plans, down to a driver call that returns at once (the
    stand-in libcuda): heddle.matmul and its kernel on sm_80, the sm_90a TMA and split-K kernels, with the anchors
    (empty torch custom op, aten.alias through torch.ops) measured in the same process."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the stand-in libcuda")
    try:
        nvrtc = heddle._C.runtime.nvrtc_info()["path"]
    except Exception as e:  # RuntimeUnavailable
        pytest.skip(f"NVRTC not found: {str(e).splitlines()[0]}")
    lib = tmp_path / "libcuda.so.1"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(lib), os.path.join(HERE, "..", "tests", "fake_cuda",
                                                                               "libcuda_fake.c")], check=True)
    for target, cc_version in (("sm_80", "8.0"), ("sm_90a", "9.0")):
        env = {**os.environ, "HEDDLE_LIBCUDA_PATH": str(lib), "HEDDLE_NVRTC_PATH": nvrtc, "FAKE_CUDA_CC": cc_version,
               "PYTHONPATH": os.pathsep.join(sys.path)}
        proc = subprocess.run([sys.executable, os.path.join(HERE, "dispatch_cpu.py"), target], env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        rows = [json.loads(line) for line in proc.stdout.splitlines()]
        anchor = next(r for r in rows if r["step"] == "custom_op_empty")["stats"]["median"]
        for row in rows:  # rows of the CPU cost table (benchmarks/report.py compile_table)
            calls = f", {row['full_path_calls']} of {row['calls']} calls on the full path" if "calls" in row else ""
            recorder.add("compile", {"suite": "compile", "step": row["step"], "stats": row["stats"], "unit": "us",
                                     "variant": f"{target}: {row['kernel']} (stand-in libcuda{calls}; "
                                                f"{row['vs_custom_op']:.2f}x the empty custom op's {anchor:.2f} us "
                                                "in the same run)",
                                     "status": "ok"})


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
