"""The computed output scale on the MXFP8 kernel (scales="mx32" on sm_100a; docs/fp8.md "Computed output scales" and
"MX formats"): an MXFP8 (or NVFP4: scales="nv16", "The NVFP4 kernel") layer's output re-quantized in the epilogue
(heddle.ops.quantize: q e4m3 / e5m2, s f32 per row and 128 columns or per row), so the next layer takes (q, s)
without a separate pass. The block-scaled kernel's epilogue warpgroup is the plain tcgen05 kernel's: it reads the
accumulator columns only (the scale columns lie past them), one tile row a thread, so the group's amax is the same
per-thread max. The printed kernel interpreted on ragged M, N, K (K a multiple of 32, not of 128: a partial last k
tile) against float64 (s up to f32 rounding, q * s within one step of the format), the quantize source mutants that
apply caught (NVRTC: tests/isa/test_tcgen05_mx_compile.py). The NVFP4 kernel's epilogue is the same warpgroup
(MmaSm100Nvf4::row_addr is MmaSm100's too): its cases below."""
import pytest

import heddle
from support.interp_defs import needs_cxx
from support.mx_defs import build_mx, build_nv, mx_quant_tensors, nv_quant_tensors
from support.quant_defs import (QUANT_KINDS_SM100, assert_quant_mutants_caught, dequantized_against_float64,
                                interpreted_sm100)


@needs_cxx
@pytest.mark.parametrize("fa,fb,bn,stages,acc,M,N,K,fmt,group", [
    # 2 x 2 tiles over 2 CTAs (the operand ring and the one accumulator stage wrap), K = 320: 2.5 k tiles; the
    # second n tile holds 72 columns of N, the rest of its group past N
    ("e4m3", "e4m3", 128, 2, 1, 130, 200, 320, "e4m3", 128),
    # mixed formats, a 256-wide tile (two groups a tile): the second tile's second 128 rows of B start past N =
    # 300 (its scale chunk is TMA zero fill) and its second group lies wholly past N (no scale stored)
    pytest.param("e5m2", "e4m3", 256, 2, 1, 100, 300, 384, "e5m2", 128, marks=pytest.mark.slow),
    # per row: one n tile covers N = 120; 3 operand stages, 2 accumulator stages, K = 416 (3.25 k tiles)
    pytest.param("e4m3", "e5m2", 128, 3, 2, 260, 120, 416, "e4m3", "row", marks=pytest.mark.slow),
])
def test_mx_kernel_quantizes_with_right_numbers(fa, fb, bn, stages, acc, M, N, K, fmt, group):
    fd = build_mx(fa, fb, n=N, k=K, bn=bn, stages=stages, acc_stages=acc, quant=(fmt, group))
    ts = mx_quant_tensors(fd, M, seed=1)
    k, r = interpreted_sm100(fd, ts)  # numbers: dequantized_against_float64
    src = k.lowered.source
    assert f"using Mma = heddle::MmaSm100Mx<{bn}, T, heddle::{fb}>;" in src  # the block-scaled step
    assert src.count("heddle::sm100::tmem_load_32(taddr + c0, v);") == 2  # the group read twice: amax, then q
    assert "__shfl" not in src and ("_q128_" if group == 128 else "_qrow_") in k.name
    dequantized_against_float64(fd, ts, r.output, fmt, group)


@needs_cxx
@pytest.mark.slow
def test_mx_kernel_quantizes_with_a_tma_loaded_bias():
    # the bias row's producer warp and ring beside the operand ring with its scale chunks: the epilogue reads the
    # slot in both passes of each group, between the slot's fullE wait and its emptyE arrive
    fd = build_mx("e4m3", "e4m3", n=200, k=320, bn=128, quant=("e4m3", 128), tma="bias")
    ts = mx_quant_tensors(fd, 130, seed=1)
    k, r = interpreted_sm100(fd, ts)
    assert "_tmae2" in k.name and k.lowered.source.count("heddle::to_float(sE[") == 2, k.name
    dequantized_against_float64(fd, ts, r.output, "e4m3", 128)


