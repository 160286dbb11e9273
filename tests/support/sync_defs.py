"""sync_lab programs shared by the sync tests (tests/sync/test_barrier_objects.py, test_sync_origins.py)."""


def roles(stages, cond="warp < 2"):
    """The same split with no syncs: named_barrier_roles places the protocol."""
    return [("if", cond, [("loop", "i", 0, "N", "serial", [("write", "X", f"i % {stages}", "copy@0:64")])],
             [("loop", "i", 0, "N", "serial", [("read", "X", f"i % {stages}", "mma@64:128")])])]
