"""The sm_80 cp.async plan at any ring depth (issue 31 item 3): the hazard intervals grow with the square of
the stage count (the walk covers trip counts 1..s+1 and 3s+1), but the placement the planner proves
minimal is the same three wait + barrier pairs at every depth, with the steady-state wait keeping s-2 groups
in flight. The barrier search runs over the distinct candidate sets of those intervals (sync/planner.cpp,
chooseBarriers); these assertions are on the plan it returns, never on its time
(benchmarks/test_compile_bench.py::test_lowering_vs_stages measures that)."""
import re

import pytest

from support.matmul_defs import matmul_fusion, schedule


def _lowered(stages):
    fd, a, b = matmul_fusion(n=200, k=32 * 40, dtype="bf16", layout="NN", epilogue="bias_gelu")
    schedule(fd, a, b, bm=64, bn=64, bk=32, wm=2, wn=2, stages=stages)
    return fd.lower("sm_80")


def _waits_and_barriers(plan):
    out = []
    for e in plan:
        m = re.match(r"cp\.async\.wait_group\((\d+)\)", e["mechanism"])
        out.append(("wait", int(m.group(1)), e["hazards"]) if m else
                   ("barrier", None, e["hazards"]) if e["mechanism"].startswith("block barrier") else
                   ("other", None, e["mechanism"]))
    return out


@pytest.mark.parametrize("stages", [3, 5, 12, 20])
def test_deep_ring_keeps_one_barrier_per_iteration(stages):
    low = _lowered(stages)
    raw, both = "RAW sA, RAW sB", "RAW sA, RAW sB, WAR sA, WAR sB"
    assert _waits_and_barriers(low.sync_plan) == [
        ("wait", stages - 2, raw), ("barrier", None, raw),    # the prologue's first stage
        ("wait", stages - 2, both), ("barrier", None, both),  # the main loop: next stage in, this one free
        ("wait", 0, raw), ("barrier", None, raw),             # the drain before the epilogue's stages
    ]
    summary = low.sync_summary
    trips = ", ".join(str(n) for n in range(1, stages + 2))
    assert f"over trip counts {{{trips}, {3 * stages + 1}}}" in summary, summary
    assert "1 barrier(s) per main-loop iteration" in summary and "placement proven minimal" in summary, summary