@needs_cxx
def test_quantize_mutants_are_caught_on_the_mx_kernel():
    # mx_quant_tensors: a column past N would dominate its group's amax, so the mask mutant shows
    fd = build_mx("e4m3", "e4m3", n=200, k=320, bn=128, quant=("e4m3", 128))
    ts = mx_quant_tensors(fd, 130, seed=1)
    k, _ = interpreted_sm100(fd, ts)
    assert_quant_mutants_caught(k, ts, QUANT_KINDS_SM100 + ("quant_shuffle",),
                                QUANT_KINDS_SM100)


@needs_cxx
@pytest.mark.parametrize("bn,stages,acc,M,N,K,fmt,group", [
    # 2 x 2 tiles over 2 CTAs, K = 320: 2.5 k tiles of 128 e2m1 (the last one's second scale chunk past the scale
    # tensor); the second n tile holds 72 columns of N, the rest of its group past N
    (128, 2, 1, 130, 200, 320, "e4m3", 128),
    # a 256-wide tile (two groups a tile) whose second 128 rows of B start past N = 300; e5m2
    pytest.param(256, 2, 1, 100, 300, 320, "e5m2", 128, marks=pytest.mark.slow),
    # per row: one n tile covers N = 120; 3 operand stages, 2 accumulator stages
    pytest.param(128, 3, 2, 260, 120, 320, "e4m3", "row", marks=pytest.mark.slow),
])
def test_nvf4_kernel_quantizes_with_right_numbers(bn, stages, acc, M, N, K, fmt, group):
    fd = build_nv(n=N, k=K, bn=bn, stages=stages, acc_stages=acc, quant=(fmt, group))
    ts = nv_quant_tensors(fd, M, seed=1)
    k, r = interpreted_sm100(fd, ts)  # numbers: dequantized_against_float64
    src = k.lowered.source
    assert f"using Mma = heddle::MmaSm100Nvf4<{bn}>;" in src  # the NVFP4 step
    assert src.count("heddle::sm100::tmem_load_32(taddr + c0, v);") == 2  # the group read twice: amax, then q
    assert "__shfl" not in src and ("_q128_" if group == 128 else "_qrow_") in k.name and "_nv16_" in k.name
    dequantized_against_float64(fd, ts, r.output, fmt, group)


@needs_cxx
def test_quantize_mutants_are_caught_on_the_nvf4_kernel():
    # nv_quant_tensors: a column past N would dominate its group's amax, so the mask mutant shows
    fd = build_nv(n=200, k=320, bn=128, quant=("e4m3", 128))
    ts = nv_quant_tensors(fd, 130, seed=1)
    k, _ = interpreted_sm100(fd, ts)
    assert_quant_mutants_caught(k, ts, QUANT_KINDS_SM100 + ("quant_shuffle",), QUANT_KINDS_SM100)


def test_the_simulator_refuses_it_by_name():
    fd = build_mx("e4m3", "e4m3", n=200, k=320, quant=("e4m3", 128))
    k = heddle.Kernel.build(fd, "sm_100a", rtc=False)
    with pytest.raises(heddle.HeddleError, match=r"kernel-IR simulator does not model"):
        heddle.simulate(k, mx_quant_tensors(fd, 130), reference=False)


@pytest.mark.parametrize("group,bn,n,msg", [
    ("row", 128, 300, r"a scale per row needs one CTA tile to cover all of N .* N = 300 but the n tile is 128"),
])
def test_the_quantize_rules_apply_to_the_mx_kernel(group, bn, n, msg):
    fd = build_mx("e4m3", "e4m3", n=n, k=320, bn=bn, quant=("e4m3", group))
    with pytest.raises(heddle.ScheduleError, match=msg):
        heddle.Kernel.build(fd, "sm_100a", rtc=False)
