"""The torch.compile backend's capture of aten._grouped_mm (issue 33 point 3, docs/grouped.md "torch"): the
grouped product with its bias, activation and casts becomes one heddle grouped op (explain reports it), numbers
against float64 expert by expert, training through the compiled graph; what it cannot take (a 3-D x, the
K-grouped 2-D x 2-D form, a non-mma.sync target) stays with torch with the reason."""
import pytest
import torch
import torch.nn.functional as F

import heddle.dynamo as hd
from heddle.pytorch import dynamo_epilogue, dynamo_grouped
from support.grouped_defs import reference

pytestmark = pytest.mark.usefixtures("_fresh_dynamo")
EAGER = {"fallback": "eager"}


def _moe_inputs(ends=(0, 9, 9, 40, 41), T=41, k=32, n=48, seed=0, dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(T, k, generator=g) * 0.5).to(dtype)
    w_nk = (torch.randn(len(ends), n, k, generator=g) * 0.5).to(dtype)   # Linear weights per expert [E, N, K]
    bias = (torch.randn(n, generator=g) * 0.5).to(dtype)
    return x, w_nk, bias, torch.tensor(ends, dtype=torch.int32)


def expert_ffn(x, w_nk, bias, offs):
    """What an MoE expert layer writes: the grouped product on the weights' transposed view, + bias, gelu."""
    return F.gelu(torch._grouped_mm(x, w_nk.transpose(-2, -1), offs=offs) + bias).float()


def test_grouped_mm_with_epilogue_is_one_heddle_op():
    x, w_nk, bias, offs = _moe_inputs()
    out = torch.compile(expert_ffn, backend="heddle", options=EAGER)(x, w_nk, bias, offs)
    ref = reference(x, w_nk, offs, trans_b=True, bias=bias, activation="gelu")
    assert torch.allclose(out.double(), ref, atol=3e-2, rtol=2e-2)
    ex = hd.explain(expert_ffn, x, w_nk, bias, offs, fallback="eager")
    assert ex.heddle_ops == ["gmm_bf16_k32_n48_t_Bbf16s_Agelu_of32"]
    (gr,) = ex.groups
    assert gr.summary == "grouped mm(x, w[e]) + bias -> gelu -> f32"
    assert [d.op for r in ex.graphs for d in r.decisions if d.status in ("fused", "absorbed")] == \
        ["_grouped_mm", "add", "gelu", "prims.convert_element_type"]
    assert "gmm_bf16_k32_n48_t_Bbf16s_Agelu_of32" in str(ex)


def test_grouped_mm_runs_the_printed_kernel_when_compiled(monkeypatch):
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    monkeypatch.setenv("HEDDLE_INTERPRET_TARGET", "sm_80")
    x, w_nk, bias, offs = _moe_inputs(ends=(5, 5, 70), T=72, seed=1)   # rows 70, 71 belong to no expert

    def f(x, w, offs):
        return torch.relu(torch._grouped_mm(x, w, offs=offs)).to(torch.float32)
    w = w_nk.transpose(-2, -1).contiguous()   # stored [E, K, N]
    import heddle.core.interpret as hi
    ran, run_checked = [], hi.run_checked
    monkeypatch.setattr(hi, "run_checked", lambda k, ts: ran.append(k) or run_checked(k, ts))
    out = torch.compile(f, backend="heddle", options=EAGER)(x, w, offs)
    ref = reference(x, w, offs, activation=None).relu()
    assert torch.allclose(out[:70].double(), ref[:70], atol=3e-2, rtol=2e-2)
    assert ["_grouped" in k.name for k in ran] == [True]   # the printed grouped kernel, interpreted


def test_training_through_the_compiled_graph_matches_float64():
    x, w_nk, bias, offs = _moe_inputs(seed=2)
    xs, ws, bs = [t.clone().requires_grad_(True) for t in (x, w_nk, bias)]
    out = torch.compile(expert_ffn, backend="heddle", options=EAGER)(xs, ws, bs, offs)
    dy = torch.randn(out.shape, generator=torch.Generator().manual_seed(3))
    (out * dy).sum().backward()
    xd, wd, bd = [t.double().requires_grad_(True) for t in (x, w_nk, bias)]
    rows = [xd[s:e] @ wd[i].t() for i, (s, e) in enumerate(zip([0] + offs.tolist()[:-1], offs.tolist()))]
    (F.gelu(torch.cat(rows) + bd) * dy.double()).sum().backward()
    for got, want in ((xs.grad, xd.grad), (ws.grad, wd.grad), (bs.grad, bd.grad)):
        assert torch.allclose(got.double(), want, atol=0.1, rtol=3e-2)
    ex = hd.explain(expert_ffn, xs, ws, bs, offs, backward=True, fallback="eager")
    fwd, bwd = ex.graph("forward"), ex.graph("backward")
    # the partitioner saves the product for the backward (and recomputes bias + gelu there): the op ends at it
    assert [(g.op, g.stop) for g in fwd.groups] == [("gmm_bf16_k32_n48_t_obf16", "_grouped_mm has 2 users")]
    # dx = dz @ w[e] (a grouped product: heddle), dw = x^T @ dz grouped along K (torch, with the reason)
    assert [g.op for g in bwd.groups] == ["gmm_bf16_k48_n32_n_obf16"]
    (left,) = bwd.unfused_matmuls
    assert left.op == "_grouped_mm" and "a K-grouped product (2-D w" in left.reason


def test_what_heddle_cannot_take_stays_with_torch():
    g = torch.Generator().manual_seed(4)
    x3 = torch.randn(3, 16, 32, generator=g).to(torch.bfloat16)
    w3 = torch.randn(3, 32, 24, generator=g).to(torch.bfloat16)

    def batched(x, w):   # 3-D x, 3-D w, no offs: a batched product
        return torch._grouped_mm(x, w)
    ex = hd.explain(batched, x3, w3, fallback="eager")
    (d,) = [d for r in ex.graphs for d in r.decisions if d.op == "_grouped_mm"]
    assert not ex.groups and d.status == "not fused" and "a batched product (3-D x)" in d.reason
    torch.testing.assert_close(torch.compile(batched, backend="heddle", options=EAGER)(x3, w3), batched(x3, w3))


@pytest.mark.parametrize("target,why", [("gfx942", "no mma.sync"), ("", "no target")])
def test_a_target_without_mma_sync_keeps_torchs_op(target, why):
    x, w_nk, bias, offs = _moe_inputs()
    gm = torch.fx.symbolic_trace(lambda x, w, offs: torch._grouped_mm(x, w, offs=offs))
    gm = _with_meta(gm, x, w_nk.transpose(-2, -1), offs)
    (root,) = [n for n in gm.graph.nodes if dynamo_grouped.is_grouped_mm(n)]
    with pytest.raises(dynamo_epilogue.Reject, match=why):
        dynamo_grouped._plan(root, target)
    assert dynamo_grouped._plan(root, "sm_80").steps == ["grouped mm(x, w[e])"]


def _with_meta(gm, *args):
    """gm traced to aten with make_fx, its nodes carrying fake-tensor metadata (as in the backend)."""
    from torch.fx.experimental.proxy_tensor import make_fx
    return make_fx(gm, tracing_mode="fake")(*args)
