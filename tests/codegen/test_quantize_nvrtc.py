"""The computed output scale through NVRTC (docs/fp8.md "Computed output scales"): the quantize epilogue of the
sm_90a wgmma kernels (the quad's amax by shfl.sync.bfly, the scale store, the satfinite cast) compiles for
sm_90a without spills or a stack frame (support.wgmma_defs.nvrtc_sm90), cooperative and ping-pong, with the
direct store and through the TMA-store epilogue (a plain 8-bit output there too); the one of
the sm_100a tcgen05 kernel (a per-thread amax over tcgen05.ld columns, no shuffle) compiles for sm_100a without
spills or a stack frame, with n tiles of 128 and 256, a TMA-loaded bias, and q through the TMA-store epilogue."""
import re

import pytest

from support.env import requires_nvrtc, rt
from support.fp8_defs import fp8_schedule
from support.tcgen05_defs import roles
from support.wgmma_defs import nvrtc_sm90, schedule_sm90

pytestmark = requires_nvrtc


def quant_gemm(group):
    """gelu((a @ b.T) * scale_a [M, 1] * scale_b [1, N] + bias) quantized to e4m3; K = 4096, N = 4096 for
    groups of 128, N = 128 per row. (fusion, a, b)."""
    import heddle
    fd = heddle.Fusion()
    n = 4096 if group == 128 else 128
    a, b = fd.input("a", "e4m3", ["M", 4096]), fd.input("b", "e4m3", [n, 4096])
    y = fd.matmul(a, b, False, True) * fd.input("scale_a", "f32", ["M", 1]) * fd.input("scale_b", "f32", [1, n])
    q, s = heddle.ops.quantize(heddle.ops.gelu(y + fd.input("bias", "bf16", [n])), "e4m3", group=group)
    fd.output(q)
    fd.output(s)
    return fd, a, b


@pytest.mark.parametrize("variant,group,bn", [("coop", 128, 128), ("pingpong", 128, 128), ("coop", "row", 128)])
def test_quantize_epilogue_compiles_without_spills(variant, group, bn):
    fd, a, b = quant_gemm(group)
    fp8_schedule(fd, a, b, variant=variant, bn=bn)
    r = nvrtc_sm90(fd.lower("sm_90a"))
    assert len(re.findall(r"shfl\.sync\.bfly\.b32", r.ptx)) >= 2
    assert "cvt.rn.satfinite.e4m3x2.f32" in r.ptx
    assert "#177-D" not in r.log, r.log  # nothing declared and never read (test_unused_declarations.py)


@pytest.mark.parametrize("variant,group", [("coop", 128), ("pingpong", 128), ("coop", "row")])
def test_quantize_through_the_tma_store_compiles_without_spills(variant, group):
    # q staged in 128-byte swizzled chunks (16-bit st.shared of satfinite pairs), fence.proxy.async, the TMA
    # store and its bulk group; s still stored directly (docs/fp8.md "Computed output scales")
    fd, a, b = quant_gemm(group)
    # ping-pong: 64 x 128 warpgroup tiles (a whole 128 x 128 one spilled 80 bytes: the schedule refuses it)
    fp8_schedule(fd, a, b, variant=variant, bm=64 if variant == "pingpong" else 128, bn=128).epilogue_store("tma")
    r = nvrtc_sm90(fd.lower("sm_90a"))
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in r.ptx and "fence.proxy.async" in r.ptx
    assert "cp.async.bulk.wait_group.read" in r.ptx and "st.shared.u16" in r.ptx and "stmatrix" not in r.ptx
    assert "cvt.rn.satfinite.e4m3x2.f32" in r.ptx and len(re.findall(r"shfl\.sync\.bfly\.b32", r.ptx)) >= 2
    assert "#177-D" not in r.log, r.log


@pytest.mark.parametrize("variant,bm,bn", [("coop", 128, 256), ("pingpong", 64, 128)])
def test_plain_8bit_output_through_the_tma_store_compiles_without_spills(variant, bm, bn):
    import heddle
    fd = heddle.Fusion()
    a, b = fd.input("a", "e4m3", ["M", 4096]), fd.input("b", "e4m3", [4096, 4096])
    y = fd.matmul(a, b, False, True) * fd.input("scale_a", "f32", ["M", 1]) * fd.input("scale_b", "f32", [1, 4096])
    fd.output((heddle.ops.gelu(y + fd.input("bias", "bf16", [4096])) * fd.input("scale_out", "f32", [1])).to("e5m2"))
    fp8_schedule(fd, a, b, variant=variant, bm=bm, bn=bn).epilogue_store("tma")
    r = nvrtc_sm90(fd.lower("sm_90a"))
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in r.ptx and "st.shared.u16" in r.ptx
    assert "fence.proxy.async" in r.ptx and "stmatrix" not in r.ptx and "cvt.rn.satfinite.e5m2x2.f32" in r.ptx
    assert "#177-D" not in r.log, r.log


@pytest.mark.parametrize("group,bn,tma,store", [(128, 256, None, None), (128, 128, None, None), ("row", 128, None, None),
                                                (128, 128, "bias", None), (128, 256, None, "tma"),
                                                ("row", 256, None, "tma"), (128, 128, "bias", "tma")])
def test_tcgen05_quantize_epilogue_compiles_without_spills(group, bn, tma, store):
    # tma="bias": the bias row by its producer warp into its ring, read from the slot in both passes; store="tma":
    # q staged in 128-byte swizzled chunks of 128 codes (st.shared.v4 of pack4_f8's satfinite pairs), TMA-stored
    fd, a, b = quant_gemm(group)
    mm = schedule_sm90(fd, a, b, bm=128, bn=bn, bk=128, wgs=1, stages=4, roles=roles(2))
    if tma:
        fd.cache_after(next(t for t in fd.inputs if t.name == tma), "tma_load").circular_buffer(2)
    if store:
        mm.epilogue_store(store)
    low = fd.lower("sm_100a")
    r = rt.compile(low.source, low.name, "sm_100a", isolate=True)
    st = r.stats
    assert st.spill_stores == 0 and st.spill_loads == 0 and st.stack_frame == 0, (low.name, r.ptxas)
    stores = r.ptx.count("cp.async.bulk.tensor.2d.global.shared::cta")  # q's chunks (each chunk of a tile its own)
    assert r.ptx.count("cp.async.bulk.tensor") - stores == 2 + (tma is not None), low.name  # operands (+ the bias)
    assert stores == (bn // 128 if store else 0), (low.name, stores)
    if store:
        assert "st.shared.v4.b32" in r.ptx and "fence.proxy.async" in r.ptx and low.name.endswith("_tmas2"), low.name
        assert "cp.async.bulk.wait_group.read" in r.ptx
    assert "tcgen05.mma.cta_group::1.kind::f8f6f4" in r.ptx and "tcgen05.ld.sync.aligned.32x32b.x32" in r.ptx
    assert "cvt.rn.satfinite.e4m3x2.f32" in r.ptx and "shfl.sync" not in r.ptx  # the amax is per thread
    assert "#177-D" not in r.log, r.log  # nothing declared and never read (test_unused_declarations.py)
