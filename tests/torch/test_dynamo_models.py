"""torch.compile(backend="heddle") on models heddle's authors did not write: transformers' GPT-2, Llama,
BERT, Qwen2 and Mistral built from tiny configs with random weights, and torch's own
nn.TransformerEncoderLayer / nn.MultiheadAttention.

For each: outputs (and in training, gradients) equal eager within bf16 tolerance, every matmul is a
heddle op, and the patterns a user expects are fused (asserted per pattern on the graph reports of the
compile itself). Graph breaks and recompiles over batch sizes and sequence lengths are counted and
bounded. docs/torch.md ("Real models") lists what is fused per model and what is not, and why.

transformers is an optional test dependency (the `test` extra); without it those tests skip.
Everything runs on CPU (heddle's ops compute the fused chain with torch there); bigger sweeps are
under -m slow.
"""
import pytest
import torch
import torch.nn as nn

import heddle.dynamo as hd
from heddle.dynamo import heddle_backend

from support.dynamo_defs import needs_cxx

pytestmark = pytest.mark.usefixtures("_fresh_dynamo")  # tests/torch/conftest.py

tf = pytest.importorskip("transformers", reason="transformers is an optional test dependency")

BF16 = torch.bfloat16


@pytest.fixture(autouse=True)
def _no_fast_path():
    fastpath = torch.backends.mha.get_fastpath_enabled()
    # nn.TransformerEncoderLayer / nn.MultiheadAttention in eval under no_grad run PyTorch's fused native
    # op, whose matmuls no backend sees (test_encoder_fast_path_is_reported): the model tests turn it off
    torch.backends.mha.set_fastpath_enabled(False)
    yield
    torch.backends.mha.set_fastpath_enabled(fastpath)


# --------------------------------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------------------------------
_TINY = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_hidden_layers=1, vocab_size=128,
             attn_implementation="eager")


def _config(name):
    if name == "gpt2":
        return tf.GPT2Config(n_layer=1, n_embd=64, n_head=4, vocab_size=128, n_positions=64, bos_token_id=0,
                             eos_token_id=0, attn_implementation="eager")
    if name == "bert":
        return tf.BertConfig(**_TINY, max_position_embeddings=64)
    cls = {"llama": tf.LlamaConfig, "qwen2": tf.Qwen2Config, "mistral": tf.MistralConfig}[name]
    return cls(**_TINY, num_key_value_heads=2, max_position_embeddings=64)


class HF(nn.Module):
    """A transformers base model from token ids to its hidden states (and BERT's pooled output)."""

    def __init__(self, name):
        super().__init__()
        cls = {"gpt2": tf.GPT2Model, "bert": tf.BertModel, "llama": tf.LlamaModel, "qwen2": tf.Qwen2Model,
               "mistral": tf.MistralModel}[name]
        self.m = cls(_config(name))

    def forward(self, ids):
        o = self.m(input_ids=ids)
        pooled = getattr(o, "pooler_output", None)
        return o.last_hidden_state if pooled is None else (o.last_hidden_state, pooled)


class Encoder(nn.Module):
    """nn.TransformerEncoderLayer (GELU, norm first) on [B, S, 64] inputs."""

    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.1, activation="gelu", batch_first=True,
                                                norm_first=True)

    def forward(self, x):
        return self.layer(x)


