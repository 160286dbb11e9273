"""torch.compile(backend="heddle"): the SwiGLU MLP of Llama / Mistral / Qwen2 (transformers, tiny configs,
random weights) has its gate and up matmuls in ONE heddle op (a matmul group, tests/lower/test_matmul_group.py),
with outputs and gradients equal to eager; GELU-gated variants too; a pair that does not share its input
stays two ops. Runs on CPU (the op computes its fusion with torch there)."""
import pytest
import torch
import torch.nn as nn

import heddle.dynamo as hd
from heddle.dynamo import heddle_backend

from support.dynamo_defs import needs_cxx, run_fresh

pytestmark = pytest.mark.usefixtures("_fresh_dynamo")  # tests/torch/conftest.py

tf = pytest.importorskip("transformers", reason="transformers is an optional test dependency")
BF16 = torch.bfloat16


def mlp(name):
    cfg = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_hidden_layers=1, vocab_size=128,
               num_key_value_heads=2)
    mod = {"llama": "llama.modeling_llama.LlamaMLP", "mistral": "mistral.modeling_mistral.MistralMLP",
           "qwen2": "qwen2.modeling_qwen2.Qwen2MLP"}[name]
    path, cls = mod.rsplit(".", 1)
    import importlib
    conf = {"llama": tf.LlamaConfig, "mistral": tf.MistralConfig, "qwen2": tf.Qwen2Config}[name](**cfg)
    torch.manual_seed(0)
    return getattr(importlib.import_module("transformers.models." + path), cls)(conf).to(BF16)


class GeluGated(nn.Module):
    """GEGLU: gelu(x W1^T) * (x W3^T), erf or tanh GELU, on a 2-D input."""

    def __init__(self, approximate):
        super().__init__()
        self.w1, self.w3 = nn.Linear(64, 96, bias=False), nn.Linear(64, 96, bias=False)
        self.approximate = approximate

    def forward(self, x):
        return nn.functional.gelu(self.w1(x), approximate=self.approximate) * self.w3(x)


class TwoInputs(nn.Module):
    """silu(x W1^T) * (y W3^T): the matmuls do not share A, so no group."""

    def __init__(self):
        super().__init__()
        self.w1, self.w3 = nn.Linear(64, 96, bias=False), nn.Linear(64, 96, bias=False)

    def forward(self, x, y):
        return nn.functional.silu(self.w1(x)) * self.w3(y)


def _close(got, want):
    scale = max(want.detach().abs().max().item(), 1e-3)
    torch.testing.assert_close(got.detach().float(), want.detach().float(), atol=3e-2 * scale, rtol=3e-2)


def gated_groups(kind):
    return [g for r in hd.reports if r.kind == kind for g in r.groups if g.op.startswith("gated_")]


@pytest.mark.parametrize("name", ["llama", "mistral", "qwen2"])
def test_inference_gate_and_up_are_one_op(name):
    m = mlp(name)
    x = torch.randn(2, 8, 64).to(BF16)
    with torch.no_grad():
        ref = m(x)
        out = torch.compile(m, backend=heddle_backend, options={"fallback": "eager"})(x)
    _close(out, ref)
    (g,) = gated_groups("inference")
    assert "silu(g) * u" in g.summary
    mms = [n for n in g.nodes if n.startswith("mm")]
    assert len(mms) == 2 and "silu" in g.nodes and "mul" in g.nodes   # gate mm, up mm, silu and mul: one op
    assert hd.stats["matmuls_left"] == 0 and hd.stats["heddle_ops"] == 2   # the group + down_proj


@pytest.mark.parametrize("name", ["llama", "qwen2"])
def test_training_keeps_pre_activations_and_gradients_match(name):
    m = mlp(name).train()
    x = torch.randn(2, 8, 64).to(BF16).requires_grad_(True)

    def step(fn):
        out = fn(x)
        out.float().square().mean().backward()
        grads = {n: p.grad.clone() for n, p in m.named_parameters()}
        m.zero_grad(set_to_none=True)
        gx, x.grad = x.grad.clone(), None
        return out, grads, gx

    ref, ref_grads, ref_gx = step(m)
    out, grads, gx = step(torch.compile(m, backend=heddle_backend, options={"fallback": "eager"}))
    _close(out, ref)
    _close(gx, ref_gx)
    for n in ref_grads:
        _close(grads[n], ref_grads[n])
    (g,) = gated_groups("forward")
    assert "kept" in g.summary   # the backward's saved values come out of the same kernel
    assert hd.stats["matmuls_left"] == 0


