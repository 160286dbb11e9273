"""NVRTC compile checks of the sm_100a FP8 GEMM (tcgen05.mma kind::f8f6f4; docs/fp8.md "sm_100a"): e4m3, e5m2 and
mixed operands, k tiles 32, 64 and 128, per-tensor and per-row scales, and the automatic schedule compile for
sm_100a through heddle's runtime (crash-isolated) with no spills; the PTX issues kind::f8f6f4 (never kind::f16)."""
import pytest

from support.env import requires_nvrtc, rt
from support.tcgen05_defs import build_fp8

pytestmark = requires_nvrtc


def check(low):
    r = rt.compile(low.source, low.name, "sm_100a", isolate=True)
    st = r.stats
    assert st.spill_stores == 0 and st.spill_loads == 0 and st.stack_frame == 0, (low.name, r.ptxas)
    assert "tcgen05.mma.cta_group::1.kind::f8f6f4" in r.ptx, low.name
    assert "kind::f16" not in r.ptx and "wgmma" not in r.ptx
    for op in ("tcgen05.commit.cta_group::1.mbarrier::arrive::one", "tcgen05.ld.sync.aligned.32x32b.x32",
               "cp.async.bulk.tensor", "mbarrier.try_wait.parity"):
        assert op in r.ptx, (low.name, op)
    return r


@pytest.mark.parametrize("fa,fb,scales,s,a,bn,bk", [
    ("e4m3", "e4m3", "row", 4, 2, 128, 128),
    ("e4m3", "e5m2", "tensor", 3, 1, 256, 128),
    ("e5m2", "e5m2", None, 6, 2, 64, 32),
    ("e5m2", "e4m3", "row", 5, 2, 128, 64),
])
def test_fp8_kernel_compiles_clean(fa, fb, scales, s, a, bn, bk):
    check(build_fp8(fa, fb, scales, stages=s, acc_stages=a, bn=bn, bk=bk, n=1024, k=4096).lower("sm_100a"))


def test_fp8_auto_schedule_compiles():
    import heddle
    fd = heddle.Fusion()
    a, b = fd.input("a", "e4m3", ["M", 4096]), fd.input("b", "e4m3", [4096, 4096])
    y = fd.matmul(a, b, False, True) * fd.input("scale_a", "f32", ["M", 1]) * fd.input("scale_b", "f32", [1, 4096])
    fd.output(y.to("bf16"))
    fd.auto_schedule("sm_100a", -1, 4096, 4096)
    low = fd.lower("sm_100a")
    assert low.tile["bk"] == 128
    check(low)
