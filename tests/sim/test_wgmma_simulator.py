"""The CPU simulator on the Hopper kernels (docs/sync-cases.md cases 8-12 and 17): every real plan simulates clean
(no race, deadlock, mbarrier misuse, missing proxy fence; right numbers) under the adversarial and a
random schedule for the trip counts {1, s-1, s, s+1, 3s+1} and ragged
sizes; every mutant of a plan -- each sync deleted, each wgmma / bulk wait loosened by one, each
parity flipped, each mbarrier over- or under-arrived, each wait moved to its partner barrier (the two
roles then wait on each other) -- is flagged. Run with -s for the kill-rate table.

The simulator's own model is checked by planted bugs (hand-mutated kernels with a known defect)."""
import pytest

from heddle import verify
from support.wgmma_defs import build, inputs

M_TILES = 200   # >= 3 tiles per CTA in the persistent kernels (num_ctas = tiles // 3)


def trips(variant, s):
    # every kernel takes any trip count >= 1 (a cloned pipeline predicates its prologue's issues)
    return sorted({1, s - 1, s, s + 1, 3 * s + 1} - {0})


def lowered(variant, s, p, t, layout="NN", dtype="bf16", ragged_k=True):
    k = 16 * t - (5 if ragged_k and t > 1 else 0)
    fd = build(variant, stages=s, prefetch=p, layout=layout, dtype=dtype, k=k)
    return fd, fd.lower("sm_90a")


CLEAN = [
    ("pipeline", 2, 1), ("pipeline", 3, 0), ("pipeline", 4, 2), ("pipeline", 4, 3),
    ("block_sync", 2, 1), ("block_sync", 4, 1), ("block_sync", 3, 2),
    ("coop", 2, 1), ("coop", 4, 2), ("coop", 4, 3), ("coop", 3, 0),
    ("pingpong", 2, 1), ("pingpong", 4, 2), ("pingpong", 3, 2),
    ("3role", 2, 1), ("3role", 4, 2), ("3role", 3, 0),
]


@pytest.mark.parametrize("variant,s,p", CLEAN)
def test_real_plans_simulate_clean(variant, s, p):
    for i, t in enumerate(trips(variant, s)):
        layout = ["NN", "TT", "NT", "TN"][i % 4]
        fd, low = lowered(variant, s, p, t, layout=layout)
        ins = inputs(fd, [M_TILES, 100, 64][i % 3], seed=t)
        for sched, seed in (("adversarial", 0), ("random", t)):
            r = verify.simulate(low, ins, sched, seed)
            assert r.ok, f"{variant} s={s} p={p} trips={t} {layout} {sched}:\n{r.report()}"


@pytest.mark.parametrize("variant", ["pipeline", "coop", "3role"])
def test_f16_and_other_epilogues(variant):
    fd = build(variant, stages=3, prefetch=1, dtype="f16", epilogue="silu_scale", k=16 * 7)
    r = verify.simulate(fd.lower("sm_90a"), inputs(fd, 130, seed=3), "random", 5)
    assert r.ok, r.report()


def test_batched_tma_pipeline():
    fd = build("pipeline", stages=3, prefetch=2, batched=True, k=16 * 5)
    r = verify.simulate(fd.lower("sm_90a"), inputs(fd, 70, seed=2, batch=2))
    assert r.ok, r.report()


# --- mutation testing (docs/sync-cases.md case 17) ----------------------------------------------------------

KILL = [
    ("pipeline", 3, 1), ("pipeline", 4, 3), ("pipeline", 2, 0),
    ("block_sync", 3, 1), ("block_sync", 2, 1),
    ("coop", 4, 2), ("coop", 3, 2),
    ("pingpong", 4, 2), ("pingpong", 3, 2),
    ("3role", 3, 1), ("3role", 2, 0),
]
_totals = {"killed": 0, "total": 0, "survivors": [], "kinds": {}}


@pytest.mark.parametrize("variant,s,p", KILL)
def test_every_hopper_mutant_is_flagged(variant, s, p):
    t = 3 * s + 1
    fd, low = lowered(variant, s, p, t)
    cases = [inputs(fd, M_TILES, seed=1)]
    report = verify.kill_rate(low, cases)
    _totals["killed"] += report.killed
    _totals["total"] += report.total
    _totals["survivors"] += [f"{low.name}: {m.description}" for m in report.survivors]
    for m, v in report.verdicts:
        k = _totals["kinds"].setdefault(m.kind, [0, 0])
        k[0] += v != "SURVIVED"
        k[1] += 1
    print(f"\n{report.kernel}: kill rate {report.killed}/{report.total}")
    kinds = {m.kind for m, _ in report.verdicts}
    want = {"delete_sync", "flip_parity", "over_arrive", "under_arrive", "loosen_wait"}
    if variant != "block_sync":  # no empty barriers: a wait has no partner to move to
        want.add("role_cycle")
    assert want <= kinds
    assert not report.survivors, str(report) + "\n" + low.kernel_ir


