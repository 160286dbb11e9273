"""The computed output scale through NVRTC (docs/fp8.md "Computed output scales"): the quantize epilogue of the
sm_90a wgmma kernels (the quad's amax by shfl.sync.bfly, the scale store, the satfinite cast) compiles for
sm_90a without spills or a stack frame (support.wgmma_defs.nvrtc_sm90), cooperative and ping-pong."""
import re

import pytest

from support.env import requires_nvrtc
from support.fp8_defs import fp8_schedule
from support.wgmma_defs import nvrtc_sm90

pytestmark = requires_nvrtc


@pytest.mark.parametrize("variant,group,bn", [("coop", 128, 128), ("pingpong", 128, 128), ("coop", "row", 128)])
def test_quantize_epilogue_compiles_without_spills(variant, group, bn):
    import heddle
    fd = heddle.Fusion()
    n = 4096 if group == 128 else 128
    a, b = fd.input("a", "e4m3", ["M", 4096]), fd.input("b", "e4m3", [n, 4096])
    y = fd.matmul(a, b, False, True) * fd.input("scale_a", "f32", ["M", 1]) * fd.input("scale_b", "f32", [1, n])
    q, s = heddle.ops.quantize(heddle.ops.gelu(y + fd.input("bias", "bf16", [n])), "e4m3", group=group)
    fd.output(q)
    fd.output(s)
    fp8_schedule(fd, a, b, variant=variant, bn=bn)
    r = nvrtc_sm90(fd.lower("sm_90a"))
    assert len(re.findall(r"shfl\.sync\.bfly\.b32", r.ptx)) >= 2
    assert "cvt.rn.satfinite.e4m3x2.f32" in r.ptx
