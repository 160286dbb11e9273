"""Hopper kernels on a GPU (sm_90a, e.g. H100/H200; skipped without one): numbers against the float64
reference for square, ragged and LLM shapes, every role kind and the pipeline without roles, and
compute-sanitizer racecheck / synccheck on the three role kinds when the tool is installed."""
import os
import shutil
import subprocess
import sys

import pytest
import torch

import heddle
from heddle.reference import evaluate
from support.wgmma_defs import build

pytestmark = pytest.mark.gpu


def hopper_gpu():
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs an sm_90 GPU (Hopper)")


VARIANTS = [("coop", dict(bm=128, bn=128, bk=64)), ("pingpong", dict(bm=128, bn=128, bk=64)),
            ("3role", dict(bm=64, bn=128, bk=64)), ("pipeline", dict(bm=64, bn=128, bk=64)),
            ("block_sync", dict(bm=64, bn=128, bk=64))]
SHAPES = [(512, 512, 512), (1000, 1000, 1000), (77, 200, 136), (1024, 4096, 4096), (300, 14336, 4096)]


def run_case(variant, kw, M, N, K, layout="NN", dtype="bf16", stages=4, prefetch=2):
    fd = build(variant, stages=stages, prefetch=prefetch, layout=layout, dtype=dtype, n=N, k=K, **kw)
    k = heddle.Kernel.build(fd, "sm_90a")
    g = torch.Generator().manual_seed(M + N + K)
    ts = []
    for t in fd.inputs:
        shape = [M if s == "M" else s for s in t.shape]
        dt = {"f16": torch.float16, "bf16": torch.bfloat16}[t.dtype]
        ts.append((torch.randn(shape, generator=g) * 0.5).to(dt))
    ref = evaluate(fd, ts).float()
    out = k(*[t.cuda() for t in ts]).float().cpu()
    tol = 4e-2 if dtype == "bf16" else 1e-2
    assert torch.allclose(out, ref, atol=tol, rtol=tol), (variant, M, N, K, (out - ref).abs().max().item())


@pytest.mark.parametrize("variant,kw", VARIANTS, ids=[v for v, _ in VARIANTS])
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_numerics_against_float64(variant, kw, M, N, K):
    hopper_gpu()
    run_case(variant, kw, M, N, K)


@pytest.mark.parametrize("layout", ["NT", "TN", "TT"])
@pytest.mark.parametrize("variant", ["coop", "3role", "pipeline"])
def test_layouts(variant, layout):
    hopper_gpu()
    kw = dict(VARIANTS)[variant]
    run_case(variant, kw, 333, 512, 520, layout=layout)


def test_heddle_matmul_on_hopper():
    hopper_gpu()
    a = torch.randn(4096, 4096, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(4096, 4096, dtype=torch.bfloat16, device="cuda")
    bias = torch.randn(4096, dtype=torch.bfloat16, device="cuda")
    out = heddle.matmul(a, b, bias=bias, activation="gelu")
    ref = torch.nn.functional.gelu((a.double() @ b.double()) + bias.double())
    assert torch.allclose(out.double(), ref, atol=0.5, rtol=4e-2)


@pytest.mark.parametrize("variant", ["coop", "pingpong", "3role"])
@pytest.mark.parametrize("tool", ["racecheck", "synccheck"])
def test_compute_sanitizer(variant, tool):
    hopper_gpu()
    sanitizer = shutil.which("compute-sanitizer")
    if not sanitizer:
        pytest.skip("compute-sanitizer not installed")
    here = os.path.dirname(os.path.abspath(__file__))  # tests/gpu, and tests/ for support
    code = ("import sys; sys.path[:0] = [%r, %r]; from test_wgmma_gpu import run_case, VARIANTS; "
            "run_case(%r, dict(VARIANTS)[%r], 300, 256, 512)") % (here, os.path.dirname(here), variant, variant)
    res = subprocess.run([sanitizer, "--tool", tool, "--error-exitcode", "3", sys.executable, "-c", code],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
