"""Host emulation of the AMD matmul device runtime (heddle_hip_copy.cuh, heddle_hip_mma.cuh).

No AMD GPU is reachable, so the device code is proven on the CPU: tests/emu/amd_mma_emu.cpp compiles
the real headers with g++ under HEDDLE_HOST_EMULATION; tests/emu/amd_emu.cpp emulates LDS DMA (M0 +
4*lane, landing only at s_waitcnt vmcnt), and runs the lanes of a wavefront in lockstep for every
MFMA (wave64) / WMMA (wave32) with the register layouts of AMD's matrix instruction calculator.
"""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEVICE_DIR = ROOT / "src" / "heddle" / "codegen" / "device"
EMU_DIR = ROOT / "tests" / "emu"

LAYOUTS = [("k", "n"), ("k", "k"), ("m", "n"), ("m", "k")]  # A k-/m-contiguous, B k-/n-contiguous
CONFIGS = ["64x64x32_2x2", "128x128x32_2x2", "32x64x64_2x1"]
SHAPES = [(77, 70, 53), (130, 261, 133)]  # ragged everywhere; K odd: edge chunks cut by ncols


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    gxx = os.environ.get("CXX_FOR_EMULATION") or shutil.which("g++")
    if not gxx:
        pytest.skip("g++ not found: the host emulation harness needs a C++17 compiler")
    tmp = tmp_path_factory.mktemp("heddle_amd_emu")
    inc = tmp / "include" / "heddle"
    inc.mkdir(parents=True)
    for hdr in DEVICE_DIR.glob("*.cuh"):
        shutil.copy(hdr, inc / hdr.name)
    exe = tmp / "amd_mma_emu"
    # -O0: the harness instantiates ~100 GEMM variants; compile time dominates, the run is fast anyway
    cmd = [gxx, "-O0", "-std=c++17", "-DHEDDLE_HOST_EMULATION", "-Wall", "-Wextra", "-Wno-unknown-pragmas",
           "-I", str(tmp / "include"), "-I", str(EMU_DIR), str(EMU_DIR / "amd_mma_emu.cpp"),
           str(EMU_DIR / "amd_emu.cpp"), "-o", str(exe)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, f"AMD emulation harness failed to compile:\n{res.stderr[-6000:]}"
    assert "warning" not in res.stderr, res.stderr[-3000:]
    return exe


def _run(exe, *args):
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=300)


def test_layout_tables_match_the_isa(emu):
    res = _run(emu, "selftest")
    assert res.returncode == 0 and "PASS selftest" in res.stdout, res.stdout + res.stderr


@pytest.mark.parametrize("scenario", ["nonuniform_m0", "divergence", "dma_oob"])
def test_emulator_refuses_misuse(emu, scenario):
    res = _run(emu, "expect-error", scenario)
    assert res.returncode == 2 and "EMULATION ERROR" in res.stderr, f"{scenario} not caught:\n{res.stdout}{res.stderr}"


@pytest.mark.parametrize("a_layout,b_layout", LAYOUTS, ids=[f"A{a}B{b}" for a, b in LAYOUTS])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("wave", [64, 32], ids=["mfma_wave64", "wmma_wave32"])
def test_gemm_through_device_code(emu, wave, dtype, a_layout, b_layout):
    copies = ["async", "sync8"] if wave == 64 else ["sync8", "sync1"]
    failures = []
    for cfg in CONFIGS:
        for copy in copies:
            for i, (m, n, k) in enumerate(SHAPES):
                if cfg != "64x64x32_2x2" and i == 0 and copy != copies[0]:
                    continue  # keep the matrix small: every config sees both shapes with the first copy kind
                res = _run(emu, "run", wave, dtype, a_layout, b_layout, cfg, copy, m, n, k, 11 + i)
                if res.returncode != 0 or "PASS" not in res.stdout:
                    failures.append(f"--- {cfg} {copy} {m}x{n}x{k} (rc={res.returncode})\n{(res.stdout + res.stderr)[-3000:]}")
    assert not failures, "\n".join(failures)
