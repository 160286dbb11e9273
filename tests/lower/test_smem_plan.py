"""Shared-memory planner: stack allocation with alignment, aliasing of buffers whose lifetimes do not
overlap, the WAR barrier a reuse needs (and only when it needs one), and the over-limit error."""
import pytest

import heddle
from heddle import _C


def plan(prog, stages=1):
    return _C.sync_lab(prog, stages, True)


def slots(l):
    return {s["buffer"]: s for s in l.smem_plan}


def texts(l):
    return [n["text"] for n in l.structure]


def test_live_buffers_are_stacked_with_alignment():
    l = plan([("buffer", "X", 100), ("buffer", "Y", 256, 128), ("write", "X", 0, "t"), ("write", "Y", 0, "t"),
              ("read", "X", 0, "t"), ("read", "Y", 0, "t")])
    s = slots(l)
    assert s["X"]["offset"] == 0 and s["Y"]["offset"] == 128  # 100 B rounded up to Y's 128 B alignment
    assert l.smem_bytes == 128 + 256 and s["Y"]["alias_of"] == ""


def test_dead_buffer_bytes_are_reused_with_a_war_barrier():
    l = plan([("buffer", "X", 1024), ("buffer", "Y", 1024), ("write", "X", 0, "copy"), ("read", "X", 0, "mma"),
              ("write", "Y", 0, "copy"), ("read", "Y", 0, "mma")])
    s = slots(l)
    assert s["Y"]["alias_of"] == "X" and s["Y"]["offset"] == s["X"]["offset"]
    assert l.smem_bytes == 1024
    # RAW X, WAR X->Y (the reuse), RAW Y: the reuse costs exactly one barrier between read X and write Y
    assert texts(l) == ["write X[0]", "block_sync", "read X[0]", "block_sync", "write Y[0]", "block_sync",
                        "read Y[0]"]
    assert "WAR X" in l.explain()


def test_reuse_by_the_same_threads_needs_no_barrier():
    l = plan([("buffer", "X", 1024), ("buffer", "Y", 1024), ("write", "X", 0, "t"), ("read", "X", 0, "t"),
              ("write", "Y", 0, "t"), ("read", "Y", 0, "t")])
    assert slots(l)["Y"]["alias_of"] == "X"
    assert l.count_syncs("block_sync") == 0


def test_without_aliasing_there_is_no_reuse_barrier():
    l = _C.sync_lab([("buffer", "X", 1024), ("buffer", "Y", 1024), ("write", "X", 0, "copy"),
                     ("read", "X", 0, "mma"), ("write", "Y", 0, "copy"), ("read", "Y", 0, "mma")], 1, False)
    assert texts(l) == ["write X[0]", "block_sync", "read X[0]", "write Y[0]", "block_sync", "read Y[0]"]


def test_over_the_limit_lists_buffers():
    with pytest.raises(heddle.ScheduleError, match=r"needs 200000 bytes but sm_80 allows 166912[\s\S]*X: 100000 bytes"):
        plan([("buffer", "X", 100000), ("buffer", "Y", 100000), ("write", "X", 0, "t"), ("write", "Y", 0, "t"),
              ("read", "X", 0, "t"), ("read", "Y", 0, "t")])


def test_matmul_over_limit_suggests_fewer_stages():
    from support.matmul_defs import matmul_fusion, schedule
    fd, a, b = matmul_fusion(n=512, k=512)
    # 128x256x64 on 2x4 warps: the accumulators fit the registers (64x64 per warp), 5 stages do not fit
    schedule(fd, a, b, bm=128, bn=256, bk=64, wm=2, wn=4, stages=5)
    with pytest.raises(heddle.ScheduleError, match=r"sA: 81920 bytes[\s\S]*sB: 163840 bytes[\s\S]*"
                       r"use circular_buffer\(stages=3\) \(147456 bytes; the largest stage count that fits\)"):
        fd.lower("sm_80")
