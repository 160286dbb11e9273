"""heddle demo: matmul + bias + GELU, scheduled by hand with a 4-stage cp.async circular buffer.

On any machine: defines the fusion, schedules it, lowers it, prints the kernel IR and explains every
sync, compiles it with NVRTC for sm_80 (reporting registers and spills), and runs the printed CUDA
source on the CPU with heddle.interpret (every GPU thread a fiber; races, deadlocks and numbers
checked against a float64 torch reference). With a CUDA GPU it also runs the kernel there.
HEDDLE_INTERPRET=1 runs the kernel through the interpreter instead of the torch op's CPU reference.
"""
import argparse
import sys

import heddle


def define(m="M", n=1024, k=512, dtype="bf16"):
    fd = heddle.Fusion()
    a = fd.input("a", dtype, [m, k])
    b = fd.input("b", dtype, [k, n])
    bias = fd.input("bias", dtype, [n])
    acc = fd.matmul(a, b)
    fd.output(heddle.ops.gelu(acc + bias).to(dtype))
    return fd, a, b


def schedule(fd, a, b, stages=4, prefetch=-1):
    mm = fd.schedule()                              # root axes: m, n, k
    mm.split("m", 128).split("n", 128).split("k", 32)
    mm.split("m.i", 64).split("n.i", 64)            # 2 x 2 warps, 64 x 64 each
    mm.parallelize("m.o", "BIDy").parallelize("n.o", "BIDx")
    mm.parallelize("m.i.o", "warp").parallelize("n.i.o", "warp")
    mm.reorder(["m.o", "n.o", "k.o", "m.i.o", "n.i.o", "m.i.i", "n.i.i", "k.i"])
    for t in (a, b):
        fd.cache_after(t, "cp_async").circular_buffer(stages, prefetch)
    return mm


def interpret_on_cpu(fd, lowered, M=200, K=512, N=1024):
    """The printed kernel on the CPU: heddle.interpret (or, with HEDDLE_INTERPRET=1, the torch op, which
    then runs through the interpreter too)."""
    import time
    import torch
    from heddle.interpret import interpret, interpret_mode
    from heddle.reference import evaluate
    g = torch.Generator().manual_seed(0)
    x = torch.randn(M, K, generator=g).to(torch.bfloat16)
    w = (torch.randn(K, N, generator=g) / K ** 0.5).to(torch.bfloat16)
    bias = torch.randn(N, generator=g).to(torch.bfloat16)
    t0 = time.perf_counter()
    if interpret_mode():
        kern = heddle.Kernel.build(fd, lowered.target, rtc=False)
        y = kern.op(x, w, bias)   # HEDDLE_INTERPRET=1: the op interprets the printed kernel
        ref = evaluate(fd, [x, w, bias])
        err = ((y.double() - ref.double()).abs().max() / ref.double().abs().max()).item()
        print(f"== HEDDLE_INTERPRET=1: {kern.name} through the torch op on the CPU ==\n"
              f"max relative error {err:.2e} against float64 torch ({time.perf_counter() - t0:.1f} s)")
        return 0 if err < 2e-2 else 1
    r = interpret(lowered, x, w, bias, fusion=fd)
    print(f"== heddle.interpret (the printed source on the CPU, {time.perf_counter() - t0:.1f} s) ==\n" + r.report())
    return 0 if r.ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="sm_80")
    ap.add_argument("--stages", type=int, default=4)
    ap.add_argument("--prefetch", type=int, default=-1)
    args = ap.parse_args()

    fd, a, b = define()
    print("== fusion ==\n" + str(fd))
    mm = schedule(fd, a, b, args.stages, args.prefetch)
    print("== schedule ==\n" + mm.domain + "\n")

    lowered = fd.lower(args.target)
    print("== kernel IR ==\n" + lowered.kernel_ir)
    print("== sync plan ==\n" + lowered.explain())

    import torch
    from heddle.reference import evaluate
    rc = interpret_on_cpu(fd, lowered)
    if not heddle.nvrtc_available():
        print("NVRTC not found: set HEDDLE_NVRTC_PATH or CUDA_HOME, or `pip install nvidia-cuda-nvrtc`",
              file=sys.stderr)
        return 1
    kern = fd.compile(args.target)
    s = kern.stats
    print(f"== NVRTC ({args.target}) ==\n{kern.name}: {s.registers} registers, {s.spill_stores} B spill stores, "
          f"{s.spill_loads} B spill loads, {lowered.smem_bytes} B shared memory, "
          f"compiled in {kern.binary.compile_ms:.0f} ms ({kern.binary.cache_source})")

    if not heddle.gpu_available():
        print("no CUDA GPU here: lowered, explained, compiled and interpreted; skipping the GPU run")
        return rc
    from heddle.runtime import target_for_device
    if target_for_device() != args.target:
        kern = fd.compile(target_for_device())
    M, K, N = 1000, 512, 1024
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(K, N, device="cuda", dtype=torch.bfloat16) / K ** 0.5
    bias = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    y = kern(x, w, bias)
    ref = evaluate(fd, [x, w, bias])
    err = ((y.double() - ref.double()).abs().max() / ref.double().abs().max()).item()
    print(f"ran on {torch.cuda.get_device_name()}: max relative error {err:.2e} against float64 torch")
    return 0 if err < 2e-2 else 1


if __name__ == "__main__":
    sys.exit(main())