def test_hopper_kill_rate_summary():
    if not _totals["total"]:
        pytest.skip("run together with test_every_hopper_mutant_is_flagged")
    rate = _totals["killed"] / _totals["total"]
    print(f"\nHopper sync mutants killed: {_totals['killed']}/{_totals['total']} ({100 * rate:.1f}%) over "
          f"{len(KILL)} kernels")
    for kind, (k, n) in sorted(_totals["kinds"].items()):
        print(f"  {kind:14s} {k}/{n}")
    assert rate == 1.0, "\n".join(_totals["survivors"])


def test_mutation_kinds_include_the_hopper_ones():
    assert set(verify.mutation_kinds()) >= {"delete_sync", "loosen_wait", "flip_parity", "over_arrive",
                                             "under_arrive", "role_cycle"}
    fd, low = lowered("coop", 4, 2, 13)
    ms = verify.mutants(low)
    n_waits = low.count_syncs("mbarrier.try_wait.parity")
    assert sum(m.kind == "flip_parity" for m in ms) == n_waits
    assert sum(m.kind == "role_cycle" for m in ms) == n_waits
    assert sum(m.kind == "under_arrive" for m in ms) == low.count_syncs("mbarrier.init")
    assert not any("setmaxnreg" in m.description for m in ms)  # a register budget, not a sync


# --- planted bugs: the model itself ---------------------------------------------------------------

def mutant(low, kind, text):
    return next(m for m in verify.mutants(low) if m.kind == kind and text in m.description).kernel()


def test_flipped_raw_parity_reads_before_the_copy_lands():
    fd, low = lowered("pipeline", 3, 2, 10)
    r = verify.simulate(mutant(low, "flip_parity", "full[kt % 3]"), inputs(fd, 100))
    assert r.races and "sA" in " ".join(r.races)


def test_missing_proxy_fence_is_reported():
    fd, low = lowered("3role", 3, 1, 10)
    r = verify.simulate(mutant(low, "delete_sync", "delete fence.proxy.async"), inputs(fd, M_TILES))
    assert any("missing proxy fence" in m for m in r.async_misuse), r.report()


def test_under_arrival_deadlocks_with_the_barrier_state_in_the_message():
    fd, low = lowered("coop", 3, 1, 10)
    r = verify.simulate(mutant(low, "under_arrive", "empty[0]"), inputs(fd, M_TILES))
    assert r.deadlocks and " on empty[" in r.deadlocks[0] and "arrivals" in r.deadlocks[0]


def test_tx_mismatch_is_reported():
    fd, low = lowered("pipeline", 3, 1, 10)
    r = verify.simulate(mutant(low, "delete_sync", "delete mbarrier.arrive.expect_tx full[(kt"), inputs(fd, 100))
    assert any("transaction count mismatch" in m for m in r.async_misuse), r.report()


def test_loosened_wgmma_wait_races_with_the_next_copy():
    fd, low = lowered("coop", 4, 2, 13)
    r = verify.simulate(mutant(low, "loosen_wait", "wgmma.wait_group(1)"), inputs(fd, M_TILES))
    assert r.races or any("still reading" in m for m in r.async_misuse), r.report()


def test_role_cycle_deadlocks():
    fd, low = lowered("coop", 3, 1, 10)
    r = verify.simulate(mutant(low, "role_cycle", "empty["), inputs(fd, M_TILES))
    assert r.deadlocks, r.report()


def test_missing_wgmma_fence_is_reported():
    fd, low = lowered("pingpong", 3, 1, 10)
    r = verify.simulate(mutant(low, "delete_sync", "delete wgmma.fence"), inputs(fd, M_TILES))
    assert any("without wgmma.fence" in m for m in r.async_misuse), r.report()


def test_pingpong_without_turns_breaks_the_parity_protocol():
    """The order ring is needed for correctness: a warpgroup starting its next tile would wait on
    items rounds ahead of the ring, where parities alias."""
    fd, low = lowered("pingpong", 3, 2, 10)
    r = verify.simulate(mutant(low, "delete_sync", "delete mbarrier.try_wait.parity order"), inputs(fd, M_TILES))
    assert not r.ok
