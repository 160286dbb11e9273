"""heddle.scaled_mm takes torch._scaled_mm's arguments in torch's order (issue 32): (self, mat2, scale_a, scale_b,
bias, scale_result, out_dtype, use_fast_accum), positionally or by keyword; use_fast_accum is accepted and
changes nothing (docs/fp8.md "use_fast_accum"); the torch.compile capture maps aten._scaled_mm's arguments by
its schema. CPU tensors, the printed kernel interpreted (HEDDLE_INTERPRET=1) as in test_scaled_mm.py."""
import inspect

import pytest
import torch

import heddle
from heddle.core.errors import InputError, ScheduleError

E4M3 = torch.float8_e4m3fn
M, K, N = 32, 64, 32


@pytest.fixture
def operands(monkeypatch):
    """(a, b, scale_a, scale_b, bias, scale_result): per-row scales, b column-major (a Linear weight's w.t())."""
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    g = torch.Generator().manual_seed(3)
    a = torch.randn(M, K, generator=g).to(E4M3)
    b = torch.randn(N, K, generator=g).to(E4M3).t()
    sa, sb = torch.rand(M, 1, generator=g) + 0.5, torch.rand(1, N, generator=g) + 0.5
    return a, b, sa, sb, torch.randn(N, generator=g).bfloat16(), torch.tensor(0.25)


def _call(*args, **kw):
    try:
        return heddle.scaled_mm(*args, **kw)
    except ScheduleError as e:  # a build without the sm_90a FP8 kernel family (docs/fp8.md)
        assert "not lowered in this build yet" in str(e)
        pytest.skip(f"FP8 wgmma kernels not in this build: {e}")


def _reference(a, b, sa, sb, bias):
    return (a.double() @ b.double()) * sa.double() * sb.double() + bias.double()


def test_parameters_after_the_operands_are_torchs():
    schema = [x.name for x in torch.ops.aten._scaled_mm.default._schema.arguments]
    params = list(inspect.signature(heddle.scaled_mm).parameters.values())
    positional = [p.name for p in params if p.kind == p.POSITIONAL_OR_KEYWORD]
    assert schema[:2] == ["self", "mat2"] and positional[:2] == ["a", "b"]
    assert positional[2:] == schema[2:]
    assert [p.name for p in params if p.kind == p.KEYWORD_ONLY] == ["activation", "out_scale"]


def test_positional_call_as_torch_takes_it(operands):
    """The same eight positional arguments to torch._scaled_mm and heddle.scaled_mm give the same f32 output
    (scale_result is ignored for a 32-bit output by both), and equal the keyword form."""
    a, b, sa, sb, bias, sr = operands
    out = _call(a, b, sa, sb, bias, sr, torch.float32, False)
    assert out.dtype == torch.float32 and out.shape == (M, N)
    torch.testing.assert_close(out, torch._scaled_mm(a, b, sa, sb, bias, sr, torch.float32, False))
    kw = _call(a, b, sa, sb, bias=bias, scale_result=sr, out_dtype=torch.float32, use_fast_accum=False)
    assert torch.equal(out, kw)
    ref = _reference(a, b, sa, sb, bias)
    assert (out.double() - ref).abs().max().item() <= ref.abs().max().item() * 2.0 ** -20


def test_positional_scale_result_scales_an_8bit_output(operands):
    """scale_result in its torch position (the sixth) reaches the kernel: an e4m3 output multiplied by it
    (cuBLASLt's D scale, as torch's CUDA op applies it), the same as the keyword call."""
    a, b, sa, sb, bias, sr = operands
    out = _call(a, b, sa, sb, bias, sr, E4M3)
    assert out.dtype == E4M3
    assert torch.equal(out.view(torch.uint8), _call(a, b, sa, sb, bias=bias, scale_result=sr,
                                                    out_dtype=E4M3).view(torch.uint8))
    ref = (_reference(a, b, sa, sb, bias) * 0.25).clamp(-448, 448)
    assert ((out.double() - ref).abs() <= ref.abs() * 2.0 ** -4 + 2.0 ** -9).all()  # e4m3: 3 mantissa bits


def test_the_front_picks_the_ops_tensors_from_torchs_positions(operands):
    """The eager front (CallTable.adopt's pick) takes each of the op's tensors from the argument of scaled_mm's
    call in torch's order: bias the fifth, scale_result the sixth (an index past them would name out_dtype)."""
    from heddle.pytorch import scaled_mm as smm
    a, b, sa, sb, bias, sr = operands
    call = (a, b, sa, sb, bias, sr, E4M3, False, None, None)  # scaled_mm's call as its front keys it
    spec, op_tensors = smm.scaled_spec(*call)
    pick = smm._pick(spec)
    assert len(pick) == len(op_tensors) == 6
    assert [op_tensors[j].data_ptr() for j in range(6)] == [call[i].data_ptr() for i in pick]


def test_use_fast_accum_is_accepted_and_changes_nothing(operands):
    a, b, sa, sb, bias, sr = operands
    slow = _call(a, b, sa, sb, bias, None, torch.bfloat16, False)
    fast = _call(a, b, sa, sb, bias, None, torch.bfloat16, True)
    assert torch.equal(slow, fast)
    with pytest.raises(InputError, match=r"use_fast_accum=1 must be True or False .*docs/fp8.md"):
        heddle.scaled_mm(a, b, sa, sb, bias, None, torch.bfloat16, 1)


def test_capture_maps_positional_aten_arguments():
    """A graph with aten._scaled_mm called positionally (scale_result, out_dtype, use_fast_accum in torch's
    places): the capture's binding names each argument by the schema."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from heddle.pytorch.dynamo_scaled import _bind, is_scaled_mm
    a = torch.randn(M, K).to(E4M3)
    b = torch.randn(N, K).to(E4M3).t()
    sa, sb, bias, sr = torch.ones(M, 1), torch.ones(1, N), torch.zeros(N, dtype=torch.bfloat16), torch.tensor(1.0)
    gm = make_fx(lambda a, b, sa, sb, bias, sr: torch._scaled_mm(a, b, sa, sb, bias, sr, torch.bfloat16, True),
                 tracing_mode="fake")(a, b, sa, sb, bias, sr)
    (node,) = [n for n in gm.graph.nodes if is_scaled_mm(n)]
    got = _bind(node)
    names = {n: p.name for n, p in zip(("a", "b", "scale_a", "scale_b", "bias", "scale_result"),
                                       [p for p in gm.graph.nodes if p.op == "placeholder"])}
    assert {k: got[k].name for k in names} == names
    assert got["out_dtype"] == torch.bfloat16 and got["use_fast_accum"] is True
