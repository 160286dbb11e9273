"""heddle.scaled_mm(..., out_scale="mx32"): an MX-format output (docs/fp8.md "MX formats", "An MX-format output"):
the call returns (q, s), q e4m3 / e5m2 [M, N] and s torch.float8_e8m0fnu per row and 32 columns in torch's blocked
layout [round_up(M, 128), round_up(N/32, 4)] -- the scale_a of the next MX call as it is. On the plain CPU path
(the fusion evaluated with torch) and interpreted for sm_100a; checked against float64 written out here (the OCP MX
FLOOR exponent of each block's amax, q = satfinite(y / 2^e)); the chain of two MXFP8 layers through heddle against
the float64 sum over the dequantized q; the op's name, decode and fake shapes; the refusals by name."""
import math

import pytest
import torch

import heddle
from heddle.core.errors import InputError
from heddle.core.reference import unblock_mx_scales
from heddle.pytorch import scaled_mm as smm
from support.interp_defs import needs_cxx
from support.mx_defs import scaled_mm_operands, scaled_mm_reference, to_blocked

E4M3, E5M2, E8M0 = torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e8m0fnu
FMAX = {E4M3: 448.0, E5M2: 57344.0}


def _layer(m, k, n, seed=0):
    """a, b e4m3 with e8m0 codes per 32 of K in 2^-4 .. 2^3 (mx_defs.scaled_mm_operands)."""
    return scaled_mm_operands(m, k, n, seed=seed, codes=(123, 131))


