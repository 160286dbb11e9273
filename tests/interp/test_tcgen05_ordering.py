"""The tcgen05 ordering rules and tensor memory's race shadow in the CPU interpreter
(src/heddle/interp/rt/hrt_tmem_shadow.cpp, called by hrt_tcgen05.cpp; docs/verification.md): the printed
sm_100a kernels of both Blackwell families (the plain epilogue and the TMA-cached bias) run clean with the
numbers of a float64 reference on ragged shapes, and hand-made edits of the printed source are each reported
by the adversarial schedule -- deterministically, as a tensor-memory race naming the instruction, the lanes
and columns and the missing ordering, not only as wrong numbers under some seed:
  * each tcgen05.fence::after_thread_sync after a wait that acquires tcgen05 work deleted (the MMA thread's
    after its accEmpty wait, the epilogue's after its accFull wait);
  * the epilogue's tcgen05.fence::before_thread_sync before its accEmpty arrive deleted;
  * the accumulator stage reused without waiting (the MMA thread's accEmpty wait deleted), or read while the
    MMA may be writing it (the epilogue reading the other stage);
  * tcgen05.commit on accFull replaced by fence::before + a plain arrive (the MMA's result is published only
    by its commit's arrival, PTX ISA 9.7.16.6.4.2).
tcgen05.alloc and tcgen05.dealloc are synchronous (PTX ISA 9.7.16.6.1), so the fences the printer puts around
them (before the block barrier that hands out the address, after the teardown barrier) order nothing the
barrier does not: deleting them is not a finding.
A hand-written one-CTA kernel (tests/interp/tcgen05_ordering.cu: the ISA's canonical patterns around one
reused accumulator stage, independent of the printer) runs clean with exact numbers under three schedules,
and each of its fences, its MMA thread's wait and its commit edited away is a tensor-memory race."""
import json
from pathlib import Path

import pytest
import torch

import heddle
from heddle.core.interpret import _Mutated
from heddle.interpret import interpret
from support.tcgen05_defs import build, build_epi
from support.wgmma_defs import inputs
from support.interp_defs import kernel, needs_cxx

pytestmark = needs_cxx

M = 260  # 3 row tiles x 3 column tiles of N = 136 on 2 SMs: every CTA walks 4 or 5 tiles over 2 stages


def plain():
    return build(stages=2, acc_stages=2, bn=64, bk=16, n=136, k=72)


def bias_tma():
    return build_epi(operands=("bias",), tma="bias", stages=3, acc_stages=2, bn=64, bk=16, n=136, k=72)


FAMILIES = {"plain": plain, "bias_tma": bias_tma}
_cache = {}


def family(name):
    if name not in _cache:
        fd = FAMILIES[name]()
        _cache[name] = (fd, kernel(fd, "sm_100a"))
    return _cache[name]


def line_with(src, *parts):
    hits = [l for l in src.splitlines() if all(p in l for p in parts)]
    assert len(hits) == 1, (parts, hits)
    return hits[0]


def delete(src, *parts):
    return src.replace(line_with(src, *parts) + "\n", "", 1)


def replace(src, old, new):
    assert src.count(old) == 1, old
    return src.replace(old, new)


def run(name, source=None, schedule="adversarial", seed=0, m=M):
    fd, k = family(name)
    return interpret(_Mutated(k, source) if source else k, *inputs(fd, m, seed=1), schedule=schedule, seed=seed,
                     sms=2)


@pytest.mark.parametrize("name", sorted(FAMILIES))
@pytest.mark.parametrize("m,schedule,seed", [(M, "adversarial", 0), (M, "random", 3), (136, "adversarial", 0)])
def test_families_run_clean_with_right_numbers(name, m, schedule, seed):
    r = run(name, schedule=schedule, seed=seed, m=m)
    assert r.ok, r.report()


