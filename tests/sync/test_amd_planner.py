"""AMD sync planning through the shared planner (docs/sync-cases.md cases 14-16): exact s_barrier / s_waitcnt vmcnt /
split-barrier placement on hand-built kernels (heddle._C.sync_lab with an AMD target), and every such
plan simulated clean with every single-sync mutant flagged (docs/sync-cases.md case 17)."""
import pytest

from heddle import _C, verify


def lab(prog, stages=1, target="gfx90a"):
    return _C.sync_lab(prog, stages, target=target)


def ops(nodes):
    return [n["text"] for n in nodes]


def loop_body(lowered, stage):
    return next(n for n in lowered.structure if n["kind"] == "for" and n["stage"] == stage)["body"]


def alternate_signal_wait(structure):
    """Every block: signals and waits alternate, starting with a signal (no wait before its signal, no
    double signal)."""
    pending = False
    for n in structure:
        if n["kind"] == "for":
            assert alternate_signal_wait(n["body"]) is True
        t = n["text"]
        if t == "s_barrier_signal":
            assert not pending, "double signal"
            pending = True
        elif t == "s_barrier_wait":
            assert pending, "wait before its signal"
            pending = False
    assert not pending, "signal without its wait in the same block"
    return True


# --- docs/sync-cases.md case 14: LDS barriers ---------------------------------------------------------------------

@pytest.mark.parametrize("target", ["gfx90a", "gfx942"])
def test_lds_write_then_read_exactly_one_barrier(target):
    l = lab([("write", "X", 0, "copy"), ("read", "X", 0, "mma")], target=target)
    assert ops(l.structure) == ["write X[0]", "block_sync", "read X[0]"]


def test_different_buffers_need_no_barrier():
    l = lab([("write", "X", 0, "a"), ("read", "X", 0, "a"), ("write", "Y", 0, "b"), ("read", "Y", 0, "b")])
    assert l.count_syncs("block_sync") == 0


def test_existing_barrier_is_reused():
    l = lab([("write", "X", 0, "a"), ("barrier",), ("read", "X", 0, "b")])
    assert ops(l.structure) == ["write X[0]", "block_sync", "read X[0]"]


def test_overlapping_intervals_one_barrier():
    # hazard X spans statements (1, 3), hazard Y (2, 4): one barrier between 2 and 3 serves both
    l = lab([("write", "X", 0, "a"), ("write", "Y", 0, "a"), ("read", "X", 0, "b"), ("read", "Y", 0, "b")])
    assert ops(l.structure) == ["write X[0]", "write Y[0]", "block_sync", "read X[0]", "read Y[0]"]


def test_loop_bodies_walked_twice_for_loop_carried_hazards():
    double = lab([("loop", "i", 0, "N", "serial", [("write", "X", "i % 2", "copy"), ("read", "X", "i % 2", "mma")])], 2)
    assert ops(loop_body(double, "serial")) == ["write X[i % 2] (iter i)", "block_sync", "read X[i % 2] (iter i)"]
    single = lab([("loop", "i", 0, "N", "serial", [("write", "X", 0, "copy"), ("read", "X", 0, "mma")])], 1)
    assert ops(loop_body(single, "serial")) == ["write X[0] (iter i)", "block_sync", "read X[0] (iter i)",
                                                 "block_sync"]


# --- docs/sync-cases.md case 15: LDS DMA counted by vmcnt -----------------------------------------------------------

def test_two_loads_used_in_issue_order_wait_one_then_zero():
    l = lab([("write", "X", 0, "t", True), ("write", "Y", 0, "t", True), ("read", "X", 0, "t"), ("read", "Y", 0, "t")])
    assert ops(l.structure) == ["write X[0]", "write Y[0]", "s_waitcnt vmcnt(1)", "read X[0]", "s_waitcnt vmcnt(0)",
                                "read Y[0]"]


def test_newest_load_used_first_waits_for_both():
    l = lab([("write", "X", 0, "t", True), ("write", "Y", 0, "t", True), ("read", "Y", 0, "t"), ("read", "X", 0, "t")])
    assert ops(l.structure) == ["write X[0]", "write Y[0]", "s_waitcnt vmcnt(0)", "read Y[0]", "read X[0]"]


def test_control_flow_merge_takes_the_minimum():
    one_path = lab([("write", "X", 0, "t", True), ("if", "flag", [("write", "Y", 0, "t", True)]), ("read", "X", 0, "t")])
    assert ops(one_path.structure) == ["write X[0]", "if (flag)", "s_waitcnt vmcnt(0)", "read X[0]"]
    both = lab([("write", "X", 0, "t", True), ("if", "flag", [("write", "Y", 0, "t", True)], [("write", "Z", 0, "t", True)]),
                ("read", "X", 0, "t")])
    assert ops(both.structure) == ["write X[0]", "if (flag)", "s_waitcnt vmcnt(1)", "read X[0]"]


