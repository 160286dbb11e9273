"""Placement tests of the sync planner on hand-built kernels (heddle._C.sync_lab), in the style of
Wave's barrier tests: minimality (docs/sync-cases.md case 7), interval stabbing, barrier reuse, async waits."""
from heddle import _C


def body_of(lowered, loop=0):
    loops = [n for n in lowered.structure if n["kind"] == "for"]
    return loops[loop]["body"]


def ops(nodes):
    return [n["text"] for n in nodes]


def test_same_thread_mapping_needs_no_barrier():
    l = _C.sync_lab([("loop", "i", 0, "N", "serial", [("write", "X", "i % 2", "t"), ("read", "X", "i % 2", "t")])], 2)
    assert l.count_syncs("block_sync") == 0


def test_different_mappings_double_buffer_one_loop_carried_barrier():
    l = _C.sync_lab([("loop", "i", 0, "N", "serial",
                      [("write", "X", "i % 2", "copy"), ("read", "X", "i % 2", "mma")])], 2)
    assert ops(body_of(l)) == ["write X[i % 2] (iter i)", "block_sync", "read X[i % 2] (iter i)"]


def test_single_buffer_needs_raw_and_war_barriers():
    l = _C.sync_lab([("loop", "i", 0, "N", "serial", [("write", "X", 0, "copy"), ("read", "X", 0, "mma")])], 1)
    assert ops(body_of(l)) == ["write X[0] (iter i)", "block_sync", "read X[0] (iter i)", "block_sync"]


def test_different_buffers_no_barrier_between():
    l = _C.sync_lab([("write", "X", 0, "a"), ("read", "X", 0, "a"), ("write", "Y", 0, "b"), ("read", "Y", 0, "b")], 1)
    assert l.count_syncs("block_sync") == 0


def test_overlapping_intervals_share_one_barrier():
    # hazard X: (1, 3), hazard Y: (2, 4) -> one barrier between 2 and 3
    l = _C.sync_lab([("write", "X", 0, "a"), ("write", "Y", 0, "a"), ("read", "X", 0, "b"), ("read", "Y", 0, "b")], 1)
    assert ops(l.structure) == ["write X[0]", "write Y[0]", "block_sync", "read X[0]", "read Y[0]"]


def test_disjoint_intervals_need_two_barriers():
    l = _C.sync_lab([("write", "X", 0, "a"), ("read", "X", 0, "b"), ("write", "Y", 0, "a"), ("read", "Y", 0, "b")], 1)
    assert ops(l.structure) == ["write X[0]", "block_sync", "read X[0]", "write Y[0]", "block_sync", "read Y[0]"]


def test_existing_barrier_is_reused_not_duplicated():
    l = _C.sync_lab([("write", "X", 0, "a"), ("barrier",), ("read", "X", 0, "b")], 1)
    assert l.count_syncs("block_sync") == 1


def test_async_same_thread_gets_a_wait_but_no_barrier():
    l = _C.sync_lab([("loop", "i", 0, "N", "serial",
                      [("write", "X", "i % 2", "t", True), ("commit",), ("read", "X", "i % 2", "t")])], 2)
    assert ops(body_of(l)) == ["write X[i % 2] (iter i)", "cp.async.commit_group", "cp.async.wait_group(0)",
                               "read X[i % 2] (iter i)"]


def test_async_wait_counts_newer_groups():
    # two loads committed separately, used in reverse order: the first read may leave 1 group in flight
    l = _C.sync_lab([("write", "X", 0, "t", True), ("commit",), ("write", "Y", 0, "t", True), ("commit",),
                     ("read", "Y", 0, "t"), ("read", "X", 0, "t")], 1)
    assert ops(l.structure) == ["write X[0]", "cp.async.commit_group", "write Y[0]", "cp.async.commit_group",
                                "cp.async.wait_group(0)", "read Y[0]", "read X[0]"]
    l = _C.sync_lab([("write", "X", 0, "t", True), ("commit",), ("write", "Y", 0, "t", True), ("commit",),
                     ("read", "X", 0, "t"), ("read", "Y", 0, "t")], 1)
    assert ops(l.structure) == ["write X[0]", "cp.async.commit_group", "write Y[0]", "cp.async.commit_group",
                                "cp.async.wait_group(1)", "read X[0]", "cp.async.wait_group(0)", "read Y[0]"]


def test_every_placed_sync_explains_itself():
    l = _C.sync_lab([("loop", "i", 0, "N", "serial",
                      [("write", "X", "i % 2", "copy"), ("read", "X", "i % 2", "mma")])], 2)
    text = l.explain()
    assert "RAW X: write X[i % 2] (iter i)  ->  read X[i % 2] (iter i)" in text
    assert "WAR X" in text and "block barrier" in text
