"""transformers' mixture-of-experts models through backend="heddle" (issue 33 point 3, docs/grouped.md "torch"):
tiny Mixtral and Qwen3-MoE built from configs with random weights (2 layers, hidden 64, 4 experts, top-2), their
experts on transformers' "grouped_mm" implementation (torch.nn.functional.grouped_mm -> aten._grouped_mm).
Compiled, they match eager in eval (logits) and in training (loss and gradients), and explain reports one
heddle grouped op per expert projection (and, in the backward, dx as a grouped op while dw, the K-grouped
product, stays with torch with its reason)."""
import pytest
import torch

import heddle.dynamo as hd

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("_fresh_dynamo")
EAGER = {"fallback": "eager"}
SMALL = dict(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             max_position_embeddings=64)


def mixtral():
    cfg = transformers.MixtralConfig(intermediate_size=96, num_local_experts=4, num_experts_per_tok=2, **SMALL)
    return cfg, transformers.MixtralForCausalLM


def qwen3_moe():
    cfg = transformers.Qwen3MoeConfig(moe_intermediate_size=96, intermediate_size=128, num_experts=4,
                                      num_experts_per_tok=2, head_dim=16, **SMALL)
    return cfg, transformers.Qwen3MoeForCausalLM


MODELS = {"mixtral": mixtral, "qwen3_moe": qwen3_moe}


def build(name, seed=0):
    cfg, cls = MODELS[name]()
    torch.manual_seed(seed)
    model = cls(cfg).to(torch.bfloat16)   # bf16: transformers takes grouped_mm under dynamo for bf16 weights only
    model.set_experts_implementation("grouped_mm")
    ids = torch.randint(0, cfg.vocab_size, (2, 8), generator=torch.Generator().manual_seed(seed + 1))
    return model, ids


# per layer: the gate / up projection [E, 2 * 96, 64] and the down projection [E, 64, 96], Linear weights per
# expert read transposed ("t"); nothing after them to absorb (a chunk into gate and up; the routing weights)
EXPERT_OPS = ["gmm_bf16_k64_n192_t_obf16", "gmm_bf16_k96_n64_t_obf16"] * 2


def _grouped(report):
    return [g.op for g in report.groups if g.op.startswith("gmm_")]


@pytest.mark.parametrize("name", list(MODELS))
def test_moe_model_eval_matches_eager_and_reports_grouped_ops(name):
    model, ids = build(name)
    model.eval()
    with torch.no_grad():
        ref = model(ids).logits.float()
        out = torch.compile(model, backend="heddle", options=EAGER)(ids).logits.float()
    assert (out - ref).abs().max().item() <= 2e-2 * ref.abs().max().item()
    ex = hd.explain(model, ids, fallback="eager")
    assert _grouped(ex.graph("inference")) == EXPERT_OPS
    assert not [d for r in ex.graphs for d in r.decisions if d.op == "_grouped_mm" and d.status == "not fused"]


@pytest.mark.parametrize("name", list(MODELS))
def test_moe_model_training_matches_eager(name):
    model, ids = build(name, seed=2)
    model.train()
    loss = model(ids, labels=ids).loss
    loss.backward()
    ref = {n: p.grad.float().clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    got = torch.compile(model, backend="heddle", options=EAGER)(ids, labels=ids).loss
    got.backward()
    assert abs(got.item() - loss.item()) <= 1e-2 * abs(loss.item())
    experts = [n for n in ref if ".experts." in n]
    assert len(experts) == 4   # gate_up_proj, down_proj of both layers
    for n, p in model.named_parameters():
        if n in ref:   # relative error of each gradient (bf16 throughout, summed in another order)
            err = (p.grad.float() - ref[n]).norm() / ref[n].norm().clamp_min(1e-6)
            assert err <= 5e-2, (n, err.item())
    # what the compile above did (heddle.dynamo.reports: explain's reports, without compiling again)
    (fwd,) = [r for r in hd.reports if r.kind == "forward"]
    (bwd,) = [r for r in hd.reports if r.kind == "backward"]
    assert _grouped(fwd) == EXPERT_OPS
    # dx of each expert projection is a grouped product of dy with the weights read the other way
    assert sorted(_grouped(bwd)) == sorted(["gmm_bf16_k192_n64_n_obf16", "gmm_bf16_k64_n96_n_obf16"] * 2)
    left = [d for d in bwd.unfused_matmuls if d.op == "_grouped_mm"]
    assert len(left) == 4 and all("K-grouped product" in d.reason for d in left)   # dw: torch's op


@pytest.mark.slow
def test_mixtral_runs_the_printed_grouped_kernels(monkeypatch):
    """HEDDLE_INTERPRET=1: every heddle op of the compiled model, the grouped ones included, runs its printed
    sm_80 kernel on the CPU; the logits still match eager."""
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    monkeypatch.setenv("HEDDLE_INTERPRET_TARGET", "sm_80")
    model, ids = build("mixtral", seed=3)
    model.eval()
    import heddle.core.interpret as hi
    ran, run_checked = [], hi.run_checked
    monkeypatch.setattr(hi, "run_checked", lambda k, ts: ran.append(k.name) or run_checked(k, ts))
    with torch.no_grad():
        ref = model(ids).logits.float()
        out = torch.compile(model, backend="heddle", options=EAGER)(ids).logits.float()
    assert (out - ref).abs().max().item() <= 2e-2 * ref.abs().max().item()
    assert sum("_grouped" in n for n in ran) == 4   # two expert projections in each of the two layers
