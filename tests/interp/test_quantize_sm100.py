"""The computed output scale on sm_100a (docs/fp8.md "Computed output scales"): the tcgen05 kernel's epilogue
warpgroup quantizes its epilogue value per row and 128 columns (or per row) straight from tensor memory. With
tcgen05.ld 32x32b each thread holds one tile row's consecutive columns, so a group's amax is a per-thread max (no
shuffle); the thread stores the row's scale to D1 [M, groups], then reads the group again and stores q to D.
The CPU interpreter runs the printed kernels on ragged M, N, K against float64 (q dequantized by s within the
format's step, s up to f32 rounding), the schedule rules refuse the rest by name, and the quantize source
mutants that apply (mask, group, divisor) are caught."""
import pytest

import heddle
from support.interp_defs import needs_cxx
from support.quant_defs import (QUANT_KINDS_SM100, assert_quant_mutants_caught, bare_quant, dequantized_against_float64,
                                interpreted_sm100, quant_fusion, scheduled_sm100, tensors)
from support.tcgen05_defs import build_fp8, roles
from support.wgmma_defs import schedule_sm90

QUANT_KINDS = QUANT_KINDS_SM100


def check(fd, M, seed=0):
    ins = tensors(fd, M, seed)
    k, r = interpreted_sm100(fd, ins)  # numbers: dequantized_against_float64
    return k, ins, r


@needs_cxx
@pytest.mark.parametrize("fmt,group,n,bn", [
    ("e4m3", 128, 200, 128),    # two n tiles, the second with a group of 72 columns inside N and 56 past it
    ("e5m2", 128, 300, 256),    # two groups a tile; the second tile's second group lies wholly past N
    ("e4m3", "row", 120, 128),  # per row: one n tile covers N = 120
])
def test_quantize_epilogue_interpreted(fmt, group, n, bn):
    fd = scheduled_sm100(n=n, k=80, bn=bn, fmt=fmt, group=group)  # K = 80: a partial second k tile of 64
    k, ins, r = check(fd, 70)  # M = 70: ragged against the 128 rows of a tile
    src = k.lowered.source
    assert "tcgen05.ld" in src and "__shfl" not in src  # the row's columns are one thread's
    assert src.count("heddle::sm100::tmem_load_32(taddr + c0, v);") == 2  # the group read twice: amax, then q
    assert ("_q128_" if group == 128 else "_qrow_") in k.name and "sm100" in k.name
    dequantized_against_float64(fd, ins, r.output, fmt, group)


@needs_cxx
@pytest.mark.parametrize("tma,group,n,bn", [
    ("bias", 128, 200, 128),                               # the bias row's ring, two n tiles, a ragged last group
    pytest.param("res", "row", 200, 256, marks=pytest.mark.slow),  # a residual tile's ring (rows lr), per row
])
def test_quantize_with_a_tma_loaded_epilogue_operand(tma, group, n, bn):
    # the bias / residual producer warp (warp 2) loads the tile's box into its ring; the epilogue reads the slot in
    # both passes of each group (the amax, then q), all between the slot's fullE wait and its emptyE arrive
    from heddle.interpret import interpret
    fd = scheduled_sm100(n=n, k=80, bn=bn, tma=tma, group=group, residual=tma == "res", acc_stages=1)
    k = heddle.Kernel.build(fd, "sm_100a", rtc=False)
    ins = tensors(fd, 150)  # M = 150: two m tiles, the second ragged; one CTA walks every tile (the 2-stage ring wraps)
    r = interpret(k, *ins, sms=1, reference=False)
    assert r.ok, f"{k.name}:\n{r.report()}"
    src = k.lowered.source
    assert "_tmae2" in k.name and ("_q128_" if group == 128 else "_qrow_") in k.name, k.name
    assert src.count("heddle::sm100::tmem_load_32(taddr + c0, v);") == 2
    assert src.count("heddle::to_float(sE[") == 2  # the slot read in the amax pass and in the q pass
    assert "E_" + tma not in src.split("__global__")[1].split("{", 1)[1]  # no global read of the cached operand
    i_st = src.index("quantized to e4m3")
    assert src.rindex("mbar_wait((fullE", 0, i_st) and src.index("mbar_arrive((emptyE", i_st) > src.rindex("/ qs)")
    dequantized_against_float64(fd, ins, r.output, "e4m3", group)


