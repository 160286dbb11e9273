"""Run-time inputs get the same checks on every device (issue 16, items 2, 3 and 9), on the CPU: mixed
devices (meta included), the CUDA path's rules for heddle.matmul on CPU tensors, and empty problems
answered like torch without a kernel."""
import pytest
import torch

import heddle
from support.matmul_defs import matmul_fusion, schedule


def bf(*shape):
    return torch.randn(*shape).bfloat16()


# --- 2: mixed devices (meta included) ---------------------------------------------------------------
def test_meta_bias_is_refused_by_heddle_matmul():
    a, b, bias = bf(8, 16), bf(16, 24), bf(24)
    with pytest.raises(heddle.InputError, match="'bias' is on meta but input 'a' is on cpu"):
        heddle.matmul(a, b, bias=bias.to("meta"))


def test_meta_input_is_refused_by_kernel_op():
    fd, a, b = matmul_fusion(m="M", n=32, k=64, dtype="bf16")
    schedule(fd, a, b, bm=64, bn=32, bk=32, wm=2, wn=1, stages=2, prefetch=1)
    k = heddle.Kernel(fd, fd.lower("sm_80"), None, "sm_80", 8, 8)
    with pytest.raises(heddle.InputError, match="input 'bias' is on meta but input 'a' is on cpu"):
        k.op(bf(8, 64), bf(64, 32), bf(32).to("meta"))
    out = k.op(bf(8, 64).to("meta"), bf(64, 32).to("meta"), bf(32).to("meta"))  # all meta: shapes only
    assert out.device.type == "meta" and out.shape == (8, 32)


# --- 3: heddle.matmul on CPU applies the CUDA path's rules -------------------------------------------
@pytest.mark.parametrize("kwargs, match", [
    (dict(bias=bf(23)), r"input 'bias' axis 0: size 23 but the fusion declares 24"),
    (dict(bias=bf(1)), r"input 'bias' axis 0: size 1 but the fusion declares 24"),
    (dict(residual=bf(1, 24)), r"input 'residual' axis 0: size 1 but symbol M is already bound to 8"),
    (dict(residual=bf(8, 25)), r"input 'residual' axis 1: size 25 but the fusion declares 24"),
    (dict(bias=torch.zeros(24, dtype=torch.int64)), r"'bias' has dtype torch.int64"),
    (dict(out_dtype=torch.float64), r"out_dtype=torch.float64 is not supported"),
])
def test_cpu_matmul_refuses_what_cuda_refuses(kwargs, match):
    with pytest.raises(heddle.InputError, match=match):
        heddle.matmul(bf(8, 16), bf(16, 24), **kwargs)


def test_transposed_weight_refused_on_cpu_like_on_cuda():
    w = bf(24, 16).t()  # [16, 24] with strides (1, 16): rows not contiguous
    with pytest.raises(heddle.InputError, match="input 'b': its last axis has stride 16"):
        heddle.matmul(bf(8, 16), w)
    ok = heddle.matmul(bf(8, 16), bf(24, 16), trans_b=True)  # the right way: declare it transposed
    assert ok.shape == (8, 24)


def test_non_tensor_operands_are_input_errors():
    with pytest.raises(heddle.InputError, match="'bias' is a list"):
        heddle.matmul(bf(8, 16), bf(16, 24), bias=[0.0] * 24)


# --- 9: empty problems are answered like torch, without a kernel --------------------------------------
def _torch64(a, b, bias=None, residual=None, alpha=None, act=None):
    y = a.double() @ b.double()
    if alpha is not None:
        y = y * alpha
    if bias is not None:
        y = y + bias.double()
    if act == "gelu":
        y = torch.nn.functional.gelu(y)
    if residual is not None:
        y = y + residual.double()
    return y


@pytest.mark.parametrize("M, N, K", [(0, 24, 16), (8, 0, 16), (8, 24, 0), (0, 0, 0)])
def test_zero_sizes_match_torch(M, N, K):
    a, b, bias, res = bf(M, K), bf(K, N), bf(N), bf(M, N)
    out = heddle.matmul(a, b, bias=bias, residual=res, alpha=0.5, activation="gelu")
    ref = _torch64(a, b, bias, res, 0.5, "gelu")
    assert out.shape == (M, N) and out.dtype == torch.bfloat16
    torch.testing.assert_close(out.double(), ref, atol=2e-2, rtol=1e-2)
    if K == 0 and M and N:  # zeros through the epilogue, not uninitialised memory
        assert out.abs().sum() > 0


def test_zero_batch_and_zero_k_batched():
    a, b = bf(0, 8, 16), bf(0, 16, 24)
    assert heddle.matmul(a, b).shape == (0, 8, 24)
    a, b, bias = bf(3, 8, 0), bf(3, 0, 24), bf(24)
    out = heddle.matmul(a, b, bias=bias)
    torch.testing.assert_close(out.double(), bias.double().expand(3, 8, 24))


def test_zero_k_keeps_the_rules():
    with pytest.raises(heddle.InputError, match="input 'bias' axis 0: size 5 but the fusion declares 24"):
        heddle.matmul(bf(8, 0), bf(0, 24), bias=bf(5))
    with pytest.raises(heddle.InputError, match="input 'bias' axis 0: size 5 but symbol N is already bound to 0"):
        heddle.matmul(bf(8, 16), bf(16, 0), bias=bf(5))
