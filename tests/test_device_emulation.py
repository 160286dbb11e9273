"""Host emulation of the sm_80 matmul device runtime (heddle_copy.cuh, heddle_mma_sm80.cuh).

There is no GPU in CI, so the device code is proven on the CPU: tests/emu/mma_emu.cpp compiles the
real headers with g++ under HEDDLE_HOST_EMULATION, where every PTX primitive (cp.async, ldmatrix,
mma.sync) is emulated per the PTX ISA by tests/emu/warp_emu.cpp, with the 32 lanes of each warp
running in lockstep. See the header comments of those files for what is checked.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEVICE_DIR = ROOT / "src" / "heddle" / "codegen" / "device"
EMU_DIR = ROOT / "tests" / "emu"

DTYPES = ["f16", "bf16"]
LAYOUTS = [("k", "k"), ("k", "n"), ("m", "k"), ("m", "n")]  # A: k-/m-contiguous, B: k-/n-contiguous
CONFIGS = ["64x64x32_2x2", "128x128x32_2x2", "128x256x64_4x2", "32x192x16_1x8"]  # last: odd FN
COPIES = ["async8", "async4", "async2", "sync8", "sync1"]
SHAPES = [(77, 70, 53), (130, 261, 133)]  # ragged in every dimension, 1..15 CTAs, 1..9 k-slabs


def _gxx():
    return os.environ.get("CXX_FOR_EMULATION") or shutil.which("g++")


@pytest.fixture(scope="module")
def emu_binary(tmp_path_factory):
    gxx = _gxx()
    if not gxx:
        pytest.skip("g++ not found: the host emulation harness needs a C++17 compiler")
    tmp = tmp_path_factory.mktemp("heddle_emu")
    inc = tmp / "include" / "heddle"
    inc.mkdir(parents=True)
    for hdr in DEVICE_DIR.glob("*.cuh"):  # generated kernels #include "heddle/<name>.cuh"
        shutil.copy(hdr, inc / hdr.name)
    exe = tmp / "mma_emu"
    cmd = [gxx, "-O1", "-std=c++17", "-DHEDDLE_HOST_EMULATION", "-Wall", "-Wextra",
           "-Wno-unknown-pragmas", "-I", str(tmp / "include"), "-I", str(EMU_DIR),
           str(EMU_DIR / "mma_emu.cpp"), str(EMU_DIR / "warp_emu.cpp"), "-o", str(exe)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, f"emulation harness failed to compile:\n{res.stderr[-6000:]}"
    return exe


def _run(exe, *args, timeout=300):
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def test_selftest_conversions_swizzle_math(emu_binary):
    res = _run(emu_binary, "selftest")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "PASS selftest" in res.stdout


@pytest.mark.parametrize("scenario", ["divergence", "nonuniform", "ldmatrix_misaligned",
                                      "cp_async_oob", "cp_async_src_size", "copy_tile_oob"])
def test_emulator_rejects_misuse(emu_binary, scenario):
    """The emulator is only a proof if it refuses what hardware would not do."""
    res = _run(emu_binary, "expect-error", scenario)
    assert res.returncode == 2, f"scenario {scenario} not caught:\n{res.stdout}{res.stderr}"
    assert "EMULATION ERROR" in res.stderr


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("a_layout,b_layout", LAYOUTS, ids=[f"A{a}B{b}" for a, b in LAYOUTS])
@pytest.mark.parametrize("dtype", DTYPES)
def test_gemm_through_device_code(emu_binary, dtype, a_layout, b_layout, cfg):
    failures = []
    for copy in COPIES:
        for i, (m, n, k) in enumerate(SHAPES):
            res = _run(emu_binary, "run", dtype, a_layout, b_layout, cfg, copy, m, n, k, 11 + i)
            out = res.stdout + res.stderr
            if res.returncode != 0 or "PASS" not in res.stdout:
                failures.append(f"--- {copy} {m}x{n}x{k} (rc={res.returncode})\n{out[-3000:]}")
    assert not failures, "\n".join(failures)