@needs_cxx
def test_quantize_mutants_are_caught():
    fd = scheduled_sm100(n=200, k=80)
    k, ins, r = check(fd, 70)
    dequantized_against_float64(fd, ins, r.output, "e4m3", 128)
    assert_quant_mutants_caught(k, ins, QUANT_KINDS + ("quant_shuffle",), QUANT_KINDS)  # no shuffle to mutate


@needs_cxx
@pytest.mark.slow
@pytest.mark.parametrize("tma,n,least", [(None, 200, 25), ("bias", 328, 40)])
def test_sync_mutants_are_caught(tma, n, least):
    """The group read twice from tensor memory rests on the accumulator ring: with one accumulator stage and both
    n tiles on one CTA the MMA of the next tile waits for this tile's accEmpty arrive, after the second read.
    Every sync mutant of the printed kernel is caught (29 on this kernel; about 40 s). With a TMA-loaded bias the
    CTA walks three n tiles, so the bias ring's producer waits for the emptyE arrive after both reads of a slot."""
    from heddle.interpret import mutation_kill_rate
    fd, a, b = quant_fusion(n=n, k=80)
    schedule_sm90(fd, a, b, bm=128, bn=128, bk=64, wgs=1, stages=2, roles=roles(1))
    if tma:
        fd.cache_after(next(t for t in fd.inputs if t.name == tma), "tma_load").circular_buffer(2)
    k = heddle.Kernel.build(fd, "sm_100a", rtc=False)
    res = mutation_kill_rate(k, *tensors(fd, 70), sms=1, schedules=(("adversarial", 0),))
    assert {"delete_sync", "flip_parity", "swap_stage"} <= set(res["by_kind"])
    assert res["total"] >= least and not res["survivors"], (res["total"], res["survivors"])


@pytest.mark.parametrize("how,msg", [
    ("bn64", r"the n tile 64 splits a group of 128 columns between CTAs"),
    ("row_wide", r"a scale per row needs one CTA tile to cover all of N .* N = 300 but the n tile is 128"),
])
def test_schedule_rules_name_the_rule(how, msg):
    fd, a, b = quant_fusion(n=300, k=80, group="row" if how == "row_wide" else 128)
    schedule_sm90(fd, a, b, bm=128, bn=64 if how == "bn64" else 128, bk=64, wgs=1, stages=2, roles=roles(2))
    with pytest.raises(heddle.ScheduleError, match=msg):
        heddle.Kernel.build(fd, "sm_100a", rtc=False)


def test_a_plain_8bit_output_is_still_refused():
    # only the q of a computed output scale is an 8-bit output of the tcgen05 kernel; a cast to e4m3 is not
    fd = build_fp8("e4m3", "e4m3", "row", bn=128, n=200, k=80, out="e4m3")
    with pytest.raises(heddle.ScheduleError, match=r"output T\d+ is e4m3: an 8-bit float output is lowered on the "
                                                   r"sm_90a FP8 wgmma kernels only .* on sm_100a the q of "
                                                   r"heddle.ops.quantize"):
        heddle.Kernel.build(fd, "sm_100a", rtc=False)


def test_16bit_operands_are_refused_by_name():
    # like sm_90a: the quantized output needs 8-bit operands (the FP8 kernel family)
    fd, a, b = bare_quant("bf16", k=80, n=200)
    schedule_sm90(fd, a, b, bm=128, bn=128, bk=16, wgs=1, stages=2, roles=roles(2))
    with pytest.raises(heddle.ScheduleError, match=r"an 8-bit float output is lowered on the sm_90a"):
        heddle.Kernel.build(fd, "sm_100a", rtc=False)


def test_the_simulator_refuses_it_by_name():
    fd = scheduled_sm100(n=200, k=80)
    k = heddle.Kernel.build(fd, "sm_100a", rtc=False)
    with pytest.raises(heddle.HeddleError, match=r"quantizes with a computed output scale, which the kernel-IR "
                                                 r"simulator does not model; heddle.interpret runs the printed"):
        heddle.simulate(k, tensors(fd, 70), reference=False)
