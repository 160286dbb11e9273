"""heddle.scaled_mm with NVFP4 operands (docs/fp8.md "MX formats"): a [M, K/2] and b [K/2, N] (column-major, torch's
b_packed.t()) torch.float4_e2m1fn_x2, scale_a / scale_b torch.float8_e4m3fn (ue4m3) per 16 of K in torch's blocked
layout (torch's own to_blocked, flattened as torch._scaled_mm takes them: torch/_meta_registrations.py
_check_scaled_mm_sizes) select the nv16 fusion: evaluated with torch on the plain CPU path, and the printed sm_100a
NVFP4 kernel interpreted under HEDDLE_INTERPRET=1; against a float64 sum over the e2m1 codes and unblocked scales
decoded here from the format's formula. The op's name, its decode and fake shapes; each refused use named. The
torch.compile capture of torch._scaled_mm and F.scaled_mm (BlockWise1x16, SWIZZLE_32_4_4) with NVFP4 operands and
their epilogue into that op on CPU tensors (torch's CPU _scaled_mm has none: the graph runs only through heddle), and
by target."""
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
from support.quant_defs import out_scale_against_float64

FP4, E4M3, E5M2 = torch.float4_e2m1fn_x2, torch.float8_e4m3fn, torch.float8_e5m2


def _operands(m, k, n, seed=0):
    """a [M, K/2], b [K/2, N] column-major (w.t() of a packed [N, K/2] weight), the raw e2m1 codes [rows, K] and ue4m3
    scale codes per row and 16 of K (0x28 .. 0x47: 2^-2 .. 3.75), the scales' blocked forms (1-D, as torch's
    to_blocked returns them), a bf16 bias."""
    g = torch.Generator().manual_seed(seed)
    ca, cw = (torch.randint(0, 16, (r, k), generator=g, dtype=torch.uint8) for r in (m, n))
    a, w = ((c[:, 0::2] | (c[:, 1::2] << 4)).contiguous().view(FP4) for c in (ca, cw))
    sa, sb = (torch.randint(0x28, 0x48, (r, k // 16), generator=g, dtype=torch.uint8) for r in (m, n))
    ba, bb = (to_blocked(s).contiguous().view(E4M3).flatten() for s in (sa, sb))
    return a, w.t(), (ca, cw, sa, sb), ba, bb, torch.randn(n, generator=g).to(torch.bfloat16)


def _reference(codes, bias):
    """gelu(sum_k A[m,k] sa[m,k/16] B[n,k] sb[n,k/16] + bias) in float64."""
    return F.gelu(_reference_plain(codes, bias))


def test_nvfp4_on_the_cpu_path():
    """Without HEDDLE_INTERPRET the op evaluates the nv16 fusion with torch (heddle.reference.evaluate)."""
    a, b, codes, sa, sb, bias = _operands(40, 96, 48)
    out = heddle.scaled_mm(a, b, sa, sb, bias=bias, activation="gelu")
    check_bf16(out, _reference(codes, bias))
    assert torch.equal(heddle.scaled_mm(a, b, sa, sb, bias=bias, activation="gelu"), out)  # the eager front


def test_nvfp4_op_name_decode_and_fake():
    a, b, _, sa, sb, bias = _operands(32, 128, 272)
    spec, args = smm.scaled_spec(a, b, sa, sb, bias, out_dtype=torch.float32, activation="gelu")
    assert spec.nv and not spec.mx and spec.op_name() == "smm_e2m1x2e2m1x2_k64_n272_snv_Bbf16_Agelu_of32"
    assert smm.decode(spec.op_name()) == spec
    assert [tuple(t.shape) for t in args[2:4]] == [(128, 8), (384, 8)]  # views of the blocked bytes: K/16 = 8
    assert args[2].data_ptr() == sa.data_ptr() and args[1].shape == (272, 64)  # b^T: the packed [N, K/2] weight
    out = smm.scaled_op(spec).fake(args)
    assert (out.shape, out.dtype) == ((32, 272), torch.float32)


@pytest.mark.parametrize("kw,msg", [
    (dict(k=48), "K=48 (a [16, 24] packed e2m1) and N=32: K/2 and N must be multiples of 16"),
    (dict(b=torch.zeros(64, 32, dtype=torch.uint8).view(E4M3).t().contiguous().t()),
     "'b' is torch.float8_e4m3fn but the other operand is torch.float4_e2m1fn_x2"),
    (dict(sb=torch.ones(1)), "'scale_b' has dtype torch.float32; NVFP4 (torch.float4_e2m1fn_x2 operands) takes "
                             "torch.float8_e4m3fn scales"),
    (dict(sa=torch.zeros(512, dtype=torch.uint8).view(torch.float8_e8m0fnu)),
     "'scale_a' is torch.float8_e8m0fnu (MX scales) but 'scale_b' is torch.float8_e4m3fn; MXFP4 takes both scales "
     "e8m0"),
    (dict(sa=torch.zeros(100, dtype=torch.uint8).view(E4M3)), "'scale_a' has 100 e4m3 scales ([100]); NVFP4 scales"),
    (dict(out_dtype=E4M3), "out_dtype=torch.float8_e4m3fn with NVFP4 operands is not built without out_scale"),
])
def test_nvfp4_errors_name_the_argument(kw, msg):
    k = kw.pop("k", 64)
    a, b, _, sa, sb, _ = _operands(16, k, 32)
    a, b, sa, sb = (kw.pop(n, v) for n, v in (("a", a), ("b", b), ("sa", sa), ("sb", sb)))
    with pytest.raises(InputError, match=msg.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")):
        heddle.scaled_mm(a, b, sa, sb, **{"out_dtype": torch.bfloat16, **kw})


@pytest.mark.parametrize("dt,out_scale,n", [(E4M3, "1x128", 272), (E5M2, "row", 48)])
def test_nvfp4_out_scale_on_the_cpu_path(dt, out_scale, n):
    """An NVFP4 layer's output re-quantized (out_scale): (q, s) from the fusion evaluated with torch."""
    a, b, codes, sa, sb, bias = _operands(40, 96, n)
    q, s = heddle.scaled_mm(a, b, sa, sb, bias=bias, activation="gelu", out_dtype=dt, out_scale=out_scale)
    out_scale_against_float64(q, s, _reference(codes, bias), dt, out_scale)
    spec = smm.scaled_spec(a, b, sa, sb, bias, out_dtype=dt, activation="gelu", out_scale=out_scale)[0]
    assert spec.nv and "_snv_" in spec.op_name() and smm.decode(spec.op_name()) == spec


@needs_cxx
def test_nvfp4_interpreted(monkeypatch):
    """HEDDLE_INTERPRET=1, HEDDLE_INTERPRET_TARGET=sm_100a: the NVFP4 kernel printed and run on the CPU; M = 100
    ragged against the 128-row tile, K = 192 (1.5 k tiles; K/64 odd: the last k tile's second scale chunk is TMA
    zero fill), N = 272 (a ragged third n tile)."""
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    monkeypatch.setenv("HEDDLE_INTERPRET_TARGET", "sm_100a")
    a, b, codes, sa, sb, bias = _operands(100, 192, 272, seed=1)
    out = heddle.scaled_mm(a, b, sa, sb, bias=bias, activation="gelu")
    spec = smm.scaled_spec(a, b, sa, sb, bias, activation="gelu")[0]
    ks = [k for key, k in smm.scaled_op(spec).kernels.items() if key[0] == "sm_100a"]
    assert ks and all("MmaSm100Nvf4<" in k.source for k in ks)
    check_bf16(out, _reference(codes, bias))


@needs_cxx
def test_nvfp4_out_scale_interpreted(monkeypatch):
    """The printed sm_100a NVFP4 kernel with its quantize epilogue (the automatic 128 x 256 x 64-byte tile: two groups
    a tile, N = 272 a last group of 16 columns), M = 100, K = 192, interpreted on the CPU."""
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    monkeypatch.setenv("HEDDLE_INTERPRET_TARGET", "sm_100a")
    a, b, codes, sa, sb, bias = _operands(100, 192, 272, seed=2)
    q, s = heddle.scaled_mm(a, b, sa, sb, bias=bias, activation="gelu", out_dtype=E4M3, out_scale="1x128")
    out_scale_against_float64(q, s, _reference(codes, bias), E4M3, "1x128")
    spec = smm.scaled_spec(a, b, sa, sb, bias, out_dtype=E4M3, activation="gelu", out_scale="1x128")[0]
    ks = [k for key, k in smm.scaled_op(spec).kernels.items() if key[0] == "sm_100a"]
    assert ks and all("MmaSm100Nvf4<" in k.source and "_q128_" in k.name for k in ks)


@pytest.mark.usefixtures("_fresh_dynamo")
def test_compile_captures_nvfp4_scaled_mm():
    """torch._scaled_mm with NVFP4 operands + bias + GELU: one heddle op (the blocked scales viewed 2-D in the graph),
    right against float64."""
    a, b, codes, sa, sb, bias = _operands(40, 96, 48, seed=4)

    def f(a, b, sa, sb, bias):
        return F.gelu(torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16) + bias)
    check_bf16(torch.compile(f, backend="heddle", options={"fallback": "eager"})(a, b, sa, sb, bias),
           _reference(codes, bias))
    assert hd.explain(f, a, b, sa, sb, bias, fallback="eager").heddle_ops == \
        ["smm_e2m1x2e2m1x2_k48_n48_snv_Bbf16_Agelu_obf16"]


@pytest.mark.usefixtures("_fresh_dynamo")
def test_compile_captures_nvfp4_scaled_mm_with_its_quantize():
    """An NVFP4 layer whose output is re-quantized per 1 x 128 in the graph (DeepGEMM's per_token_cast_to_fp8
    pattern) becomes one op returning (q, s), as after an MX _scaled_mm: checked against float64."""
    a, b, codes, sa, sb, bias = _operands(40, 96, 256, seed=3)

    def f(a, b, sa, sb, bias):
        y = F.gelu(torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16) + bias)
        yg = y.float().view(y.shape[0], -1, 128)
        s = yg.abs().amax(dim=-1, keepdim=True).clamp(min=1e-4) / 448.0
        return (yg / s).to(E4M3).view(y.shape[0], -1), s.view(y.shape[0], -1)
    q, s = torch.compile(f, backend="heddle", options={"fallback": "eager"})(a, b, sa, sb, bias)
    out_scale_against_float64(q, s, _reference(codes, bias), E4M3, "1x128")
    assert hd.explain(f, a, b, sa, sb, bias, fallback="eager").heddle_ops == \
        ["smm_e2m1x2e2m1x2_k48_n256_snv_Bbf16_Agelu_G128_oe4m3"]


@pytest.mark.usefixtures("_fresh_dynamo")
@pytest.mark.skipif(not hasattr(F, "scaled_mm"), reason="torch.nn.functional.scaled_mm is newer than this torch")
def test_compile_captures_functional_nvfp4_scaled_mm():
    """F.scaled_mm's single-level NVFP4 recipe (BlockWise1x16 with SWIZZLE_32_4_4 for both operands, no global
    scale), the bias its own argument."""
    a, b, codes, sa, sb, bias = _operands(72, 128, 144, seed=5)
    ST, SW = F.ScalingType, F.SwizzleType

    def f(a, b, sa, sb, bias):
        return F.scaled_mm(a, b, sa, ST.BlockWise1x16, sb, ST.BlockWise1x16, swizzle_a=SW.SWIZZLE_32_4_4,
                           swizzle_b=SW.SWIZZLE_32_4_4, bias=bias, output_dtype=torch.bfloat16)
    out = torch.compile(f, backend="heddle", options={"fallback": "eager"})(a, b, sa, sb, bias)
    check_bf16(out, _reference_plain(codes, bias))
    assert hd.explain(f, a, b, sa, sb, bias, fallback="eager").heddle_ops == ["smm_e2m1x2e2m1x2_k64_n144_snv_Bbf16_obf16"]


def _reference_plain(codes, bias):
    """sum_k A[m,k] sa[m,k/16] B[n,k] sb[n,k/16] + bias in float64 (no activation)."""
    ca, cw, sa, sb = codes
    fa, fb = (s.view(E4M3).double().repeat_interleave(16, dim=1) for s in (sa, sb))
    return (e2m1_value(ca) * fa) @ (e2m1_value(cw) * fb).t() + bias.double()


@pytest.mark.parametrize("target,fused", [("sm_100a", True), ("sm_90a", False)])
def test_capture_of_nvfp4_follows_the_target(target, fused):
    """A CUDA graph for a device without the block-scaled tcgen05.mma keeps torch's NVFP4 _scaled_mm, saying why."""
    a, b, _, sa, sb, _ = _operands(32, 64, 272)
    assert_block_scaled_capture(a, b, sa, sb, target, fused, "smm_e2m1x2e2m1x2_k32_n272_snv_obf16", 4)
