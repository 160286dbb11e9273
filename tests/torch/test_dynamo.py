"""torch.compile(backend=heddle_backend): partition decisions, numerics and gradients against eager (CPU).

On CPU tensors heddle's ops compute with the torch reference (float32 epilogue, one rounding at the
end), so everything here runs without a GPU; tests/gpu/test_dynamo_gpu.py repeats the models on CUDA.
"""
import shutil

import pytest
import torch

import heddle
import heddle.dynamo as hd
from heddle.dynamo import heddle_backend

from support.dynamo_defs import needs_cxx
from support.dynamo_models import MLP, Attention, GatedFFN, ResidualLinear, RowBias, ScaledSigmoid, build

pytestmark = pytest.mark.usefixtures("_fresh_dynamo")  # tests/torch/conftest.py

BF16_TOL = dict(atol=3e-2, rtol=3e-2)


def _x(*shape, dtype=torch.bfloat16, seed=1, grad=False):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype).requires_grad_(grad)


def _groups(report):
    """{root node: (summary, [absorbed node labels])} of one GraphReport."""
    return {g.root: g.summary for g in report.groups}


def _train_step(fn, model, x):
    out = fn(x)
    out.float().square().mean().backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    gx = x.grad.detach().clone()
    model.zero_grad(set_to_none=True)
    x.grad = None
    return out.detach(), grads, gx


def _check_train(model, x, **options):
    """Compiled forward + backward equal eager within bf16 tolerance; returns the graph reports."""
    ref_out, ref_grads, ref_gx = _train_step(model, model, x)
    compiled = torch.compile(model, backend=heddle_backend, options=options or None)
    out, grads, gx = _train_step(compiled, model, x)
    torch.testing.assert_close(out, ref_out, **BF16_TOL)
    torch.testing.assert_close(gx, ref_gx, **BF16_TOL)
    for name in ref_grads:
        scale = ref_grads[name].abs().max().item()
        torch.testing.assert_close(grads[name], ref_grads[name], atol=3e-2 * scale, rtol=3e-2, msg=name)
    return list(hd.reports)


# --------------------------------------------------------------------------------------------------
# partition decisions (inference)
# --------------------------------------------------------------------------------------------------
def test_mlp_inference_fuses_bias_and_gelu():
    e = hd.explain(build(MLP), _x(16, 64), fallback="eager")
    r = e.graph("inference")
    assert len(r.groups) == 2 and not r.unfused_matmuls
    first, second = r.groups
    assert first.summary == "addmm(a, b^T) + bias -> gelu" and first.nodes == ["addmm", "gelu"]
    assert second.summary == "addmm(a, b^T) + bias"
    assert r.decision("gelu").status == "absorbed"
    assert e.dynamo_graphs == 1 and len(e.heddle_ops) == 2
    assert all(op.startswith("mm_bf16_nt_") for op in e.heddle_ops)


def test_mlp_on_3d_input_reads_it_as_a_batched_operand():
    r = hd.explain(build(MLP), _x(2, 8, 64), fallback="eager").graph("inference")
    assert [g.summary for g in r.groups] == [
        "addmm(a, b^T) + bias (batched over the 3-D input) -> gelu",
        "addmm(a, b^T) + bias (batched over the 3-D input)"]
    spec = next(s for s in heddle.api._ops if s.op_name() == r.groups[0].op)
    assert spec.batched and not spec.batched_b and spec.activation == "gelu" and spec.bias == ("bf16", 1)


def test_gated_ffn_gate_and_up_are_one_op():
    # silu(x W1^T) * (x W3^T): a matmul group, one heddle op (heddle/pytorch/dynamo_gated.py)
    r = hd.explain(build(GatedFFN), _x(16, 64), fallback="eager").graph("inference")
    by_root = _groups(r)
    assert by_root == {"mm": "gated mm(a, b^T) x 2 (one kernel): silu(g) * u", "mm_2": "mm(a, b^T) + residual"}
    for node in ("silu", "mm_1", "mul"):
        assert r.decision(node).status == "absorbed", node
    assert r.groups[0].op.startswith("gated_bf16_silu_")


def test_residual_linear_fuses_bias_relu_and_residual():
    r = hd.explain(build(ResidualLinear), _x(16, 64), fallback="eager").graph("inference")
    (g,) = r.groups
    assert g.summary == "addmm(a, b^T) + bias -> relu + residual"
    spec = next(s for s in heddle.api._ops if s.op_name() == g.op)
    assert spec.residual == ("bf16", 2) and spec.activation == "relu"


def test_scale_bias_activation_and_cast_in_one_op():
    r = hd.explain(build(ScaledSigmoid), _x(16, 64), fallback="eager").graph("inference")
    (g,) = r.groups
    assert g.summary == "mm(a, b^T) * 0.5 + bias -> sigmoid -> f32"
    spec = next(s for s in heddle.api._ops if s.op_name() == g.op)
    assert spec.alpha == 0.5 and spec.out_dtype == "f32"


