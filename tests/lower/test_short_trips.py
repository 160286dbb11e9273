"""Pipelined loops of any trip count (lower/passes/circular_buffer.cpp): a k loop with fewer k-tiles than
stages runs with the right numbers. The prologue's loads of k-tiles past the end are predicated
(`if (kt < nk)`), its commits are not, the main loop is empty when nk <= p and the epilogue starts at
max(nk - p, 0). Checked on the kernel IR, in the kernel-IR simulator (adversarial and random schedules,
float64 reference) and in the CPU interpreter of the printed source, for the sm_80 cp.async path, the
AMD paths (simulator only) and the sm_90a TMA pipeline without roles. Tiny shapes: a few seconds."""
import re

import pytest

from heddle import verify
from heddle.interpret import _Mutated, interpret
from support.wgmma_defs import build as build_sm90
from support.wgmma_defs import inputs as sm90_inputs
from support.interp_defs import inputs, kernel, needs_cxx, sm80
from support.amd_defs import operands, small
from support.simulator_defs import lowered_plan, make_inputs, ragged_k

SCHEDULES = (("adversarial", 0), ("random", 1))
SHORT = (1, 2, 3)


def simulate_clean(lowered, ins, what):
    for sched, seed in SCHEDULES:
        r = verify.simulate(lowered, ins, sched, seed)
        assert r.ok, f"{lowered.name} {what} {sched}:\n{r.report()}\n{lowered.kernel_ir}"


# --- the kernel IR and the printed loops ----------------------------------------------------------

def test_prologue_loads_predicated_commit_unconditional_epilogue_clamped():
    low = lowered_plan(4, 3)
    ir = low.kernel_ir
    pro = ir[ir.index("prologue"):ir.index("main (")]
    assert "if (kt < heddle_ceil_div(K, 16)) {" in pro
    guard_end = pro.index("}", pro.index("if (kt <"))
    assert pro.index("cp_async A") < guard_end < pro.index("cp.async.commit_group")  # commit outside the if
    assert "for kt in [heddle_max(heddle_ceil_div(K, 16) - 3, 0), heddle_ceil_div(K, 16)) epilogue" in ir
    src = low.source
    assert "for (int kt = 0; kt < heddle_ceil_div(K, 16) - 3; ++kt)" in src  # negative stop: no iteration
    assert "for (int kt = heddle_max(heddle_ceil_div(K, 16) - 3, 0); kt < heddle_ceil_div(K, 16); ++kt)" in src
    assert "if (kt < heddle_ceil_div(K, 16)) {" in src


def test_lds_dma_loads_are_not_predicated():
    # vmcnt counts instructions: a skipped load would loosen every wait counted across it, so a k-tile
    # past the end is issued (all out of bounds, zero-filled) like any other
    ir = small("gfx90a", "async_lds", 4, (2, 1)).kernel_ir
    assert "if (kt <" not in ir and "heddle_max(heddle_ceil_div(K, 32) - 3, 0)" in ir


def test_tma_pipeline_issue_is_predicated():
    ir = build_sm90("pipeline", stages=4, prefetch=3, k=16).lower("sm_90a").kernel_ir
    pro = ir[ir.index("prologue"):ir.index("main (")]
    assert re.search(r"if \(kt < heddle_ceil_div\(K, 16\)\) \{\s+if \(tid == 0\) \{\s+mbarrier.arrive.expect_tx", pro)


def test_no_stage_count_launch_check():
    low = lowered_plan(4, 3)
    for K in (1, 16, 32, 48, 64):
        low.check_launch({"M": 37, "N": 45, "K": K, "batch": 1})


# --- the kernel-IR simulator ----------------------------------------------------------------------

