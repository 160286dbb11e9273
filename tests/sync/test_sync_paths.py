"""The sync planner on every path (issue: path-sensitive counts, placement at any size, uniformity).

Each plan is checked twice: its shape (the wait arguments and barrier places the planner must pick)
and, in the kernel-IR simulator, its behaviour for every value of the branch conditions."""
import itertools

import pytest

from heddle import _C, verify


def ops(nodes):
    out = []
    for n in nodes:
        out.append(n["text"])
        for key in ("body", "then", "else"):
            if n.get(key):
                out += ops(n[key])
    return out


def clean_everywhere(lab, flags=(), trips=(1,)):
    """The plan simulates clean for every trip count and every value of the flags."""
    for n in trips:
        for vals in itertools.product((0, 1), repeat=len(flags)):
            scalars = {"N": n, **dict(zip(flags, vals))}
            for sched, seed in (("adversarial", 0), ("random", 3)):
                r = verify.simulate(lab, None, sched, seed, scalars=scalars)
                assert r.ok, f"{scalars} {sched}:\n{r.report()}\n{lab.kernel_ir}"


def two_branches(target):
    """X copied first; then `if (f1) copy Y` and `if (f2) {} else copy Z`; then X is read. The path
    f1=0, f2=1 has no newer copy, so the read needs every copy retired."""
    cp = target.startswith("sm_")
    commit = [("commit",)] if cp else []
    return ([("write", "X", 0, "t", True)] + commit +
            [("if", "f1", [("write", "Y", 0, "t", True)] + commit),
             ("if", "f2", [], [("write", "Z", 0, "t", True)] + commit),
             ("read", "X", 0, "t")])


@pytest.mark.parametrize("target", ["sm_80", "gfx90a", "gfx1200"])
def test_two_independent_branches_wait_for_the_path_with_no_newer_copy(target):
    lab = _C.sync_lab(two_branches(target), 1, target=target)
    waits = [o for o in ops(lab.structure) if "wait" in o]
    assert waits == (["cp.async.wait_group(0)"] if target == "sm_80" else ["s_waitcnt vmcnt(0)"]), lab.kernel_ir
    assert "4 path(s) per trip count (2 uniform condition(s) enumerated" in lab.sync_summary
    clean_everywhere(lab, ("f1", "f2"))
    # the old two-trace answer (every branch taken / none taken) is caught on the path f1=0, f2=1
    loose = [m for m in verify.mutants(lab) if m.kind == "loosen_wait"]
    assert loose
    r = verify.simulate(loose[0].kernel(), None, "adversarial", 0, scalars={"N": 1, "f1": 0, "f2": 1})
    assert not r.ok


def test_both_branches_copying_keep_one_group_in_flight():
    # every path has a newer copy: the wait may leave one group in flight
    prog = [("write", "X", 0, "t", True), ("commit",),
            ("if", "f1", [("write", "Y", 0, "t", True), ("commit",)], [("write", "Z", 0, "t", True), ("commit",)]),
            ("read", "X", 0, "t")]
    lab = _C.sync_lab(prog, 1)
    assert "cp.async.wait_group(1)" in ops(lab.structure)
    clean_everywhere(lab, ("f1",))


def test_nested_branches_inside_a_loop():
    prog = [("loop", "i", 0, "N", "serial",
             [("write", "X", "i % 2", "copy", True), ("commit",),
              ("if", "f1", [("if", "f2", [("write", "Y", 0, "t", True), ("commit",)])]),
              ("read", "X", "i % 2", "mma")])]
    lab = _C.sync_lab(prog, 2, min_trips=1)
    assert "cp.async.wait_group(0)" in ops(lab.structure)
    clean_everywhere(lab, ("f1", "f2"), trips=(1, 2, 3, 5))


def test_loop_variant_condition_walks_both_sides_and_stays_sound():
    # (i + f) % 2 changes per iteration: walked as alternatives, counts take the side with fewer commits
    prog = [("loop", "i", 0, "N", "serial",
             [("write", "X", "i % 2", "copy", True), ("commit",),
              ("if", "(i + f) % 2", [("write", "Y", 0, "t", True), ("commit",)]),
              ("read", "X", "i % 2", "mma")])]
    lab = _C.sync_lab(prog, 2, min_trips=1)
    assert "1 branch(es) walked as alternatives" in lab.sync_summary
    clean_everywhere(lab, ("f",), trips=(1, 2, 3, 5))


