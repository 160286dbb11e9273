"""Host work per repeated sm_90a Kernel call on a machine without a GPU, through the stand-in libcuda
(tests/fake_cuda/libcuda_fake.c: its cuLaunchKernel returns at once, its tensor maps are 128 bytes naming
their address), so the whole C++ launch path runs: signature, plan lookup, output allocation, tensor maps
given the call's addresses, workspace of the stream, pack, the driver call. CPU tensors stand in for CUDA ones.

Each timed call is Kernel.__call__ without its CUDA-device guard: the plan when one takes the call, else
the full path (checks, Kernel.prepare with its cuTensorMapEncodeTiled per map, a new plan). Inputs rotate
over three sets and the last two outputs are kept alive, as a real loop's would be, so no output comes back
at the previous one's address. Rows: an sm_90a kernel with TMA loads and a TMA-store epilogue (x [16, 256] @
w [256, 256]), a split-K one (the automatic choice for x [16, 4096] @ W^T, W [1024, 4096]: split_k(16)), and
the full path alone for scale. Thread CPU time, medians of 7 loops.

Runs under any heddle tree (it uses only Kernel._launch, run_planned and prepare), so the same script gives
the before and after figures: HEDDLE_LIBCUDA_PATH=<fake libcuda.so.1> PYTHONPATH=<tree>/python python3
benchmarks/hopper_plan_cpu.py [calls]. Prints one JSON object per row."""
import collections
import json
import os
import sys

import torch

import heddle
from heddle import _C, bench
from heddle.core import inputs
from heddle.pytorch.matmul import MatmulSpec

STUB = 'extern "C" __global__ void stub(int* p) { if (p) *p = 0; }'  # the fake loads any image


def kernel(m, n, k, trans_b):
    spec = MatmulSpec(dtype="bf16", batched=False, batched_b=False, k=k, n=n, trans_a=False, trans_b=trans_b,
                      bias=None, residual=None, activation=None, alpha=None, out_dtype="bf16")
    fd = spec.build_fusion()
    fd.auto_schedule("sm_90a", m, n, k, sms=132)
    kern = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    kern._loaded = _C.runtime.Kernel.load(_C.runtime.compile(STUB, "stub.cu", "sm_90a"), "stub")
    return kern


def operand_sets(m, n, k, trans_b, count=3):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(m, k, generator=g).bfloat16(),
             torch.randn(n, k, generator=g).bfloat16() if trans_b else torch.randn(k, n, generator=g).bfloat16())
            for _ in range(count)]


def rows(calls=2000):
    out = []
    for name, (m, n, k, trans_b) in {"sm90a_tma_store": (16, 256, 256, False),
                                     "sm90a_split_k": (16, 1024, 4096, True)}.items():
        kern = kernel(m, n, k, trans_b)
        sets = operand_sets(m, n, k, trans_b)
        _, _, args = kern.prepare(sets[0])  # the fake's parameter table: this kernel's (read on its first launch)
        os.environ["FAKE_CUDA_PARAMS"] = ",".join(str(len(v)) if kd == "bytes" else "4" if kd in ("i32", "f32") else "8"
                                                  for kd, v in args)
        full = [0]
        keep = collections.deque(maxlen=2)
        turn = [0]

        def full_path(t):
            full[0] += 1
            t = inputs.materialize(t)
            return kern._launch(t, inputs.check(kern.name, kern._inputs, kern._matmul_expr, t))

        def next_set():
            turn[0] += 1
            return sets[turn[0] % len(sets)]

        def call():
            t = next_set()
            o = kern.run_planned(t)
            keep.append(o if o is not None else full_path(t))

        st = bench.measure_host(call, calls=calls, repeats=7, timer=bench.ThreadCpuTimer())
        out.append({"step": name + "_call", "kernel": kern.name, "stats": st.to_dict(),
                    "full_path_calls": full[0], "calls": turn[0]})
        st = bench.measure_host(lambda: keep.append(full_path(next_set())), calls=max(1, calls // 4), repeats=7,
                                timer=bench.ThreadCpuTimer())
        out.append({"step": name + "_full_path", "kernel": kern.name, "stats": st.to_dict()})
    return out


if __name__ == "__main__":
    if not os.environ.get("HEDDLE_LIBCUDA_PATH"):
        sys.exit("set HEDDLE_LIBCUDA_PATH to the stand-in libcuda (tests/fake_cuda/libcuda_fake.c, built with "
                 "cc -shared -fPIC -O1)")
    for row in rows(int(sys.argv[1]) if len(sys.argv) > 1 else 2000):
        print(json.dumps(row))