@pytest.mark.parametrize("stages,prefetch", [(4, 1), (4, 2), (4, 3), (4, 0), (2, 1), (3, 2)])
def test_sm80_cp_async_any_trip_count_simulates_clean(stages, prefetch):
    low = lowered_plan(stages, prefetch, "NT")
    for trips in range(1, 3 * stages + 2):  # every trip count 1..3s+1 (docs/sync-plan.md)
        simulate_clean(low, make_inputs("NT", ragged_k(trips), seed=trips), f"trips={trips}")


@pytest.mark.parametrize("target,kind,stages,warps", [("gfx90a", "async_lds", 4, (2, 1)),
                                                     ("gfx942", "async_lds", 3, (1, 2)),
                                                     ("gfx1200", "plain", 3, (1, 2))])
def test_amd_any_trip_count_simulates_clean(target, kind, stages, warps):
    low = small(target, kind, stages, warps)
    for trips in SHORT + (stages + 1,):
        simulate_clean(low, operands(70, 32 * trips - 5, 64, seed=trips), f"trips={trips}")


@pytest.mark.parametrize("variant,s,p", [("pipeline", 4, 1), ("pipeline", 4, 2), ("pipeline", 4, 3),
                                         ("block_sync", 4, 2), ("pipeline", 2, 1)])
def test_tma_pipeline_any_trip_count_simulates_clean(variant, s, p):
    for trips in SHORT + (5,):
        fd = build_sm90(variant, stages=s, prefetch=p, k=16 * trips - (5 if trips > 1 else 0))
        simulate_clean(fd.lower("sm_90a"), sm90_inputs(fd, 70, seed=trips), f"trips={trips}")


def test_min_max_in_hand_built_index_expressions():
    # kir/parse.cpp: max(a, b) / min(a, b), as the epilogue start prints them
    prog = [("loop", "i", "max(0 - 2, 0)", 3, "serial",
             [("write", "X", "max(i - 1, 0) % 2", "copy"), ("barrier",), ("read", "X", "min(i, 1) * 0", "mma"),
              ("barrier",)])]
    assert verify.simulate(verify.tiny_kernel(prog, threads=64), None).ok


# --- the interpreter of the printed source --------------------------------------------------------

def interpret_clean(k, ins, what):
    for sched, seed in SCHEDULES:
        r = interpret(k, *ins, schedule=sched, seed=seed)
        assert r.ok, f"{k.name} {what} [{sched}]:\n{r.report()}"


@needs_cxx
@pytest.mark.parametrize("prefetch", [1, 2, 3])
def test_sm80_cp_async_any_trip_count_interprets_clean(prefetch):
    for trips in (1, 2, 3, 4, 5, 13) if prefetch == 3 else SHORT:
        fd = sm80(stages=4, prefetch=prefetch, layout="NT", k=32 * trips - 8)
        interpret_clean(kernel(fd, "sm_80"), inputs(fd, 70, seed=trips), f"trips={trips}")


@needs_cxx
@pytest.mark.parametrize("variant,p", [("pipeline", 1), ("pipeline", 3), ("block_sync", 2)])
def test_tma_pipeline_any_trip_count_interprets_clean(variant, p):
    for trips in SHORT:
        fd = build_sm90(variant, stages=4, prefetch=p, k=16 * trips)
        interpret_clean(kernel(fd, "sm_90a"), sm90_inputs(fd, 70, seed=trips), f"trips={trips}")


@needs_cxx
def test_unclamped_epilogue_start_is_caught():
    # the epilogue starting at nk - p (negative kt for nk < p) reads a stage below the buffer
    fd = sm80(stages=4, prefetch=3, k=32)
    k = kernel(fd, "sm_80")
    src = k.lowered.source
    bad = src.replace("for (int kt = heddle_max(heddle_ceil_div(K, 32) - 3, 0);", "for (int kt = heddle_ceil_div(K, 32) - 3;")
    assert bad != src
    ins = inputs(fd, 70, seed=1)
    assert interpret(k, *ins).ok
    assert not interpret(_Mutated(k, bad), *ins).ok
