"""The block-scaled matmul (docs/fp8.md "Block scales and promotion"), bf16 or e4m3 / e5m2 operands, scheduled on the
warp-specialized sm_90a kernel: shared by tests/lower/test_block_scale_promotion.py and the GPU window's
sm90_fp8_block family (tools/window/families.py)."""
import torch

import heddle
from heddle.tma import m_major_scales
from support.wgmma_defs import roles_for, schedule_sm90


FP8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def block_scaled(N=200, K=300, variant="coop", bk=64, bn=64, stages=4, prefetch=1, promotion=None, bias=True,
                 out="bf16", dtype="bf16"):
    """[M, K] x [N, K]^T with block128 scales sa [M, ceil(K/128)], sb [ceil(N/128), ceil(K/128)], + bias, gelu."""
    fd = heddle.Fusion()
    a, b = fd.input("a", dtype, ["M", K]), fd.input("b", dtype, [N, K])
    kb = -(-K // 128)
    sa, sb = fd.input("sa", "f32", ["M", kb]), fd.input("sb", "f32", [-(-N // 128), kb])
    y = fd.matmul(a, b, trans_b=True, scale_a=sa, scale_b=sb)
    if bias:  # epilogue tensors are 16-bit with 8-bit operands
        y = heddle.ops.gelu(y + fd.input("bias", "bf16" if dtype in FP8 else dtype, [N]))
    fd.output(y.to(out) if out != "f32" else y)
    wgs = 2 if variant == "coop" else 1
    schedule_sm90(fd, a, b, bm=64 * wgs, bn=bn, bk=bk, wgs=wgs, stages=stages, prefetch=prefetch,
                  roles=roles_for(variant))
    if promotion:
        fd.matmul_tensor.promotion(promotion)
    return fd


def block_scaled_inputs(fd, M, seed=0):
    """Operands ~ N(0, 1/4); scales 2^u, u uniform in {-3..3} per block, so that a scale taken from the wrong
    block changes the numbers. scale_a in the kernel's layout: M-major, M padded to a multiple of 4 (the TMA map
    of lower/passes/block_scale_ring.cpp)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for t in fd.inputs:
        shape = [M if s == "M" else s for s in t.shape]
        if t.name in ("sa", "sb"):
            s = torch.exp2(torch.randint(-3, 4, shape, generator=g).float())
            out.append(m_major_scales(s) if t.name == "sa" else s)
        else:  # 16-bit operands and bias, or 8-bit operands (values exactly representable in the format)
            out.append((torch.randn(shape, generator=g) * 0.5).to(FP8.get(t.dtype, torch.bfloat16)))
    return out