def test_barrier_inside_a_uniform_branch_counts_only_where_taken():
    # the hazard exists only when f runs the copy; a barrier inside the branch serves it
    prog = [("if", "f", [("write", "X", 0, "a"), ("read", "X", 0, "b")]), ("write", "Y", 0, "a"), ("read", "Y", 0, "b")]
    lab = _C.sync_lab(prog, 1)
    assert lab.count_syncs("block_sync") == 2
    clean_everywhere(lab, ("f",))


# --- uniformity ----------------------------------------------------------------------------------

def test_thread_dependent_branch_hazard_is_ordered_after_the_branch():
    prog = [("write", "X", 0, "a"), ("if", "tid < 64", [("write", "X", 0, "a")]), ("read", "X", 0, "b")]
    lab = _C.sync_lab(prog, 1)
    s = lab.structure
    branch = next(n for n in s if n["kind"] == "if")
    assert not any("block_sync" in o for o in ops(branch.get("then", []))), lab.kernel_ir
    assert [n["text"] for n in s][-2:] == ["block_sync", "read X[0]"], lab.kernel_ir
    clean_everywhere(lab)


def test_thread_dependent_branch_with_the_whole_hazard_inside_is_refused():
    prog = [("if", "tid < 64", [("write", "X", 0, "a"), ("read", "X", 0, "b")])]
    with pytest.raises(_C.HeddleError, match=r"only be ordered inside if \(tid < 64\).*not be reached by every thread"):
        _C.sync_lab(prog, 1)


def test_loop_bounds_from_the_thread_are_refused():
    prog = [("loop", "i", 0, "warp + 1", "serial", [("write", "X", 0, "a"), ("read", "X", 0, "b")])]
    with pytest.raises(_C.HeddleError, match=r"for i in \[0, warp \+ 1\) depend on the thread"):
        _C.sync_lab(prog, 1)


def test_same_thread_waits_may_sit_in_thread_dependent_branches():
    prog = [("if", "tid < 32", [("write", "X", 0, "t", True), ("commit",), ("read", "X", 0, "t")])]
    lab = _C.sync_lab(prog, 1)
    assert ops(lab.structure)[1:] == ["write X[0]", "cp.async.commit_group", "cp.async.wait_group(0)", "read X[0]"]
    clean_everywhere(lab)


@pytest.mark.parametrize("cond,where", [("tid < 64", "if (tid < 64)"), ("warp < 2", "if (warp < 2)"),
                                        ("lane == 0", "if (lane == 0)")])
def test_a_barrier_written_inside_a_divergent_branch_is_refused(cond, where):
    prog = [("write", "X", 0, "a"), ("if", cond, [("barrier",)]), ("read", "X", 0, "b")]
    with pytest.raises(_C.HeddleError, match=r"check_uniformity: 'block_sync' must be executed by the whole block.*"
                                             + where.replace("(", r"\(").replace(")", r"\)")):
        _C.sync_lab(prog, 1)


def test_a_condition_reaching_the_thread_through_lets_is_checked():
    """check_uniformity expands the kernel's lets: a barrier under a condition three lets away from tid is
    refused, one under a ten-let chain from a uniform scalar is accepted (its expansion is skipped: no thread)."""
    chain = [("let", "r", "tid"), ("let", "s", "r * 2"), ("let", "u", "s + 1")]
    prog = chain + [("write", "X", 0, "a"), ("if", "u < 64", [("barrier",)]), ("read", "X", 0, "b")]
    with pytest.raises(_C.HeddleError, match=r"must be executed by the whole block.*inside if \(u < 64\)"):
        _C.sync_lab(prog, 1)
    uniform = [("let", "c0", "f + 1")] + [("let", f"c{i}", f"c{i - 1} * 2 + c{i - 1}") for i in range(1, 10)]
    prog = uniform + [("write", "X", 0, "a"), ("if", "3 < c9", [("barrier",)]), ("read", "X", 0, "b")]
    assert _C.sync_lab(prog, 1).count_syncs("block_sync") >= 1
    deep = uniform + [("let", "c10", "c9 + tid")]  # the thread at the end of the chain
    prog = deep + [("write", "X", 0, "a"), ("if", "3 < c10", [("barrier",)]), ("read", "X", 0, "b")]
    with pytest.raises(_C.HeddleError, match=r"inside if \(3 < c10\)"):
        _C.sync_lab(prog, 1)


