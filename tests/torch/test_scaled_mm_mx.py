"""heddle.scaled_mm with MX scales (MXFP8, docs/fp8.md "MX formats"): a, b e4m3 / e5m2 and scale_a / scale_b
torch.float8_e8m0fnu in torch's blocked layout (torch's own to_blocked, flattened as torch._scaled_mm takes them)
select the mx32 fusion: evaluated with torch on the plain CPU path, and the printed sm_100a block-scaled tcgen05
kernel interpreted under HEDDLE_INTERPRET=1; against a float64 sum over the unblocked scales written out here. The
op's name, its decode and fake shapes; each refused use named. The torch.compile capture of torch._scaled_mm and
F.scaled_mm (BlockWise1x32, SWIZZLE_32_4_4) with MX scales and their epilogue into that op, on CPU tensors (torch's
CPU _scaled_mm has no MX scales: the graph runs only through heddle) and by target."""
import pytest
import torch
import torch.nn.functional as F

import heddle
import heddle.dynamo as hd
from heddle.core.errors import InputError
from heddle.pytorch import scaled_mm as smm
from support.interp_defs import needs_cxx
from support.dynamo_defs import assert_block_scaled_capture, scaled_decision
from support.mx_defs import scaled_mm_operands as _operands, scaled_mm_reference as _reference
from support.quant_defs import out_scale_against_float64

E4M3, E5M2, E8M0 = torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e8m0fnu


def _check(out, want, dtype):
    assert out.dtype == dtype and out.shape == want.shape
    rel = {torch.bfloat16: 2 ** -8, torch.float32: 2 ** -20}[dtype]
    err = (out.double() - want).abs() - rel * want.abs()
    assert float(err.max()) <= 1e-5 * float(want.abs().max()), float((out.double() - want).abs().max())


def test_mx_scales_on_the_cpu_path():
    """Without HEDDLE_INTERPRET the op evaluates the mx32 fusion with torch (heddle.reference.evaluate)."""
    a, b, ca, cb, sa, sb, bias = _operands(40, 96, 48, fa=E5M2)
    out = heddle.scaled_mm(a, b, sa, sb, bias=bias, activation="gelu")
    _check(out, _reference(a, b, ca, cb, bias), torch.bfloat16)
    again = heddle.scaled_mm(a, b, sa, sb, bias=bias, activation="gelu")  # the eager front's second call
    assert torch.equal(again, out)
    sa2 = sa.clone().view(torch.uint8)
    sa2[0] = 121 if int(sa2[0]) != 121 else 122  # row 0's first scale: another power of two, another output
    ca2 = ca.clone()
    ca2[0, 0] = int(sa2[0])
    out2 = heddle.scaled_mm(a, b, sa2.view(E8M0), sb, bias=bias, activation="gelu")
    _check(out2, _reference(a, b, ca2, cb, bias), torch.bfloat16)


def test_mx_op_name_decode_and_fake():
    a, b, ca, cb, sa, sb, bias = _operands(32, 64, 272)
    spec, args = smm.scaled_spec(a, b, sa, sb, bias, out_dtype=torch.float32, activation="gelu")
    assert spec.mx and spec.op_name() == "smm_e4m3e4m3_k64_n272_smx_Bbf16_Agelu_of32"
    assert smm.decode(spec.op_name()) == spec
    assert [tuple(t.shape) for t in args[2:4]] == [(128, 4), (384, 4)]  # views of the blocked bytes
    assert args[2].data_ptr() == sa.data_ptr()
    out = smm.scaled_op(spec).fake(args)
    assert (out.shape, out.dtype) == ((32, 272), torch.float32)


