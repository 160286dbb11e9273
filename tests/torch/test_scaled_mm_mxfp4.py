"""heddle.scaled_mm with MXFP4 operands (docs/fp8.md "MX formats"): a [M, K/2] and b [K/2, N] (column-major, torch's
b_packed.t()) torch.float4_e2m1fn_x2 with scale_a / scale_b torch.float8_e8m0fnu per 32 of K in torch's blocked
layout (torch's convention: e8m0 scales mean block 32, an e2m1x2 operand counts K = 2 * its columns) select the mx32
fusion with packed operands: evaluated with torch on the plain CPU path, and the printed sm_100a MXFP4 kernel
interpreted under HEDDLE_INTERPRET=1; against a float64 sum over the e2m1 codes and the scales' exponents decoded
here. The op's name, its decode and fake shapes; each refused use named. The torch.compile capture of
torch._scaled_mm and F.scaled_mm (BlockWise1x32, SWIZZLE_32_4_4) with fp4 operands into that op on CPU tensors
(torch's CPU _scaled_mm has no MX scales: the graph runs only through heddle), and by target."""
import pytest
import torch
import torch.nn.functional as F

import heddle
import heddle.dynamo as hd
from heddle.core.errors import InputError
from heddle.pytorch import scaled_mm as smm
from support.dynamo_defs import assert_block_scaled_capture
from support.interp_defs import needs_cxx
from support.mx_defs import check_bf16, e2m1_value, to_blocked

FP4, E8M0 = torch.float4_e2m1fn_x2, torch.float8_e8m0fnu


