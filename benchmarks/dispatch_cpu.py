"""Host work per repeated eager call on a machine without a GPU, through the stand-in libcuda
(tests/fake_cuda/libcuda_fake.c: its cuLaunchKernel returns at once, its tensor maps are 128 bytes naming
their address), so the whole launch path runs down to the driver call: signature, plan lookup, stream,
output allocation, tensor maps given the call's addresses, workspace of the stream, pack, cuLaunchKernel.
CPU tensors stand in for CUDA ones (no device or stream query: a CUDA call adds two calls into torch).

Each timed Kernel call is Kernel.__call__ without its CUDA-device guard: the plan when one takes the call
(Kernel._plans_call, PlanTable.call or Kernel.run_planned, whichever the tree has), else the full path (checks, Kernel.prepare
with its cuTensorMapEncodeTiled per map, a new plan). The heddle.matmul row is the real function (its front,
CallTable.run, then the op's plan). Inputs rotate over three sets and the last two outputs are kept alive, as
a real loop's would be, so no output comes back at the previous one's address. In the same process, as
anchors: an empty torch custom op (torch.library.custom_op, the dispatch layer alone) and a C++ aten op
called through torch.ops (aten.alias.default). Thread CPU time, medians of 7 loops.

Where heddle._C_aten serves the running torch (heddle.core.aten), every call row is measured twice in the same
process: through the tables that read tensors and allocate outputs through ATen (the default), and through
tables that read them through torch's Python API (step suffix _python_reads: the path before _C_aten, and the
path of a build without it).

target sm_80 (run with FAKE_CUDA_CC=8.0): heddle.matmul(x, w, bias=b, activation="gelu", trans_b=True),
x [16, 256], w [256, 256], bf16, and its kernel called directly. target sm_90a (the default): a kernel with TMA
loads and a TMA-store epilogue (x [16, 256] @ w [256, 256]), a split-K one (the automatic choice for
x [16, 4096] @ W^T, W [1024, 4096]: split_k(16)), and the full path alone for scale; heddle.scaled_mm (x [16, 256]
e4m3 @ W^T, W [256, 256], + bias, bf16 out) with per-tensor, per-row and 128-block scales, its checks alone, and
torch._scaled_mm on the same CPU tensors (its CPU kernel computes the product: an anchor, not a dispatch cost);
heddle.grouped_mm, grouped_mm_gated and grouped_mm_masked (MoE decode shapes, grouped_sets) through their fronts,
a call their front does not key, and the path before the fronts, with torch._grouped_mm's CPU op as an anchor.

HEDDLE_LIBCUDA_PATH=<fake libcuda.so.1> PYTHONPATH=<tree>/python python3 benchmarks/dispatch_cpu.py
[sm_80|sm_90a] [calls]. Prints one JSON object per row."""
import collections
import json
import os
import sys

import torch

import heddle
from heddle import _C, bench
from heddle.core import aten, inputs
from heddle.core.kernel import plan_table
from heddle.pytorch.matmul import MatmulSpec

STUB = 'extern "C" __global__ void stub(int* p) { if (p) *p = 0; }'  # the fake loads any image


def spec_for(n, k, trans_b, bias=None, activation=None):
    return MatmulSpec(dtype="bf16", batched=False, batched_b=False, k=k, n=n, trans_a=False, trans_b=trans_b,
                      bias=bias, residual=None, activation=activation, alpha=None, out_dtype="bf16")


def kernel(spec, target, m, sms):
    fd = spec.build_fusion()
    fd.auto_schedule(target, m, spec.n, spec.k, sms=sms)
    return stub(heddle.Kernel.build(fd, target, rtc=False), target, operands(m, spec, 1)[0])


def stub(kern, target, tensors):
    """`kern` loaded as the stand-in driver's stub (it loads any image), with the fake's parameter table for its
    arguments on `tensors` (read on the kernel's first launch)."""
    kern._loaded = _C.runtime.Kernel.load(_C.runtime.compile(STUB, "stub.cu", target), "stub")
    _, _, args = kern.prepare(tensors)
    os.environ["FAKE_CUDA_PARAMS"] = ",".join(str(len(v)) if kd == "bytes" else "4" if kd in ("i32", "f32") else "8"
                                              for kd, v in args)
    return kern


def operands(m, spec, count=3):
    g = torch.Generator().manual_seed(0)
    n, k = spec.n, spec.k
    return [(torch.randn(m, k, generator=g).bfloat16(),
             torch.randn(n, k, generator=g).bfloat16() if spec.trans_b else torch.randn(k, n, generator=g).bfloat16())
            + ((torch.randn(n, generator=g).bfloat16(),) if spec.bias else ())
            for _ in range(count)]


