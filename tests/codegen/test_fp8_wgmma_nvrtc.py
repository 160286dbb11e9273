"""The sm_90a FP8 kernels through NVRTC (docs/fp8.md): the printed source compiles for sm_90a with the 8-bit
wgmma (m64nNk32 .e4m3/.e5m2, no transpose operands) in the PTX, no spills, no stack frame, setmaxnreg
honoured and no wgmma serialisation (support.wgmma_defs.nvrtc_sm90), for the hand schedules and the automatic
FP8 tiling, 16-bit and 8-bit outputs."""
import re

import pytest

from support.env import requires_nvrtc
from support.fp8_defs import fp8_fusion, fp8_schedule
from support.wgmma_defs import nvrtc_sm90

pytestmark = requires_nvrtc


@pytest.mark.parametrize("variant,ab,out", [
    ("coop", ("e4m3", "e4m3"), "bf16"),
    ("pingpong", ("e5m2", "e4m3"), "e4m3"),
])
def test_fp8_kernels_compile_without_spills(variant, ab, out):
    fd, a, b = fp8_fusion(n=4096, k=4096, a_dtype=ab[0], b_dtype=ab[1], scale="row", bias=True, act="gelu",
                          out=out, out_scale=out != "bf16")
    fp8_schedule(fd, a, b, variant=variant, bn=128 if variant == "coop" else 64)
    r = nvrtc_sm90(fd.lower("sm_90a"))
    ptx = r.ptx
    insts = set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k32\.f32\.(e[45]m[23])\.(e[45]m[23])", ptx))
    assert insts == {ab}, insts
    assert "k16" not in "".join(re.findall(r"wgmma\.mma_async[^ ]*", ptx))


def test_fp8_auto_tiling_compiles_without_spills():
    fd, a, b = fp8_fusion(n=4096, k=4096, scale="row", bias=True)
    fd.auto_schedule("sm_90a", 4096, 4096, 4096)
    low = fd.lower("sm_90a")
    assert re.search(r"MmaSm90<128, (128|256), 128,", low.source)
    nvrtc_sm90(low)
