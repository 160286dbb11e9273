"""NVRTC compile check of the block-scaled tcgen05 primitives (heddle_sm100.cuh MmaSm100Mx, MXFP8, and
MmaSm100Nvf4, NVFP4; docs/fp8.md "MX formats") in the probe kernel of tests/support/mx_defs.py: sm_100a, no spills,
the PTX issues one tcgen05.cp 32x128b.warpx4 per scale chunk and the block-scaled MMA of its kind (never the plain
kinds)."""
import pytest

from support.env import requires_nvrtc, rt
from support.mx_defs import source

pytestmark = requires_nvrtc


@pytest.mark.parametrize("bn,fa,fb,mma,copies", [
    (128, "e4m3", "e4m3", "kind::mxf8f6f4.block_scale.scale_vec::1X", 2),
    (256, "e5m2", "e4m3", "kind::mxf8f6f4.block_scale.scale_vec::1X", 3),
    (128, "e2m1", "e2m1", "kind::mxf4nvf4.block_scale.scale_vec::4X", 4),
    (256, "e2m1", "e2m1", "kind::mxf4nvf4.block_scale.scale_vec::4X", 6),
])
def test_block_scaled_primitives_compile_for_sm100a(bn, fa, fb, mma, copies):
    r = rt.compile(source(bn, fa, fb), "mx_probe", "sm_100a", isolate=True)
    st = r.stats
    assert st.spill_stores == 0 and st.spill_loads == 0, r.ptxas
    assert "tcgen05.mma.cta_group::1." + mma in r.ptx
    assert r.ptx.count("tcgen05.cp.cta_group::1.32x128b.warpx4") == copies, r.ptx.count("tcgen05.cp")
    assert "kind::f8f6f4" not in r.ptx and "kind::f16" not in r.ptx
