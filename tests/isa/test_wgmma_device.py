"""The Hopper device headers as files: the generated wgmma wrappers (heddle_sm90_wgmma.cuh, the 8-bit form in
heddle_sm90_wgmma_f8.cuh) match their generator, and the headers include nothing from a toolkit.

(The layout and fragment math of heddle_sm90.cuh -- TMA boxes and swizzle, wgmma descriptors and the D
fragment -- is checked through the interpreter's ISA model: TmaTile offsets against the TMA box in
tests/interp/test_interp_isa.py, the wgmma / TMA instruction semantics in tests/test_interp_ptx.py, and GEMMs through
the header's own code in the sm_90a kernels of tests/test_interpret_kernels.py.)"""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEVICE_DIR = ROOT / "src" / "heddle" / "codegen" / "device"


@pytest.mark.parametrize("args,header", [([], "heddle_sm90_wgmma.cuh"), (["f8"], "heddle_sm90_wgmma_f8.cuh")])
def test_generated_wgmma_wrappers_are_current(args, header):
    gen = DEVICE_DIR / "gen_sm90_wgmma.py"
    res = subprocess.run([sys.executable, str(gen), *args], capture_output=True, text=True, check=True)
    assert res.stdout == (DEVICE_DIR / header).read_text(), \
        f"{header} is stale: python3 gen_sm90_wgmma.py {' '.join(args)} > {header}"


def test_device_header_has_no_toolkit_includes():
    for name in ("heddle_sm90.cuh", "heddle_sm90_wgmma.cuh", "heddle_sm90_wgmma_f8.cuh"):
        for line in (DEVICE_DIR / name).read_text().splitlines():
            if line.startswith("#include"):
                assert '"heddle/' in line, line