def test_bmm_with_transposed_operand_and_scale():
    q, k, v = (_x(2, 16, 32, seed=s) for s in (1, 2, 3))
    r = hd.explain(Attention(), q, k, v, fallback="eager").graph("inference")
    summaries = sorted(g.summary for g in r.groups)
    assert summaries == ["bmm(a, b)", "bmm(a, b^T) * 0.125 -> f32"]
    softmax_stop = next(g for g in r.groups if "0.125" in g.summary).stop
    assert "has 2 users" in softmax_stop   # softmax (decomposed) reads it twice


def test_float32_matmuls_are_left_to_torch_with_the_reason():
    r = hd.explain(build(MLP, dtype=torch.float32), _x(16, 64, dtype=torch.float32),
                   fallback="eager").graph("inference")
    assert not r.groups
    assert len(r.unfused_matmuls) == 2
    assert all("float16 / bfloat16" in d.reason for d in r.unfused_matmuls)


def test_fuse_false_keeps_the_pipeline_and_fuses_nothing():
    r = hd.explain(build(MLP), _x(16, 64), fallback="eager", fuse=False).graph("inference")
    assert not r.groups and all("fusion disabled" in d.reason for d in r.unfused_matmuls)


def test_explain_prints_every_decision(capsys):
    e = hd.explain(build(GatedFFN), _x(16, 64), fallback="eager", verbose=True)
    text = capsys.readouterr().out
    assert text == str(e)
    assert "heddle op(s)" in text and "silu(g) * u" in text and "chain ends:" in text
    assert "nodes: mm, silu, mm_1, mul" in text   # the gated pair: every node it replaced


def test_explain_restores_gradients_and_reports_backward():
    model = build(MLP)
    x = _x(16, 64, grad=True)
    e = hd.explain(model, x, backward=True, fallback="eager")
    assert [r.kind for r in e.graphs] == ["forward", "backward"]
    assert all(p.grad is None for p in model.parameters()) and x.grad is None
    fw = e.graph("forward")
    # training: the pre-activation is saved for gelu's backward: the op keeps it as a second output
    first = fw.groups[0]
    assert first.summary == f"addmm(a, b^T) + bias -> gelu (keeps {first.root} as a second output)", first.summary
    assert first.op.endswith("_Agelu_Sbf16_obf16") or first.op.endswith("_Agelu_Sf16_of16"), first.op
    bw = e.graph("backward")
    assert len(bw.groups) == 4 and not bw.unfused_matmuls   # dgrad x2, wgrad x2 (static shapes)
    assert sum(g.summary.startswith("mm(a^T, b)") for g in bw.groups) == 2   # wgrads read dY transposed


def test_dump_partition_prints_the_report(monkeypatch, capfd):
    monkeypatch.setenv("HEDDLE_DUMP", "partition")
    model = torch.compile(build(ResidualLinear), backend=heddle_backend, options={"fallback": "eager"})
    with torch.no_grad():
        model(_x(4, 64))
    err = capfd.readouterr().err
    assert "===== heddle partition =====" in err and "addmm(a, b^T) + bias -> relu + residual" in err


# --------------------------------------------------------------------------------------------------
# numerics and gradients against eager
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [MLP, GatedFFN, ResidualLinear, ScaledSigmoid])
@pytest.mark.parametrize("shape", [(24, 64), (3, 8, 64)])
def test_training_matches_eager(cls, shape):
    reports = _check_train(build(cls), _x(*shape, grad=True), fallback="eager")
    assert [r.kind for r in reports] == ["forward", "backward"]
    assert sum(len(r.groups) for r in reports) >= 3
    ops = {g.op for r in reports for g in r.groups}
    assert all(hasattr(torch.ops.heddle, op) for op in ops)


def test_backward_matmuls_run_through_heddle(monkeypatch):
    specs = {fm.fusion: spec for spec, fm in heddle.api._ops.items()}
    calls = []
    evaluate = heddle.reference.evaluate

    def logged(fusion, tensors, **kw):       # the CPU body of every heddle op
        calls.append(fusion)
        return evaluate(fusion, tensors, **kw)

    monkeypatch.setattr(heddle.reference, "evaluate", logged)
    model = torch.compile(build(MLP), backend=heddle_backend, options={"fallback": "eager"})
    x = _x(24, 64, grad=True)
    out = model(x)
    n_forward = len(calls)
    out.float().sum().backward()
    specs = {fm.fusion: spec for spec, fm in heddle.api._ops.items()}
    forward, backward = [specs[f] for f in calls[:n_forward]], [specs[f] for f in calls[n_forward:]]
    assert len(forward) == 2 and all(s.trans_b and s.bias for s in forward)
    # dgrad dX = dY @ W (plain) and wgrad dW = dY^T @ X (a transposed), for both layers
    assert len(backward) == 4
    assert sum(s.trans_a and not s.trans_b for s in backward) == 2
    assert sum(not s.trans_a and not s.trans_b for s in backward) == 2


