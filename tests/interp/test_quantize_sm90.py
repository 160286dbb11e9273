"""The computed output scale on sm_90a (docs/fp8.md "Computed output scales"): the warp-specialized wgmma
kernels (cooperative, ping-pong) quantize their epilogue value per row and 128 columns (or per row) with the
amax reduced over the quad of lanes that holds a row's columns of the D fragment (two shfl.xor steps), store q
to D and the scale to D1 [M, groups]. The CPU interpreter runs the printed kernels on ragged M, N, K against
float64 (q dequantized by s against the reference within e4m3's step, s up to f32 rounding), the schedule rules
refuse the rest by name, and the quantize source mutants are caught."""
import pytest

import heddle
from heddle.interpret import interpret
from support.fp8_defs import fp8_schedule
from support.interp_defs import needs_cxx
from support.quant_defs import (assert_quant_mutants_caught, bare_quant, dequantized_against_float64, quant_fusion,
                                tensors)

QUANT_KINDS = ("quant_shuffle", "quant_mask", "quant_group", "quant_divisor")


def check(fd, M, seed=0):
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    ins = tensors(fd, M, seed)
    # numbers: dequantized_against_float64 (q's absolute error scales with 1 / s: interpret's per-dtype atol
    # would read f32's tail of gelu, ~1e-7 apart from float64, times 57344 / amax for e5m2)
    r = interpret(k, *ins, sms=2, reference=False)
    assert r.ok, f"{k.name}:\n{r.report()}"
    return k, ins, r


@needs_cxx
@pytest.mark.parametrize("variant,fmt,group,n", [
    ("coop", "e4m3", 128, 300),  # N = 300: three groups over three n tiles, the last group of 44 columns
    pytest.param("pingpong", "e5m2", 128, 200, marks=pytest.mark.slow),  # e5m2; the last n tile half past N
    pytest.param("pingpong", "e4m3", "row", 120, marks=pytest.mark.slow),  # per row: one n tile covers N = 120
])
def test_quantize_epilogue_interpreted(variant, fmt, group, n):
    fd, a, b = quant_fusion(n=n, k=144, fmt=fmt, group=group)
    fp8_schedule(fd, a, b, variant=variant, bn=128)
    k, ins, r = check(fd, 100)  # M = 100: ragged against 128 rows; K = 144: a partial last k tile
    src = k.lowered.source
    assert src.count("__shfl_xor_sync(0xffffffffu, amax, 1)") and src.count("__shfl_xor_sync(0xffffffffu, amax, 2)")
    assert ("_q128_" if group == 128 else "_qrow_") in k.name
    dequantized_against_float64(fd, ins, r.output, fmt, group)


@needs_cxx
@pytest.mark.slow
def test_quantize_mutants_are_caught():
    fd, a, b = quant_fusion(n=300, k=144)
    fp8_schedule(fd, a, b, variant="coop", bn=128)
    k, ins, r = check(fd, 100)
    dequantized_against_float64(fd, ins, r.output, "e4m3", 128)
    assert_quant_mutants_caught(k, ins, QUANT_KINDS, QUANT_KINDS)


@pytest.mark.parametrize("how,msg", [
    ("bn64", r"the n tile 64 splits a group of 128 columns between CTAs"),
    ("row_wide", r"a scale per row needs one CTA tile to cover all of N .* N = 300 but the n tile is 128"),
    ("pipeline", r"lowered on the sm_90a warp-specialized wgmma kernels .* and the sm_100a tcgen05 kernel only"),
    # through the TMA-store epilogue (q staged, s direct): tests/interp/test_fp8_tma_store_sm90.py and its refusals
    ("epi_tma", r"an epilogue role \(sm_90a\) and TMA-loaded epilogue operands are not lowered with a computed"),
])
def test_schedule_rules_name_the_rule(how, msg):
    fd, a, b = quant_fusion(n=300, group="row" if how == "row_wide" else 128)
    if how == "pipeline":
        fp8_schedule(fd, a, b, variant="pipeline", bm=64, stages=3, prefetch=1)
    else:
        fp8_schedule(fd, a, b, variant="coop", bn=64 if how == "bn64" else 128)
        if how == "epi_tma":
            fd.cache_after(next(t for t in fd.inputs if t.name == "bias"), "tma_load").circular_buffer(2)
    with pytest.raises(heddle.ScheduleError, match=msg):
        heddle.Kernel.build(fd, "sm_90a", rtc=False)


def test_outputs_must_be_q_then_s():
    fd, a, b = bare_quant(s_first=True)
    fp8_schedule(fd, a, b, variant="coop", bn=128)
    with pytest.raises(heddle.ScheduleError, match=r"mark q, then s, as the fusion's outputs"):
        heddle.Kernel.build(fd, "sm_90a", rtc=False)


def test_the_simulator_refuses_it_by_name():
    # the kernel-IR simulator models one element per thread; the quad's shuffles are the printed kernel's
    fd, a, b = quant_fusion(n=136, k=144)
    fp8_schedule(fd, a, b, variant="coop", bn=128)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    with pytest.raises(heddle.HeddleError, match=r"quantizes with a computed output scale, which the kernel-IR "
                                                 r"simulator does not model; heddle.interpret runs the printed"):
        heddle.simulate(k, tensors(fd, 70), reference=False)
