"""Planted-bug pairs in the style of Triton's ConSan tests: each FAIL kernel beside its OK twin,
differing in one sync op. The hand-built kernels (heddle.verify.tiny_kernel) carry exactly the
syncs written -- no planner runs -- with 64 threads and two named thread mappings ("copy" writes,
"mma" reads: different threads per element; equal names: the same thread).
"""
import pytest

from heddle import _C, verify
from support.simulator_defs import lowered_plan, make_inputs

W_ASYNC = ("write", "X", 0, "copy", True)
READ = ("read", "X", 0, "mma")

PAIRS = {
    # name: (OK program, FAIL program, list the FAIL must land in)
    "missing barrier after cp.async wait": (
        [W_ASYNC, ("commit",), ("wait", 0), ("barrier",), READ],
        [W_ASYNC, ("commit",), ("wait", 0), READ],
        "races"),
    "wait_group too loose": (
        [W_ASYNC, ("commit",), ("write", "X", 1, "copy", True), ("commit",), ("wait", 1), ("barrier",), READ],
        [W_ASYNC, ("commit",), ("write", "X", 1, "copy", True), ("commit",), ("wait", 2), ("barrier",), READ],
        "async_misuse"),
    "missing wait before the barrier": (
        [W_ASYNC, ("commit",), ("wait", 0), ("barrier",), READ],
        [W_ASYNC, ("commit",), ("barrier",), READ],
        "async_misuse"),
    "reading a stage before its commit": (
        [W_ASYNC, ("commit",), ("wait", 0), ("barrier",), READ],
        [W_ASYNC, ("wait", 0), ("commit",), ("barrier",), READ],
        "async_misuse"),
    "same-thread async read without its wait": (
        [W_ASYNC, ("commit",), ("wait", 0), ("read", "X", 0, "copy")],
        [W_ASYNC, ("commit",), ("read", "X", 0, "copy")],
        "async_misuse"),
    "barrier removed in the WAR position": (
        [("loop", "i", 0, 4, "serial", [("write", "X", 0, "copy"), ("barrier",), READ, ("barrier",)])],
        [("loop", "i", 0, 4, "serial", [("write", "X", 0, "copy"), ("barrier",), READ])],
        "races"),
    "double buffer: WAR of the stage two iterations back": (
        [("loop", "i", 0, 5, "serial", [("write", "X", "i % 2", "copy"), ("barrier",), ("read", "X", "i % 2", "mma")])],
        [("loop", "i", 0, 5, "serial", [("write", "X", "i % 2", "copy"), ("read", "X", "i % 2", "mma"),
                                         ("barrier",)])],
        "races"),
    "barrier inside a branch some threads skip": (
        [("if", "tid", "<", 64, [W_ASYNC, ("commit",), ("wait", 0), ("barrier",)]), READ],
        [("if", "tid", "<", 32, [W_ASYNC, ("commit",), ("wait", 0), ("barrier",)]), READ],
        "deadlocks"),
    "different barriers in the two branches": (
        [("write", "X", 0, "copy"), ("if", "warp", "==", 0, [("read", "X", 0, "copy")], [("read", "X", 0, "copy")]),
         ("barrier",)],
        [("write", "X", 0, "copy"), ("if", "warp", "==", 0, [("barrier",)], [("barrier",)]), READ],
        "deadlocks"),
}


@pytest.mark.parametrize("name", list(PAIRS))
@pytest.mark.parametrize("schedule,seed", [("adversarial", 0), ("random", 3), ("random", 4)])
def test_planted_bug_pair(name, schedule, seed):
    ok_prog, fail_prog, where = PAIRS[name]
    ok = verify.simulate(verify.tiny_kernel(ok_prog, threads=64), None, schedule, seed)
    assert ok.ok, f"OK twin of '{name}':\n{ok.report()}"
    bad = verify.simulate(verify.tiny_kernel(fail_prog, threads=64), None, schedule, seed)
    assert getattr(bad, where), f"FAIL twin of '{name}' not in {where}:\n{bad.report()}"


def test_reports_name_op_buffer_stage_iteration_and_threads():
    k = verify.tiny_kernel(PAIRS["barrier removed in the WAR position"][1])
    r = verify.simulate(k)
    text = r.races[0]
    for part in ("WAR race on X[stage 0]", "'read X[0] (iter i)'", "'write X[0] (iter i)'", "iteration 0",
                 "iteration 1", "thread", "warp", "lane"):
        assert part in text, text
    d = verify.simulate(verify.tiny_kernel(PAIRS["barrier inside a branch some threads skip"][1])).deadlocks[0]
    assert "threads 0-31 wait at 'block_sync'" in d and "threads 32-63 have exited" in d, d


def test_stale_data_is_a_mismatch_in_hand_built_kernels():
    # the reader runs after the overwrite of the next iteration: it sees the wrong iteration's token
    r = verify.simulate(verify.tiny_kernel(PAIRS["barrier removed in the WAR position"][1]))
    assert r.mismatches and "program order says" in r.mismatches[0]


# --- the same bugs planted in a real lowered kernel ---------------------------------------------

def _mutant(lowered, startswith):
    return next(m for m in verify.mutants(lowered) if m.description.startswith(startswith)).kernel()


@pytest.mark.parametrize("schedule,seed", [("adversarial", 0), ("random", 9)])
def test_lowered_kernel_pairs(schedule, seed):
    l = lowered_plan(3, 2)                     # prologue wait(1)+barrier, main wait(1)+barrier, drain
    ins = make_inputs("NN", 3 * 16 + 5, seed=2)
    assert verify.simulate(l, ins, schedule, seed).ok
    no_barrier = verify.simulate(_mutant(l, "delete block_sync [main"), ins, schedule, seed)
    assert no_barrier.races or no_barrier.async_misuse
    loose = verify.simulate(_mutant(l, "loosen cp.async.wait_group(1) to cp.async.wait_group(2) [main"), ins, schedule, seed)
    assert loose.async_misuse and not loose.races
    no_drain = verify.simulate(_mutant(l, "delete cp.async.wait_group(0)"), ins, schedule, seed)
    assert no_drain.async_misuse and not no_drain.deadlocks


# --- kernels placed by the sync planner's lab: clean, and every mutant flagged ---------------------

LAB = {
    "double buffer, async": ([("loop", "i", 0, "N", "serial", [("write", "X", "i % 2", "copy", True), ("commit",),
                                                               ("read", "X", "i % 2", "mma")])], 2),
    "single buffer": ([("loop", "i", 0, "N", "serial", [("write", "X", 0, "copy"), ("read", "X", 0, "mma")])], 1),
    "two buffers": ([("write", "X", 0, "a"), ("write", "Y", 0, "a"), ("read", "X", 0, "b"), ("read", "Y", 0, "c")], 1),
}


@pytest.mark.parametrize("name", list(LAB))
def test_sync_lab_plans(name):
    if not hasattr(_C, "sync_lab"):
        pytest.skip("this build has no sync_lab")
    prog, stages = LAB[name]
    l = _C.sync_lab(prog, stages)
    trips = [{"N": n} for n in (1, 2, 3, 7)]
    for t in trips:
        for sched, seed in (("adversarial", 0), ("random", 1)):
            r = verify.simulate(l, None, sched, seed, scalars=t)
            assert r.ok, f"{name} {t}:\n{r.report()}\n{l.kernel_ir}"
    report = verify.kill_rate(l, [None] * len(trips), scalars=trips)
    assert not report.survivors, str(report) + "\n" + l.kernel_ir
