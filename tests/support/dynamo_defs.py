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
