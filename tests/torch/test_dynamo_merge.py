"""torch.compile(backend="heddle"): matmuls reading the same input (attention's q / k / v projections) become
ONE heddle op, a matmul group with an output per member (heddle/pytorch/dynamo_merge.py), each member with its
own bias (Qwen2, BERT). GQA (Mistral, Llama / Qwen2 with fewer key-value heads): k and v (equal N) are merged,
q stays its own op. transformers models from tiny configs with random weights, eval and training: outputs and
gradients equal eager. Runs on CPU (the op computes its fusion with torch there; under HEDDLE_INTERPRET=1 the
printed group kernel)."""
import pytest
import torch
import torch.nn as nn

import heddle.dynamo as hd
from heddle.dynamo import heddle_backend

from support.dynamo_models import SelfAttention
from support.dynamo_models import build as build_model
from support.dynamo_defs import needs_cxx, run_fresh

pytestmark = pytest.mark.usefixtures("_fresh_dynamo")  # tests/torch/conftest.py

tf = pytest.importorskip("transformers", reason="transformers is an optional test dependency")
BF16 = torch.bfloat16
_TINY = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_hidden_layers=1, vocab_size=128,
             attn_implementation="eager", max_position_embeddings=64)


class HF(nn.Module):
    """A transformers base model, token ids -> last hidden state; kv: key-value heads (4: no GQA)."""

    def __init__(self, name, kv=2):
        super().__init__()
        if name == "bert":
            cfg = tf.BertConfig(**_TINY, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        else:
            cfg = {"llama": tf.LlamaConfig, "qwen2": tf.Qwen2Config, "mistral": tf.MistralConfig}[name](
                **_TINY, num_key_value_heads=kv)
        self.m = {"bert": tf.BertModel, "llama": tf.LlamaModel, "qwen2": tf.Qwen2Model,
                  "mistral": tf.MistralModel}[name](cfg)

    def forward(self, ids):
        return self.m(input_ids=ids).last_hidden_state


def build(name, kv=2, train=False):
    torch.manual_seed(0)
    return HF(name, kv).to(BF16).train(train)


def ids(batch=2, seq=8):
    return torch.randint(0, 128, (batch, seq), generator=torch.Generator().manual_seed(1))


def _close(got, want, what="output"):
    scale = max(want.detach().abs().max().item(), 1.0)
    torch.testing.assert_close(got.detach().float(), want.detach().float(), atol=3e-2 * scale, rtol=3e-2, msg=what)


def merged(kind):
    return [g for r in hd.reports if r.kind == kind for g in r.groups if g.op.startswith("merged_")]


def compile_eager(m):
    return torch.compile(m, backend=heddle_backend, options={"fallback": "eager"})


# model, key-value heads -> (members of the merged op, with bias?, q left alone?)
CASES = {("llama", 4): (3, False), ("llama", 2): (2, False), ("qwen2", 2): (2, True), ("mistral", 2): (2, False),
         ("bert", 4): (3, True)}


@pytest.mark.parametrize("name,kv", list(CASES))
def test_inference_one_op_per_merged_group(name, kv):
    members, bias = CASES[(name, kv)]
    m, x = build(name, kv), ids()
    with torch.no_grad():
        ref = m(x)
        out = compile_eager(m)(x)
    _close(out, ref)
    (g,) = merged("inference")   # one attention layer: one merged op
    assert f"x {members} (one kernel, an output each)" in g.summary
    assert g.summary.count("+ bias") == (members if bias else 0)
    mms = [n for n in g.nodes if n.startswith(("mm", "addmm"))]
    assert len(mms) == members   # the member matmuls are all inside the one op
    ops = [gr.op for r in hd.reports for gr in r.groups]
    assert g.op in ops and hd.stats["matmuls_left"] == 0
    if members == 2:   # GQA: q (N = 64) is its own op, k and v (N = 32) the merged one
        assert "_n32_" in g.op
        assert any(s.startswith(("mm(a, b^T)", "addmm(a, b^T)")) for s in (gr.summary for gr in
                                                                           hd.reports[-1].groups))


def _train_step(m, fn, x):
    out = fn(x)
    out.float().square().mean().backward()
    grads = {n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None}
    m.zero_grad(set_to_none=True)
    return out, grads


@pytest.mark.parametrize("name,kv", [("qwen2", 2), ("bert", 4),
                                     pytest.param("llama", 4, marks=pytest.mark.slow),
                                     pytest.param("mistral", 2, marks=pytest.mark.slow)])
def test_training_outputs_and_gradients_equal_eager(name, kv):
    m, x = build(name, kv, train=True), ids()
    ref, ref_grads = _train_step(m, m, x)
    out, grads = _train_step(m, compile_eager(m), x)
    _close(out, ref)
    assert set(grads) == set(ref_grads)
    for n in ref_grads:
        _close(grads[n], ref_grads[n], n)
    (g,) = merged("forward")
    assert f"x {CASES[(name, kv)][0]} (one kernel" in g.summary
    assert hd.stats["matmuls_left"] == 0


class Shared(nn.Module):
    """Four Linear layers on one input: l0's output is read twice, l1 has no bias, l3 is followed by an
    activation and l4 by a residual add (their own heddle ops absorb those: not members)."""

    def __init__(self):
        super().__init__()
        self.l0, self.l2, self.l3 = nn.Linear(64, 48), nn.Linear(64, 48), nn.Linear(64, 48)
        self.l1, self.l4 = nn.Linear(64, 48, bias=False), nn.Linear(64, 48)

    def forward(self, x, r):
        a, b, c = self.l0(x), self.l1(x), self.l2(x)
        return a * b + a.sum(-1, keepdim=True), c.transpose(1, 2), torch.relu(self.l3(x)), self.l4(x) + r


def test_members_with_other_readers_mixed_bias_and_a_richer_chain_left_alone():
    torch.manual_seed(0)
    m = Shared().to(BF16)
    x, r = torch.randn(2, 6, 64).to(BF16), torch.randn(2, 6, 48).to(BF16)
    with torch.no_grad():
        ref = m(x, r)
        out = compile_eager(m)(x, r)
    for o, w in zip(out, ref):
        _close(o, w)
    (g,) = merged("inference")
    assert "x 3 (one kernel" in g.summary and g.summary.count("+ bias") == 2
    assert "_mBbf16r1obf16_mobf16_mBbf16r1obf16" in g.op   # l0 + bias, l1 without, l2 + bias (graph order)
    own = [gr.summary for rep in hd.reports for gr in rep.groups if not gr.op.startswith("merged_")]
    assert len(own) == 2 and has_one(own, "-> relu") and has_one(own, "+ residual")
    assert hd.stats["heddle_ops"] == 3 and hd.stats["matmuls_left"] == 0


def test_a_failing_search_leaves_every_matmul_to_its_own_op(monkeypatch):
    import heddle.pytorch.dynamo_merge as dm

    def broken(gm, plan):
        raise RuntimeError("injected")
    monkeypatch.setattr(dm, "find_merges", broken)
    torch.manual_seed(0)
    m = Shared().to(BF16)
    x, r = torch.randn(2, 6, 64).to(BF16), torch.randn(2, 6, 48).to(BF16)
    with torch.no_grad(), pytest.warns(UserWarning, match="could not look for the merged groups: RuntimeError"):
        out = compile_eager(m)(x, r)
    for o, w in zip(out, m(x, r)):
        _close(o, w)
    assert not merged("inference") and hd.stats["heddle_ops"] == 5 and hd.stats["matmuls_left"] == 0


def has_one(summaries, part):
    return sum(part in s for s in summaries) == 1


def test_a_merge_that_cannot_finish_leaves_the_graph_as_it_was(monkeypatch):
    """The view of a member's output back to [B, S, N] fails half-way: nothing of the merge stays in the graph,
    the matmuls are fused one by one, no merged op runs, outputs and gradients equal eager."""
    import heddle.pytorch.group_op as go

    class Aten:   # aten whose view fails
        def __getattr__(self, name):
            if name == "view":
                raise RuntimeError("injected: no aten.view")
            return getattr(torch.ops.aten, name)
    monkeypatch.setattr(go, "aten", Aten())
    called = []
    real = go.GroupOp.run
    monkeypatch.setattr(go.GroupOp, "run", lambda self, t: called.append(self.spec) or real(self, t))
    m, x = build("bert", 4, train=True), ids()
    ref, ref_grads = _train_step(m, m, x)
    with pytest.warns(UserWarning, match="could not fuse the merged group"):
        out, grads = _train_step(m, compile_eager(m), x)
    _close(out, ref)
    for n in ref_grads:
        _close(grads[n], ref_grads[n], n)
    assert not called and not merged("forward") and hd.stats["matmuls_left"] == 0


@needs_cxx
def test_explain_agrees_with_the_inductor_compile():
    m = build_model(SelfAttention).eval()   # eval dropout: a clone under one fallback, gone under the other
    x = torch.randn(2, 8, 64).to(BF16)
    rep = hd.explain(m, x, fallback="eager")
    want = [op for op in rep.heddle_ops if op.startswith("merged_")]
    hd.reset_stats()
    torch._dynamo.reset()
    with torch.no_grad():
        out = torch.compile(m, backend=heddle_backend)(x)   # the real compile: inductor runs the rest
        _close(out, m(x))
    assert len(want) == 1 and [g.op for g in merged("inference")] == want
    assert "x 3 (one kernel" in merged("inference")[0].summary


def test_merged_op_names_round_trip_and_resolve_in_a_fresh_process():
    from heddle.pytorch.dynamo_merge import MergeSpec, resolve
    spec = MergeSpec("bf16", 64, 32, True, ((("bf16", 1), "bf16"), (None, "f32"), (("f32", 2), "bf16")))
    assert MergeSpec.decode(spec.op_name()) == spec
    for bad in ("merged_bf16_k64_n32_t_mobf16",                      # one member: no group
                "merged_bf16_k64_n32_t" + "_mobf16" * 5,             # five: more than a group takes
                "merged_bf16_k0_n32_t_mobf16_mobf16", "merged_bf16_k64_n32_t_mBbf16r3obf16_mobf16"):
        assert not resolve(bad)
    name = MergeSpec("bf16", 64, 32, True, ((("bf16", 1), "bf16"), (None, "bf16"))).op_name()
    code = ("import torch, heddle\n"   # torch.export.load looks ops up by name in a fresh process
            f"op = getattr(torch.ops.heddle, {name!r}).default\n"
            "x, w0 = torch.randn(5, 64).bfloat16(), torch.randn(32, 64).bfloat16()\n"
            "w1 = torch.randn(32, 64).bfloat16()\n"
            "b0 = torch.randn(32).bfloat16()\n"
            "q, k = op(x, w0, w1, b0)\n"
            "torch.testing.assert_close(q.float(), x.float() @ w0.float().T + b0.float(), atol=5e-2, rtol=2e-2)\n"
            "torch.testing.assert_close(k.float(), x.float() @ w1.float().T, atol=5e-2, rtol=2e-2)\n"
            "print('ok')\n")
    run_fresh(code)


def test_merged_op_trains_when_called_directly():
    """The op's autograd formula (through its fusion, as Kernel.op's): gradients of x, every weight and bias."""
    from heddle.pytorch.dynamo_merge import MergeSpec, merged_op
    op = merged_op(MergeSpec("bf16", 32, 24, True, ((("f32", 1), "bf16"), (None, "f32")))).op
    g = torch.Generator().manual_seed(3)
    x, w0, w1 = (torch.randn(*s, generator=g).to(BF16).requires_grad_(True) for s in ((10, 32), (24, 32), (24, 32)))
    b0 = torch.randn(24, generator=g).requires_grad_(True)
    q, k = op(x, w0, w1, b0)
    assert (q.dtype, k.dtype) == (BF16, torch.float32)
    (q.float().square().sum() + k.sum()).backward()
    got = [t.grad for t in (x, w0, w1, b0)]
    xs = [t.detach().double().requires_grad_(True) for t in (x, w0, w1, b0)]
    ((xs[0] @ xs[1].T + xs[3]).square().sum() + (xs[0] @ xs[2].T).sum()).backward()
    for a, b in zip(got, xs):
        _close(a, b.grad)


@needs_cxx
@pytest.mark.slow   # a minute on 2 cores; the group kernel with per-member bias: test_matmul_group.py
def test_interpreted_group_kernel_matches_eager(monkeypatch):
    # HEDDLE_INTERPRET=1: the merged op runs the printed group kernel (per-member bias) on the CPU, checked
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    m, x = build("bert", 4), ids(1, 5)
    with torch.no_grad():
        ref = m(x)
        out = compile_eager(m)(x)
    _close(out, ref)
    (g,) = merged("inference")
    from heddle.pytorch.group_op import _ops
    (op,) = [o for o in _ops.values() if o.spec.op_name() == g.op]
    assert [key for key in op.kernels if key[-1] is False]   # the printed kernel (rtc=False) ran