def _mx_against_float64(q, s, y, dt):
    """(q, s) of out_scale="mx32" against y in float64: the codes floor(log2 amax) - emax + 127 per block (one apart
    only where the amax lies within f32 rounding of a power of two), q within one step where the code agrees."""
    m, n = y.shape
    emax = math.floor(math.log2(FMAX[dt]))
    assert q.dtype == dt and q.shape == (m, n)
    assert s.dtype == E8M0 and s.shape == (-(-m // 128) * 128, -(-(n // 32) // 4) * 4)
    codes = unblock_mx_scales(s.view(torch.uint8), m, n // 32).to(torch.int64)
    amax = y.abs().view(m, n // 32, 32).amax(-1)
    want = (torch.floor(torch.log2(amax)).to(torch.int64) - emax).clamp(-127, 127) + 127
    near = (torch.log2(amax) - torch.round(torch.log2(amax))).abs() < 2 ** -18
    assert torch.all((codes == want) | (near & ((codes - want).abs() == 1))), (codes - want).abs().max()
    full = unblock_mx_scales(s.view(torch.uint8), s.shape[0], s.shape[1])
    assert not full[m:].any() and not full[:, n // 32:].any()  # the padding: code 0
    per_col = torch.exp2(codes.double() - 127).repeat_interleave(32, dim=1)
    want_q = (y / per_col).clamp(-FMAX[dt], FMAX[dt])
    same = (codes == want).repeat_interleave(32, dim=1)
    step = 2.0 ** -3 if dt == E4M3 else 2.0 ** -2
    err = (q.double() - want_q).abs()[same]
    assert torch.all(err <= want_q.abs()[same] * step + 2.0 ** -6), err.max()
    return per_col


@pytest.mark.parametrize("dt,n", [(E4M3, 160), (E5M2, 96)])
def test_mx_out_on_the_cpu_path(dt, n):
    a, b, ca, cb, sa, sb, bias = _layer(40, 96, n)
    q, s = heddle.scaled_mm(a, b, sa, sb, bias=bias, activation="gelu", out_dtype=dt, out_scale="mx32")
    _mx_against_float64(q, s, scaled_mm_reference(a, b, ca, cb, bias), dt)
    spec = smm.scaled_spec(a, b, sa, sb, bias, out_dtype=dt, activation="gelu", out_scale="mx32")[0]
    assert "_Gmx32_" in spec.op_name() and smm.decode(spec.op_name()) == spec
    fq, fs = smm.scaled_op(spec).fake([a, b.t(), sa.reshape(-1, 4), sb.reshape(-1, 4), bias])
    assert fq.shape == q.shape and fs.shape == s.shape and fs.dtype == E8M0


def test_mx_out_from_per_row_scales():
    """The kind::f8f6f4 layer (per-row / per-column f32 scales) with an MX-format output, on the CPU path."""
    g = torch.Generator().manual_seed(1)
    a, w = torch.randn(50, 64, generator=g).to(E4M3), torch.randn(128, 64, generator=g).to(E4M3)
    sa, sb = torch.rand(50, 1, generator=g) + 0.5, torch.rand(1, 128, generator=g) + 0.5
    q, s = heddle.scaled_mm(a, w.t(), sa, sb, out_dtype=E4M3, out_scale="mx32")
    _mx_against_float64(q, s, (a.double() @ w.double().t()) * sa.double() * sb.double(), E4M3)


def test_mx_out_from_an_mxfp4_layer():
    """The MXFP4 layer (e2m1x2 operands, e8m0 scales per 32 of K) with an MX-format output, on the CPU path."""
    from heddle.core.reference import decode_e2m1x2
    g = torch.Generator().manual_seed(2)
    m, k, n = 50, 128, 160
    ca, cw = (torch.randint(0, 16, (r, k), generator=g, dtype=torch.uint8) for r in (m, n))
    a, w = ((c[:, 0::2] | (c[:, 1::2] << 4)).contiguous().view(torch.float4_e2m1fn_x2) for c in (ca, cw))
    sa, sb = (torch.randint(122, 132, (r, k // 32), generator=g, dtype=torch.uint8) for r in (m, n))
    ba, bb = (to_blocked(t).contiguous().view(E8M0).flatten() for t in (sa, sb))
    q, s = heddle.scaled_mm(a, w.t(), ba, bb, out_dtype=E5M2, out_scale="mx32")
    fa, fb = (torch.exp2(t.double() - 127).repeat_interleave(32, dim=1) for t in (sa, sb))
    _mx_against_float64(q, s, (decode_e2m1x2(a) * fa) @ (decode_e2m1x2(w) * fb).t(), E5M2)


def _chain(m=70, k=96, n=128, n2=64):
    """Layer 1 (MX scales) quantized to an MX-format output, layer 2 taking its (q, s) as (a, scale_a) through heddle,
    against the float64 sum over layer 1's dequantized q (and layer 1 against float64 itself)."""
    a, b, ca, cb, sa, sb, bias = _layer(m, k, n, seed=4)
    q, s = heddle.scaled_mm(a, b, sa, sb, bias=bias, activation="gelu", out_dtype=E4M3, out_scale="mx32")
    per_col = _mx_against_float64(q, s, scaled_mm_reference(a, b, ca, cb, bias), E4M3)
    g = torch.Generator().manual_seed(5)
    w2 = torch.randn(n2, n, generator=g).to(E4M3)
    c2 = torch.randint(124, 130, (n2, n // 32), generator=g, dtype=torch.uint8)
    s2 = to_blocked(c2).contiguous().view(E8M0).flatten()
    out = heddle.scaled_mm(q, w2.t(), s, s2, out_dtype=torch.float32)
    f2 = torch.exp2(c2.double() - 127).repeat_interleave(32, dim=1)
    want = (q.double() * per_col) @ (w2.double() * f2).t()
    assert out.dtype == torch.float32 and out.shape == (m, n2)
    assert torch.allclose(out.double(), want, rtol=2 ** -18, atol=2 ** -18 * float(want.abs().max()))
    return q, s


def test_two_mxfp8_layers_chain_on_the_cpu_path():
    _chain()


@needs_cxx
@pytest.mark.slow  # 41 s here: two printed sm_100a kernels interpreted
def test_two_mxfp8_layers_chain_interpreted(monkeypatch):
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    monkeypatch.setenv("HEDDLE_INTERPRET_TARGET", "sm_100a")
    _chain()


@pytest.mark.parametrize("kw,msg", [
    (dict(n=48), r"out_scale='mx32' needs N a multiple of 32 .* N=48: pad b with zero columns to 64"),
    (dict(out_dtype=torch.bfloat16), r"out_scale='mx32' quantizes the output with a computed scale, which needs an "
                                     r"8-bit out_dtype"),
    (dict(out_scale="mx16"), r"out_scale='mx16' is not supported; .* or out_scale='mx32'"),
])
def test_refusals_are_named(kw, msg):
    n = kw.pop("n", 64)
    a, b, _, _, sa, sb, _ = _layer(40, 64, n)
    args = dict(out_dtype=E4M3, out_scale="mx32")
    args.update(kw)
    with pytest.raises(InputError, match=msg):
        heddle.scaled_mm(a, b, sa, sb, **args)
