"""heddle.matmul as a torch custom op: registration, fake tensors, CPU reference path, opcheck."""
import pytest
import torch

import heddle
import heddle.api  # noqa: F401  (heddle.api._ops is read below)


def _inputs(m=37, k=64, n=48, dtype=torch.bfloat16, trans_b=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(dtype)
    b = (torch.randn(n, k, generator=g) if trans_b else torch.randn(k, n, generator=g)).to(dtype)
    bias = torch.randn(n, generator=g).to(dtype)
    return a, b, bias


def test_op_is_registered_under_heddle_namespace():
    a, b, bias = _inputs()
    heddle.matmul(a, b, bias=bias, activation="gelu")
    names = [n for n in dir(torch.ops.heddle) if n.startswith("mm_bf16_nn_")]
    assert names, dir(torch.ops.heddle)


@pytest.mark.parametrize("activation", [None, "relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh"])
@pytest.mark.parametrize("trans_b", [False, True])
def test_cpu_path_matches_float64_reference(activation, trans_b):
    a, b, bias = _inputs(trans_b=trans_b)
    y = heddle.matmul(a, b, bias=bias, activation=activation, trans_b=trans_b, alpha=0.5)
    w = b.double().t() if trans_b else b.double()
    ref = 0.5 * (a.double() @ w) + bias.double()
    act = {None: lambda x: x, "relu": torch.relu, "gelu": torch.nn.functional.gelu,
           "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
           "silu": torch.nn.functional.silu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}[activation]
    ref = act(ref)
    assert y.dtype == torch.bfloat16 and y.shape == (37, 48)
    torch.testing.assert_close(y.double(), ref, rtol=2e-2, atol=2e-2)


def test_varying_m_reuses_one_op():
    a, b, bias = _inputs()
    heddle.matmul(a, b, bias=bias)
    spec_ops = len(heddle.api._ops)
    for m in (1, 5, 64, 300):
        a2 = torch.randn(m, 64).to(torch.bfloat16)
        assert heddle.matmul(a2, b, bias=bias).shape == (m, 48)
    assert len(heddle.api._ops) == spec_ops


def test_fake_tensor_shapes_under_torch_compile():
    a, b, bias = _inputs()

    def f(x, w, c):
        return heddle.matmul(x, w, bias=c, activation="silu") * 2

    compiled = torch.compile(f, backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(a, b, bias), f(a, b, bias))


def test_opcheck_cpu():
    a, b, bias = _inputs()
    heddle.matmul(a, b, bias=bias, activation="gelu")
    fm = next(fm for spec, fm in heddle.api._ops.items() if spec.activation == "gelu" and not spec.trans_b
              and spec.residual is None and spec.alpha is None and (spec.k, spec.n) == tuple(b.shape))
    torch.library.opcheck(fm.op, (a, b, bias), test_utils=("test_schema", "test_faketensor",
                                                          "test_aot_dispatch_static", "test_aot_dispatch_dynamic"))


def test_input_errors_are_clear():
    a, b, bias = _inputs()
    with pytest.raises(heddle.InputError, match="float16 or both"):
        heddle.matmul(a.float(), b.float())
    with pytest.raises(heddle.InputError, match="K=64 but b gives K=48"):
        heddle.matmul(a, b.t().contiguous())
    with pytest.raises(heddle.InputError, match="activation 'softplus' is not one of relu"):  # bad input
        heddle.matmul(a, b, activation="softplus")


def test_kernel_bind_checks_inputs():
    from support.matmul_defs import matmul_fusion
    fd, a, b = matmul_fusion(dtype="bf16", n=48, k=64)
    fd.auto_schedule("sm_80")
    lowered_kernel = heddle.Kernel(fd, fd.lower("sm_80"), None, "sm_80", 8, 8)
    x, w, bias = _inputs()
    env = lowered_kernel.bind((x, w, bias))
    assert env == {"M": 37}
    with pytest.raises(heddle.InputError, match="input 'a': dtype torch.float16"):
        lowered_kernel.bind((x.half(), w, bias))
    with pytest.raises(heddle.InputError, match="input 'b' axis 1: size 47"):
        lowered_kernel.bind((x, w[:, :47], bias))
    with pytest.raises(heddle.InputError, match="expected 3 tensors"):
        lowered_kernel.bind((x, w))


@pytest.mark.nvrtc
def test_compiled_fusion_is_a_custom_op():
    from support.matmul_defs import matmul_fusion
    fd, a, b = matmul_fusion(dtype="bf16", n=48, k=64)
    fd.auto_schedule("sm_80")
    k = fd.compile("sm_80")
    op = k.op
    assert k.op is op and op._qualname.startswith("heddle::fusion_")
    x, w, bias = _inputs()
    y = op(x, w, bias)
    ref = torch.nn.functional.gelu(x.double() @ w.double() + bias.double())
    torch.testing.assert_close(y.double(), ref, rtol=2e-2, atol=2e-2)
    torch.library.opcheck(op, (x, w, bias), test_utils=("test_schema", "test_faketensor"))
    names = [n for n, _, _ in k._inputs]
    with pytest.raises(heddle.InputError) as ei:  # heddle's error naming the input, not the dispatcher's
        op(x, w)
    msg = str(ei.value)
    assert f"missing input '{names[2]}'" in msg and ", ".join(names) in msg
    with pytest.raises(heddle.InputError, match=f"missing inputs '{names[1]}', '{names[2]}'"):
        op(x)
    torch.testing.assert_close(op(x, **{names[1]: w, names[2]: bias}), y)  # by name: fine