def pipeline(stages, mapping_read="t"):
    s, p = stages, stages - 1
    return [("loop", "i", 0, p, "prologue", [("write", "X", f"i % {s}", "t", True)]),
            ("loop", "i", 0, f"N - {p}", "main", [("write", "X", f"(i + {p}) % {s}", "t", True),
                                                  ("read", "X", f"i % {s}", mapping_read)]),
            ("loop", "i", f"N - {p}", "N", "epilogue", [("read", "X", f"i % {s}", mapping_read)])]


@pytest.mark.parametrize("stages,outstanding", [(2, 1), (3, 2), (4, 3)])
def test_circular_buffer_keeps_stages_minus_one_loads_in_flight(stages, outstanding):
    l = lab(pipeline(stages), stages)
    main = ops(loop_body(l, "main"))
    assert main == [f"write X[(i + {stages - 1}) % {stages}] (iter i)", f"s_waitcnt vmcnt({outstanding})",
                    f"read X[i % {stages}] (iter i)"]
    assert ops(loop_body(l, "epilogue"))[0] == "s_waitcnt vmcnt(0)"


def test_wait_count_is_capped_at_the_counter_width():
    prog = [("write", "X", 0, "t", True), ("loop", "j", 0, 70, "serial", [("write", "Y", "j", "t", True)]),
            ("read", "X", 0, "t")]
    l = lab(prog, 70)  # 70 newer LDS DMA ops than X's: the 6-bit counter holds 63
    assert ops(l.structure)[-2:] == ["s_waitcnt vmcnt(63)", "read X[0]"]
    assert "capped at the counter's maximum" in l.explain()


def test_no_back_off_barrier_drains_before_the_barrier():
    # the barrier must follow the plain write of Z, so the DMA of Y is issued before it
    prog = [("write", "X", 0, "copy", True), ("write", "Y", 0, "t", True), ("write", "Z", 0, "copy"),
            ("read", "X", 0, "mma"), ("read", "Z", 0, "mma")]
    cdna = lab(prog, target="gfx90a")  # BackOffBarrier: Y may stay in flight across s_barrier
    assert ops(cdna.structure) == ["write X[0]", "write Y[0]", "write Z[0]", "s_waitcnt vmcnt(1)", "block_sync",
                                   "read X[0]", "read Z[0]"]
    gfx12 = lab(prog, target="gfx1200")  # none: counters drain, then the split barrier
    assert ops(gfx12.structure) == ["write X[0]", "write Y[0]", "write Z[0]", "s_waitcnt vmcnt(0)", "s_barrier_signal",
                                    "s_barrier_wait", "read X[0]", "read Z[0]"]
    assert "no BackOffBarrier" in gfx12.explain()


def test_cuda_lab_is_unchanged_by_the_target_argument():
    prog = [("write", "X", 0, "t", True), ("commit",), ("write", "Y", 0, "t", True), ("commit",),
            ("read", "X", 0, "t"), ("read", "Y", 0, "t")]
    assert ops(_C.sync_lab(prog, 1).structure) == ops(_C.sync_lab(prog, 1, target="sm_80").structure) == [
        "write X[0]", "cp.async.commit_group", "write Y[0]", "cp.async.commit_group", "cp.async.wait_group(1)",
        "read X[0]", "cp.async.wait_group(0)", "read Y[0]"]


# --- docs/sync-cases.md case 16: GFX12 split barriers ---------------------------------------------------------------

def test_split_barrier_signal_after_producer_wait_before_consumer():
    prog = [("write", "Y", 0, "b"), ("write", "X", 0, "a"), ("read", "Y", 0, "b"), ("read", "X", 0, "b")]
    l = lab(prog, target="gfx1200")
    assert ops(l.structure) == ["write Y[0]", "write X[0]", "s_barrier_signal", "read Y[0]", "s_barrier_wait",
                                "read X[0]"]
    assert alternate_signal_wait(l.structure)
    cdna = lab(prog, target="gfx90a")
    assert ops(cdna.structure) == ["write Y[0]", "write X[0]", "block_sync", "read Y[0]", "read X[0]"]


def test_split_barriers_never_wait_before_signal_nor_signal_twice():
    progs = [
        [("write", "X", 0, "a"), ("write", "Y", 0, "a"), ("read", "X", 0, "b"), ("read", "Y", 0, "b")],
        [("write", "X", 0, "a"), ("read", "X", 0, "b"), ("write", "Y", 0, "a"), ("read", "Y", 0, "b")],
        [("loop", "i", 0, "N", "serial", [("write", "X", 0, "copy"), ("read", "X", 0, "mma")])],
        [("loop", "i", 0, "N", "serial", [("write", "X", "i % 2", "copy"), ("write", "W", 0, "w"),
                                          ("read", "W", 0, "w"), ("read", "X", "i % 2", "mma")])],
    ]
    for prog in progs:
        l = lab(prog, 2, target="gfx1200")
        assert alternate_signal_wait(l.structure), l.kernel_ir
        assert l.count_syncs("block_sync") == 0


