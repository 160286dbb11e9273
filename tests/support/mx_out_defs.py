"""The MX-format output's fusions (heddle.ops.quantize(y, fmt, group="mx32"); docs/fp8.md "MX formats", "An MX-format
output"), shared by its interpreter tests, the NVRTC check, the mutation family sm100_mx_out and the window family:
the tcgen05 kernels of each operand kind -- 16-bit (kind::f16), 8-bit (kind::f8f6f4), MXFP8 (mx32), NVFP4 (nv16)
and MXFP4 (mxf4: mx32 scales on e2m1x2 operands) -- ending in bias + GELU and the MX-format quantize; outputs q, then s (e8m0, [round_up(M, 128), round_up(N/32, 4)]
blocked)."""
import torch

import heddle
from support import mx_defs
from support.fp8_defs import inputs as fp8_inputs
from support.tcgen05_defs import roles
from support.wgmma_defs import schedule_sm90

KINDS = ("bf16", "f8f6f4", "mx32", "nv16", "mxf4")


def build(kind="bf16", n=160, k=192, fmt="e4m3", bn=128, stages=2, acc_stages=1, auto=False, act=True, tma=None):
    """kind's tcgen05 kernel of gelu(a @ b.T [* scale_a [M, 1] * scale_b [1, n] for f8f6f4] + bias [+ res]) quantized
    with group="mx32" (act=False: no GELU, so a block's largest magnitude is as often negative as positive); tiles
    128 x bn x (64 for bf16, 128 for the 8-bit and block-scaled kinds). tma="bias" | "res": that epilogue operand
    (tma="res" adds the residual res bf16 [M, n]) cached with tma_load, its producer warp and a ring of 2 stages."""
    epi = "bias_gelu" if act else "bias"
    more = dict(quant=(fmt, "mx32"), auto=auto, epilogue=epi, residual=tma == "res", tma=tma)
    if kind == "mx32":
        return mx_defs.build_mx("e4m3", "e5m2", n=n, k=k, bn=bn, stages=stages, acc_stages=acc_stages, **more)
    if kind == "mxf4":
        return mx_defs.build_mxf4(n=n, k=k, bn=bn, stages=stages, acc_stages=acc_stages, **more)
    if kind == "nv16":
        return mx_defs.build_nv(n=n, k=k, bn=bn, stages=stages, acc_stages=acc_stages, **more)
    fd = heddle.Fusion()
    dt = "bf16" if kind == "bf16" else "e4m3"
    a, b = fd.input("a", dt, ["M", k]), fd.input("b", dt, [n, k])
    y = fd.matmul(a, b, False, True)
    if kind == "f8f6f4":
        y = y * fd.input("scale_a", "f32", ["M", 1]) * fd.input("scale_b", "f32", [1, n])
    extra = {"bias": fd.input("bias", "bf16", [n])}
    y = y + extra["bias"]
    if tma == "res":
        extra["res"] = fd.input("res", "bf16", ["M", n])
        y = y + extra["res"]
    if act:
        y = heddle.ops.gelu(y)
    for t in heddle.ops.quantize(y, fmt, group="mx32"):
        fd.output(t)
    if auto:
        fd.auto_schedule("sm_100a")
    else:
        schedule_sm90(fd, a, b, bm=128, bn=bn, bk=64 if kind == "bf16" else 128, wgs=1, stages=stages,
                      roles=roles(acc_stages))
    if tma:
        fd.cache_after(extra[tma], "tma_load").circular_buffer(2)
    return fd


def tensors(fd, kind, M, seed=0):
    """kind's inputs for M rows; row 3 of A zero (an all-zero row of y but for the bias)."""
    if kind == "mx32":
        ins = mx_defs.mx_tensors(fd, M, seed=seed)
    elif kind == "nv16":
        ins = mx_defs.nv_tensors(fd, M, seed=seed)
    elif kind == "mxf4":
        ins = mx_defs.mxf4_tensors(fd, M, seed=seed)
    elif kind == "f8f6f4":
        ins = fp8_inputs(fd, M, seed=seed)
    else:
        g = torch.Generator().manual_seed(seed)
        n, k = fd.inputs[1].shape
        ins = [torch.randn(M, k, generator=g).bfloat16(), torch.randn(n, k, generator=g).bfloat16(),
               torch.randn(n, generator=g).bfloat16()]
        if any(t.name == "res" for t in fd.inputs):  # tma="res"
            ins.append(torch.randn(M, n, generator=g).bfloat16())
    return ins


def interpreted(fd, ins):
    """fd built for sm_100a (no NVRTC), its printed kernel interpreted on `ins` over 2 CTAs against heddle.reference
    in float64 (the interpreter's check: the e8m0 codes exactly, padding included; q within one step of the
    format), clean. (kernel, result)."""
    from heddle.interpret import interpret
    k = heddle.Kernel.build(fd, "sm_100a", rtc=False)
    r = interpret(k, *ins, sms=2)
    assert r.ok, f"{k.name}:\n{r.report()}"
    return k, r
