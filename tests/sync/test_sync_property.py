"""Property test of the sync planner (docs/sync-plan.md, "Property test"): random sync_lab programs
(tests/support/sync_fuzz.py) on every planner target. For each program the planner either refuses with one
of its documented errors or places a plan that the simulator finds clean for every trip count
1..2s+2 and every value of the branch flags, under an adversarial and a random schedule; in exact
plans every placed barrier and (but for a counted residue) every placed wait, deleted or loosened,
is caught. A fixed bounded set runs in CI, a large one under -m slow."""
import collections

import pytest

from heddle import _C, verify
from support.sync_fuzz import random_case

TARGETS = ("sm_80", "gfx90a", "gfx1200")
REFUSALS = ("can only be ordered inside", "not yet committed")


def check(seed, target, stats):
    case = random_case(seed, target)
    try:
        lab = _C.sync_lab(case.program, 2, target=target, min_trips=1)
    except _C.HeddleError as e:
        assert any(r in str(e) for r in REFUSALS), f"seed {seed} {target}: unexpected refusal: {e}\n{case.program}"
        stats["refused"] += 1
        return
    binds = case.bindings()
    for b in binds:
        for sched, s in (("adversarial", 0), ("random", seed + 1)):
            r = verify.simulate(lab, None, sched, s, scalars=b)
            assert r.ok, f"seed {seed} {target} {b} {sched}: unsound plan\n{r.report()}\n{case.program}\n{lab.kernel_ir}"
    stats["planned"] += 1
    # programs whose unknown branches were all enumerated get exact plans; loop-variant or
    # thread-dependent branches are walked as alternatives (sound, not claimed minimal)
    exact = "walked as alternatives" not in lab.sync_summary or " 0 branch(es) walked" in lab.sync_summary
    report = verify.kill_rate(lab, [None] * len(binds), scalars=binds)
    for m, verdict in report.verdicts:
        if "(sync " not in m.description:  # mutants of the program's own commits: not the planner's
            continue
        head = m.description.split(" [")[0]  # "delete block_sync", "loosen s_waitcnt vmcnt(0) to ..."
        key = ("barrier" if "block_sync" in head or "s_barrier" in head else "wait") + ("" if exact else " (merged)")
        stats[key + " mutants"] += 1
        if verdict == "SURVIVED":
            stats[key + " survived"] += 1
            assert key != "barrier", f"seed {seed} {target}: a placed barrier is not needed: {m.description}\n{lab.kernel_ir}"


def run(seeds):
    stats = collections.Counter()
    for seed in seeds:
        for target in TARGETS:
            check(seed, target, stats)
    return stats


def test_random_programs_get_sound_plans_whose_syncs_are_all_needed():
    stats = run(range(60))
    print(dict(stats))
    assert stats["planned"] >= 120, stats  # most programs are plannable
    assert stats["barrier mutants"] > 100 and stats["wait mutants"] > 100, stats
    # exact plans: every placed barrier and wait is needed by some trip count, flag value and
    # schedule (a wait whose interval another wait retires only at an earlier iteration's instance
    # can survive: docs/sync-plan.md counts them)
    assert stats["wait survived"] <= 0.01 * stats["wait mutants"], stats


@pytest.mark.slow
def test_random_programs_large_run():
    stats = run(range(60, 1060))
    print(dict(stats))
    assert stats["wait survived"] <= 0.01 * stats["wait mutants"], stats
