"""The computed output scale's fusions (heddle.ops.quantize; docs/fp8.md "Computed output scales"), shared by
its interpreter tests and the mutation family sm90_fp8_amax: an e4m3 GEMM with per-row / per-column scales,
a bias and an activation, quantized with a scale per row and 128 columns (or per row); outputs q, then s."""
import heddle
from support.fp8_defs import fp8_schedule, inputs


def quant_fusion(n=300, k=144, fmt="e4m3", group=128, act="gelu"):
    """(a @ b.T) * scale_a [M, 1] * scale_b [1, N] + bias -> act -> quantize(fmt, group). (fusion, a, b)."""
    fd = heddle.Fusion()
    a = fd.input("a", "e4m3", ["M", k])
    b = fd.input("b", "e4m3", [n, k])
    y = fd.matmul(a, b, False, True) * fd.input("scale_a", "f32", ["M", 1]) * fd.input("scale_b", "f32", [1, n])
    y = y + fd.input("bias", "bf16", [n])
    if act:
        y = getattr(heddle.ops, act)(y)
    q, s = heddle.ops.quantize(y, fmt, group=group)
    fd.output(q)
    fd.output(s)
    return fd, a, b


def scheduled(variant="coop", n=136, k=144, stages=4, prefetch=2, **kw):
    """quant_fusion on the sm_90a warp-specialized kernel with 128 x 128 x 128 tiles (bn holds whole groups)."""
    fd, a, b = quant_fusion(n=n, k=k, **kw)
    fp8_schedule(fd, a, b, variant=variant, bn=128, stages=stages, prefetch=prefetch)
    return fd


def tensors(fd, M, seed=0):
    """fd's inputs (support.fp8_defs.inputs) with the last column set up so that a column past N would show:
    a large bias under a negative column scale, so most rows' real value there is small while a column past
    N (its operand reads clamped to this one, its accumulator zero) would be large."""
    ins = inputs(fd, M, seed=seed)
    n = ins[1].shape[0]
    ins[3][0, n - 1] = -8.0  # scale_b [1, N]
    ins[4][n - 1] = 48.0     # bias [N]
    return ins