def _operands(m, k, n, seed=0):
    """a [M, K/2], b [K/2, N] column-major (w.t() of a packed [N, K/2] weight), the raw e2m1 codes [rows, K] and ue8m0
    scale codes per row and 32 of K (120 .. 133: 2^-7 .. 2^6), the scales' blocked forms (1-D, as torch's to_blocked
    returns them), a bf16 bias."""
    g = torch.Generator().manual_seed(seed)
    ca, cw = (torch.randint(0, 16, (r, k), generator=g, dtype=torch.uint8) for r in (m, n))
    a, w = ((c[:, 0::2] | (c[:, 1::2] << 4)).contiguous().view(FP4) for c in (ca, cw))
    sa, sb = (torch.randint(120, 134, (r, k // 32), generator=g, dtype=torch.uint8) for r in (m, n))
    ba, bb = (to_blocked(s).contiguous().view(E8M0).flatten() for s in (sa, sb))
    return a, w.t(), (ca, cw, sa, sb), ba, bb, torch.randn(n, generator=g).to(torch.bfloat16)


def _reference_plain(codes, bias):
    """sum_k A[m,k] 2^(sa[m,k/32]-127) B[n,k] 2^(sb[n,k/32]-127) + bias in float64."""
    ca, cw, sa, sb = codes
    fa, fb = (torch.exp2(s.double() - 127).repeat_interleave(32, dim=1) for s in (sa, sb))
    return (e2m1_value(ca) * fa) @ (e2m1_value(cw) * fb).t() + bias.double()


def test_mxfp4_on_the_cpu_path():
    """Without HEDDLE_INTERPRET the op evaluates the mx32 fusion with packed operands with torch."""
    a, b, codes, sa, sb, bias = _operands(40, 96, 48)
    out = heddle.scaled_mm(a, b, sa, sb, bias=bias, activation="gelu")
    check_bf16(out, F.gelu(_reference_plain(codes, bias)))
    assert torch.equal(heddle.scaled_mm(a, b, sa, sb, bias=bias, activation="gelu"), out)  # the eager front


def test_mxfp4_op_name_decode_and_fake():
    a, b, _, sa, sb, bias = _operands(32, 160, 272)
    spec, args = smm.scaled_spec(a, b, sa, sb, bias, out_dtype=torch.float32, activation="gelu")
    assert spec.mx and not spec.nv and spec.op_name() == "smm_e2m1x2e2m1x2_k80_n272_smx_Bbf16_Agelu_of32"
    assert smm.decode(spec.op_name()) == spec
    assert [tuple(t.shape) for t in args[2:4]] == [(128, 8), (384, 8)]  # K/32 = 5 padded to 8
    assert args[2].data_ptr() == sa.data_ptr() and args[1].shape == (272, 80)  # b^T: the packed [N, K/2] weight
    out = smm.scaled_op(spec).fake(args)
    assert (out.shape, out.dtype) == ((32, 272), torch.float32)


@pytest.mark.parametrize("kw,msg", [
    (dict(sb=torch.zeros(512, dtype=torch.uint8).view(torch.float8_e4m3fn)),
     "'scale_a' is torch.float8_e8m0fnu (MX scales) but 'scale_b' is torch.float8_e4m3fn; MXFP4 takes both scales e8m0"),
    (dict(sa=torch.zeros(100, dtype=torch.uint8).view(E8M0)),
     "'scale_a' has 100 e8m0 scales ([100]); MX scales in torch's blocked layout (to_blocked) are round_up(16, 128) * "
     "round_up(K/32, 4) = 512"),
    (dict(out_dtype=torch.float8_e4m3fn), "out_dtype=torch.float8_e4m3fn with MX scales is not built without out_scale"),
])
def test_mxfp4_errors_name_the_argument(kw, msg):
    a, b, _, sa, sb, _ = _operands(16, 64, 32)
    a, b, sa, sb = (kw.pop(n, v) for n, v in (("a", a), ("b", b), ("sa", sa), ("sb", sb)))
    with pytest.raises(InputError, match=msg.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]").replace("*", r"\*")):
        heddle.scaled_mm(a, b, sa, sb, **{"out_dtype": torch.bfloat16, **kw})


@needs_cxx
def test_mxfp4_interpreted(monkeypatch):
    """HEDDLE_INTERPRET=1, HEDDLE_INTERPRET_TARGET=sm_100a: the MXFP4 kernel printed and run on the CPU; M = 100
    ragged against the 128-row tile, K = 160 (1.25 k tiles: the last one a single 32-chunk, its scale bytes 1-3 torch's
    zero padding and its operand bytes past K/2 TMA zero fill), N = 272 (a ragged third n tile)."""
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    monkeypatch.setenv("HEDDLE_INTERPRET_TARGET", "sm_100a")
    a, b, codes, sa, sb, bias = _operands(100, 160, 272, seed=1)
    out = heddle.scaled_mm(a, b, sa, sb, bias=bias, activation="gelu")
    spec = smm.scaled_spec(a, b, sa, sb, bias, activation="gelu")[0]
    ks = [k for key, k in smm.scaled_op(spec).kernels.items() if key[0] == "sm_100a"]
    assert ks and all("MmaSm100Mxf4<" in k.source and "_mxf4_" in k.name for k in ks)
    check_bf16(out, F.gelu(_reference_plain(codes, bias)))


@pytest.mark.usefixtures("_fresh_dynamo")
def test_compile_captures_mxfp4_scaled_mm():
    """torch._scaled_mm with fp4 operands and e8m0 scales + bias + GELU: one heddle op, right against float64."""
    a, b, codes, sa, sb, bias = _operands(40, 96, 48, seed=4)

    def f(a, b, sa, sb, bias):
        return F.gelu(torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16) + bias)
    check_bf16(torch.compile(f, backend="heddle", options={"fallback": "eager"})(a, b, sa, sb, bias),
           F.gelu(_reference_plain(codes, bias)))
    assert hd.explain(f, a, b, sa, sb, bias, fallback="eager").heddle_ops == \
        ["smm_e2m1x2e2m1x2_k48_n48_smx_Bbf16_Agelu_obf16"]


@pytest.mark.usefixtures("_fresh_dynamo")
@pytest.mark.skipif(not hasattr(F, "scaled_mm"), reason="torch.nn.functional.scaled_mm is newer than this torch")
def test_compile_captures_functional_mxfp4_scaled_mm():
    """F.scaled_mm's MXFP4 recipe (BlockWise1x32 with SWIZZLE_32_4_4 for both fp4 operands), the bias its own
    argument."""
    a, b, codes, sa, sb, bias = _operands(72, 128, 144, seed=5)
    ST, SW = F.ScalingType, F.SwizzleType

    def f(a, b, sa, sb, bias):
        return F.scaled_mm(a, b, sa, ST.BlockWise1x32, sb, ST.BlockWise1x32, swizzle_a=SW.SWIZZLE_32_4_4,
                           swizzle_b=SW.SWIZZLE_32_4_4, bias=bias, output_dtype=torch.bfloat16)
    out = torch.compile(f, backend="heddle", options={"fallback": "eager"})(a, b, sa, sb, bias)
    check_bf16(out, _reference_plain(codes, bias))
    assert hd.explain(f, a, b, sa, sb, bias, fallback="eager").heddle_ops == ["smm_e2m1x2e2m1x2_k64_n144_smx_Bbf16_obf16"]


@pytest.mark.parametrize("target,fused", [("sm_100a", True), ("sm_90a", False)])
def test_capture_of_mxfp4_follows_the_target(target, fused):
    """A CUDA graph for a device without the block-scaled tcgen05.mma keeps torch's MXFP4 _scaled_mm, saying why."""
    a, b, _, sa, sb, _ = _operands(32, 64, 272)
    assert_block_scaled_capture(a, b, sa, sb, target, fused, "smm_e2m1x2e2m1x2_k32_n272_smx_obf16", 4)


def test_mxfp4_out_scale_on_the_cpu_path():
    """An MXFP4 layer's output re-quantized (out_scale="1x128"): (q, s) from the fusion evaluated with torch."""
    from support.quant_defs import out_scale_against_float64
    a, b, codes, sa, sb, bias = _operands(40, 96, 272)
    q, s = heddle.scaled_mm(a, b, sa, sb, bias=bias, activation="gelu", out_dtype=torch.float8_e4m3fn,
                            out_scale="1x128")
    out_scale_against_float64(q, s, F.gelu(_reference_plain(codes, bias)), torch.float8_e4m3fn, "1x128")
    spec = smm.scaled_spec(a, b, sa, sb, bias, out_dtype=torch.float8_e4m3fn, activation="gelu", out_scale="1x128")[0]
    assert spec.mx and spec.op_name() == "smm_e2m1x2e2m1x2_k48_n272_smx_Bbf16_Agelu_G128_oe4m3"
    assert smm.decode(spec.op_name()) == spec
