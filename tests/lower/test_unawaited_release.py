"""The TMA pipeline without roles (docs/sync-cases.md case 8) releases a slot only when a load will wait for it:
`if (kt + 1 < nk - p) arrive empty[(kt+p+1)%s]` (passes/tma_pipeline.cpp). Found on a GPU (H200,
2026-11-27): compute-sanitizer synccheck reported "Missing wait" on a split-K kernel with 4 k-tiles per
split (s = 4, p = 2), where the unguarded last release completed phase 1 of empty[0] right after its
pre-arrived phase 0, which no wait observed either (the prologue loads stages [0, p) without a wait).

Both CPU tiers report that pattern as mbarrier misuse -- two consecutive completed phases of one barrier
that no wait observed -- and never a single unobserved phase, which correct plans have (docs/verification.md,
"Unobserved phases"). The fix reverted: the kernel-IR mutant `unguard_sync` (an opt-in mutation kind) for
the simulator, the printed source with the `if` removed for the interpreter."""
import pytest

import heddle
from heddle import verify
from heddle.core.interpret import _Mutated
from support.wgmma_defs import inputs, schedule_sm90
from support.interp_defs import needs_cxx
from support.matmul_defs import matmul_fusion

S, STAGES, PREFETCH = 2, 4, 2
MARK = "both completed and no wait observed either"


def split_k_pipeline(nk, ragged=True):
    """sm_90a TMA pipeline without roles, 64x64x16 tiles, s = 4, p = 2, split_k(2), nk k-tiles per split."""
    k = 16 * nk * S - (8 if ragged and nk > 1 else 0)  # the last k-tile ragged (TMA: 16-byte rows); nk per split
    fd, a, b = matmul_fusion(n=72, k=k)
    schedule_sm90(fd, a, b, bm=64, bn=64, bk=16, wgs=1, stages=STAGES, prefetch=PREFETCH).split_k(S)
    return heddle.Kernel.build(fd, "sm_90a", rtc=False)


def unguarded(k):
    """The kernel IR with the release's guard dropped (the fix reverted)."""
    ms = [m for m in verify.mutants(k, kinds=["unguard_sync"]) if "around mbarrier.arrive empty" in m.description]
    assert len(ms) == 1, ms  # (the split-K reduction's guarded grid syncs are sites of the kind too)
    return ms[0].kernel()


def unguarded_source(k):
    """The printed source with the `if` around the release removed (its line and its closing brace)."""
    lines = k.source.split("\n")
    i = next(i for i, l in enumerate(lines) if l.strip().startswith("if (kt + 1 <"))
    assert "mbar_arrive((empty" in lines[i + 1] and lines[i + 2].strip() == "}", lines[i:i + 3]
    return "\n".join(lines[:i] + [lines[i + 1]] + lines[i + 3:])


def test_guard_is_the_main_loop_stop():
    k = split_k_pipeline(4)
    main = [l for l in k.source.split("\n") if l.strip().startswith("for (int kt = 0; kt < heddle_ceil_div(KS")]
    assert len(main) == 1, k.source
    stop = main[0].split("kt < ", 1)[1].split(";", 1)[0]
    guard = [l.strip() for l in k.source.split("\n") if l.strip().startswith("if (kt + 1 <")]
    assert guard == [f"if (kt + 1 < {stop}) {{"], guard


@pytest.mark.parametrize("nk", [1, 2, 3, 4, 5, 9])
def test_guarded_split_k_pipeline_simulates_clean(nk):
    k = split_k_pipeline(nk)
    ins = inputs(k.fusion, 70, seed=nk)
    for sched, seed in (("adversarial", 0), ("random", 1), ("random", 2)):
        r = verify.simulate(k, ins, sched, seed)
        assert r.ok, f"nk={nk} [{sched} {seed}]\n{r.report()}"


