"""explain() names warp entanglement (src/heddle/sync/explain_entangle.cpp): a cp.async commit in control flow
that diverges within a warp costs throughput (the warp's async-copy batches are one warp-shared sequence;
diverged threads commit one batch each, so later waits over-wait and the paths serialise -- CUDA C++
Programming Guide, "Warp Entanglement"). No heddle schedule puts a commit under a warp-divergent branch
(commits are unconditional or under uniform stage guards), so the positive cases are hand-built kernel IR
(heddle._C.sync_lab, plan=False); the real cp.async pipelines must get no note."""
import pytest

from heddle import _C
from support.matmul_defs import matmul_fusion, schedule


def lab(prog):
    return _C.sync_lab(prog, 2, plan=False, target="sm_80")


COPY = [("write", "X", "i % 2", "copy", True), ("commit",)]


def loop(body):
    return [("loop", "i", 0, "N", "serial", body + [("wait", 0), ("barrier",), ("read", "X", "i % 2", "mma"),
                                                     ("barrier",)])]


@pytest.mark.parametrize("cond,warp", [("lane < 7", 0), ("tid < 48", 1), ("tid % 2 == 0", 0)])
def test_a_commit_under_a_warp_divergent_branch_is_named(cond, warp):
    text = lab(loop([("if", cond, COPY)])).explain()
    assert text.count("[entanglement") == 1, text
    note = text[text.index("[entanglement"):]
    assert "cp.async.commit_group" in note and f"'if ({cond})'" in note and f"warp {warp}'s lanes" in note, note
    assert note.index("cost:") < note.index("change:")  # what it costs, then what to change
    assert "wait_group waits for more copies than planned" in note
    assert "move the commit out of the branch" in note


def test_the_else_side_and_a_thread_dependent_loop_bound_are_named_too():
    text = lab(loop([("if", "lane < 16", [("write", "X", "i % 2", "copy", True)], COPY)])).explain()
    assert "the else of 'if (lane < 16)'" in text, text
    bound = lab([("loop", "j", 0, "lane % 3", "serial", [("commit",)])]).explain()
    assert "the loop bound 'j < lane % 3'" in bound, bound


@pytest.mark.parametrize("cond", ["warp < 2", "tid < 64", "warp == 1 && f", "f"])
def test_warp_uniform_control_flow_gets_no_note(cond):
    # a uniform branch around one commit, a divergent one around another: only the second is named
    text = lab(loop([("if", cond, COPY), ("if", "lane < 7", COPY)])).explain()
    assert text.count("[entanglement") == 1 and "'if (lane < 7)'" in text and f"'if ({cond})'" not in text, text
    alone = lab(loop([("if", cond, COPY)])).explain()
    assert "entanglement: all 1 cp.async.commit_group op(s) sit in warp-converged control flow" in alone, alone


def test_commit_outside_the_branch_gets_no_note():
    # the change the note proposes: predicate the copy, commit with the whole warp
    text = lab(loop([("if", "lane < 7", [("write", "X", "i % 2", "copy", True)]), ("commit",)])).explain()
    assert "[entanglement" not in text and "all 1 cp.async.commit_group op(s) sit in warp-converged" in text, text


@pytest.mark.parametrize("stages,prefetch", [(2, 1), (3, -1), (4, 2)])
def test_the_cp_async_matmul_pipelines_get_no_note(stages, prefetch):
    fd, a, b = matmul_fusion(m="M", n=200, k="K")
    schedule(fd, a, b, bm=64, bn=64, bk=32, wm=2, wn=2, stages=stages, prefetch=prefetch, kind="cp_async")
    l = fd.lower("sm_80")
    commits = l.kernel_ir.count("cp.async.commit_group")
    assert commits >= 2
    text = l.explain()
    assert "[entanglement" not in text, text
    assert f"warp entanglement: all {commits} cp.async.commit_group op(s) sit in warp-converged control flow" in text