@pytest.mark.parametrize("kw,msg", [
    (dict(k=80), "K=80 is not a multiple of 32; an MXFP8 scale covers 32 elements of K"),
    (dict(sb=torch.ones(1)), "'scale_a' is torch.float8_e8m0fnu (MX scales) but 'scale_b' is torch.float32"),
    (dict(sa=torch.zeros(100, dtype=torch.uint8).view(E8M0)), "'scale_a' has 100 e8m0 scales ([100]); MX scales"),
    (dict(out_dtype=E4M3), "out_dtype=torch.float8_e4m3fn with MX scales is not built without out_scale"),
    (dict(out_scale="1x128"), "out_scale='1x128' quantizes the output with a computed scale, which needs an 8-bit"),
])
def test_mx_errors_name_the_argument(kw, msg):
    k = kw.pop("k", 64)
    a, b, _, _, sa, sb, _ = _operands(16, 96 if k == 80 else k, 32)
    if k == 80:
        a, b = a[:, :80].contiguous(), b.t()[:, :80].contiguous().t()
    sa, sb = kw.pop("sa", sa), kw.pop("sb", sb)
    with pytest.raises(InputError, match=msg.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")):
        heddle.scaled_mm(a, b, sa, sb, **{"out_dtype": torch.bfloat16, **kw})


@needs_cxx
def test_mx_scales_interpreted(monkeypatch):
    """HEDDLE_INTERPRET=1, HEDDLE_INTERPRET_TARGET=sm_100a: the block-scaled tcgen05 kernel printed and run on the
    CPU; M = 100 ragged against the 128-row tile, K = 160 (1.25 k tiles), N = 272 (a ragged third n tile),
    e4m3 x e5m2."""
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    monkeypatch.setenv("HEDDLE_INTERPRET_TARGET", "sm_100a")
    a, b, ca, cb, sa, sb, bias = _operands(100, 160, 272, fb=E5M2, seed=1)
    out = heddle.scaled_mm(a, b, sa, sb, bias=bias, activation="gelu")
    spec = smm.scaled_spec(a, b, sa, sb, bias, activation="gelu")[0]
    ks = [k for key, k in smm.scaled_op(spec).kernels.items() if key[0] == "sm_100a"]
    assert ks and all("MmaSm100Mx<" in k.source for k in ks)
    _check(out, _reference(a, b, ca, cb, bias), torch.bfloat16)


@pytest.mark.usefixtures("_fresh_dynamo")
def test_compile_captures_mx_scaled_mm():
    """torch._scaled_mm with MX scales (flattened blocked bytes, as torch's to_blocked returns them) + bias + GELU:
    one heddle op (the scales viewed 2-D in the graph), right against float64; with M dynamic (a and its scales
    marked) two more Ms run through one graph."""
    a, b, ca, cb, sa, sb, bias = _operands(40, 96, 48, fa=E5M2)

    def f(a, b, sa, sb, bias):
        return F.gelu(torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16) + bias)
    out = torch.compile(f, backend="heddle", options={"fallback": "eager"})(a, b, sa, sb, bias)
    _check(out, _reference(a, b, ca, cb, bias), torch.bfloat16)
    ex = hd.explain(f, a, b, sa, sb, bias, fallback="eager")
    assert ex.heddle_ops == ["smm_e5m2e4m3_k96_n48_smx_Bbf16_Agelu_obf16"]
    g = torch.compile(f, backend="heddle", options={"fallback": "eager"})
    before = len(hd.reports)
    for m in (136, 72):  # M (and scale_a's length) dynamic, K and N static as a weight's
        a2, _, ca2, _, sa2, _, _ = _operands(m, 96, 48, fa=E5M2, seed=m)
        torch._dynamo.mark_dynamic(a2, 0)
        torch._dynamo.mark_dynamic(sa2, 0)
        _check(g(a2, b, sa2, sb, bias), _reference(a2, b, ca2, cb, bias), torch.bfloat16)
    (report,) = hd.reports[before:]  # one graph for both Ms
    assert [g.op for g in report.groups] == ["smm_e5m2e4m3_k96_n48_smx_Bbf16_Agelu_obf16"]


@pytest.mark.usefixtures("_fresh_dynamo")
@pytest.mark.skipif(not hasattr(F, "scaled_mm"), reason="torch.nn.functional.scaled_mm is newer than this torch")
def test_compile_captures_functional_mx_scaled_mm():
    """F.scaled_mm's BlockWise1x32 recipe with SWIZZLE_32_4_4 (torch's blocked layout) for both operands."""
    a, b, ca, cb, sa, sb, _ = _operands(64, 128, 144, fb=E5M2, seed=2)
    ST, SW = F.ScalingType, F.SwizzleType

    def f(a, b, sa, sb):
        return F.scaled_mm(a, b, sa, ST.BlockWise1x32, sb, ST.BlockWise1x32, swizzle_a=SW.SWIZZLE_32_4_4,
                           swizzle_b=SW.SWIZZLE_32_4_4, output_dtype=torch.float32)
    out = torch.compile(f, backend="heddle", options={"fallback": "eager"})(a, b, sa, sb)
    want = (a.double() * torch.exp2(ca.double() - 127).repeat_interleave(32, dim=1)) @ \
        (b.t().double() * torch.exp2(cb.double() - 127).repeat_interleave(32, dim=1)).t()
    _check(out, want, torch.float32)
    assert hd.explain(f, a, b, sa, sb, fallback="eager").heddle_ops == ["smm_e4m3e5m2_k128_n144_smx_of32"]


@pytest.mark.parametrize("target,fused", [("sm_100a", True), ("sm_90a", False)])
def test_capture_of_mx_scales_follows_the_target(target, fused):
    """A CUDA graph for a device without the block-scaled tcgen05.mma keeps torch's MX _scaled_mm, saying why."""
    a, b, _, _, sa, sb, _ = _operands(32, 64, 272)
    assert_block_scaled_capture(a, b, sa, sb, target, fused, "smm_e4m3e4m3_k64_n272_smx_obf16", 4)