@pytest.mark.parametrize("nk", [4, 5])
def test_unguarded_release_reported_by_the_simulator(nk):
    # nk in [s, s+p): the last release completes phase 1 of empty[nk - s], whose pre-arrived phase 0 the
    # prologue never waited for -- under every schedule (the rule does not depend on the interleaving)
    k = split_k_pipeline(nk)
    ins = inputs(k.fusion, 70, seed=nk)
    mk = unguarded(k)
    for sched, seed in (("adversarial", 0), ("random", 1), ("random", 2)):
        r = verify.simulate(mk, ins, sched, seed)
        hits = [t for t in r.async_misuse if MARK in t]
        assert hits and f"empty[{nk - STAGES}]: phases 0 and 1" in hits[0], r.report()
        assert "mbarrier.arrive empty" in hits[0], hits[0]
        assert not r.mismatches and not r.races and not r.deadlocks, r.report()  # harmless otherwise


@pytest.mark.parametrize("nk", [1, 2, 3, 6, 9])
def test_one_unobserved_phase_is_not_reported(nk):
    # outside [s, s+p) the unguarded release completes a single phase no wait observes (like the trailing
    # releases of the persistent rings): legal, and what synccheck passed with 9 k-tiles on the GPU
    k = split_k_pipeline(nk)
    r = verify.simulate(unguarded(k), inputs(k.fusion, 70, seed=nk))
    assert r.ok, r.report()


@needs_cxx
@pytest.mark.parametrize("nk", [1, 2, 3, 4, 5, 9])
def test_guarded_split_k_pipeline_interprets_clean(nk):
    k = split_k_pipeline(nk)
    ins = inputs(k.fusion, 70, seed=nk)
    for sched, seed in (("adversarial", 0), ("random", 1)):
        r = heddle.interpret(k, *ins, schedule=sched, seed=seed)
        assert r.ok, f"nk={nk}: {r.report()}"


@needs_cxx
@pytest.mark.parametrize("nk", [4, 5])
def test_unguarded_release_reported_by_the_interpreter(nk):
    k = split_k_pipeline(nk)
    ins = inputs(k.fusion, 70, seed=nk)
    mk = _Mutated(k, unguarded_source(k))
    for sched, seed in (("adversarial", 0), ("random", 1)):
        r = heddle.interpret(mk, *ins, schedule=sched, seed=seed)
        hits = [t for t in r.async_misuse if MARK in t]
        assert hits and "phases 0 and 1" in hits[0], r.report()
        assert not r.mismatches and not r.races and not r.deadlocks, r.report()
    # a single unobserved phase (nk = 6) stays clean in the interpreter too
    k6 = split_k_pipeline(6)
    r = heddle.interpret(_Mutated(k6, unguarded_source(k6)), *inputs(k6.fusion, 70, seed=6))
    assert r.ok, r.report()


def test_the_gpu_kernel_is_guarded_and_its_revert_is_reported():
    # the kernel synccheck flagged: auto_schedule("sm_90a", 1000, 1024, 1024, sms=132) -> 128x256x64,
    # s = 4, p = 2, split_k(4): 4 k-tiles per split. One CTA of split 0 (it waits on no flag) suffices.
    fd, a, b = matmul_fusion(n=1024, k=1024, dtype="bf16", layout="NT", epilogue=None)
    fd.auto_schedule("sm_90a", 1000, 1024, 1024, sms=132)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    low = k.lowered
    assert low.split_k == 4 and "128x256x64" in k.name, k.name
    assert "if (kt + 1 < " in k.source
    ins = inputs(fd, 128, seed=3)
    r = verify.simulate(unguarded(k), ins, ctas=[(0, 0, 0)], reference=False)
    assert any(MARK in t and "empty[0]: phases 0 and 1" in t for t in r.async_misuse), r.report()
    r = verify.simulate(k, ins, ctas=[(0, 0, 0)], reference=False)
    assert r.ok, r.report()


def test_unguard_sync_is_opt_in():
    # no part of kill rates (verify.mutants(k) without kinds, kill_rate): a dropped guard adds work
    k = split_k_pipeline(4)
    assert "unguard_sync" not in verify.mutation_kinds()
    assert not [m for m in verify.mutants(k) if m.kind == "unguard_sync"]
    with pytest.raises(heddle.HeddleError, match="unknown mutation kind 'no_such_kind'"):
        verify.mutants(k, kinds=["no_such_kind"])
