"""The torch.compile backend's capture of an FP8 quantization written out after torch._scaled_mm (docs/fp8.md
"Computed output scales", heddle/pytorch/dynamo_quantize.py): the op with out_scale="1x128" | "row" returns the
quantized output and its scale, matching the eager graph (within one step of the format where the eager graph
rounds y to bf16 before its amax); a pattern with another floor or constant, or read elsewhere, stays with
torch and the report says why."""
import pytest
import torch
import torch.nn.functional as F

import heddle.dynamo as hd
from support.interp_defs import needs_cxx

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
FMAX = {E4M3: 448.0, E5M2: 57344.0}


@pytest.fixture
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _operands(m=40, k=64, n=256, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(E4M3)
    b = torch.randn(n, k, generator=g).to(E4M3).t()   # [K, N] column-major
    return a, b, torch.rand(m, 1, generator=g) + 0.5, torch.rand(1, n, generator=g) + 0.5, \
        torch.randn(n, generator=g).to(torch.bfloat16)


def quant_1x128(a, b, sa, sb, bias, dt=E4M3, floor=1e-4, fmax=None):
    y = F.gelu(torch._scaled_mm(a, b, sa, sb, bias=bias, out_dtype=torch.bfloat16))
    m, n = y.shape
    yg = y.float().view(m, n // 128, 128)
    s = yg.abs().amax(dim=-1, keepdim=True).clamp(min=floor) / (fmax or FMAX[dt])
    q = (yg / s).to(dt).view(m, n)
    return q, s.view(m, n // 128)


def quant_row(a, b, sa, sb, bias, dt=E5M2):
    y = torch._scaled_mm(a, b, sa, sb, bias=bias, out_dtype=torch.bfloat16)
    s = y.abs().amax(dim=-1, keepdim=True).float().clamp(min=1e-4) / FMAX[dt]
    q = (y.float() / s).clamp(-FMAX[dt], FMAX[dt]).to(dt)
    return q, s


def _same_within_a_step(got, want, dt):
    (q, s), (q0, s0) = got, want
    assert q.dtype == q0.dtype == dt and q.shape == q0.shape and s.shape == s0.shape and s.dtype == torch.float32
    torch.testing.assert_close(s, s0, rtol=2 ** -7, atol=0)   # the eager amax reads y rounded to bf16
    step = 2.0 ** -3 if dt == E4M3 else 2.0 ** -2
    assert torch.all((q.float() - q0.float()).abs() <= q0.float().abs() * step + 2.0 ** -6), \
        (q.float() - q0.float()).abs().max()


def _fused(fn, *args):
    ex = hd.explain(fn, *args, fallback="eager")
    return ex, [d for r in ex.graphs for d in r.decisions if d.op == "_scaled_mm"]


@pytest.mark.usefixtures("_fresh_dynamo")
@pytest.mark.parametrize("fn,dt,tag", [(quant_1x128, E4M3, "G128_oe4m3"), (quant_row, E5M2, "Grow_oe5m2")])
def test_quantize_after_scaled_mm_becomes_the_ops_computed_scale(fn, dt, tag):
    n = 256 if fn is quant_1x128 else 96
    args = _operands(n=n)
    ex, d = _fused(fn, *args)
    assert len(ex.heddle_ops) == 1 and ex.heddle_ops[0].endswith(tag), ex.heddle_ops
    assert d and d[0].status == "fused"
    (grp,) = ex.groups
    assert "-> quantize" in grp.summary and "1e-4" in grp.summary, grp.summary
    got = torch.compile(fn, backend="heddle", options={"fallback": "eager"})(*args)
    _same_within_a_step(got, fn(*args), dt)


@pytest.mark.usefixtures("_fresh_dynamo")
@needs_cxx
def test_captured_quantize_runs_the_printed_kernel(monkeypatch):
    """HEDDLE_INTERPRET=1: the captured op runs its sm_90a kernel (the quantize epilogue) through the interpreter."""
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    args = _operands(m=70, n=256)
    got = torch.compile(quant_1x128, backend="heddle", options={"fallback": "eager"})(*args)
    _same_within_a_step(got, quant_1x128(*args), E4M3)


@pytest.mark.usefixtures("_fresh_dynamo")
def test_other_quantizations_stay_with_torch():
    args = _operands(n=256)
    for fn in (lambda *a: quant_1x128(*a, floor=1e-12),        # another floor: other scales for tiny groups
               lambda *a: quant_1x128(*a, fmax=240.0)):        # another constant
        ex, d = _fused(fn, *args)
        assert not any(op.endswith("oe4m3") for op in ex.heddle_ops), ex.heddle_ops
        assert d and d[0].status == "fused"   # the matmul + gelu still fuse, into a bf16 op
        got, want = torch.compile(fn, backend="heddle", options={"fallback": "eager"})(*args), fn(*args)
        _same_within_a_step(got, want, E4M3)

    def keeps_y(a, b, sa, sb, bias):   # y read elsewhere too: the quantization is not its only consumer
        y = torch._scaled_mm(a, b, sa, sb, bias=bias, out_dtype=torch.bfloat16)
        s = y.abs().amax(dim=-1, keepdim=True).float().clamp(min=1e-4) / 448.0
        return (y.float() / s).to(E4M3), s, y.sum()
    small = _operands(n=96)
    ex, d = _fused(keeps_y, *small)
    assert not any(op.endswith("oe4m3") for op in ex.heddle_ops), ex.heddle_ops


@pytest.mark.usefixtures("_fresh_dynamo")
def test_row_quantization_of_a_wide_output_stays_with_torch_and_says_why():
    args = _operands(n=256)
    fn = lambda *a: quant_row(*a, dt=E4M3)  # noqa: E731
    ex, d = _fused(fn, *args)
    assert d and d[0].status == "fused" and not any(op.endswith("oe4m3") for op in ex.heddle_ops), ex.heddle_ops
    assert "per-row quantization of N = 256" in ex.groups[0].stop, ex.groups[0].stop
    _same_within_a_step(torch.compile(fn, backend="heddle", options={"fallback": "eager"})(*args), fn(*args), E4M3)
