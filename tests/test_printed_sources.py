"""The printed CUDA of every kernel family stays byte-identical across a change that should not alter it
(a faster pass, a restructured planner): each case of tools/window/families.py, lowered for its targets,
plus the sm_80 cp.async kernel at 2..20 stages, the AMD families (LDS DMA and register-staged loads on
gfx90a / gfx942, split barriers on gfx1200) and the sm_100a tcgen05 families, is printed and its SHA-256 compared with
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

from support.matmul_defs import matmul_fusion, schedule
from support import tcgen05_defs
from support import interp_defs

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


AMD = {
    "async_lds-s3": lambda t: interp_defs.amd("async_lds", stages=3),
    "async_lds-s2-TN": lambda t: interp_defs.amd("async_lds", stages=2, layout="TN"),
    "plain-s2-bf16": lambda t: interp_defs.amd("plain", stages=2, dtype="bf16"),
    "plain-gfx12-s2": lambda t: interp_defs.amd("plain", stages=2, warps=(2, 2)),
    "plain-gfx12-s3-NT": lambda t: interp_defs.amd("plain", stages=3, layout="NT", warps=(2, 2)),
}
TCGEN05 = {
    "plain-s4-acc2": lambda t: tcgen05_defs.build(stages=4, acc_stages=2),
    "plain-s3-acc1-TN": lambda t: tcgen05_defs.build(stages=3, acc_stages=1, layout="TN"),
    "bias-tma-ring": lambda t: tcgen05_defs.build_epi(),
    "residual-tma-ring": lambda t: tcgen05_defs.build_epi(operands=("bias", "residual"), tma="residual"),
}


def cases():
    """(name, target, make) for every printed kernel the check covers."""
    out = []
    for fam in FAMILIES.values():
        if not fam.pinned:  # a family added since the digests were written (tools/window/families.py)
            continue
        targets = (fam.needs,) if fam.needs in ("sm_90a", "sm_100a") else ("sm_80", "sm_90a")
        for c in fam.cases:
            if c.make is not None:
                out += [(f"{fam.name}.{c.label}.{t}", t, c.make) for t in targets]
    out += [(f"sm80_stages.s{s}.sm_80", "sm_80", _stages(s)) for s in STAGES]
    for label, make in AMD.items():
        out += [(f"amd.{label}.{t}", t, make) for t in (("gfx1200",) if "gfx12" in label else ("gfx90a", "gfx942"))]
    out += [(f"tcgen05.{label}.sm_100a", "sm_100a", make) for label, make in TCGEN05.items()]
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