def measure(fn, calls):
    return bench.measure_host(fn, calls=calls, repeats=7, timer=bench.ThreadCpuTimer())


def rotating(fn, sets):
    keep = collections.deque(maxlen=2)  # the previous output stays alive: never the same address twice in a row
    turn = [0]

    def call():
        turn[0] += 1
        keep.append(fn(*sets[turn[0] % len(sets)]))
    return call, turn


def kernel_caller(kern, full):
    """Kernel.__call__ without its CUDA-device guard (CPU tensors stand in for CUDA ones)."""
    table_call = getattr(kern, "_plans_call", None) or getattr(kern._plans, "call", None)  # as Kernel.__call__

    def call(*t):
        o = table_call(t) if table_call is not None else None
        if o is None:
            o = kern.run_planned(t)
        if o is None:
            full[0] += 1
            t = inputs.materialize(t)
            o = kern._launch(t, inputs.check(kern.name, kern._inputs, kern._matmul_expr, t))
        return o
    return call


def anchors(calls):
    @torch.library.custom_op("heddle_bench::noop_cpu", mutates_args=())
    def noop(x: torch.Tensor) -> torch.Tensor:
        return x.new_empty(0)
    x = torch.zeros(16, 256)
    alias = torch.ops.aten.alias.default
    return [{"step": "custom_op_empty", "kernel": "empty torch custom op (torch.library.custom_op)",
             "stats": measure(lambda: noop(x), calls).to_dict()},
            {"step": "aten_op", "kernel": "a C++ aten op through torch.ops (aten.alias.default)",
             "stats": measure(lambda: alias(x), calls).to_dict()}]


# (step suffix, python_reads) of each measured call: ATen reads where heddle._C_aten serves this torch
READS = [("", False), ("_python_reads", True)] if aten.access() is not None else [("", True)]


def reads_name(python_reads):
    return " (tensors read through Python)" if python_reads and aten.access() is not None else ""


def kernel_call_rows(step, kern, sets, calls):
    rows = []
    for suffix, python_reads in READS:
        kern._plans = plan_table(python_reads)  # empty: the first call takes the full path and plans
        full = [0]
        call, turn = rotating(kernel_caller(kern, full), sets)
        rows.append({"step": step + suffix, "kernel": kern.name + reads_name(python_reads),
                     "stats": measure(call, calls).to_dict(), "full_path_calls": full[0], "calls": turn[0]})
    return rows


def sm80_rows(calls):
    spec = spec_for(256, 256, True, bias=("bf16", 1), activation="gelu")
    kern = kernel(spec, "sm_80", 16, 108)
    sets = operands(16, spec)
    rows = kernel_call_rows("sm80_kernel_call", kern, sets, calls)
    # where a planned call's time goes: the signature and lookup alone (seven Python attribute reads per tensor,
    # the hash, the table), and the output's allocation as the table makes it (new_empty of the sizes)
    rows.append({"step": "sm80_signature", "kernel": kern.name,
                 "stats": measure(lambda: sets[0] in kern._plans, calls).to_dict()})
    new_empty = torch.empty(0, dtype=torch.bfloat16).new_empty
    rows.append({"step": "sm80_output", "kernel": "new_empty(16, 256), bf16",
                 "stats": measure(lambda: new_empty(16, 256), calls).to_dict()})
    return rows + matmul_call_rows("sm80_matmul_call", spec, kern, sets, calls, bias=True, activation="gelu")


def matmul_call_rows(step, spec, kern, sets, calls, bias=False, activation=None):
    """heddle.matmul(x, w[, bias=b], activation=..., trans_b=spec.trans_b) on `sets`: its op's eager table holds
    `kern`'s plan (the first call takes the op's plan and leaves the whole call keyed in heddle.matmul's front,
    CallTable); the timed calls are front hits."""
    from heddle.pytorch import matmul as hm
    fm = hm.fused_matmul_op(spec)
    name, _ = hm._op_and_args(*sets[0][:2], sets[0][2] if bias else None, activation, None, None, False,
                              spec.trans_b, None)
    hm._by_name[name] = fm
    rows = []
    for suffix, python_reads in READS:
        fm._eager = plan_table(python_reads)
        hm._calls = hm.call_table(python_reads)
        hm._front = hm._calls.fast_run
        out, grid, args, parts = kern._prepare(sets[0])  # one signature: the sets differ only in their addresses
        fm._eager.add(sets[0], kern.plan(kern._loaded, grid, args, parts), [out])
        if bias:
            call, turn = rotating(lambda x, w, b: hm.matmul(x, w, bias=b, activation=activation,
                                                            trans_b=spec.trans_b), sets)
        else:
            call, turn = rotating(lambda x, w: hm.matmul(x, w, activation=activation, trans_b=spec.trans_b), sets)
        call()
        assert len(hm._calls) == 1, "the call is keyed in heddle.matmul's front"
        rows.append({"step": step + suffix, "kernel": kern.name + reads_name(python_reads),
                     "stats": measure(call, calls).to_dict()})
    return rows


