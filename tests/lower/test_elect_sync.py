"""Single-thread issue by elect.sync on sm_90a (TargetInfo::electSync): the Hopper passes mark their
one-thread issuers (mbarrier init, TMA loads, the TMA store) as elected in a warp
(kir::IfThenElse::electWarp); the kernel IR keeps `tid == 32 * W` (what the simulator evaluates) and
the printer spells `if (warp == W && heddle::elect_one_sync())`. The interpreter runs elect.sync as a
warp collective (hrt_sched.cpp), so a source that elects outside the issuing role, drops the warp test
or reaches elect.sync with part of a warp is caught. NVRTC checks: tests/isa/test_wgmma_compile.py."""
import re
from pathlib import Path

import pytest

from heddle.interpret import _Mutated, interpret
from support.wgmma_defs import walk
from support.interp_defs import inputs, kernel, needs_cxx, sm80, sm90

VARIANTS = [("pipeline", 3, 1), ("block_sync", 3, 1), ("coop", 3, 1), ("pingpong", 3, 1), ("3role", 3, 1)]
ISSUE = "heddle::elect_one_sync()"


def elected(low):
    return [(n["cond"], n["elect_warp"]) for n in walk(low.structure) if n["kind"] == "if" and "elect_warp" in n]


@pytest.mark.parametrize("variant,s,p", VARIANTS)
def test_sm90a_issuers_are_elected(variant, s, p):
    low = sm90(variant, stages=s, prefetch=p).lower("sm_90a")
    marks = elected(low)
    assert marks and all(c == f"tid == {32 * w}" for c, w in marks)  # the IR's thread: the warp's lowest lane
    src = low.source
    assert not re.search(r"if \(tid == \d+\)", src), src  # no thread-index issuer left
    for _, w in marks:
        assert f"if (warp == {w} && {ISSUE}) {{" in src
    if variant == "3role":  # the TMA store is issued in the epilogue role's first warp
        assert ("tid == 256", 8) in marks and f"if (warp == 8 && {ISSUE})" in src


def test_device_header_elects_with_ptx():
    hdr = (Path(__file__).resolve().parents[2] / "src/heddle/codegen/device/heddle_sm90.cuh").read_text()
    body = hdr[hdr.index("bool elect_one_sync()"):]
    body = body[:body.index("\n}\n")]
    assert "elect.sync _|P, %1;" in body and '"r"(0xffffffffu)' in body  # full-warp membermask
    assert "::heddle_rt::elect_sync(0xffffffffu)" in body  # the interpreter's warp collective


def test_sm80_source_has_no_elect():
    src = sm80(stages=3, prefetch=1).lower("sm_80").source
    assert "elect" not in src and "if (kt < heddle_ceil_div(K, 32)) {" in src


# --- the interpreter: elect.sync as a warp collective ---------------------------------------------

def _run(fd, src_edit=None, M=130, sms=2):
    k = kernel(fd, "sm_90a")
    ins = inputs(fd, M, seed=1)
    if src_edit is None:
        return interpret(k, *ins, sms=sms)
    bad = src_edit(k.lowered.source)
    assert bad != k.lowered.source
    return interpret(_Mutated(k, bad), *ins, sms=sms, max_events=2_000_000)


@needs_cxx
@pytest.mark.parametrize("variant", ["pipeline", "3role"])
def test_elected_kernels_interpret_clean(variant):
    r = _run(sm90(variant, stages=3, prefetch=1))
    assert r.ok, r.report()


@needs_cxx
def test_dropped_warp_test_is_caught():
    # every warp elects a lane: four threads init the barriers and issue each stage's TMA
    r = _run(sm90("pipeline", stages=3, prefetch=1), lambda s: s.replace(f"warp == 0 && {ISSUE}", ISSUE))
    assert not r.ok, r.report()


@needs_cxx
def test_election_outside_the_issuing_role_is_caught():
    # the load role is warps 0-3 (`if (warp < 4)`): electing in warp 4 there never issues -- the MMA
    # role waits on `full` forever
    fd = sm90("coop", stages=3, prefetch=1)
    src = kernel(fd, "sm_90a").lowered.source
    role = src.index("if (warp < 4) {")
    load = src.index(f"if (warp == 0 && {ISSUE})", role)
    r = _run(fd, lambda s: s[:load] + f"if (warp == 4 && {ISSUE})" + s[load + len(f"if (warp == 0 && {ISSUE})"):])
    assert not r.ok and r.deadlocks, r.report()


@needs_cxx
def test_part_of_a_warp_at_elect_sync_is_caught():
    # elect.sync waits for every lane of its mask: half a warp reaching it never completes
    r = _run(sm90("pipeline", stages=3, prefetch=1),
             lambda s: s.replace(f"warp == 0 && {ISSUE}", f"warp == 0 && lane < 16 && {ISSUE}"))
    assert not r.ok and r.deadlocks and "elect.sync (a collective:" in r.deadlocks[0], r.report()


@needs_cxx
def test_partial_membermask_is_refused():
    r = _run(sm90("pipeline", stages=3, prefetch=1),
             lambda s: s.replace(f"warp == 0 && {ISSUE}", "warp == 0 && ::heddle_rt::elect_sync(0xffffu)"))
    assert not r.ok and any("membermask" in f for f in r.errors), r.report()
