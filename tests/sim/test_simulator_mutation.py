"""Mutation testing of the sync plans (docs/sync-cases.md case 17): every mutant of every real kernel -- each
sync op deleted, each cp.async.wait_group loosened by one -- must be flagged by the simulator (a
race, a deadlock, an early async read, or wrong numbers) on at least one of the ragged trip counts.
A survivor is either an unnecessary sync in the plan or a blind spot of the simulator.

Run with -s to see the kill-rate table.
"""
import pytest

from heddle import verify
from support.simulator_defs import EXTRA, LAYOUTS, PLANS, lowered_plan, make_inputs, ragged_k, trip_counts

KERNELS = [(s, p, "cp_async", lay) for s, p in PLANS for lay in LAYOUTS] + \
          [(s, p, kind, lay) for s, p, kind in EXTRA for lay in LAYOUTS]
_totals = {"killed": 0, "total": 0, "survivors": []}


def cases(stages, layout):
    return [make_inputs(layout, ragged_k(t), seed=t) for t in trip_counts(stages)]


@pytest.mark.parametrize("stages,prefetch,kind,layout", KERNELS)
def test_every_mutant_is_flagged(stages, prefetch, kind, layout):
    l = lowered_plan(stages, prefetch, layout, kind)
    report = verify.kill_rate(l, cases(stages, layout))
    _totals["killed"] += report.killed
    _totals["total"] += report.total
    _totals["survivors"] += [f"{l.name}: {m.description}" for m in report.survivors]
    print(f"\n{report.kernel}: kill rate {report.killed}/{report.total}")
    assert report.total >= 1
    assert not report.survivors, str(report) + "\n" + l.kernel_ir


def test_kill_rate_summary():
    if not _totals["total"]:
        pytest.skip("run together with test_every_mutant_is_flagged")
    rate = _totals["killed"] / _totals["total"]
    print(f"\nsync mutants killed: {_totals['killed']}/{_totals['total']} ({100 * rate:.1f}%) over {len(KERNELS)} kernels")
    assert rate == 1.0, "\n".join(_totals["survivors"])


def test_mutant_enumeration_covers_every_sync_op():
    l = lowered_plan(3, 2)
    ms = verify.mutants(l)
    n_sync = sum(l.count_syncs(k) for k in ("block_sync", "cp.async.commit_group", "cp.async.wait_group"))
    n_wait = l.count_syncs("cp.async.wait_group")
    assert sum(m.kind == "delete_sync" for m in ms) == n_sync
    assert sum(m.kind == "loosen_wait" for m in ms) == n_wait
    assert set(verify.mutation_kinds()) >= {"delete_sync", "loosen_wait"}
    assert all("[" in m.description for m in ms)  # says where the op stands


def test_mutant_is_a_deep_copy():
    l = lowered_plan(2, 1)
    before = l.kernel_ir
    m = next(m for m in verify.mutants(l) if m.kind == "loosen_wait")
    mk = m.kernel()
    assert l.kernel_ir == before
    assert mk.kernel_ir != before
    assert mk.count_syncs("block_sync") == l.count_syncs("block_sync")
    d = next(m for m in verify.mutants(l) if m.description.startswith("delete block_sync")).kernel()
    assert d.count_syncs("block_sync") == l.count_syncs("block_sync") - 1
    del l  # the mutant keeps what it needs alive
    assert verify.simulate(mk, make_inputs("NN", 45)).async_misuse


def test_missing_war_barrier_also_shows_in_the_numbers():
    # single-buffered plain loads: delete the WAR barrier at the end of the k loop. Happens-before
    # flags the race; the adversarial schedule (one thread runs ahead into the next k-tile) also
    # makes the other threads read the overwritten tile, so the output is wrong too.
    l = lowered_plan(1, 0, "NN", "plain")
    war = [m for m in verify.mutants(l) if m.kind == "delete_sync" and "WAR" in m.description]
    assert len(war) == 1
    r = verify.simulate(war[0].kernel(), make_inputs("NN", 61))
    assert r.races and r.mismatches
    assert "race on sA" in " ".join(r.races) or "race on sB" in " ".join(r.races)
