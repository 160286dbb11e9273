"""Host emulation of the Hopper device runtime (heddle_sm90.cuh): the layout and fragment math that
no CPU can execute natively, proven against an independent emulation of the PTX ISA.

tests/emu/sm90_emu.cpp compiles the real header with g++ under HEDDLE_HOST_EMULATION. Its TMA copies
boxes as the ISA's tensor-copy rules say (zero fill out of bounds, the 32/64/128-byte address
swizzle on shared-window address bits), its wgmma decodes the two matrix descriptors as the ISA's
canonical K-major / MN-major layouts (start address, LBO, SBO, swizzle mode) and hands each of the
128 threads its D fragment (row 16*warp + lane/4 + 8*(r/2), col 8*j + 2*(lane%4) + r%2). A GEMM
through tma_load_tile + MmaSm90::step + row_of/col_of + TmaTile::offset + tma_store_tile must then
match a double-precision reference for every operand layout, swizzle mode (128B for 64-wide k
tiles and M/N-major operands, 64B for k=32, 32B for k=16), tile shape, dtype, ragged sizes and
batched tensor maps -- which is only possible when the header's descriptors, boxes, coordinates,
offsets and fragment ownership are all right."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEVICE_DIR = ROOT / "src" / "heddle" / "codegen" / "device"
EMU = ROOT / "tests" / "emu" / "sm90_emu.cpp"

CONFIGS = ["128x128x64_coop2", "64x128x32_coop1", "64x64x16_coop1", "128x256x64_coop2", "128x192x32_coop2",
           "128x128x64_pp", "256x128x64_coop2"]
LAYOUTS = [("k", "k"), ("k", "n"), ("m", "k"), ("m", "n")]


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    gxx = os.environ.get("CXX_FOR_EMULATION") or shutil.which("g++")
    if not gxx:
        pytest.skip("g++ not found: the host emulation harness needs a C++17 compiler")
    tmp = tmp_path_factory.mktemp("heddle_sm90_emu")
    inc = tmp / "include" / "heddle"
    inc.mkdir(parents=True)
    for hdr in DEVICE_DIR.glob("*.cuh"):
        shutil.copy(hdr, inc / hdr.name)
    exe = tmp / "sm90_emu"
    cmd = [gxx, "-O1", "-std=c++17", "-DHEDDLE_HOST_EMULATION", "-Wall", "-Wextra", "-Werror",
           "-Wno-unknown-pragmas", "-I", str(tmp / "include"), str(EMU), "-o", str(exe)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, f"emulation harness failed to compile:\n{res.stderr[-6000:]}"
    return exe


def run(exe, *args):
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=300)


def test_tile_offsets_are_where_tma_puts_elements(emu):
    res = run(emu, "selftest")
    assert res.returncode == 0 and "PASS selftest" in res.stdout, res.stdout + res.stderr


@pytest.mark.parametrize("cfg", CONFIGS)
def test_gemm_through_tma_wgmma_and_tma_store(emu, cfg):
    failures = []
    for dt in ("bf16", "f16"):
        for al, bl in LAYOUTS:
            shapes = ((77, 70, 53, 1), (130, 261, 133, 2)) if dt == "bf16" else ((77, 70, 53, 1),)
            for m, n, k, seed in shapes:
                res = run(emu, "run", dt, al, bl, cfg, m, n, k, seed)
                if res.returncode or "PASS" not in res.stdout:
                    failures.append(f"{dt} A{al} B{bl} {m}x{n}x{k}: {res.stdout[-500:]}{res.stderr[-1500:]}")
    assert not failures, "\n".join(failures)


def test_batched_tensor_maps(emu):
    for al, bl in LAYOUTS:
        res = run(emu, "run", "bf16", al, bl, "64x128x32_coop1", 70, 130, 77, 4, 3)
        assert res.returncode == 0 and "batch 3" in res.stdout, res.stdout + res.stderr


@pytest.mark.parametrize("scenario", ["tma_misaligned", "tma_box_wider_than_swizzle", "wait_before_tx",
                                      "wgmma_nonuniform", "descriptor_base_offset"])
def test_emulator_refuses_misuse(emu, scenario):
    res = run(emu, "expect-error", scenario)
    assert res.returncode == 2 and "EMULATION ERROR" in res.stderr, res.stdout + res.stderr


def test_generated_wgmma_wrappers_are_current():
    gen = DEVICE_DIR / "gen_sm90_wgmma.py"
    res = subprocess.run([sys.executable, str(gen)], capture_output=True, text=True, check=True)
    assert res.stdout == (DEVICE_DIR / "heddle_sm90_wgmma.cuh").read_text(), \
        "heddle_sm90_wgmma.cuh is stale: python3 gen_sm90_wgmma.py > heddle_sm90_wgmma.cuh"


def test_device_header_has_no_toolkit_includes():
    for name in ("heddle_sm90.cuh", "heddle_sm90_wgmma.cuh"):
        for line in (DEVICE_DIR / name).read_text().splitlines():
            if line.startswith("#include"):
                assert '"heddle/' in line or "HEDDLE_HOST_EMULATION" in line, line
