"""The Triton baseline itself is checked, not trusted: triton_matmul.matmul_with on ragged sizes, the
NT layout and batched operands (shared and batched B) under Triton's interpreter
(TRITON_INTERPRET=1, runs on a CPU), against a float64 torch reference. Skipped when triton is not
importable (it is optional: the benchmarks then skip the Triton column)."""
import importlib.util
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not importable")

SCRIPT = r"""
import sys, torch
sys.path.insert(0, %r)
import triton_matmul as tm
assert tm.available
g = torch.Generator().manual_seed(0)
worst = 0.0
for B, M, N, K, tb, bb, cfg in [
        (1, 40, 72, 48, False, False, (16, 32, 32)),     # ragged M, N; K not a multiple of BLOCK_K
        (1, 33, 65, 100, True, False, (16, 32, 32)),     # NT layout (nn.Linear weight)
        (3, 20, 40, 64, False, True, (16, 32, 32)),      # batched A and B
        (2, 20, 40, 64, True, False, (16, 16, 64)),      # batched A, one shared B
        (1, 64, 64, 64, False, False, (32, 32, 32))]:    # even sizes: EVEN_K path, no masks
    a = torch.randn((B, M, K) if B > 1 else (M, K), generator=g).to(torch.float16)
    b = torch.randn(((B,) if bb else ()) + ((N, K) if tb else (K, N)), generator=g).to(torch.float16)
    c = tm.matmul_with(a, b, trans_b=tb, BLOCK_M=cfg[0], BLOCK_N=cfg[1], BLOCK_K=cfg[2])
    ref = a.double() @ (b.double().transpose(-1, -2) if tb else b.double())
    assert c.shape == ref.shape, (c.shape, ref.shape)
    err = ((c.double() - ref).norm() / ref.norm()).item()
    worst = max(worst, err)
    assert err < 2e-3, (B, M, N, K, tb, bb, err)
print("worst relative error", worst)
""" % HERE


def test_triton_matmul_under_the_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1")
    p = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0 and "only 0-dimensional arrays can be converted" in p.stderr:
        pytest.skip("this triton's interpreter does not run with this numpy (numpy >= 2.4 needs a newer triton)")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "worst relative error" in p.stdout