def test_a_lane_dependent_condition_is_not_sampled_per_warp():
    """A condition naming the warp alone is evaluated once per warp; one reaching the lane (directly or through
    lets) is evaluated per thread: lane < 16 spelled through a let is still refused around a block barrier."""
    for lets, cond in (([("let", "r", "warp * 32 + lane")], "r % 32 < 16"), ([("let", "q", "lane")], "q < 16")):
        prog = lets + [("write", "X", 0, "a"), ("if", cond, [("barrier",)]), ("read", "X", 0, "b")]
        with pytest.raises(_C.HeddleError, match="must be executed by the whole block"):
            _C.sync_lab(prog, 1)
    # warp-only: warp < 4 holds for the whole 128-thread block, warp < 2 splits it
    ok = [("write", "X", 0, "a"), ("if", "warp < 4", [("barrier",)]), ("read", "X", 0, "b")]
    assert _C.sync_lab(ok, 1).count_syncs("block_sync") >= 1


def test_warps_are_the_target_s_wavefronts():
    # an AMD s_barrier needs wave-uniform control flow (docs/backends.md, "Barrier objects"): 128 threads
    # on gfx90a are two 64-wide wavefronts, so tid < 64 is one whole wavefront and tid < 32 splits one;
    # CUDA's bar.sync 0 needs the whole block
    prog = lambda cond: [("write", "X", 0, "a"), ("if", cond, [("barrier",)]), ("read", "X", 0, "b")]
    assert _C.sync_lab(prog("warp < 2"), 1, target="gfx90a").count_syncs("block_sync") >= 1
    assert _C.sync_lab(prog("tid < 64"), 1, target="gfx90a").count_syncs("block_sync") >= 1
    with pytest.raises(_C.HeddleError, match=r"executed by a warp together.*inside if \(tid < 32\)"):
        _C.sync_lab(prog("tid < 32"), 1, target="gfx90a")
    with pytest.raises(_C.HeddleError, match=r"inside if \(warp < 2\)"):
        _C.sync_lab(prog("warp < 2"), 1, target="sm_80")


def test_a_barrier_inside_a_block_uniform_branch_is_accepted():
    # tid < 128 holds for every thread of the 128-thread lab block; f is a uniform scalar
    prog = [("write", "X", 0, "a"), ("if", "tid < 128 && f", [("barrier",)]), ("read", "X", 0, "b")]
    lab = _C.sync_lab(prog, 1)
    assert lab.count_syncs("block_sync") >= 1


def test_uncommitted_copy_touched_again_is_refused_with_the_fix():
    prog = [("write", "X", 0, "t", True), ("read", "X", 0, "t"), ("commit",)]
    with pytest.raises(_C.HeddleError, match="not yet committed.*commit the copy's group before"):
        _C.sync_lab(prog, 1)


# --- placement at any size ----------------------------------------------------------------------

def twelve_points():
    prog = []
    for k in range(12):
        prog += [("write", f"B{k}", 0, "a"), ("read", f"B{k}", 0, "b")]
    return prog


def test_twelve_independent_barrier_points_lower_proven_minimal():
    lab = _C.sync_lab(twelve_points(), 1)
    assert lab.count_syncs("block_sync") == 12
    assert "placement proven minimal" in lab.sync_summary
    assert "placement proven minimal" in lab.explain()
    clean_everywhere(lab)


def overlapping(n):
    """n buffers written by a, read by b in a rotated order: many overlapping intervals."""
    prog = [("write", f"B{k}", 0, "a") for k in range(n)]
    for k in range(n):
        prog += [("read", f"B{(3 * k) % n}", 0, "b"), ("write", f"B{(3 * k) % n}", 0, "c")]
    prog += [("read", f"B{k}", 0, "a") for k in range(n)]
    return prog


def test_budget_exhausted_gives_a_valid_plan_with_its_lower_bound():
    lab = _C.sync_lab(overlapping(14), 1, search_budget=5)
    summary = lab.sync_summary
    assert "placement valid, not proven minimal" in summary and "lower bound" in summary, summary
    execs = int(summary.split("not proven minimal: ")[1].split(" barrier")[0])
    bound = int(summary.split("lower bound ")[1].split(" ")[0])
    assert 1 <= bound <= execs
    clean_everywhere(lab)
    exact = _C.sync_lab(overlapping(14), 1)
    assert "placement proven minimal" in exact.sync_summary
    assert exact.count_syncs("block_sync") <= lab.count_syncs("block_sync")
    clean_everywhere(exact)