def test_inference_matches_eager_under_no_grad():
    for cls in (MLP, GatedFFN, ResidualLinear, ScaledSigmoid):
        model = build(cls)
        x = _x(3, 8, 64)
        compiled = torch.compile(model, backend=heddle_backend, options={"fallback": "eager"})
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), model(x), **BF16_TOL)


def test_attention_matches_eager():
    q, k, v = (_x(2, 16, 32, seed=s) for s in (1, 2, 3))
    compiled = torch.compile(Attention(), backend=heddle_backend, options={"fallback": "eager"})
    torch.testing.assert_close(compiled(q, k, v), Attention()(q, k, v), **BF16_TOL)


@needs_cxx
def test_inductor_fallback_trains_and_matches_eager():
    reports = _check_train(build(GatedFFN), _x(3, 8, 64, grad=True))
    fw = next(r for r in reports if r.kind == "forward")
    assert len(fw.groups) == 2   # the gated pair (one op, its pre-activations kept) and w2 + residual
    assert fw.groups[0].op.startswith("gated_") and "kept" in fw.groups[0].summary
    assert hd.stats["heddle_ops"] == sum(len(r.groups) for r in reports)


@needs_cxx
def test_inductor_fallback_with_dynamic_shapes():
    model = build(MLP)
    compiled = torch.compile(model, backend=heddle_backend, dynamic=True)
    for m in (5, 9, 17):
        x = _x(2, m, 64, seed=m, grad=True)
        out = compiled(x)
        out.float().sum().backward()
        got = x.grad.clone()
        x.grad = None
        model.zero_grad(set_to_none=True)
        torch.testing.assert_close(out, model(x), **BF16_TOL)
        model(x).float().sum().backward()
        torch.testing.assert_close(got, x.grad, **BF16_TOL)
        model.zero_grad(set_to_none=True)
    assert hd.stats["graphs"] == 1


@needs_cxx
def test_inductor_and_eager_fallbacks_make_the_same_decisions():
    x = _x(16, 64)
    a = hd.explain(build(MLP), x, fallback="eager")
    b = hd.explain(build(MLP), x)
    assert [g.summary for g in a.groups] == [g.summary for g in b.groups]
    assert a.heddle_ops == b.heddle_ops


@needs_cxx
def test_leftover_activations_are_decomposed_for_inductor():
    """A gelu heddle could not absorb goes back to inductor as its usual erf chain."""
    from heddle.dynamo_fuse import decompose_leftovers
    from torch._inductor.decomposition import select_decomp_table
    gm = torch.fx.experimental.proxy_tensor.make_fx(
        lambda x: torch.nn.functional.gelu(x) + torch.nn.functional.silu(x), tracing_mode="fake")(_x(4, 8))
    before = {n.target for n in gm.graph.nodes}
    assert torch.ops.aten.gelu.default in before and torch.ops.aten.silu.default in before
    assert decompose_leftovers(gm, select_decomp_table()) == 2
    after = {n.target for n in gm.graph.nodes}
    assert torch.ops.aten.gelu.default not in after and torch.ops.aten.erf.default in after
    x = _x(4, 8)
    torch.testing.assert_close(gm(x), torch.nn.functional.gelu(x) + torch.nn.functional.silu(x))


@needs_cxx
def test_mode_reduce_overhead_on_cpu_does_not_break():
    """CUDA graphs only apply to CUDA tensors; on CPU inductor skips them and the model still runs."""
    model = build(ResidualLinear)
    compiled = torch.compile(model, backend=heddle_backend, mode="reduce-overhead")
    x = _x(8, 64)
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(compiled(x), model(x), **BF16_TOL)
    assert hd.stats["heddle_ops"] == 1


def test_mode_is_ignored_with_a_warning_under_the_eager_fallback():
    gm = torch.fx.symbolic_trace(lambda x: (x + 1,))
    with pytest.warns(RuntimeWarning, match="mode='reduce-overhead' is ignored"):
        heddle_backend(gm, [torch.randn(2)], mode="reduce-overhead", options={"fallback": "eager"})


# --------------------------------------------------------------------------------------------------
# options, graph breaks, registration
# --------------------------------------------------------------------------------------------------
def test_unknown_options_are_rejected():
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    with pytest.raises(ValueError, match="fallback='cuda'"):
        heddle_backend(gm, [torch.randn(2)], options={"fallback": "cuda"})
    with pytest.raises(ValueError, match="unknown option"):
        heddle_backend(gm, [torch.randn(2)], options={"fallback": "eager", "max_autotune": True})
    with pytest.raises(ValueError, match="neither heddle's"):
        heddle_backend(gm, [torch.randn(2)], options={"no_such_option": 1})


