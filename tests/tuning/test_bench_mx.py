"""The GPU window's block-scaled bench inputs (tools/window/bench_mx.py): the blocked scale layout against torch's
own to_blocked, the quantizers' decoded values against heddle.reference's decoders, and the case's float64
reference against heddle.reference.mx_scaled_matmul on the very tensors the case times."""
import os
import sys

import pytest
import torch

from heddle import reference

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools", "window"))
import bench_mx  # noqa: E402

from support.mx_defs import to_blocked as torch_to_blocked  # noqa: E402


@pytest.mark.parametrize("rows,cols", [(1, 1), (130, 10), (256, 8), (77, 3)])
def test_to_blocked_is_torchs(rows, cols):
    s = torch.randint(0, 255, (rows, cols), dtype=torch.uint8)
    assert torch.equal(bench_mx.to_blocked(s), torch_to_blocked(s).contiguous().view(-1))


class _Run:
    dev, dry = "cpu", True


@pytest.mark.parametrize("fmt,block", [("mxfp8", 32), ("nvfp4", 16), ("mxfp4", 32)])
def test_quantized_operands_decode_to_the_reference(fmt, block):
    torch.manual_seed(0)
    m, n, k = 130, 48, 320
    sets, check, ref = bench_mx._sets(_Run(), fmt, m, n, k)
    a, bt, sa, sb = check
    b = bt.t()  # [N, K] (fp4: [N, K/2]) as stored
    if fmt in ("nvfp4", "mxfp4"):
        da, db = reference.decode_e2m1x2(a), reference.decode_e2m1x2(b)
        assert a.dtype == torch.float4_e2m1fn_x2
        assert sa.dtype == (torch.float8_e4m3fn if fmt == "nvfp4" else torch.float8_e8m0fnu)
    else:
        da, db = a.double(), b.double()
        assert a.dtype == torch.float8_e4m3fn and sa.dtype == torch.float8_e8m0fnu
    got = reference.mx_scaled_matmul(da, db.t(), sa.double() if fmt == "nvfp4" else sa.float().double(),
                                     sb.double() if fmt == "nvfp4" else sb.float().double(), block=block)
    torch.testing.assert_close(got.float(), ref, rtol=1e-6, atol=1e-6)
    assert bool((sa.view(torch.uint8) != 0xFF).all()) and ref.abs().max() > 0  # no NaN scale code


@pytest.mark.parametrize("fmt,block,bound", [("mxfp8", 32, 0.13), ("nvfp4", 16, 0.2), ("mxfp4", 32, 0.26)])
def test_quantizers_round_to_nearest_within_the_formats_step(fmt, block, bound):
    """Each dequantized block lies within `bound` of its own amax from the source values: MXFP8's FLOOR exponent
    may clip values in (448, 512) * 2^e to 448 (12.5%), MXFP4's values in (6, 8) * 2^e to 6 (25%); NVFP4's worst gap
    is 4 -> 6 (half: 1/6 of amax), its scale amax / 6 a normal e4m3 here (amax >= 6 * 2^-6)."""
    torch.manual_seed(1)
    x = torch.randn(130, 256) * torch.logspace(0, 3, 256)  # blocks over three decades
    _, _, deq = bench_mx._operand(fmt, x)
    err = (deq - x.double()).abs().view(130, -1, block).amax(-1)
    amax = x.double().abs().view(130, -1, block).amax(-1)
    assert bool((err <= bound * amax).all())
    assert float((err / amax).mean()) < 0.6 * bound  # on average well inside the bound


def test_the_separate_mx_quantize_is_heddles_mx_format_output():
    """The peer's separate ops of the MX-format output case (bench_mx.mx_quantize) give heddle.reference.mx_codes'
    codes in torch's blocked layout and q = satfinite(y / 2^(code - 127)); mx_dequantized inverts them."""
    torch.manual_seed(3)
    y = torch.randn(130, 224) * torch.logspace(-2, 2, 224)
    y[5] = 0  # an all-zero row: code 0, q 0
    q, s = bench_mx.mx_quantize(y)
    codes = reference.mx_codes(y.double(), "e4m3")
    assert torch.equal(s.view(torch.uint8).to(torch.int64), torch_to_blocked(codes.to(torch.uint8)).view(-1).long())
    scale = torch.exp2(codes.double() - 127).repeat_interleave(32, dim=1)
    assert torch.equal(q, (y.double() / scale).clamp(-448, 448).to(torch.float8_e4m3fn))
    deq = bench_mx.mx_dequantized((q, s))
    assert torch.equal(deq.double(), q.double() * scale) and not deq[5].any()
