"""Printed kernels declare only what they read (issue 31 item 4: memory per cached kernel). A `const int` that
nothing reads is NVRTC's front-end warning #177-D ("variable ... was declared but never referenced"), each with
its source line quoted into the program log the cached kernel keeps (about 1.5 KiB for the Hopper GEMM). The
grid's m0 / n0 / batch_idx are declared by the printer only when the body reads them (codegen/printer.cpp), a
role's tile-walk lets by the pass drop_unused_lets only when the role reads them (kir/reads.cpp lists the reads).

Checked: each family of tests/test_printed_sources.py, the unpinned families of tools/window/families.py and
the grouped kernels (its first case; every case under -m slow) compiled by
NVRTC's front end (-fdevice-syntax-only: the warnings are the front end's) has no #177-D in the log and no
error (a declaration dropped that the code reads would be one), the AMD kernels the same under clang-19
-Wunused-variable; and the pass really removes lets from the IR: the 3-role kernel's MMA role reads no m0."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from support.env import requires_nvrtc, rt

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tools", "window"))
import test_printed_sources  # noqa: E402

DEVICE = os.path.join(ROOT, "src", "heddle", "codegen", "device")
CLANG = shutil.which("clang-19")
HIP_RUNTIME_H = "/usr/include/hip/hip_runtime.h"
UNUSED = re.compile(r"warning #177-D: .*|warning: unused variable .*")



def _more_cases():
    """The families test_printed_sources.py does not pin (tools/window/families.py, pinned=False) and the grouped
    kernels (their families run whole calls: built here from tests/support/grouped_defs.py)."""
    from families import FAMILIES
    from support import grouped_defs as g
    out = []
    for fam in FAMILIES.values():
        if not fam.pinned:
            targets = (fam.needs,) if fam.needs in ("sm_90a", "sm_100a") else ("sm_80", "sm_90a")
            out += [(f"{fam.name}.{c.label}.{t}", t, c.make) for c in fam.cases if c.make is not None for t in targets]
    out += [("grouped_cp_async.skewed.sm_80", "sm_80", lambda t: g.scheduled()),
            ("grouped_masked.sm_80", "sm_80", lambda t: g.masked_scheduled()),
            ("grouped_wgmma.coop.sm_90a", "sm_90a", lambda t: g.scheduled_sm90(bm=128)),
            ("grouped_tcgen05.sm_100a", "sm_100a", lambda t: g.scheduled_tcgen05())]
    return out


CASES = test_printed_sources.cases() + _more_cases()


def first_of_each_family(targets):
    seen, out = set(), []
    for name, target, make in CASES:
        if target in targets and name.split(".")[0] not in seen:
            seen.add(name.split(".")[0])
            out.append(pytest.param(name, target, make, id=name))
    return out


def every(targets, quick=()):
    """Every case on `targets`, slow unless its name is in `quick`."""
    return [pytest.param(n, t, m, id=n, marks=() if n in quick else pytest.mark.slow)
            for n, t, m in CASES if t in targets]


NV = ("sm_80", "sm_90a", "sm_100a")
AMD = ("gfx90a", "gfx942", "gfx1200")
AMD_QUICK = ("amd.async_lds-s3.gfx90a", "amd.plain-gfx12-s2.gfx1200")  # LDS DMA (CDNA), split barriers (GFX12)


def nvrtc_unused(name, target, make):
    src = make(target).lower(target).source
    r = rt.compile(src, name + ".cu", target, options=["-fdevice-syntax-only"], use_cache=False, want_ptx=False)
    return UNUSED.findall(r.log)


@requires_nvrtc
@pytest.mark.parametrize("name,target,make", first_of_each_family(NV))
def test_nvrtc_log_has_no_unused_declaration(name, target, make):
    assert nvrtc_unused(name, target, make) == []


@requires_nvrtc
@pytest.mark.parametrize("name,target,make", [p for p in every(NV)
                                              if p.id not in {q.id for q in first_of_each_family(NV)}])
def test_nvrtc_log_has_no_unused_declaration_every_kernel(name, target, make):
    assert nvrtc_unused(name, target, make) == []


def clang_unused(name, target, make):
    d = tempfile.mkdtemp(prefix="heddle_unused_")
    try:
        shutil.copytree(DEVICE, os.path.join(d, "heddle"))
        src = os.path.join(d, name + ".hip")
        with open(src, "w") as f:
            f.write(make(target).lower(target).source)
        res = subprocess.run([CLANG, "-x", "hip", f"--offload-arch={target}", "--cuda-device-only", "-nogpulib",
                              "-fsyntax-only", "-Wunused-variable", "-include", "hip/hip_runtime.h", "-I", d, src],
                             capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    assert res.returncode == 0, res.stderr[-4000:]
    return UNUSED.findall(res.stderr)


needs_clang = pytest.mark.skipif(not CLANG or not os.path.exists(HIP_RUNTIME_H),
                                 reason="clang-19 and the HIP headers are needed (apt-get install clang-19 "
                                        "libamdhip64-dev)")


@needs_clang
@pytest.mark.parametrize("name,target,make", every(AMD, quick=AMD_QUICK))
def test_hip_source_has_no_unused_variable(name, target, make):
    assert clang_unused(name, target, make) == []


def test_drop_unused_lets_removes_the_mma_roles_coordinates():
    """The 3-role kernel: before the pass every role walks tile, m0, n0; after it the MMA role (raw accumulators
    into sC, no global address) has none, the load and epilogue roles keep theirs."""
    make = next(m for n, t, m in CASES if n == "sm90_3role.64x128x64-M1000.sm_90a")
    low = make("sm_90a").lower("sm_90a", dump_passes=True)
    by = {p[0]: p for p in low.passes}
    before = next(p[3] for p in reversed(low.passes) if p[0] != "drop_unused_lets" and p[3] != "(unchanged)\n")
    after = by["drop_unused_lets"][3]
    assert by["drop_unused_lets"][2] and before.count("let m0 =") == 3 and after.count("let m0 =") == 2
    assert after.count("let tile =") == 2 and "let tile =" in before
    # every let left is read: the printed source, compiled, says so (test_nvrtc_log_has_no_unused_declaration)
    assert low.source.count("const int m0 =") == 2
