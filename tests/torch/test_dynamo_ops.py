"""torch.library.opcheck over every kind of op heddle registers (CPU; CUDA too when a GPU is there).

Kinds: heddle.matmul's ops (torch.ops.heddle.mm_*) over every epilogue / layout / batching variant,
and compiled fusions (Kernel.op, torch.ops.heddle.fusion_*). Also: the eager autograd formulas of
heddle.matmul against torch's autograd, and the lean host path.
"""
import pytest
import torch

import heddle
from heddle.api import MatmulSpec, fused_matmul_op
from support.matmul_op_defs import VARIANTS, spec

ALL_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_static",
             "test_aot_dispatch_dynamic")
_DT = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


# ops returning (output, pre-activation): the training backend's kept pre-activation
SAVED = {"bias_gelu_saved": spec(trans_b=True, bias=("bf16", 1), activation="gelu", saved="bf16"),
         "batched_silu_saved_f32": spec(batched=True, activation="silu", saved="f32")}


def inputs_for(s: MatmulSpec, m=19, batch=3, device="cpu", grad=False, seed=0):
    g = torch.Generator().manual_seed(seed)

    def t(shape, dt):
        return (torch.randn(*shape, generator=g) / 4).to(device=device, dtype=_DT[dt]).requires_grad_(grad)

    a = t(([batch] if s.batched else []) + ([s.k, m] if s.trans_a else [m, s.k]), s.dtype)
    b = t(([batch] if s.batched_b else []) + ([s.n, s.k] if s.trans_b else [s.k, s.n]), s.dtype)
    out = [a, b]
    if s.bias is not None:
        out.append(t([s.n] if s.bias[1] == 1 else [1, s.n], s.bias[0]))
    if s.row_bias is not None:
        out.append(t(([batch] if s.row_bias[1] == 3 else []) + [m, 1], s.row_bias[0]))
    if s.residual is not None:
        out.append(t(([batch] if s.residual[1] == 3 else []) + [m, s.n], s.residual[0]))
    return out


def reference(s: MatmulSpec, tensors):
    """The op's meaning, in float64 torch (differentiable)."""
    a, b = tensors[0].double(), tensors[1].double()
    A = a.transpose(-1, -2) if s.trans_a else a
    B = b.transpose(-1, -2) if s.trans_b else b
    y = A @ B
    if s.alpha is not None:
        y = y * s.alpha
    rest = list(tensors[2:])
    if s.bias is not None:
        y = y + rest.pop(0).double()
    if s.row_bias is not None:
        y = y + rest.pop(0).double()
    if s.activation is not None:
        from heddle.dynamo_autograd import _ACT
        y = _ACT[s.activation](y)
    if s.residual is not None:
        y = y + rest.pop(0).double()
    return y


