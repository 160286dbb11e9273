"""heddle.scaled_mm with a computed output scale (out_scale="1x128" | "row", docs/fp8.md "Computed output
scales"): the call returns (q, s), its op has a two-tensor return with the scale's fake shape, its name encodes
the option, opcheck passes, each wrong use is an InputError naming the option, and q * s matches a float64
reference within the 8-bit format's step -- on the plain CPU path (heddle.reference.evaluate) and with the
printed sm_90a kernel interpreted under HEDDLE_INTERPRET=1."""
import pytest
import torch
import torch.nn.functional as F

import heddle
from heddle.core.errors import InputError
from heddle.pytorch import scaled_mm as smm
from support.interp_defs import needs_cxx
from support.quant_defs import out_scale_against_float64

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


def _operands(m, k, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(E4M3)
    b = torch.randn(n, k, generator=g).to(E4M3).t()   # [K, N] column-major: a Linear weight's w.t()
    sa, sb = torch.rand(m, 1, generator=g) + 0.5, torch.rand(1, n, generator=g) + 0.5
    bias = torch.randn(n, generator=g).to(torch.bfloat16)
    return a, b, sa, sb, bias


def _check_quantized(q, s, a, b, sa, sb, bias, dt, out_scale):
    """q * s against gelu((a @ b) * sa * sb + bias) in float64; s against the amax definition in float64."""
    y = F.gelu((a.double() @ b.double()) * sa.double() * sb.double() + bias.double())
    out_scale_against_float64(q, s, y, dt, out_scale)


@pytest.mark.parametrize("dt,out_scale,n", [(E4M3, "1x128", 272), (E5M2, "row", 48)])
def test_out_scale_on_the_cpu_path(dt, out_scale, n):
    """Without HEDDLE_INTERPRET the op evaluates the fusion with torch (heddle.reference.evaluate)."""
    a, b, sa, sb, bias = _operands(40, 64, n)
    q, s = heddle.scaled_mm(a, b, sa, sb, bias=bias, out_dtype=dt, activation="gelu", out_scale=out_scale)
    _check_quantized(q, s, a, b, sa, sb, bias, dt, out_scale)


def test_out_scale_op_name_fake_shapes_and_opcheck():
    a, b, sa, sb, bias = _operands(32, 64, 272)
    spec, args = smm.scaled_spec(a, b, sa, sb, bias, out_dtype=E4M3, activation="gelu", out_scale="1x128")
    fm = smm.scaled_op(spec)
    assert spec.op_name() == "smm_e4m3e4m3_k64_n272_src_Bbf16_Agelu_G128_oe4m3"
    assert smm.decode(spec.op_name()) == spec
    row = smm.scaled_spec(a, b, sa, sb, None, out_dtype=E5M2, out_scale="row")[0]
    assert row.op_name() == "smm_e4m3e4m3_k64_n272_src_Grow_oe5m2" and smm.decode(row.op_name()) == row
    assert smm.decode(spec.op_name().replace("G128", "G64")) is None
    fq, fs = fm.fake(args)
    assert (fq.shape, fq.dtype, fs.shape, fs.dtype) == ((32, 272), E4M3, (32, 3), torch.float32)
    op = getattr(torch.ops.heddle, spec.op_name())
    assert str(op.default._schema).endswith("-> (Tensor, Tensor)"), op.default._schema
    # test_schema's mutation check compares inputs with allclose, which CPU torch lacks for float8: the bytes
    # are compared below instead
    res = torch.library.opcheck(op, tuple(args), test_utils=("test_autograd_registration", "test_faketensor",
                                                             "test_aot_dispatch_static", "test_aot_dispatch_dynamic"))
    assert set(res.values()) == {"SUCCESS"}, res
    before = [t.view(torch.uint8).clone() if t.element_size() == 1 else t.clone() for t in args]
    q, s = op(*args)
    assert s.shape == (32, 3)
    assert all(torch.equal(x, t.view(torch.uint8) if t.element_size() == 1 else t) for x, t in zip(before, args))


@pytest.mark.parametrize("kw,msg", [
    (dict(out_scale="1x128"), r"out_scale='1x128' quantizes the output with a computed scale, which needs an "
                              r"8-bit out_dtype; got out_dtype=torch.bfloat16"),
    (dict(out_scale="1x128", out_dtype=E4M3, scale_result=torch.tensor([2.0])),
     r"out_scale='1x128' computes the output's scale, so 'scale_result' \(a given one\) cannot apply too"),
    (dict(out_scale="128x128", out_dtype=E4M3), r"out_scale='128x128' is not supported; use out_scale='1x128'"),
    (dict(out_scale=128, out_dtype=E5M2), r"out_scale=128 is not supported; use out_scale='1x128'"),
])
def test_out_scale_errors_name_the_option(kw, msg):
    a, b, sa, sb, bias = _operands(16, 32, 128)
    with pytest.raises(InputError, match=msg):
        heddle.scaled_mm(a, b, sa, sb, **kw)


def test_out_scale_with_block_scales_is_refused_on_every_device():
    a, b, _, _, _ = _operands(16, 256, 256)
    sa, sb = torch.ones(16, 2), torch.ones(2, 2)   # BlockWise1x128 x BlockWise128x128
    with pytest.raises(InputError, match=r"out_scale='1x128' with 128-block scales is not built \(the "
                                         r"block-scaled kernel's n tile of 64 splits a group"):
        heddle.scaled_mm(a, b, sa, sb, out_dtype=E4M3, out_scale="1x128")


@needs_cxx
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_out_scale_interpreted(monkeypatch, target):
    """HEDDLE_INTERPRET=1: the wgmma (sm_90a) or tcgen05 (sm_100a) kernel with the quantize epilogue, printed and
    run on the CPU; M = 100 ragged against the 128-row tile, N = 272 with a last group of 16 columns."""
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    monkeypatch.setenv("HEDDLE_INTERPRET_TARGET", target)
    a, b, sa, sb, bias = _operands(100, 64, 272, seed=1)
    q, s = heddle.scaled_mm(a, b, sa, sb, bias=bias, out_dtype=E4M3, activation="gelu", out_scale="1x128")
    spec = smm.scaled_spec(a, b, sa, sb, bias, out_dtype=E4M3, activation="gelu", out_scale="1x128")[0]
    ks = [k for key, k in smm.scaled_op(spec).kernels.items() if key[0] == target]  # the op serves both targets
    assert ks and all("_q128" in k.name and ("sm100" in k.name) == (target == "sm_100a") for k in ks)
    _check_quantized(q, s, a, b, sa, sb, bias, E4M3, "1x128")