def sm90_rows(calls):
    rows = []
    for name, (m, n, k, trans_b) in {"sm90a_tma_store": (16, 256, 256, False),
                                     "sm90a_split_k": (16, 1024, 4096, True)}.items():
        spec = spec_for(n, k, trans_b)
        kern = kernel(spec, "sm_90a", m, 132)
        sets = operands(m, spec)
        rows += kernel_call_rows(name + "_call", kern, sets, calls)
        if name == "sm90a_tma_store":  # issue 31: heddle.matmul's repeated call on its sm_90a plan (TMA maps patched)
            rows += matmul_call_rows("sm90a_matmul_call", spec, kern, sets, calls)
        keep = collections.deque(maxlen=2)
        turn = [0]

        def full_path():
            t = sets[turn[0] % len(sets)]
            turn[0] += 1
            t = inputs.materialize(t)
            keep.append(kern._launch(t, inputs.check(kern.name, kern._inputs, kern._matmul_expr, t)))
        rows.append({"step": name + "_full_path", "kernel": kern.name,
                     "stats": measure(full_path, max(1, calls // 4)).to_dict()})
    return rows


def scaled_operands(kind, m, k, n, count=3):
    """heddle.scaled_mm's (a, b, scale_a, scale_b, bias) in the layouts its kernel reads without a copy (b
    column-major; block scales: scale_a M-major, scale_b [ceil(K/128), ceil(N/128)] column-major, torch's
    BlockWise1x128 / BlockWise128x128), `count` sets of one signature."""
    g = torch.Generator().manual_seed(0)
    f8 = torch.float8_e4m3fn
    kb, nb = -(-k // 128), -(-n // 128)
    scales = {"tensor": lambda: (torch.rand((), generator=g) + 0.5, torch.rand((), generator=g) + 0.5),
              "row": lambda: (torch.rand(m, 1, generator=g) + 0.5, torch.rand(1, n, generator=g) + 0.5),
              "block": lambda: (torch.rand(kb, m, generator=g).t() + 0.5, torch.rand(nb, kb, generator=g).t() + 0.5)}
    return [(torch.randn(m, k, generator=g).to(f8), torch.randn(n, k, generator=g).to(f8).t(), *scales[kind](),
             torch.randn(n, generator=g).bfloat16()) for _ in range(count)]


def scaled_rows(calls):
    """heddle.scaled_mm(a, b, scale_a, scale_b, bias), x [16, 256] e4m3 @ W^T [256, 256], per-tensor, per-row and
    128-block scales: the repeated call (its front, scaled_mm._calls, keyed by the first call, which takes the op's
    plan), the checks a repeated call skips (scaled_spec), a call the front does not key (checks + the op's plan
    table); torch._scaled_mm on the same CPU tensors and on 16x16x16 ones."""
    from heddle.pytorch import scaled_mm as smm
    rows = []
    m, k, n = 16, 256, 256
    for kind in ("tensor", "row", "block"):
        sets = scaled_operands(kind, m, k, n)
        spec, args = smm.scaled_spec(*sets[0])
        fm = smm.scaled_op(spec)
        tensors = fm.kernel_tensors(args)
        kern = stub(fm.kernel_for(tensors, "sm_90a", rtc=False, sms=132), "sm_90a", tensors)
        for suffix, python_reads in READS:
            fm._eager = plan_table(python_reads)
            smm._calls = smm.call_table(python_reads)
            smm._front = smm._calls.fast_run
            out, grid, args_, parts = kern._prepare(tensors)  # the plan of the op's tensors (a first call's)
            fm._eager.add(tensors, kern.plan(kern._loaded, grid, args_, parts), [out])
            call, turn = rotating(smm.scaled_mm, sets)
            call()
            assert len(smm._calls) == 1, "the call is keyed in scaled_mm's front"
            rows.append({"step": f"smm_{kind}_call{suffix}", "kernel": kern.name + reads_name(python_reads),
                         "stats": measure(call, calls).to_dict()})
        rows.append({"step": f"smm_{kind}_checks", "kernel": kern.name,
                     "stats": measure(lambda: smm.scaled_spec(*sets[0]), calls).to_dict()})
        # a call the front does not key (e.g. a scale it copies): the checks, then the op's plan table, no op layer
        call, turn = rotating(lambda *t: fm.eager(fm.kernel_tensors(smm.scaled_spec(*t)[1])), sets)
        rows.append({"step": f"smm_{kind}_unkeyed", "kernel": kern.name, "stats": measure(call, calls).to_dict()})
        if kind != "block":  # torch's CPU op has no block scales
            for what, (mm, kk, nn) in (("", (m, k, n)), ("_tiny", (16, 16, 16))):
                a, b, sa, sb, bias = scaled_operands(kind, mm, kk, nn, 1)[0]
                rows.append({"step": f"torch_scaled_mm_{kind}{what}",
                             "kernel": f"torch._scaled_mm, CPU tensors, {mm}x{nn}x{kk} (computes the product)",
                             "stats": measure(lambda: torch._scaled_mm(a, b, sa, sb, bias, out_dtype=torch.bfloat16),
                                              max(1, calls // 4)).to_dict()})
    return rows


def grouped_sets(kind, count=3):
    """`count` argument sets of one signature of heddle.grouped_mm (x [64, 256] bf16 over 8 experts, w a
    transposed view of [8, 256, 256], a per-expert bias, silu), grouped_mm_gated (x [64, 256], w1 and w3
    [8, 256, 256]) or grouped_mm_masked (x [8, 8, 256], w [8, 256, 256], per-expert bias): the decode shapes of
    an MoE layer. Each set has its own offs / counts (other values, the same signature)."""
    g = torch.Generator().manual_seed(0)
    e, t, k, n = 8, 64, 256, 256

    def rnd(*shape):
        return torch.randn(*shape, generator=g).bfloat16()

    def ends():
        return torch.sort(torch.randint(0, t + 1, (e,), generator=g)).values.to(torch.int32)
    if kind == "mm":
        return [(rnd(t, k), rnd(e, n, k).transpose(-1, -2), ends(), rnd(e, n)) for _ in range(count)]
    if kind == "gated":
        return [(rnd(t, k), rnd(e, k, n), rnd(e, k, n), ends()) for _ in range(count)]
    return [(rnd(e, t // e, k), rnd(e, k, n), torch.randint(0, t // e + 1, (e,), generator=g).to(torch.int32),
             rnd(e, n)) for _ in range(count)]


def grouped_rows(calls):
    """The grouped calls (grouped_sets' shapes), each on its sm_90a kernel (grouped_mm's: TMA + wgmma; the gated
    and masked ones: cp.async + mma.sync) loaded as the stand-in's stub, which the module takes for the device's
    kernel of these CPU tensors: the repeated call (its front, keyed by the first call), a call its front misses
    (every check, then the kernel's plan without the op layer: the front replaced by one that never hits) and
    the path before the fronts (grouped_mm: checks, spec, torch.ops.heddle's op, its implementation, the
    kernel's plan; gated / masked: checks, then the kernel's plan), in one process; torch._grouped_mm on the
    same CPU tensors where this torch has a CPU kernel for it (it computes the product: an anchor, not a
    dispatch cost)."""
    from heddle.pytorch import grouped, grouped_gated, grouped_masked
    rows = []
    for kind, module, attr in (("mm", grouped, "device_kernel"), ("gated", grouped_gated, "_device_kernel"),
                               ("masked", grouped_masked, "_device_kernel")):
        sets = grouped_sets(kind)
        if kind == "mm":
            fn = lambda x, w, offs, b: grouped.grouped_mm(x, w, offs, bias=b, activation="silu")  # noqa: E731
            spec, tensors = grouped.grouped_spec(*sets[0][:3], sets[0][3], "silu")
            fd = grouped.grouped_fusion(*spec.sig())

            def old(x, w, offs, b):  # grouped_call before the front: the checks, the spec, the op
                spec, tensors = grouped.grouped_spec(x, w, offs, b, "silu")
                return getattr(torch.ops.heddle, grouped._op_name(*spec.sig()))(*tensors)
        elif kind == "gated":
            fn = grouped_gated.grouped_mm_gated
            trans_b, s1, s3 = grouped_gated._check_gated(*sets[0], "silu", None)
            tensors = [sets[0][0], s1, s3, sets[0][3]]
            fd = grouped_gated.gated_fusion("bf16", 256, 256, trans_b, "silu", "bf16")

            def old(x, w1, w3, offs):  # grouped_mm_gated before the front: the checks, then the kernel
                trans_b, s1, s3 = grouped_gated._check_gated(x, w1, w3, offs, "silu", None)
                return grouped_gated._run(("bf16", 256, 256, trans_b, "silu", "bf16"), [x, s1, s3, offs])
        else:
            fn = lambda x, w, counts, b: grouped_masked.grouped_mm_masked(x, w, counts, bias=b)  # noqa: E731
            tensors = [sets[0][0], sets[0][1], sets[0][3].unsqueeze(1), sets[0][2]]
            fd = grouped_masked.masked_fusion("bf16", 256, 256, False, "bf16", True, None, "bf16")

            def old(x, w, counts, b):  # grouped_mm_masked before the front: the checks, then the kernel
                trans_b, stored = grouped_masked._check(x, w, counts, b, None, None)
                sig = ("bf16", 256, 256, trans_b, "bf16", True, None, "bf16")
                return grouped_masked._run(sig, [x, stored, b.unsqueeze(1), counts])
        fd.auto_schedule("sm_90a", -1, 256, 256)
        kern = stub(heddle.Kernel.build(fd, "sm_90a", rtc=False), "sm_90a", tensors)
        setattr(module, attr, lambda sig, ts, k=kern: k)
        for suffix, python_reads in READS:
            kern._plans = plan_table(python_reads)
            module._calls = grouped.front.call_table(python_reads)
            module._front = module._calls.fast_run
            # the first call's full path (Kernel.__call__ takes it on CUDA tensors only): the kernel's plan
            kern._launch(tensors, inputs.check(kern.name, kern._inputs, kern._matmul_expr, tensors))
            call, turn = rotating(fn, sets)
            call()
            assert len(module._calls) == 1, "the call is keyed in its front"
            rows.append({"step": f"grp_{kind}_call{suffix}", "kernel": kern.name + reads_name(python_reads),
                         "stats": measure(call, calls).to_dict()})
        table, front = module._calls, module._front
        module._calls, module._front = _NeverKeyed(), lambda *a: None  # the checks, the kernel's plan, no op layer
        rows.append({"step": f"grp_{kind}_missed", "kernel": kern.name,
                     "stats": measure(rotating(fn, sets)[0], calls).to_dict()})
        module._calls, module._front = table, front
        rows.append({"step": f"grp_{kind}_before", "kernel": kern.name,
                     "stats": measure(rotating(old, sets)[0], calls).to_dict()})
    x, w, offs, _ = grouped_sets("mm", 1)[0]
    tiny = (x[:16, :16].contiguous(), w[:2, :16, :16], torch.tensor([7, 16], dtype=torch.int32))
    for what, (a, b, ends) in (("", (x, w, offs)), ("_tiny", tiny)):
        try:
            torch._grouped_mm(a, b, offs=ends)
        except Exception:  # noqa: BLE001 -- a torch without a CPU grouped_mm: no anchor row
            return rows
        rows.append({"step": f"torch_grouped_mm{what}", "kernel": f"torch._grouped_mm, CPU tensors, {a.shape[0]} x "
                     f"{b.shape[2]} x {a.shape[1]}, {b.shape[0]} experts (computes the product)",
                     "stats": measure(lambda: torch._grouped_mm(a, b, offs=ends), max(1, calls // 4)).to_dict()})
    return rows


class _NeverKeyed:
    """A front that keys nothing (grouped_rows' missed rows: a call no front keys, adopt not timed)."""

    def adopt(self, *args):
        return False


if __name__ == "__main__":
    if not os.environ.get("HEDDLE_LIBCUDA_PATH"):
        sys.exit("set HEDDLE_LIBCUDA_PATH to the stand-in libcuda (tests/fake_cuda/libcuda_fake.c, built with "
                 "cc -shared -fPIC -O1)")
    target = sys.argv[1] if len(sys.argv) > 1 else "sm_90a"
    n_calls = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    out = sm80_rows(n_calls) if target == "sm_80" else sm90_rows(n_calls) + scaled_rows(n_calls) + grouped_rows(n_calls)
    anchor = anchors(n_calls)
    for row in out + anchor:
        row["target"] = target
        row["vs_custom_op"] = row["stats"]["median"] / anchor[0]["stats"]["median"]
        print(json.dumps(row))
