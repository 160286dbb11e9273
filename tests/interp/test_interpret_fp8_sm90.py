"""The sm_90a FP8 GEMM (docs/fp8.md, "sm_90a"): 8-bit wgmma (m64nNk32, e4m3 / e5m2 in any mix, both operands
K-major), per-tensor / per-row scales applied to the f32 accumulator before the other epilogue ops, 16-bit or
8-bit (satfinite) outputs. The CPU interpreter runs the printed kernels on ragged shapes (M and N not multiples
of the tile, K long enough for many k tiles) and compares against float64 torch; source mutants of the FP8 code
(a k tile the MMA only half consumes, a dropped scale) are caught."""
import pytest
import torch

import heddle
from heddle.interpret import interpret
from support.fp8_defs import fp8_fusion, fp8_schedule, inputs
from support.interp_defs import needs_cxx

pytestmark = needs_cxx


def check(fd, M, seed=0, sms=2, schedules=(("adversarial", 0),), **tol):
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    ins = inputs(fd, M, seed=seed)
    for sched, s in schedules:
        r = interpret(k, *ins, schedule=sched, seed=s, sms=sms, **tol)
        assert r.ok, f"{k.name} [{sched}]:\n{r.report()}"
    return k, r


@pytest.mark.parametrize("variant,ab,scale", [
    ("coop", ("e4m3", "e4m3"), "tensor"),
    ("pingpong", ("e5m2", "e4m3"), "row"),
    ("pipeline", ("e4m3", "e5m2"), "mixed"),
    ("coop", ("e5m2", "e5m2"), "none"),
])
def test_fp8_wgmma_hand_schedules(variant, ab, scale):
    # M = 200 and N = 200 against 128 x 64 tiles: ragged in both; K = 1024: 8 k tiles of 128 through 4 stages
    fd, a, b = fp8_fusion(n=200, k=1024, a_dtype=ab[0], b_dtype=ab[1], scale=scale, bias=True, act="gelu")
    fp8_schedule(fd, a, b, variant=variant)
    k, _ = check(fd, 200, schedules=(("adversarial", 0), ("random", 3)))
    src = k.lowered.source
    assert "MmaSm90<128, 64, 128," in src
    if ab[0] != ab[1]:
        assert f"heddle::{ab[1]}>" in src  # B's own element type in the MMA's template


def test_fp8_ragged_k_and_k_tiles_of_32_and_64():
    # K = 1040 = 8 x 128 + 16: the last k tile is partial (TMA fills zeros past K)
    fd, a, b = fp8_fusion(n=136, k=1040, scale="row")
    fp8_schedule(fd, a, b, variant="coop")
    check(fd, 77)
    for bk in (32, 64):
        fd, a, b = fp8_fusion(n=72, k=320, scale="tensor")
        fp8_schedule(fd, a, b, variant="pipeline", bm=64, bk=bk, stages=3, prefetch=1)
        check(fd, 70, sms=1)


@pytest.mark.parametrize("out", ["e4m3", "e5m2"])
def test_fp8_output_satfinite_with_output_scale(out):
    fd, a, b = fp8_fusion(n=200, k=512, scale="row", bias=True, act="relu", out=out, out_scale=True)
    fp8_schedule(fd, a, b, variant="coop")
    k, r = check(fd, 130)
    assert f"from_float<heddle::{out}>" in k.lowered.source
    assert r.output.dtype == {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[out]


def test_fp8_auto_schedule_picks_the_fp8_tiling():
    fd, a, b = fp8_fusion(n=512, k=1024, scale="row", bias=True)
    fd.auto_schedule("sm_90a", 1024, 512, 1024)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    src = k.lowered.source
    assert "MmaSm90<128, 256, 128," in src or "MmaSm90<128, 128, 128," in src, src[:2000]
    r = interpret(k, *inputs(fd, 200, seed=4), sms=2)
    assert r.ok, r.report()


def test_fp8_source_mutants_caught():
    from heddle.core.source_mutants import source_mutants
    fd, a, b = fp8_fusion(n=72, k=512, scale="row")
    fp8_schedule(fd, a, b, variant="pipeline", bm=64, stages=3, prefetch=1)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    ins = inputs(fd, 70, seed=1)
    muts = source_mutants(k.lowered.source, kinds=("fp8_k_step", "fp8_drop_scale"))
    assert {m.kind for m in muts} == {"fp8_k_step", "fp8_drop_scale"}
    assert len([m for m in muts if m.kind == "fp8_drop_scale"]) == 2  # scale_a and scale_b
    from heddle.core.interpret import _Mutated
    for m in muts:
        r = interpret(_Mutated(k, m.source), *ins, sms=1)
        assert not r.ok, f"{m.kind} at line {m.line} ({m.what}) survived"
