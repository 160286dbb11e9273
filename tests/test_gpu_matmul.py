"""GPU numerics (marked `gpu`, skipped without a CUDA device): the generated kernels against a
float64 torch reference on fresh random inputs, with the output memory poisoned before each run."""
import pytest
import torch

import heddle
from heddle.reference import evaluate
from matmul_defs import LAYOUTS, matmul_fusion, schedule

pytestmark = pytest.mark.gpu

TOL = {"f16": 1e-2, "bf16": 2e-2}
DT = {"f16": torch.float16, "bf16": torch.bfloat16}


def poison_allocator(nbytes=1 << 26):
    """Fill a block of the caching allocator with NaN so an unwritten output element shows up."""
    junk = torch.full((nbytes // 4,), float("nan"), device="cuda")
    del junk


def rand(shape, dtype, scale=1.0):
    return (torch.randn(shape, device="cuda", dtype=torch.float32) * scale).to(DT[dtype])


def operands(layout, M, N, K, dtype, batch=None):
    ta, tb = LAYOUTS[layout]
    pre = (batch,) if batch else ()
    a = rand(pre + ((K, M) if ta else (M, K)), dtype)
    b = rand(pre + ((N, K) if tb else (K, N)), dtype, K ** -0.5)
    return a, b


def check(fd, tensors, dtype):
    poison_allocator()
    k = fd.compile(heddle.runtime.target_for_device())
    y = k(*tensors)
    torch.cuda.synchronize()
    ref = evaluate(fd, tensors).double()
    assert torch.isfinite(y).all(), "unwritten (poisoned) output elements"
    err = ((y.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-6)).item()
    assert err < TOL[dtype], err


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("stages,prefetch", [(2, 1), (3, 1), (4, 3), (4, 0), (5, 2)])
def test_ragged_numerics(layout, dtype, stages, prefetch):
    M, N, K = 500, 264, 1000
    fd, a, b = matmul_fusion(m="M", n=N, k=K, dtype=dtype, layout=layout)
    schedule(fd, a, b, stages=stages, prefetch=prefetch)
    x, w = operands(layout, M, N, K, dtype)
    check(fd, (x, w, rand((N,), dtype)), dtype)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_batched(dtype):
    fd, a, b = matmul_fusion(m="M", n=128, k=256, dtype=dtype, batched=True, epilogue="silu_scale")
    schedule(fd, a, b)
    x, w = operands("NN", 200, 128, 256, dtype, batch=3)
    check(fd, (x, w), dtype)


@pytest.mark.parametrize("M,N,K", [(1000, 1001, 199), (1, 4096, 4096), (4096, 4096, 4096)])
def test_heddle_matmul_auto(M, N, K):
    x = rand((M, K), "bf16")
    w = rand((N, K), "bf16", K ** -0.5)
    bias = rand((N,), "bf16")
    poison_allocator()
    y = heddle.matmul(x, w, bias=bias, activation="gelu", trans_b=True)
    ref = torch.nn.functional.gelu(x.double() @ w.double().t() + bias.double())
    err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
    assert err < TOL["bf16"], err
