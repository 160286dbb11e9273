"""AMD data semantics of the CPU interpreter (src/heddle/interp/rt/hrt_amdgcn.h), checked on the host.

tests/interp/amdgcn_selftest.cpp is compiled with the host C++ compiler and run once: it checks entries of
the published register-layout tables of v_mfma_f32_16x16x16_f16 (AMD matrix instruction calculator)
and of the GFX12 wave32 v_wmma_f32_16x16x16_f16 (RDNA4 ISA), that every layout is a bijection, the
MFMA / WMMA arithmetic against a float64 product, the buffer-resource decode with the raw-buffer range
rule, and the s_waitcnt field decode, printing ``ok <name>`` per check. No GPU and no heddle build needed.
"""

import pytest

from support.selftest_defs import ROOT, run_selftest

SRC = ROOT / "tests" / "interp" / "amdgcn_selftest.cpp"

EXPECTED = (
    [f"{op}16_{m}_table" for op in ("mfma", "wmma") for m in "abd"]
    + [f"{op}16_layouts_bijective_{m}" for op in ("mfma", "wmma") for m in "abd"]
    + [f"{op}16_{t}" for op in ("mfma", "wmma") for t in ("f16", "bf16")]
    + ["buffer_rsrc", "waitcnt_fields"]
)


@pytest.fixture(scope="module")
def selftest(tmp_path_factory):
    return run_selftest(tmp_path_factory, "amdgcn_selftest", [SRC])


def test_selftest_passes_every_check(selftest):
    run, ok = selftest
    failures = "\n".join(line for line in run.stdout.splitlines() if line.startswith("FAIL"))
    assert run.returncode == 0, f"amdgcn_selftest failed (rc={run.returncode}):\n{failures}\n{run.stderr}"
    assert ok == set(EXPECTED), f"missing: {sorted(set(EXPECTED) - ok)}, unlisted: {sorted(ok - set(EXPECTED))}"