FENCES = {  # the fence, and what its absence must be reported as
    "mma_after": (("sm100::fence_after();", "WAR tmem acc (epilogue -> mma)"), "missing tcgen05.fence::after_thread_sync",
                  "tcgen05.mma by thread 32"),
    "epilogue_after": (("sm100::fence_after();", "RAW tmem acc (mma -> epilogue)"),
                       "missing tcgen05.fence::after_thread_sync", "tcgen05.ld by thread"),
    "epilogue_before": (("sm100::fence_before();", "WAR tmem acc (epilogue -> mma)"),
                        "missing tcgen05.fence::before_thread_sync", "after the tcgen05.ld read by thread"),
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
@pytest.mark.parametrize("fence", sorted(FENCES))
def test_deleted_fence_is_reported(name, fence):
    parts, why, what = FENCES[fence]
    src = family(name)[1].source
    r = run(name, delete(src, *parts))
    hits = [t for t in r.races if t.startswith("tensor-memory") and why in t and what in t]
    assert hits, r.report()
    assert "columns" in hits[0] and "lane" in hits[0]


def test_fences_around_alloc_and_dealloc_order_nothing_more():
    # PTX ISA 9.7.16.6.1: alloc / dealloc are synchronous tcgen05 instructions, ordered by the block barrier
    # alone; the fences are for the asynchronous ones (mma, ld). Public sm100 kernels (FlashMLA, DeepGEMM)
    # hand out the address with a plain __syncthreads, CUTLASS-based examples free after one.
    src = family("plain")[1].source
    for parts in (("sm100::fence_before();", "publish tmem_slot"), ("sm100::fence_after();", "acquire teardown")):
        r = run("plain", delete(src, *parts))
        assert r.ok, (parts, r.report())


REUSE = {
    # the MMA thread writes an accumulator stage without waiting for the epilogue to have read it
    "no_acc_empty_wait": (lambda s: delete(s, "mbar_wait((accEmpty"), "write-after-read",
                          "tcgen05.mma by thread 32"),
    # the epilogue reads the stage the MMA of the next tile writes
    "other_stage_read": (lambda s: replace(s, "Mma::row_addr(tmem_slot[0], warp, tl % 2)",
                                           "Mma::row_addr(tmem_slot[0], warp, (tl + 1) % 2)"), "race",
                         "tcgen05.mma write by thread 32"),
    # fence::before + arrive does not publish an MMA's result: only its commit's arrival does
    "commit_as_arrive": (lambda s: replace(s, "heddle::sm100::commit((accFull + (tl % 2)));",
                                           "heddle::sm100::fence_before(); heddle::sm90::mbar_arrive((accFull + (tl % 2)));"),
                         "read-after-write", "no wait on the mbarrier of a tcgen05.commit"),
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
@pytest.mark.parametrize("mutant", sorted(REUSE))
def test_accumulator_reuse_is_reported(name, mutant):
    edit, race, text = REUSE[mutant]
    r = run(name, edit(family(name)[1].source))
    hits = [t for t in r.races if t.startswith("tensor-memory") and race in t and text in t]
    assert hits, r.report()


# --- a hand-written kernel (tests/interp/tcgen05_ordering.cu): the ISA's canonical patterns, without the printer

HAND = (Path(__file__).parent / "tcgen05_ordering.cu").read_text()
TILES = 3


def hand_mutant(tag, new=""):
    line = line_with(HAND, f"MUTANT:{tag}")
    return HAND.replace(line, new)


def run_hand(src, schedule="adversarial", seed=0):
    out = torch.full((TILES, 128), float("nan"))
    lib = heddle._C.interp.build(src, "tcgen05_ordering", "sm_100a")
    regions = [("out", out.data_ptr(), out.numel() * 4, True, 4)]
    raw = lib.run([1, 1, 1], [256, 1, 1], 6168, [("ptr", out), ("i32", TILES)], ["out", "tiles"], regions,
                  schedule, seed)
    return [(f["kind"], f["text"]) for f in json.loads(raw).get("findings", [])], out


@pytest.mark.parametrize("schedule,seed", [("adversarial", 0), ("random", 1), ("random", 2)])
def test_hand_written_kernel_runs_clean_with_right_numbers(schedule, seed):
    findings, out = run_hand(HAND, schedule, seed)
    assert not findings, findings
    assert torch.equal(out, torch.full_like(out, 16.0)), out


HAND_MUTANTS = {  # the edit, and the words its race report must hold
    "mma_after": (("mma_after", ""), "tcgen05.mma", "missing tcgen05.fence::after_thread_sync"),
    "ld_after": (("ld_after", ""), "tcgen05.ld", "missing tcgen05.fence::after_thread_sync"),
    "ld_before": (("ld_before", ""), "tcgen05.mma", "missing tcgen05.fence::before_thread_sync"),
    # the MMA thread runs ahead (adversarial): the readers see MMAs of later tiles their accFull wait did not cover
    "mma_wait": (("mma_wait", ""), "tcgen05.ld", "no wait on the mbarrier of a tcgen05.commit issued after"),
    # fence::before + a plain arrive in place of the commit: the MMA's result is published by nothing
    "commit": (("commit", "      heddle::sm100::fence_before(); heddle::sm90::mbar_arrive(accFull);"), "tcgen05.ld",
               "no wait on the mbarrier of a tcgen05.commit"),
}


@pytest.mark.parametrize("mutant", sorted(HAND_MUTANTS))
def test_hand_written_mutants_are_races(mutant):
    edit, op, why = HAND_MUTANTS[mutant]
    findings, _ = run_hand(hand_mutant(*edit))
    races = [t for k, t in findings if k == "race" and t.startswith("tensor-memory") and f"{op} by" in t and why in t]
    assert races, findings