@pytest.mark.parametrize("approximate,act", [("none", "gelu(g) * u"), ("tanh", "gelu_tanh(g) * u")])
def test_gelu_gated(approximate, act):
    m = GeluGated(approximate).to(BF16)
    x = torch.randn(24, 64).to(BF16)
    with torch.no_grad():
        ref = m(x)
        out = torch.compile(m, backend=heddle_backend, options={"fallback": "eager"})(x)
    _close(out, ref)
    (g,) = gated_groups("inference")
    assert act in g.summary


def test_matmuls_of_different_inputs_are_not_grouped():
    m = TwoInputs().to(BF16)
    x, y = torch.randn(24, 64).to(BF16), torch.randn(24, 64).to(BF16)
    with torch.no_grad():
        ref = m(x, y)
        out = torch.compile(m, backend=heddle_backend, options={"fallback": "eager"})(x, y)
    _close(out, ref)
    assert not gated_groups("inference")
    assert hd.stats["heddle_ops"] == 2


def test_explain_agrees_with_the_compile():
    m = mlp("llama")
    x = torch.randn(2, 8, 64).to(BF16)
    with torch.no_grad():
        rep = hd.explain(m, x, fallback="eager")
    assert [op for op in rep.heddle_ops if op.startswith("gated_")] and len(rep.heddle_ops) == 2


@needs_cxx
def test_interpreted_group_kernel_matches_eager(monkeypatch):
    # HEDDLE_INTERPRET=1: the op runs the printed group kernel on the CPU (heddle.interpret), checked
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    m = mlp("llama")
    x = torch.randn(1, 5, 64).to(BF16)
    with torch.no_grad():
        ref = m(x)
        out = torch.compile(m, backend=heddle_backend, options={"fallback": "eager"})(x)
    _close(out, ref)
    assert gated_groups("inference")


def test_gated_op_names_round_trip_and_resolve_in_a_fresh_process():
    from heddle.pytorch.dynamo_gated import GatedSpec, resolve
    spec = GatedSpec("bf16", 64, 128, True, "gelu_tanh", "f32", (("g", "bf16"), ("act", "f32")))
    assert GatedSpec.decode(spec.op_name()) == spec
    for bad in ("gated_bf16_swish_k64_n128_t_obf16", "gated_bf16_silu_k64_n128_t_obf16_sxbf16",
                "gated_bf16_silu_k0_n128_t_obf16"):
        assert not resolve(bad)
    name = GatedSpec("bf16", 64, 96, True, "silu", "bf16").op_name()
    code = ("import torch, heddle\n"   # torch.export.load looks ops up by name in a fresh process
            f"op = getattr(torch.ops.heddle, {name!r}).default\n"
            "x, w1, w3 = torch.randn(5, 64).bfloat16(), torch.randn(96, 64).bfloat16(), torch.randn(96, 64).bfloat16()\n"
            "want = torch.nn.functional.silu(x.float() @ w1.float().T) * (x.float() @ w3.float().T)\n"
            "torch.testing.assert_close(op(x, w1, w3).float(), want, atol=5e-2, rtol=2e-2)\n"
            "print('ok')\n")
    run_fresh(code)


def test_a_rewrite_that_cannot_finish_leaves_the_graph_as_it_was(monkeypatch):
    """Training: the gated op also gives the values the backward keeps. When the rewrite cannot replace every
    value (here: the view of the product back to the 3-D shape fails, after the kept 2-D values were wired),
    nothing of it stays in the graph: the matmuls are fused one by one, each runs once, no gated op is called,
    outputs and gradients equal eager."""
    import heddle.pytorch.group_op as go
    views = []

    class Aten:  # aten whose view fails: the rewrite stops half-way
        def __getattr__(self, name):
            if name == "view":
                views.append(name)
                raise RuntimeError("injected: no aten.view")
            return getattr(torch.ops.aten, name)
    monkeypatch.setattr(go, "aten", Aten())
    called = []
    real = go.GroupOp.run
    monkeypatch.setattr(go.GroupOp, "run", lambda self, t: called.append(1) or real(self, t))
    m = mlp("llama").train()
    x = torch.randn(2, 8, 64).to(BF16).requires_grad_(True)
    ref = m(x)
    ref.float().square().mean().backward()
    ref_grads = {n: p.grad.clone() for n, p in m.named_parameters()}
    m.zero_grad(set_to_none=True)
    with pytest.warns(UserWarning, match="could not fuse the gated pair"):
        out = torch.compile(m, backend=heddle_backend, options={"fallback": "eager"})(x)
    out.float().square().mean().backward()
    _close(out, ref)
    for n, p in m.named_parameters():
        _close(p.grad, ref_grads[n])
    assert views and not called  # the failure was injected half-way; no gated op left to run
    assert not gated_groups("forward") and hd.stats["matmuls_left"] == 0