class MHA(nn.Module):
    """nn.MultiheadAttention, self-attention, batch first."""

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(64, 4, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


HF_MODELS = ["gpt2", "llama", "bert", "qwen2", "mistral"]


def build(name, train=False):
    torch.manual_seed(0)
    m = (HF(name) if name in HF_MODELS else {"encoder": Encoder, "mha": MHA}[name]()).to(BF16)
    return m.train(train)


def example(name, batch=2, seq=8, seed=1):
    g = torch.Generator().manual_seed(seed)
    if name in HF_MODELS:
        return torch.randint(0, 128, (batch, seq), generator=g)
    return torch.randn(batch, seq, 64, generator=g).to(BF16)


def _floats(out):
    return [t for t in (out if isinstance(out, tuple) else (out,))]


def _close(got, want, what="output"):
    for g, w in zip(_floats(got), _floats(want)):
        scale = max(w.detach().abs().max().item(), 1.0)
        torch.testing.assert_close(g.detach().float(), w.detach().float(), atol=3e-2 * scale, rtol=3e-2, msg=what)


def compile_eval(model, x):
    compiled = torch.compile(model, backend=heddle_backend, options={"fallback": "eager"})
    with torch.no_grad():
        return compiled(x), compiled


def summaries(kind):
    return [g.summary for r in hd.reports if r.kind == kind for g in r.groups]


def has(summaries_, *parts):
    """How many group summaries contain every one of `parts`."""
    return sum(all(p in s for p in parts) for s in summaries_)


# what a user expects fused, per model, in inference: (summary parts, at least how many groups)
EXPECT_EVAL = {
    "gpt2": [(("addmm(a, b) + bias",), 4),                     # Conv1D: qkv, attn proj, fc, mlp proj
             (("bmm(a, b)", "* 0.25"), 1),                     # q @ k^T with the 1/sqrt(d) scale
             (("-> gelu_tanh (written out: 8 ops)",), 1),      # gelu_new
             (("+ bias (batched over the 3-D input) + residual",), 2)],                    # eval dropout, then the residual add
    # k and v as ONE op (a merged matmul group; GQA: q has another N and is its own op); q, o, down; the
    # gate/up pair as ONE op (a matmul group: silu(gate) * up in its epilogue)
    "llama": [(("merged mm(a, b^T) x 2 (one kernel, an output each)",), 1),
              (("mm(a, b^T) (batched over the 3-D input)",), 3),
              (("gated mm(a, b^T) x 2 (one kernel): silu(g) * u",), 1),
              (("bmm(a, b^T)", "* 0.25"), 1), (("+ residual",), 2)],
    "bert": [(("merged mm(a, b^T) x 3 (one kernel", "addmm + bias, addmm_1 + bias, addmm_2 + bias"), 1),   # q, k, v
             (("addmm(a, b^T) + bias",), 4), (("bmm(a, b)", "* 0.25"), 1), (("+ bias", "-> gelu"), 1),
             (("(batched over the 3-D input) + residual",), 2), (("+ bias -> tanh",), 1)],   # pooler: dense + tanh
    "encoder": [(("+ bias",), 4), (("+ bias", "-> gelu"), 1), (("(batched over the 3-D input) + residual",), 1)],
    "mha": [(("+ bias",), 2)],
}
EXPECT_EVAL["qwen2"] = [(("merged mm(a, b^T) x 2", "addmm_1 + bias, addmm_2 + bias"), 1),
                        (("addmm(a, b^T) + bias (batched over the 3-D input)",), 1)] + EXPECT_EVAL["llama"][2:]
EXPECT_EVAL["mistral"] = EXPECT_EVAL["llama"]


@pytest.mark.parametrize("name", HF_MODELS + ["encoder", "mha"])
def test_inference_matches_eager_and_fuses_expected(name):
    model = build(name)
    x = example(name)
    with torch.no_grad():
        ref = model(x)
    out, _ = compile_eval(model, x)
    _close(out, ref)
    assert hd.stats["matmuls_left"] == 0, [str(r) for r in hd.reports]
    got = summaries("inference")
    for parts, n in EXPECT_EVAL[name]:
        assert has(got, *parts) >= n, (parts, got)


# training: every forward and backward matmul a heddle op, gradients equal eager
@pytest.mark.parametrize("name", ["gpt2", "llama", "bert", "encoder", "mha"])
def test_training_matches_eager_every_matmul_fused(name):
    model = build(name, train=True)
    if name in ("encoder", "bert", "gpt2"):   # dropout draws differ between eager and compiled: off
        for mod in model.modules():
            if isinstance(mod, nn.Dropout):
                mod.p = 0.0
        if name == "encoder":
            model.layer.self_attn.dropout = 0.0   # a float, not an nn.Dropout
        else:
            for attr in ("attn_pdrop", "resid_pdrop", "embd_pdrop", "attention_probs_dropout_prob",
                         "hidden_dropout_prob"):
                if hasattr(model.m.config, attr):
                    setattr(model.m.config, attr, 0.0)
    x = example(name)
    if x.is_floating_point():
        x.requires_grad_(True)

    def step(fn):
        out = fn(x)
        sum(t.float().square().mean() for t in _floats(out)).backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        model.zero_grad(set_to_none=True)
        gx = None
        if x.grad is not None:
            gx, x.grad = x.grad.clone(), None
        return out, grads, gx

    ref, ref_grads, ref_gx = step(model)
    out, grads, gx = step(torch.compile(model, backend=heddle_backend, options={"fallback": "eager"}))
    _close(out, ref)
    if ref_gx is not None:
        _close(gx, ref_gx, "input gradient")
    assert set(grads) == set(ref_grads)
    for n in ref_grads:
        _close(grads[n], ref_grads[n], n)
    assert hd.stats["matmuls_left"] == 0, [str(r) for r in hd.reports]
    fw, bw = summaries("forward"), summaries("backward")
    assert len(bw) >= len(fw) > 0   # dgrad (and wgrad) of every forward matmul
    if name in KEEPS:   # the MLP's activation fused, the pre-activation(s) kept as further outputs
        assert has(fw, *KEEPS[name]) >= 1, fw


# training: the activation the backward differentiates reads a pre-activation the graph saves; the op
# returns both (GPT-2's gelu_new is written out as 8 ops whose intermediates are saved too: not fused)
KEEPS = {"llama": ("silu(g) * u (+ ", "kept)"),   # the gated pair's g and u (and silu(g)) from the same kernel
         "bert": ("-> gelu (keeps", "as a second output"), "encoder": ("-> gelu (keeps", "as a second output")}


def test_encoder_fast_path_is_reported():
    torch.backends.mha.set_fastpath_enabled(True)
    model = build("encoder")
    r = hd.explain(model, example("encoder"), fallback="eager").graph("inference")
    [d] = r.unfused_matmuls
    assert d.op == "_transformer_encoder_layer_fwd" and "set_fastpath_enabled(False)" in d.reason


def _sweep(sizes):
    model = build("llama")
    compiled = torch.compile(model, backend=heddle_backend, options={"fallback": "eager"})
    ops_after = []
    with torch.no_grad():
        for b, s in sizes:
            x = example("llama", b, s, seed=b * 100 + s)
            _close(compiled(x), model(x))
            ops_after.append(len({g.op for r in hd.reports for g in r.groups}))
    # a symbolic sequence length makes attention's N (scores) and K (probs @ v) symbolic: those two bmm
    # stay with torch, said so; every Linear stays fused
    for r in hd.reports:
        for d in r.unfused_matmuls:
            assert d.op == "bmm" and "is symbolic" in d.reason, d
        assert len(r.groups) >= 5   # q, k and v merged, o, the gated gate/up pair, down
        assert any(g.op.startswith("merged_") for g in r.groups)   # symbolic M too
    return ops_after


def test_recompiles_over_batch_and_sequence_are_bounded():
    """Batch and sequence length vary: dynamo's automatic dynamic shapes give a handful of graphs, never
    one per size, and no new heddle op on the dynamic graph (M is a run-time argument)."""
    ops_after = _sweep([(2, 8), (3, 8), (4, 8), (2, 16), (4, 24), (3, 32)])
    assert hd.stats["graphs"] <= 3, hd.stats       # static, dynamic batch, dynamic sequence
    assert ops_after[5] == ops_after[4]             # a new size on the dynamic graph: no new op


@pytest.mark.slow
def test_recompiles_full_sweep():
    sizes = [(b, s) for b in (1, 2, 3, 4, 8, 16) for s in (8, 16, 24, 32, 48, 64)]
    _sweep(sizes)
    assert hd.stats["graphs"] <= 5, hd.stats       # + the size-1 specialisations of batch and sequence


@needs_cxx
def test_explain_agrees_with_the_inductor_compile():
    """explain(fallback="eager") reports the same fusion as the real compile with inductor (eval dropout
    is a clone in one and not in the other: both absorb it)."""
    model = build("encoder")
    x = example("encoder")
    e = hd.explain(model, x, fallback="eager")
    hd.reset_stats()
    torch._dynamo.reset()
    with torch.no_grad():
        out = torch.compile(model, backend=heddle_backend)(x)
        ref = model(x)
    _close(out, ref)
    real = summaries("inference")
    assert real and sorted(real) == sorted(g.summary for g in e.groups)
