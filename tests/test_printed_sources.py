"""The printed CUDA of every kernel family stays byte-identical across a change that should not alter it
(a faster pass, a restructured planner): each case of tools/window/families.py, lowered for its targets,
plus the sm_80 cp.async kernel at 2..20 stages, is printed and its SHA-256 compared with
tests/data/printed_sources.json.

A change that is meant to alter printed code regenerates the file on purpose:
    HEDDLE_PRINTED_UPDATE=1 pytest tests/test_printed_sources.py
and HEDDLE_PRINTED_DUMP=<dir> writes every printed source there (<case>.cu) to diff two trees by hand.
"""
import hashlib
import json
import os
import sys

import pytest

from matmul_defs import matmul_fusion, schedule

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "window"))
from families import FAMILIES  # noqa: E402

DIGESTS = os.path.join(ROOT, "tests", "data", "printed_sources.json")
STAGES = (2, 3, 4, 6, 8, 12, 16, 20)


def _stages(s):
    def make(target):
        fd, a, b = matmul_fusion(n=200, k=32 * 40, dtype="bf16", layout="NN", epilogue="bias_gelu")
        schedule(fd, a, b, bm=64, bn=64, bk=32, wm=2, wn=2, stages=s)
        return fd
    return make


def cases():
    """(name, target, make) for every printed kernel the check covers."""
    out = []
    for fam in FAMILIES.values():
        targets = ("sm_90a",) if fam.needs == "sm_90a" else ("sm_80", "sm_90a")
        for c in fam.cases:
            if c.make is not None:
                out += [(f"{fam.name}.{c.label}.{t}", t, c.make) for t in targets]
    out += [(f"sm80_stages.s{s}.sm_80", "sm_80", _stages(s)) for s in STAGES]
    return out


def printed():
    dump = os.environ.get("HEDDLE_PRINTED_DUMP")
    got = {}
    for name, target, make in cases():
        src = make(target).lower(target).source
        got[name] = hashlib.sha256(src.encode()).hexdigest()
        if dump:
            os.makedirs(dump, exist_ok=True)
            with open(os.path.join(dump, name + ".cu"), "w") as f:
                f.write(src)
    return got


def test_printed_sources_unchanged():
    got = printed()
    if os.environ.get("HEDDLE_PRINTED_UPDATE") == "1":
        with open(DIGESTS, "w") as f:
            json.dump(got, f, indent=1, sort_keys=True)
            f.write("\n")
        pytest.skip(f"wrote {len(got)} digests to {DIGESTS}")
    with open(DIGESTS) as f:
        want = json.load(f)
    assert len(got) >= 50 and set(got) == set(want), sorted(set(got) ^ set(want))
    changed = sorted(n for n in got if got[n] != want[n])
    assert not changed, (f"printed source changed for {len(changed)} kernel(s): {changed}; if meant, "
                         "HEDDLE_PRINTED_UPDATE=1 regenerates tests/data/printed_sources.json")


def test_stage_sweep_kernels_differ():
    """The stage sweep prints a different kernel per stage count (the sweep really varies the pipeline)."""
    low = {s: _stages(s)("sm_80").lower("sm_80") for s in (2, 20)}
    assert "_s2p" in low[2].name and "_s20p" in low[20].name, (low[2].name, low[20].name)
    assert low[2].source != low[20].source