@pytest.mark.skipif(not hasattr(F, "scaled_mm"), reason="torch.nn.functional.scaled_mm is newer than this torch")
def test_capture_refuses_mx_scales_without_the_blocked_swizzle():
    """BlockWise1x32 with NO_SWIZZLE (torch's meta refuses it on CUDA, so the graph is traced by hand) stays with
    torch, and the reason names the layout heddle reads."""
    a, b, _, _, sa, sb, _ = _operands(32, 64, 128)
    ST, SW = F.ScalingType, F.SwizzleType
    gm = torch.fx.symbolic_trace(lambda a, b, sa, sb: torch.ops.aten._scaled_mm_v2.default(
        a, b, [sa], [int(ST.BlockWise1x32)], [int(SW.NO_SWIZZLE)], [sb], [int(ST.BlockWise1x32)],
        [int(SW.NO_SWIZZLE)], None, torch.bfloat16))
    d, _ = scaled_decision(gm, "sm_100a", "_scaled_mm_v2")
    assert d.status == "not fused" and "SWIZZLE_32_4_4" in d.reason, d.reason


@pytest.mark.parametrize("dt,out_scale,n", [(E4M3, "1x128", 272), (E5M2, "row", 48)])
def test_mx_out_scale_on_the_cpu_path(dt, out_scale, n):
    """An MXFP8 layer's output re-quantized (out_scale): (q, s) from the fusion evaluated with torch."""
    a, b, ca, cb, sa, sb, bias = _operands(40, 96, n)
    q, s = heddle.scaled_mm(a, b, sa, sb, bias=bias, activation="gelu", out_dtype=dt, out_scale=out_scale)
    out_scale_against_float64(q, s, _reference(a, b, ca, cb, bias), dt, out_scale)
    spec = smm.scaled_spec(a, b, sa, sb, bias, out_dtype=dt, activation="gelu", out_scale=out_scale)[0]
    assert spec.mx and "_smx_" in spec.op_name() and smm.decode(spec.op_name()) == spec


@needs_cxx
def test_mx_out_scale_interpreted(monkeypatch):
    """The printed sm_100a MXFP8 kernel with its quantize epilogue (the automatic 128 x 256 x 128 tile: two groups a
    tile, N = 272 a last group of 16 columns), M = 100, K = 160, e4m3 x e5m2, interpreted on the CPU."""
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    monkeypatch.setenv("HEDDLE_INTERPRET_TARGET", "sm_100a")
    a, b, ca, cb, sa, sb, bias = _operands(100, 160, 272, fb=E5M2, seed=2)
    q, s = heddle.scaled_mm(a, b, sa, sb, bias=bias, activation="gelu", out_dtype=E4M3, out_scale="1x128")
    out_scale_against_float64(q, s, _reference(a, b, ca, cb, bias), E4M3, "1x128")
    spec = smm.scaled_spec(a, b, sa, sb, bias, out_dtype=E4M3, activation="gelu", out_scale="1x128")[0]
    ks = [k for key, k in smm.scaled_op(spec).kernels.items() if key[0] == "sm_100a"]
    assert ks and all("MmaSm100Mx<" in k.source and "_q128_" in k.name for k in ks)


@pytest.mark.usefixtures("_fresh_dynamo")
def test_compile_captures_mx_scaled_mm_with_its_quantize():
    """An MXFP8 layer whose output is re-quantized per 1 x 128 in the graph (DeepGEMM's per_token_cast_to_fp8
    pattern) becomes one op returning (q, s): checked against float64 (torch's CPU op has no MX scales)."""
    a, b, ca, cb, sa, sb, bias = _operands(40, 96, 256, seed=3)

    def f(a, b, sa, sb, bias):
        y = F.gelu(torch._scaled_mm(a, b, sa, sb, bias=bias, out_dtype=torch.bfloat16))
        yg = y.float().view(y.shape[0], -1, 128)  # the views written with -1 (their shapes are what is matched)
        s = yg.abs().amax(dim=-1, keepdim=True).clamp(min=1e-4) / 448.0
        return (yg / s).to(E4M3).view(y.shape[0], -1), s.view(y.shape[0], -1)
    q, s = torch.compile(f, backend="heddle", options={"fallback": "eager"})(a, b, sa, sb, bias)
    out_scale_against_float64(q, s, _reference(a, b, ca, cb, bias), E4M3, "1x128")
    (op,) = hd.explain(f, a, b, sa, sb, bias, fallback="eager").heddle_ops
    assert "_smx_" in op and op.endswith("G128_oe4m3"), op