@pytest.mark.parametrize("name", sorted(VARIANTS))
@pytest.mark.parametrize("grad", [False, True])
def test_opcheck_matmul_op(name, grad):
    s = VARIANTS[name]
    op = fused_matmul_op(s).op
    assert op._qualname == f"heddle::{s.op_name()}"
    torch.library.opcheck(op, tuple(inputs_for(s, grad=grad)), test_utils=ALL_UTILS)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_matmul_op_value_and_dtype(name):
    s = VARIANTS[name]
    xs = inputs_for(s)
    y = fused_matmul_op(s).op(*xs)
    assert y.dtype == _DT[s.out_dtype] and y.is_contiguous()
    torch.testing.assert_close(y.double(), reference(s, xs), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_matmul_op_gradients_match_torch_autograd(name):
    s = VARIANTS[name]
    xs = inputs_for(s, grad=True)
    y = fused_matmul_op(s).op(*xs)
    g = torch.randn(y.shape, generator=torch.Generator().manual_seed(7)).to(y.dtype)
    got = torch.autograd.grad(y, xs, g)
    ref_in = [x.detach().double().requires_grad_(True) for x in xs]
    want = torch.autograd.grad(reference(s, ref_in), ref_in, g.double())
    for x, gg, ww in zip(xs, got, want):
        assert gg.dtype == x.dtype and gg.shape == x.shape
        torch.testing.assert_close(gg.double(), ww, atol=3e-2 * max(1.0, ww.abs().max().item()), rtol=3e-2)


def test_heddle_matmul_trains_in_eager_mode():
    x = torch.randn(8, 32).bfloat16().requires_grad_(True)
    w = torch.randn(24, 32).bfloat16().requires_grad_(True)
    bias = torch.randn(24).bfloat16().requires_grad_(True)
    heddle.matmul(x, w, bias=bias, activation="gelu", trans_b=True).float().sum().backward()
    got = [x.grad, w.grad, bias.grad]
    for t in (x, w, bias):
        t.grad = None
    torch.nn.functional.gelu(torch.nn.functional.linear(x, w, bias)).float().sum().backward()
    for g, want in zip(got, [x.grad, w.grad, bias.grad]):
        torch.testing.assert_close(g, want, atol=5e-2, rtol=3e-2)


def test_opcheck_compiled_fusion_op():
    """Kernel.op: a scheduled fusion as torch.ops.heddle.fusion_<hash> (no NVRTC needed to register)."""
    from support.matmul_defs import matmul_fusion
    fd, _, _ = matmul_fusion(dtype="bf16", n=48, k=64)
    fd.auto_schedule("sm_80")
    kernel = heddle.Kernel(fd, fd.lower("sm_80"), None, "sm_80", 8, 8)
    op = kernel.op
    assert op._qualname.startswith("heddle::fusion_")
    g = torch.Generator().manual_seed(0)
    x, w, bias = (torch.randn(*s, generator=g).bfloat16() for s in ((37, 64), (64, 48), (48,)))
    torch.library.opcheck(op, (x, w, bias), test_utils=ALL_UTILS)


def test_compiled_fusion_op_trains():
    """Kernel.op's backward (the fusion re-evaluated with torch and differentiated) against float64 torch
    autograd of the same epilogue: tanh(0.25 * (x @ w) + bias)."""
    from support.matmul_defs import matmul_fusion
    fd, _, _ = matmul_fusion(dtype="bf16", n=48, k=64, epilogue="bias_tanh")
    fd.auto_schedule("sm_80")
    op = heddle.Kernel(fd, fd.lower("sm_80"), None, "sm_80", 8, 8).op
    g = torch.Generator().manual_seed(1)
    xs = [(torch.randn(*s, generator=g) / 4).bfloat16().requires_grad_() for s in ((37, 64), (64, 48), (48,))]
    dy = torch.randn(37, 48, generator=g).bfloat16()
    got = torch.autograd.grad(op(*xs), xs, dy)
    ref = [t.detach().double().requires_grad_() for t in xs]
    want = torch.autograd.grad(torch.tanh(ref[0] @ ref[1] * 0.25 + ref[2]), ref, dy.double())
    for gt, wt, x in zip(got, want, xs):
        assert gt.dtype == x.dtype and gt.shape == x.shape
        torch.testing.assert_close(gt.double(), wt, atol=3e-2 * wt.abs().max().item(), rtol=3e-2)


@pytest.mark.parametrize("name", sorted(SAVED))
def test_opcheck_ops_that_keep_the_pre_activation(name):
    s = SAVED[name]
    op = fused_matmul_op(s).op
    torch.library.opcheck(op, tuple(inputs_for(s, grad=True)), test_utils=ALL_UTILS)
    out, pre = op(*inputs_for(s))
    assert out.dtype == _DT[s.out_dtype] and pre.dtype == _DT[s.saved] and pre.shape == out.shape


def test_opcheck_every_matmul_op_registered_in_this_session():
    """Whatever created them (this file, heddle.matmul, the torch.compile backend), every mm op passes."""
    for s in VARIANTS.values():
        fused_matmul_op(s)
    specs = list(heddle.api._ops)
    assert len(specs) >= len(VARIANTS)
    for s in specs:
        op = heddle.api._ops[s].op
        torch.library.opcheck(op, tuple(inputs_for(s, m=5, batch=2)), test_utils=("test_schema", "test_faketensor"))


def test_eager_dispatch_is_a_dict_lookup_after_the_first_call():
    """heddle.matmul keys its op cache on a flat tuple: the second call builds no MatmulSpec."""
    a = torch.randn(8, 32).bfloat16()
    b = torch.randn(32, 24).bfloat16()
    heddle.matmul(a, b, activation="relu")
    built = []
    orig = heddle.api.MatmulSpec.__init__

    def counting(self, *args, **kw):
        built.append(1)
        orig(self, *args, **kw)

    heddle.api.MatmulSpec.__init__ = counting
    try:
        for m in (1, 8, 100):
            heddle.matmul(torch.randn(m, 32).bfloat16(), b, activation="relu")
    finally:
        heddle.api.MatmulSpec.__init__ = orig
    assert not built


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_opcheck_matmul_op_cuda(name):
    s = VARIANTS[name]
    op = fused_matmul_op(s).op
    xs = inputs_for(s, m=64, device="cuda")
    torch.library.opcheck(op, tuple(xs), test_utils=ALL_UTILS)
    torch.testing.assert_close(op(*xs).double(), reference(s, xs), atol=3e-2, rtol=3e-2)
