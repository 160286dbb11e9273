"""Helpers shared by the torch.compile backend tests (tests/torch/test_dynamo*.py); their fixture
_fresh_dynamo is in tests/torch/conftest.py."""
import os
import shutil

import pytest


needs_cxx = pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None and shutil.which("cc") is None,
                               reason="inductor's CPU backend needs a C++ compiler")


def run_fresh(code: str) -> None:
    """Run `code` in a fresh Python process (as torch.export.load would resolve ops there); it prints 'ok'."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.stdout.strip() == "ok", r.stderr


def scaled_decision(gm, target, op="_scaled_mm"):
    """The backend's decision on the one `op` node of a graph traced with make_fx / symbolic_trace, rewritten by
    dynamo_scaled.fuse_scaled for `target` (no device needed): (the Decision, the graph after the rewrite)."""
    from heddle.pytorch.dynamo_report import GraphReport
    from heddle.pytorch.dynamo_scaled import fuse_scaled
    report, why = GraphReport(kind="inference", graph=0), {}
    fuse_scaled(gm, None, report, why, True, target)
    (d,) = [d for d in why.values() if d.op == op]
    return d, gm.graph


def assert_block_scaled_capture(a, b, sa, sb, target, fused, op, kp):
    """torch._scaled_mm(a, b, sa, sb) with MX / NVFP4 scales traced with fake tensors and rewritten for `target`:
    fused into `op` with each blocked scale viewed [-1, kp] in the graph, or (fused False) left to torch because the
    target has no block-scaled tcgen05.mma."""
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx
    d, graph = scaled_decision(make_fx(lambda a, b, sa, sb: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16),
                                       tracing_mode="fake")(a, b, sa, sb), target)
    if fused:
        assert d.status == "fused" and op in d.reason, d.reason
        views = [n for n in graph.nodes if n.target is torch.ops.aten.view.default]
        assert [list(n.args[1]) for n in views] == [[-1, kp], [-1, kp]]
    else:
        assert d.status == "not fused" and f"target {target} has none" in d.reason, d.reason
