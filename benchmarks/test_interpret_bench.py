"""The interpreter's speed on a 2-core CPU (issue target: a 256x256x256 bf16 GEMM through the sm_90a
warp-specialized kernel interprets in at most 10 s). A benchmark, not a unit test: it prints the median
of three runs (library build excluded, measured separately) and checks the target; docs/perf.md
records the figures with date, commit and command.

    pytest -q -s benchmarks/test_interpret_bench.py
"""
import shutil
import statistics
import time

import pytest
import torch

import heddle
from heddle.interpret import interpret

pytestmark = pytest.mark.skipif(not (shutil.which("g++") or shutil.which("clang++")), reason="no host C++ compiler")


def test_interpret_256_cube_sm90_warp_specialized():
    fd = heddle.Fusion()
    a = fd.input("a", "bf16", ["M", 256])
    b = fd.input("b", "bf16", [256, 256])
    fd.output(fd.matmul(a, b).to("bf16"))
    fd.auto_schedule("sm_90a", 256, 256, 256)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    assert "ws" in k.name  # the warp-specialized persistent kernel
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 256, generator=g).bfloat16()
    w = torch.randn(256, 256, generator=g).bfloat16()
    t0 = time.perf_counter()
    heddle._C.interp.build(k.source, k.name)
    build_s = time.perf_counter() - t0
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        r = interpret(k, x, w)
        times.append(time.perf_counter() - t0)
        assert r.ok, r.report()
    med = statistics.median(times)
    print(f"\ninterpret {k.name} 256x256x256 bf16: median {med:.2f} s over 3 runs "
          f"(library build {build_s:.2f} s, {r.ctas} CTAs, {r.raw.get('events')} events)")
    assert med <= 10.0