def test_graph_break_compiles_each_side():
    model = build(MLP)

    def f(x):
        h = torch.nn.functional.gelu(model.fc1(x))
        torch._dynamo.graph_break()
        return model.fc2(h)

    compiled = torch.compile(f, backend=heddle_backend, options={"fallback": "eager"})
    x = _x(8, 64)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), f(x), **BF16_TOL)
    assert hd.stats["graphs"] == 2 and hd.stats["heddle_ops"] == 2


def test_backend_is_registered_by_name():
    """backend="heddle" resolves through the entry point of an installed heddle (test_dynamo_install
    checks a fresh install end to end); the tests above pass the function itself, so they also run
    from a source checkout on PYTHONPATH."""
    from importlib.metadata import entry_points
    if "heddle" not in entry_points(group="torch_dynamo_backends").names:
        pytest.skip("heddle is not pip-installed here: no torch_dynamo_backends entry point")
    from torch._dynamo.backends.registry import lookup_backend
    assert lookup_backend("heddle") is heddle_backend
    assert "heddle" in torch._dynamo.list_backends()


# --------------------------------------------------------------------------------------------------
# per-row bias ([M, 1]): one value per row of the result, added with the column bias
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("row_first", [False, True])
def test_row_bias_fuses_and_trains(row_first):
    reports = _check_train(build(RowBias, row_first=row_first), _x(24, 64, grad=True), fallback="eager")
    fw = next(r for r in reports if r.kind == "forward")
    want = "mm(a, b^T) + row bias + bias -> relu" if row_first else "mm(a, b^T) + bias + row bias -> relu"
    assert [g.summary for g in fw.groups] == [want], str(fw)
    assert "_Bbf16r1_Cbf16r2_Arelu_" in fw.groups[0].op


def test_row_bias_after_the_activation_is_not_absorbed():
    class Late(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(96, 64) / 8)
            self.row = torch.nn.Parameter(torch.randn(24, 1))

        def forward(self, x):
            return torch.relu(x @ self.w.t()) + self.row

    model = build(Late)
    x = _x(24, 64)
    with torch.no_grad():
        ref = model(x)
        out = torch.compile(model, backend=heddle_backend, options={"fallback": "eager"})(x)
    torch.testing.assert_close(out, ref, **BF16_TOL)
    (g,) = hd.reports[-1].groups
    assert g.summary == "mm(a, b^T) -> relu" and "per-row [M, 1] add after the activation" in g.stop, g


def _row_bias_spec():
    from heddle.pytorch.matmul import MatmulSpec
    return MatmulSpec(dtype="bf16", batched=True, batched_b=False, k=64, n=48, trans_a=False, trans_b=True,
                      bias=None, residual=None, activation="silu", alpha=None, out_dtype="bf16",
                      row_bias=("bf16", 3))


def test_row_bias_op_name_and_gradients():
    from heddle.pytorch import op_names
    from heddle.pytorch.matmul import MatmulSpec, fused_matmul_op
    spec = _row_bias_spec()
    assert MatmulSpec(**op_names.decode(spec.op_name())) == spec
    g = torch.Generator().manual_seed(3)
    xs = [torch.randn(s, generator=g).to(torch.bfloat16).requires_grad_() for s in ((2, 40, 64), (48, 64), (2, 40, 1))]
    fused_matmul_op(spec).op(*xs).float().square().sum().backward()
    ref = [x.detach().double().requires_grad_() for x in xs]
    torch.nn.functional.silu(ref[0] @ ref[1].T + ref[2]).square().sum().backward()
    for x, r in zip(xs, ref):   # the row bias's gradient: summed over the columns
        scale = max(r.grad.abs().max().item(), 1.0)
        torch.testing.assert_close(x.grad.double(), r.grad, atol=3e-2 * scale, rtol=3e-2)


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None, reason="no host C++ compiler")
def test_row_bias_op_kernel_interpreted():
    from heddle.interpret import interpret
    from heddle.pytorch.matmul import fused_matmul_op
    k = fused_matmul_op(_row_bias_spec()).kernel("sm_80", 8, 8, m=40, rtc=False, sms=132)
    assert "E_row_bias_s1" in k.source and "E_row_bias_s2" not in k.source   # strides: batch, row; no column
    g = torch.Generator().manual_seed(4)
    ins = [(torch.randn(s, generator=g) * 0.5).to(torch.bfloat16) for s in ((2, 40, 64), (48, 64), (2, 40, 1))]
    r = interpret(k, *ins)
    assert r.ok, r.report()
