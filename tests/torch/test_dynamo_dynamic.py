"""Dynamic shapes under torch.compile(backend=heddle_backend): M (batch / sequence) is a run-time argument of
heddle's ops, so varying it recompiles neither heddle kernels nor (after dynamo's one automatic-dynamic
recompile) the graph; guards and the recompile limit behave as torch users expect."""
import warnings

import pytest
import torch

import heddle
import heddle.dynamo as hd
from heddle.dynamo import heddle_backend

from support.dynamo_models import MLP, GatedFFN, ResidualLinear, build

BF16_TOL = dict(atol=3e-2, rtol=3e-2)
BATCHES = [1, 2, 3, 5, 7, 8, 13, 16, 17, 31, 32, 33, 48, 63, 64, 65, 96, 127, 128, 200]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    hd.reset_stats()
    yield
    torch._dynamo.reset()


def _x(*shape, seed=1, grad=False):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(torch.bfloat16).requires_grad_(grad)


def _heddle_state():
    ops = heddle.api._ops
    return len(ops), sum(fm.compiles for fm in ops.values())


def test_twenty_batch_sizes_compile_at_most_twice_and_reuse_the_heddle_ops():
    assert len(set(BATCHES)) == 20
    model = build(MLP)
    compiled = torch.compile(model, backend=heddle_backend, options={"fallback": "eager"})
    with torch.no_grad():
        compiled(_x(BATCHES[0], 64))          # static compile
        compiled(_x(BATCHES[1], 64))          # dynamo marks M dynamic: the one recompile
        state = _heddle_state()
        graphs = hd.stats["graphs"]
        for m in BATCHES:
            x = _x(m, 64, seed=m)
            torch.testing.assert_close(compiled(x), model(x), **BF16_TOL)
    assert graphs == 2 and hd.stats["graphs"] == 2            # no further dynamo compiles
    assert _heddle_state() == state                            # no new heddle ops, no kernel builds
    static, dynamic = (r for r in hd.reports if r.kind == "inference")
    assert [g.op for g in static.groups] == [g.op for g in dynamic.groups]   # M is not in the op signature


def test_dynamic_true_compiles_once_for_all_batch_sizes():
    model = build(GatedFFN)
    compiled = torch.compile(model, backend=heddle_backend, dynamic=True, options={"fallback": "eager"})
    sizes = [m for m in BATCHES if m > 1]
    with torch.no_grad():
        for m in sizes:
            x = _x(4, m, 64, seed=m)          # [batch, sequence, d]: sequence varies (4 is not in BATCHES,
            #                                   so duck sizing never ties the two)
            torch.testing.assert_close(compiled(x), model(x), **BF16_TOL)
        assert hd.stats["graphs"] == 1
        state = _heddle_state()
        # dynamo specialises sizes 0 and 1 ("0/1 specialisation"): M = 1 is one more graph, same heddle ops
        x = _x(4, 1, 64)
        torch.testing.assert_close(compiled(x), model(x), **BF16_TOL)
    assert hd.stats["graphs"] == 2 and _heddle_state() == state
    first, second = hd.reports
    assert len(first.groups) == 2 and [g.op for g in first.groups] == [g.op for g in second.groups]  # gated pair, w2


def test_mark_dynamic_avoids_the_static_compile():
    model = build(ResidualLinear)
    compiled = torch.compile(model, backend=heddle_backend, options={"fallback": "eager"})
    with torch.no_grad():
        for m in BATCHES[:6]:
            x = _x(m + 1, 64, seed=m)
            torch._dynamo.mark_dynamic(x, 0)
            torch.testing.assert_close(compiled(x), model(x), **BF16_TOL)
    assert hd.stats["graphs"] == 1


def test_dynamic_training_keeps_weight_gradients_with_torch_and_says_why():
    """With a symbolic batch, wgrad (dW = dY^T @ X) reduces over M: heddle compiles one kernel per K, so
    that matmul stays with torch; dgrad (K = hidden size) still runs through heddle."""
    model = build(MLP)
    compiled = torch.compile(model, backend=heddle_backend, dynamic=True, options={"fallback": "eager"})
    for m in (5, 12, 33):
        x = _x(m, 64, seed=m, grad=True)
        out = compiled(x)
        out.float().sum().backward()
        got = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]
        model.zero_grad(set_to_none=True)
        x.grad = None
        model(x).float().sum().backward()
        want = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]
        model.zero_grad(set_to_none=True)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, atol=3e-2 * w.abs().max().item(), rtol=3e-2)
    assert hd.stats["graphs"] == 1
    bw = next(r for r in hd.reports if r.kind == "backward")
    assert len(bw.groups) == 2                      # the two dgrads
    left = bw.unfused_matmuls
    assert len(left) == 2 and all("K = " in d.reason and "symbolic" in d.reason for d in left)


def test_guards_recompile_on_dtype_change():
    model = build(ResidualLinear)
    compiled = torch.compile(model, backend=heddle_backend, dynamic=True, options={"fallback": "eager"})
    with torch.no_grad():
        compiled(_x(4, 64))
        model16 = model.to(torch.float16)
        x16 = _x(4, 64).half()
        torch.testing.assert_close(compiled(x16), model16(x16), **BF16_TOL)
    assert hd.stats["graphs"] == 2
    ops = [g.op for r in hd.reports for g in r.groups]
    assert ops[0].startswith("mm_bf16_") and ops[1].startswith("mm_f16_")


def test_recompile_limit_warns_before_dynamo_falls_back_to_eager():
    model = build(ResidualLinear)
    compiled = torch.compile(model, backend=heddle_backend, options={"fallback": "eager"})
    with torch._dynamo.config.patch(recompile_limit=2, automatic_dynamic_shapes=False), torch.no_grad():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for m in (3, 4, 5):
                x = _x(m, 64)
                torch.testing.assert_close(compiled(x), model(x), **BF16_TOL)
    ours = [w for w in caught if "recompile_limit=2" in str(w.message)]
    assert len(ours) == 1 and "eager mode, without heddle" in str(ours[0].message)
    assert hd.stats["graphs"] == 2        # the third shape ran eagerly, after the warning
