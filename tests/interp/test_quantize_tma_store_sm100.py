"""The computed output scale through the sm_100a tcgen05 TMA-store epilogue (docs/fp8.md "Computed output scales",
docs/blackwell.md "The TMA-store epilogue"; codegen/tcgen05_printer.cpp quantStagedTmemEpilogue): per staged chunk of
128 one-byte columns the epilogue thread of tile row lr (tcgen05.ld 32x32b) reduces its group's amax over tensor
memory, stores s directly (no slot, no tensor map), reads the chunk again and writes satfinite(y / s) 16 codes at a
time into its row of the 128-byte swizzled slot; the chunk's proxy fence, named barrier and TMA store follow.

The CPU interpreter runs the printed kernels against float64 on ragged shapes (M, N not tile multiples; one CTA walks
every tile, so the staging slots and the accumulator ring wrap): e4m3 per 128 columns with a 256-wide n tile (two
chunks a tile, the last tile's second group wholly past N) by default; under -m slow e5m2 per row over a 256-wide
tile (each chunk reduces the whole row again) with a TMA-loaded residual, a TMA-loaded bias, and the MXFP8 and NVFP4
kernels. The quantize source mutants and the TMA store's own (proxy fence, bulk waits, named barriers deleted, the
staging writes unswizzled, the accumulator released before the last chunk's tcgen05.ld) are caught."""
import pytest

import heddle
from heddle.interpret import _Mutated, interpret, source_mutants
from support.interp_defs import needs_cxx
from support.quant_defs import QUANT_KINDS_SM100, dequantized_against_float64, scheduled_sm100, tensors
from support.tcgen05_defs import tma_store_mutants


def staged_q(k, fmt="e4m3", sd=2):
    """The printed kernel stages q (TmaTile<128, 128, fmt>, stage_16 of 16 codes) and stores s directly."""
    src = k.lowered.source
    tile = f"heddle::sm90::TmaTile<128, 128, heddle::{fmt}>"
    assert k.name.endswith(f"_tmas{sd}") and ("_q128_" in k.name or "_qrow_" in k.name), k.name
    assert f"heddle::sm100::stage_16<{tile}>(slot, lr, " in src and f"tma_store_tile<{tile}, 2>(&tmD, m0, n0" in src
    assert "D1[(long long)qrow * " in src and "tmD1" not in src  # s stored directly, no slot or map of its own
    assert "D[(long long)row * ldd + col]" not in src and "__shfl" not in src
    assert "heddle::sm90::fence_proxy_async();" in src and "heddle::sm90::named_barrier(1, 128);" in src
    return src


def run(fd, M, sms=1, seed=0):
    k = heddle.Kernel.build(fd, "sm_100a", rtc=False)
    ins = tensors(fd, M, seed)
    r = interpret(k, *ins, sms=sms, reference=False)
    assert r.ok, f"{k.name}:\n{r.report()}"
    return k, ins, r


@needs_cxx
def test_q128_through_the_tma_store():
    # M = 150, N = 304, bn = 256: 2 x 2 tiles, one CTA walks all four (8 chunks: both slots and the one accumulator
    # stage wrap); the second n tile holds 48 columns of N, its second group lies wholly past N (no scale stored)
    fd = scheduled_sm100(n=304, k=80, bn=256, store="tma", acc_stages=1)
    k, ins, r = run(fd, 150)
    src = staged_q(k)
    assert src.count("heddle::sm100::tmem_load_32(taddr + c0, v);") == 4  # per chunk: the group's amax, then q
    assert "amax per thread over the group's columns 128..255" in src  # the second chunk is the second group
    dequantized_against_float64(fd, ins, r.output, "e4m3", 128)


