"""GPU numerics (marked `gpu`, skipped without a CUDA device): the generated kernels against a
float64 torch reference on fresh random inputs, with the output memory poisoned before each run."""
import pytest
import torch

import heddle
from heddle.kernel import _vec_for
from heddle.reference import evaluate
from support.matmul_defs import LAYOUTS, matmul_fusion, schedule

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


def check(fd, tensors, dtype, vec=(8, 8)):
    """The kernel's numbers on the GPU. Spills are allowed here: a hand schedule with 4-element copies of a
    transposed A at 4 stages spills 4 bytes (the H200 window, 2026-11-27: a ScheduleError, rightly); this test
    is about the numbers, the refusal is tests/isa/test_matmul_no_spills.py's."""
    poison_allocator()
    k = fd.compile(heddle.runtime.target_for_device(), vec_a=vec[0], vec_b=vec[1], allow_spills=True)
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
    """M = 500 rows: a transposed A ([K, M]) then has rows of 500 elements, which the 8-element (16-byte) copies
    cannot read, so the kernel is built with the copy width the operands allow (heddle.matmul does the same)."""
    M, N, K = 500, 264, 1000
    fd, a, b = matmul_fusion(m="M", n=N, k=K, dtype=dtype, layout=layout)
    schedule(fd, a, b, stages=stages, prefetch=prefetch)
    x, w = operands(layout, M, N, K, dtype)
    check(fd, (x, w, rand((N,), dtype)), dtype, vec=(_vec_for(x), _vec_for(w)))


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


def test_heddle_matmul_reads_a_negative_view_as_its_value():
    """A negative view (torch._neg_view; x.conj().imag makes one) shares its tensor's memory, shape, strides
    and address: on the first call and after plain calls of the same signature (which leave launch plans)
    heddle.matmul and Kernel.__call__ compute with -x, not with the memory."""
    x, w = rand((100, 256), "bf16"), rand((192, 256), "bf16", 256 ** -0.5)
    bias = rand((192,), "bf16")
    neg = torch._neg_view

    def ref(a, b, c):
        return torch.nn.functional.gelu(a.double() @ b.double().t() + c.double())

    for args in ((neg(x), w, bias), (x, neg(w), bias), (x, w, neg(bias)), (x, w, bias)) * 2:
        y = heddle.matmul(*args[:2], bias=args[2], activation="gelu", trans_b=True)
        torch.testing.assert_close(y.double(), ref(*args), atol=4e-2, rtol=2e-2)
    fd, a, b = matmul_fusion(m="M", n=192, k=256, dtype="bf16", layout="NN", epilogue="bias_gelu")
    schedule(fd, a, b, bm=64, bn=64, bk=32, wm=2, wn=2, stages=3)
    k = fd.compile(heddle.runtime.target_for_device())
    wt = w.t().contiguous()
    for args in ((x, wt, bias), (neg(x), wt, bias), (x, wt, bias), (neg(x), wt, bias)):
        want = torch.nn.functional.gelu(args[0].double() @ args[1].double() + args[2].double())
        torch.testing.assert_close(k(*args).double(), want, atol=4e-2, rtol=2e-2)
