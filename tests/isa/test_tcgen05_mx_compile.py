"""NVRTC compile check of the block-scaled tcgen05 primitives (heddle_sm100.cuh MmaSm100Mx, MXFP8, and
MmaSm100Nvf4, NVFP4; docs/fp8.md "MX formats") in the probe kernel of tests/support/mx_defs.py: sm_100a, no spills,
the PTX issues one tcgen05.cp 32x128b.warpx4 per scale chunk and the block-scaled MMA of its kind (never the plain
kinds); the fused MXFP8 kernel, also with its output quantized by a computed scale (heddle.ops.quantize; docs/fp8.md
"Computed output scales"), the fused NVFP4 kernel, also with a computed output scale or a TMA-loaded bias /
residual, and the fused MXFP4 kernel (kind::mxf4 .scale_vec::2X) with the same epilogues."""
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


MXF8 = "kind::mxf8f6f4.block_scale.scale_vec::1X"
NVF4 = "kind::mxf4nvf4.block_scale.scale_vec::4X"
MXF4 = "kind::mxf4.block_scale.scale_vec::2X"


def check_kernel(low, bn, mma=MXF8, mmas=4, chunks=1):
    """The fused MXFP8 (NVFP4) kernel (lower/passes/mx_scale_ring.cpp + tcgen05_specialize): no spills or stack
    frame, the block-scaled MMA four (two) times a k tile (unrolled), one tcgen05.cp per chunk (chunks x (1 +
    bn/128)), the chunks' 3-D TMA loads beside the operands' 2-D ones, the fence after the full wait."""
    r = rt.compile(low.source, low.name, "sm_100a", isolate=True)
    st = r.stats
    assert st.spill_stores == 0 and st.spill_loads == 0 and st.stack_frame == 0, (low.name, r.ptxas)
    assert r.ptx.count("tcgen05.mma.cta_group::1." + mma) == mmas, low.name
    assert r.ptx.count("tcgen05.cp.cta_group::1.32x128b.warpx4") == chunks * (1 + bn // 128)
    assert "cp.async.bulk.tensor.3d" in r.ptx and "cp.async.bulk.tensor.2d" in r.ptx
    assert "tcgen05.fence::after_thread_sync" in r.ptx and "kind::f8f6f4" not in r.ptx and "kind::f16" not in r.ptx
    return r


@pytest.mark.parametrize("fa,fb,bn,stages,acc,out", [
    ("e4m3", "e4m3", 128, 6, 2, "bf16"),
    ("e5m2", "e4m3", 256, 4, 1, "f32"),
])
def test_mx_kernel_compiles_clean(fa, fb, bn, stages, acc, out):
    from support.mx_defs import build_mx
    fd = build_mx(fa, fb, n=4096, k=4096, bn=bn, stages=stages, acc_stages=acc, out=out)
    check_kernel(fd.lower("sm_100a"), bn)


@pytest.mark.parametrize("bn,stages,residual,tma", [(256, 4, False, "bias"), (128, 4, True, "res")])
def test_mx_kernel_with_a_tma_loaded_epilogue_operand_compiles_clean(bn, stages, residual, tma):
    # the operand's producer role on warp 2 and its ring beside the scale chunks' operand ring
    from support.mx_defs import build_mx
    low = build_mx("e4m3", "e4m3", n=4096, k=4096, bn=bn, stages=stages, residual=residual, tma=tma).lower("sm_100a")
    r = check_kernel(low, bn)
    assert r.ptx.count("cp.async.bulk.tensor.") == 5  # A, B, the two chunk boxes and the epilogue operand


def test_mx_kernel_auto_schedule_compiles():
    from support.mx_defs import build_mx
    low = build_mx("e4m3", "e5m2", n=4096, k=4096, epilogue="bias", auto=True).lower("sm_100a")
    assert low.tile["bn"] == 256 and low.tile["bk"] == 128
    check_kernel(low, 256)


@pytest.mark.parametrize("fa,fb,bn,stages,acc,fmt,group", [
    ("e4m3", "e4m3", 128, 6, 2, "e4m3", 128),
    ("e5m2", "e4m3", 256, 4, 1, "e5m2", 128),
    ("e4m3", "e4m3", 128, 6, 2, "e4m3", "row"),
])
def test_mx_kernel_with_a_computed_output_scale_compiles_clean(fa, fb, bn, stages, acc, fmt, group):
    from support.mx_defs import build_mx
    n = 4096 if group == 128 else 128
    low = build_mx(fa, fb, n=n, k=4096, bn=bn, stages=stages, acc_stages=acc, quant=(fmt, group)).lower("sm_100a")
    r = check_kernel(low, bn)  # no spills or stack frame, the block-scaled MMAs, copies and chunk loads
    assert f"cvt.rn.satfinite.{fmt}x2.f32" in r.ptx and "shfl.sync" not in r.ptx


@pytest.mark.parametrize("bn,stages,acc,out,epi,auto", [
    (128, 6, 2, "bf16", "bias_gelu", False),
    (256, 4, 1, "f32", None, False),
    (256, 0, 0, "bf16", "bias", True),  # the automatic schedule: 128 x 256 x 64 bytes (128 e2m1)
])
def test_nvf4_kernel_compiles_clean(bn, stages, acc, out, epi, auto):
    from support.mx_defs import build_nv
    low = build_nv(n=4096, k=4096, bn=bn, stages=stages, acc_stages=acc, epilogue=epi, out=out,
                   auto=auto).lower("sm_100a")
    assert (low.tile["bn"], low.tile["bk"]) == (bn, 64)
    r = check_kernel(low, bn, NVF4, 2, 2)
    assert "kind::mxf8f6f4" not in r.ptx


@pytest.mark.parametrize("bn,stages,acc,fmt,group", [(128, 6, 2, "e4m3", 128), (256, 4, 1, "e5m2", "row")])
def test_nvf4_kernel_with_a_computed_output_scale_compiles_clean(bn, stages, acc, fmt, group):
    from support.mx_defs import build_nv
    n = 4096 if group == 128 else 256
    low = build_nv(n=n, k=4096, bn=bn, stages=stages, acc_stages=acc, quant=(fmt, group)).lower("sm_100a")
    r = check_kernel(low, bn, NVF4, 2, 2)  # no spills or stack frame, the NVFP4 MMAs, copies and chunk loads
    assert f"cvt.rn.satfinite.{fmt}x2.f32" in r.ptx and "shfl.sync" not in r.ptx and "kind::mxf8f6f4" not in r.ptx


@pytest.mark.parametrize("bn,stages,residual,tma", [(256, 4, False, "bias"), (128, 4, True, "res")])
def test_nvf4_kernel_with_a_tma_loaded_epilogue_operand_compiles_clean(bn, stages, residual, tma):
    # the operand's producer role on warp 2 and its ring beside the operand ring that carries the two chunks
    from support.mx_defs import build_nv
    low = build_nv(n=4096, k=4096, bn=bn, stages=stages, residual=residual, tma=tma).lower("sm_100a")
    r = check_kernel(low, bn, NVF4, 2, 2)
    assert r.ptx.count("cp.async.bulk.tensor.") == 5  # A, B, the two chunk boxes and the epilogue operand


@pytest.mark.parametrize("kind,bn,stages,acc,fmt,tma", [
    ("bf16", 128, 4, 2, "e4m3", None),
    ("f8f6f4", 256, 4, 1, "e5m2", None),
    ("mx32", 128, 6, 2, "e4m3", None),
    ("mx32", 256, 4, 1, "e5m2", None),
    ("nv16", 128, 6, 2, "e4m3", None),
    ("mxf4", 256, 4, 1, "e4m3", None),
    ("mx32", 256, 4, 1, "e4m3", "bias"),  # a TMA-loaded bias: its role on warp 2 and its ring
    ("bf16", 128, 4, 1, "e5m2", "res"),   # a TMA-loaded residual tile
    ("bf16", 256, 4, 1, "e4m3", "tma"),   # the TMA-store epilogue: q staged (st.shared), the codes direct
    ("mx32", 256, 4, 1, "e5m2", "tma"),
    ("nv16", 256, 4, 1, "e4m3", "tma"),   # the other block-scaled kinds and kind::f8f6f4 with either combination
    ("mxf4", 128, 6, 2, "e4m3", "bias"),
    ("mxf4", 256, 4, 1, "e5m2", "tma"),
    ("f8f6f4", 256, 4, 1, "e4m3", "tma"),
])
def test_mx_format_output_compiles_clean(kind, bn, stages, acc, fmt, tma):
    """An MX-format output (quantize group="mx32", docs/fp8.md "MX formats") on each tcgen05 kernel kind, bias +
    GELU, N = K = 4096 (tma "bias" / "res": the operand read from its TMA-loaded ring slot; "tma": the TMA-store
    epilogue): no spills or stack frame; y
    stays in registers (one tcgen05.ld x32 per block, no local memory), the satfinite cvt of q, the e8m0 code's byte
    store, no shuffle."""
    from support import mx_out_defs
    fd = mx_out_defs.build(kind, n=4096, k=4096, fmt=fmt, bn=bn, stages=stages, acc_stages=acc,
                           tma=None if tma == "tma" else tma)
    if tma == "tma":
        fd.matmul_tensor.epilogue_store("tma")
    low = fd.lower("sm_100a")
    if tma in ("bias", "res"):
        assert "&tmE, " in low.source and "heddle::to_float(sE[" in low.source
    if kind in ("mx32", "nv16", "mxf4"):
        r = check_kernel(low, bn, *{"mx32": (MXF8, 4, 1), "nv16": (NVF4, 2, 2), "mxf4": (MXF4, 2, 1)}[kind])
    else:
        r = rt.compile(low.source, low.name, "sm_100a", isolate=True)
        assert r.stats.spill_stores == 0 and r.stats.spill_loads == 0 and r.stats.stack_frame == 0, r.ptxas
    print(low.name, r.stats.registers)
    assert f"cvt.rn.satfinite.{fmt}x2.f32" in r.ptx and "shfl.sync" not in r.ptx
    assert "tcgen05.ld.sync.aligned.32x32b.x32" in r.ptx and "st.global.u8" in r.ptx
    assert "ld.local" not in r.ptx and "st.local" not in r.ptx
    if tma == "tma":  # q leaves through the TMA store only
        assert "cp.async.bulk.tensor.2d.global.shared::cta" in r.ptx and "st.shared.v4.b32" in r.ptx


@pytest.mark.parametrize("bn,stages,acc,out,epi,auto,quant,tma", [
    (128, 6, 2, "bf16", "bias_gelu", False, None, None),
    (256, 4, 1, "f32", None, False, None, None),
    (256, 0, 0, "bf16", "bias", True, None, None),  # the automatic schedule: 128 x 256 x 64 bytes (128 e2m1)
    (128, 6, 2, "bf16", "bias_gelu", False, ("e4m3", 128), None),  # a computed output scale
    (256, 4, 1, "bf16", "bias", False, None, "bias"),  # a TMA-loaded bias: its role on warp 2 and its ring
])
def test_mxf4_kernel_compiles_clean(bn, stages, acc, out, epi, auto, quant, tma):
    """The fused MXFP4 kernel: two kind::mxf4 MMAs a k tile (scale factor IDs 0 and 2 in the descriptor), one
    tcgen05.cp per 128 rows (one chunk a k tile), no spills or stack frame."""
    from support.mx_defs import build_mxf4
    low = build_mxf4(n=4096, k=4096, bn=bn, stages=stages, acc_stages=acc, epilogue=epi, out=out, auto=auto,
                     quant=quant, tma=tma).lower("sm_100a")
    assert (low.tile["bn"], low.tile["bk"]) == (bn, 64)
    r = check_kernel(low, bn, MXF4, 2, 1)
    assert "kind::mxf8f6f4" not in r.ptx and "kind::mxf4nvf4" not in r.ptx
    if quant:
        assert "cvt.rn.satfinite.e4m3x2.f32" in r.ptx and "shfl.sync" not in r.ptx
    if tma:
        assert r.ptx.count("cp.async.bulk.tensor.") == 5  # A, B, the two chunk boxes and the bias