@needs_cxx
def test_quant_and_tma_store_mutants_are_caught():
    # 2 x 2 tiles of 128 x 128 on one CTA, one accumulator stage: the slots and the accumulator wrap
    fd = scheduled_sm100(n=208, k=80, bn=128, store="tma", acc_stages=1)
    k, ins, r = run(fd, 150)
    dequantized_against_float64(fd, ins, r.output, "e4m3", 128)
    src = k.lowered.source
    muts = source_mutants(src, kinds=QUANT_KINDS_SM100)
    assert {m.kind for m in muts} == set(QUANT_KINDS_SM100)
    muts += [m for m in source_mutants(src, kinds=("delete_sync",))
             if any(s in m.what for s in ("fence_proxy_async", "bulk_wait_read", "named_barrier(1"))]
    own = tma_store_mutants(src)
    assert {m.kind for m in own} == {"stage_swizzle", "early_release"}
    for mu in muts + own:
        r = interpret(_Mutated(k, mu.source), *ins, sms=1, max_findings=2)
        assert not r.ok, f"survived: {mu.kind} line {mu.line} {mu.what}"


@needs_cxx
@pytest.mark.slow
@pytest.mark.parametrize("case", ["row_bn256_res", "bias_tma"])
def test_other_quantized_tma_stores(case):
    if case == "row_bn256_res":  # per row over two chunks (each reduces the whole row again), a residual ring
        fd = scheduled_sm100(n=208, k=80, bn=256, store="tma", group="row", fmt="e5m2", tma="res", residual=True)
        fmt, group = "e5m2", "row"
    else:  # group 128, the bias by TMA, two accumulator stages
        fd = scheduled_sm100(n=208, k=80, bn=128, store="tma", tma="bias")
        fmt, group = "e4m3", 128
    k, ins, r = run(fd, 150)
    src = staged_q(k, fmt)
    assert "_tmae2" in k.name and "heddle::to_float(sE[" in src
    if group == "row":
        assert src.count("amax per thread over the group's columns 0..255") == 2
    dequantized_against_float64(fd, ins, r.output, fmt, group)


@needs_cxx
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["mx32", "nv16"])
def test_block_scaled_kernels_quantize_through_the_tma_store(kind):
    from support.mx_defs import build_mx, build_nv, mx_quant_tensors, nv_quant_tensors
    if kind == "mx32":
        fd = build_mx("e4m3", "e4m3", n=208, k=320, bn=128, quant=("e4m3", 128))
        ts = mx_quant_tensors(fd, 130, seed=1)
    else:
        fd = build_nv(n=208, k=320, bn=128, quant=("e4m3", 128))
        ts = nv_quant_tensors(fd, 130, seed=1)
    fd.matmul_tensor.epilogue_store("tma")
    k = heddle.Kernel.build(fd, "sm_100a", rtc=False)
    staged_q(k)
    r = interpret(k, *ts, sms=1, reference=False)
    assert r.ok, f"{k.name}:\n{r.report()}"
    dequantized_against_float64(fd, ts, r.output, "e4m3", 128)


def test_an_8bit_chunk_needs_an_n_tile_of_128s():
    fd = scheduled_sm100(n=64, k=80, bn=64, store="tma", group="row")
    with pytest.raises(heddle.ScheduleError, match=r"epilogue_store\(T\d+, 'tma'\): output T\d+ is e4m3; the "
                                                   r"TMA-store epilogue stages 8-bit outputs in chunks of 128 columns "
                                                   r"\(one 128-byte swizzle row\), but the n tile is 64"):
        heddle.Kernel.build(fd, "sm_100a", rtc=False)


def test_s_before_q_names_the_output_order():
    # the TMA store stages q only; with s first the output-order rule is the one named (not "2 outputs")
    from support.quant_defs import bare_quant
    from support.tcgen05_defs import roles
    from support.wgmma_defs import schedule_sm90
    fd, a, b = bare_quant(k=256, n=256, s_first=True)
    schedule_sm90(fd, a, b, bm=128, bn=128, bk=128, wgs=1, stages=2, roles=roles(2)).epilogue_store("tma")
    with pytest.raises(heddle.ScheduleError, match=r"quantize: mark q, then s, as the fusion's outputs"):
        heddle.Kernel.build(fd, "sm_100a", rtc=False)