def test_split_barrier_in_a_loop_moves_past_unrelated_work():
    prog = [("write", "W", 0, "w"), ("loop", "i", 0, "N", "serial",
                                     [("write", "X", "i % 2", "copy"), ("read", "W", 0, "w"), ("read", "X", "i % 2", "mma")])]
    l = lab(prog, 2, target="gfx1200")
    assert ops(loop_body(l, "serial")) == ["write X[i % 2] (iter i)", "s_barrier_signal", "read W[0] (iter i)",
                                           "s_barrier_wait", "read X[i % 2] (iter i)"]


# --- docs/sync-cases.md case 17 on the AMD lab plans: clean, and every mutant flagged ------------------------------

LAB = {
    "gfx90a lds write->read": ([("write", "X", 0, "a"), ("read", "X", 0, "b")], 1, "gfx90a", None),
    "gfx90a double buffer": ([("loop", "i", 0, "N", "serial", [("write", "X", "i % 2", "copy"),
                                                                 ("read", "X", "i % 2", "mma")])], 2, "gfx90a", None),
    "gfx90a dma pipeline s=3": (pipeline(3, "mma"), 3, "gfx90a", None),
    "gfx942 dma pipeline s=2": (pipeline(2, "mma"), 2, "gfx942", None),
    "gfx90a dma same-thread s=3": (pipeline(3), 3, "gfx90a", None),
    "gfx90a dma merge": ([("write", "X", 0, "t", True), ("if", "flag", [("write", "Y", 0, "t", True)]),
                          ("read", "X", 0, "t")], 1, "gfx90a", [{"flag": 0}, {"flag": 1}]),
    "gfx1200 split": ([("write", "Y", 0, "b"), ("write", "X", 0, "a"), ("read", "Y", 0, "b"), ("read", "X", 0, "b")],
                      1, "gfx1200", None),
    "gfx1200 split loop": ([("loop", "i", 0, "N", "serial", [("write", "X", "i % 2", "copy"),
                                                              ("read", "X", "i % 2", "mma")])], 2, "gfx1200", None),
    "gfx1200 split ring s=3": ([("write", "X", 0, "copy"), ("loop", "i", 0, "N", "serial",
                                [("write", "X", "(i + 1) % 3", "copy"), ("read", "X", "i % 3", "mma")])], 3, "gfx1200",
                               None),
    "gfx1200 drain": ([("write", "X", 0, "copy", True), ("write", "Y", 0, "t", True), ("write", "Z", 0, "copy"),
                       ("read", "X", 0, "mma"), ("read", "Z", 0, "mma")], 1, "gfx1200", None),
    "gfx90a no drain": ([("write", "X", 0, "copy", True), ("write", "Y", 0, "t", True), ("write", "Z", 0, "copy"),
                         ("read", "X", 0, "mma"), ("read", "Z", 0, "mma"), ("read", "Y", 0, "t")], 1, "gfx90a", None),
}


def test_split_barrier_halves_slide_as_far_as_the_intervals_allow():
    # 3 stages, prefetch 1: the planner's barrier opens the loop body. The copy into the next stage
    # overwrites what was read two iterations back, which the previous iteration's barrier already
    # ordered, so this barrier's wait moves below the copy and stops before the read it publishes
    prog = [("loop", "i", 0, "N", "serial", [("write", "X", "(i + 1) % 3", "copy"), ("read", "X", "i % 3", "mma")])]
    l = lab([("write", "X", 0, "copy")] + prog, 3, target="gfx1200")
    assert ops(loop_body(l, "serial")) == ["s_barrier_signal", "write X[(i + 1) % 3] (iter i)", "s_barrier_wait",
                                           "read X[i % 3] (iter i)"], l.kernel_ir
    split = lab(LAB["gfx1200 split"][0], 1, target="gfx1200")
    slides = sorted(m.description.split()[0] for m in verify.mutants(split) if m.kind == "slide_barrier")
    assert slides == ["hoist", "sink"]  # and test_amd_lab_plans_simulate_clean_and_kill_every_mutant kills both


@pytest.mark.parametrize("name", list(LAB))
def test_amd_lab_plans_simulate_clean_and_kill_every_mutant(name):
    prog, stages, target, extra = LAB[name]
    l = lab(prog, stages, target)
    trips = [dict(N=n, **e) for n in (stages, stages + 1, 3 * stages + 1) for e in (extra or [{}])]
    for t in trips:
        for sched, seed in (("adversarial", 0), ("random", 1)):
            r = verify.simulate(l, None, sched, seed, scalars=t)
            assert r.ok, f"{name} {t}:\n{r.report()}\n{l.kernel_ir}"
    report = verify.kill_rate(l, [None] * len(trips), scalars=trips)
    assert report.total > 0 and not report.survivors, str(report) + "\n" + l.kernel_ir
