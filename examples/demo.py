"""heddle demo: matmul + bias + GELU, scheduled by hand with a 4-stage cp.async circular buffer.

On any machine: defines the fusion, schedules it, lowers it, prints the kernel IR and explains every
sync, and compiles it with NVRTC for sm_80 (reporting registers and spills). With a CUDA GPU it also
runs the kernel and checks it against a float64 torch reference.
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
        print("no CUDA GPU here: lowered, explained and compiled; skipping the run")
        return 0
    import torch
    from heddle.reference import evaluate
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
