"""The fused MXFP4 kernel (scales="mx32" with e2m1x2 operands on sm_100a, docs/fp8.md "MX formats"): the NVFP4 kernel's
operand tiles (A [M, K/2], B [N, K/2] bytes, a k tile of 128 e2m1 = 64 bytes a row, the 64-byte swizzle) with the
MXFP8 kernel's one 512-byte ue8m0 scale chunk per 128 rows and k tile in the operand ring (lower/passes/
mx_scale_ring.cpp), then MmaSm100Mxf4 in the MMA role (tcgen05.cp of the slot's chunks, two K = 64
kind::mxf4.block_scale.scale_vec::2X MMAs reading the two half words of each row's scale word, one commit), run by the
CPU interpreter on its printed source against heddle.reference.evaluate's float64 (checked against a direct sum in
tests/ir/test_mxfp4_scales.py). Ragged M, N, K (K a multiple of 32, not of 128: the last k tile's operand bytes and
scale bytes past K zero-filled, an odd number of 32-chunks in it), rings that wrap, n tiles of 128 and 256; a
TMA-loaded bias; the protocol's mutants caught."""

import pytest

import heddle
from heddle.interpret import interpret
from support.interp_defs import kernel, needs_cxx
from support.mx_defs import (assert_epilogue_operand_ring, assert_protocol_mutant_caught, assert_sync_mutants_caught,
                             build_mxf4, fp4_within_f32_sum, mxf4_tensors, protocol_mutants)

pytestmark = needs_cxx


def within_f32_sum(fd, r, ts, out="bf16"):
    fp4_within_f32_sum(fd, r, ts, out, block=32)


def assert_mxf4_kernel(k, bn):
    assert f"using Mma = heddle::MmaSm100Mxf4<{bn}>;" in k.source
    assert "_mxf4_" in k.name, k.name
    # one box of one chunk per operand and k tile: rows 4 kt .. 4 kt + 3 of the row block
    assert k.source.count("heddle::sm90::tma_load_box<3>(") == 2 and k.source.count(", 0, kt * 4, ") == 2
    assert k.lowered.tile["bk"] == 64  # stored bytes: 128 e2m1
    maps = {m["param"]: m for m in k.lowered.tensor_maps}
    assert maps["tmA"]["swizzle"] == 64 and maps["tmA"]["box_cols"] == 64  # 64 bytes a row, the 64-byte swizzle
    assert (maps["tmSFA"]["box_rows"], maps["tmSFA"]["box_depth"]) == (4, 1)
    assert (maps["tmSFB"]["box_rows"], maps["tmSFB"]["box_depth"]) == (4, bn // 128)


@pytest.mark.parametrize("bn,stages,acc,M,N,K,out,epi", [
    # 2 x 2 tiles over 2 CTAs (both rings wrap), K = 352: 2.75 k tiles, the last one three 32-chunks (K/32 = 11 scale
    # columns, padded to 12 by torch), its fourth scale byte and its operand bytes past K/2 zero
    (128, 2, 1, 130, 200, 352, "bf16", "bias_gelu"),
    # a 256-wide tile: the second n tile's second 128 rows start past N = 300 (no row block there); K = 160
    pytest.param(256, 2, 1, 100, 300, 160, "bf16", "bias_gelu", marks=pytest.mark.slow),
    pytest.param(128, 3, 2, 260, 136, 672, "f32", None, marks=pytest.mark.slow),
    pytest.param(256, 4, 1, 77, 200, 224, "f16", "bias", marks=pytest.mark.slow),
])
def test_mxf4_kernel_runs_with_right_numbers(bn, stages, acc, M, N, K, out, epi):
    fd = build_mxf4(n=N, k=K, bn=bn, stages=stages, acc_stages=acc, epilogue=epi, out=out)
    k = kernel(fd, "sm_100a")
    assert_mxf4_kernel(k, bn)
    ts = mxf4_tensors(fd, M, seed=1, codes=(122, 128) if out == "f16" else (122, 132))
    within_f32_sum(fd, interpret(k, *ts, sms=2, reference=False), ts, out)


@pytest.mark.slow
def test_mxf4_kernel_with_a_tma_loaded_bias():
    # the bias cached with tma_load: its producer role (warp 2) and ring beside the operand ring that carries the scale
    # chunk; 2 x 2 tiles over 2 CTAs (every ring wraps), K = 320: 2.5 k tiles
    fd = build_mxf4(n=200, k=320, bn=128, stages=2, acc_stages=1, tma="bias")
    k = kernel(fd, "sm_100a")
    assert_mxf4_kernel(k, 128)
    assert_epilogue_operand_ring(k, "bias")
    ts = mxf4_tensors(fd, 130, seed=4)
    within_f32_sum(fd, interpret(k, *ts, sms=2, reference=False), ts)


@pytest.mark.slow
def test_mxf4_kernel_auto_schedule_runs_with_right_numbers():
    fd = build_mxf4(n=512, k=256, auto=True)
    k = kernel(fd, "sm_100a")
    assert "MmaSm100Mxf4<256>" in k.source
    ts = mxf4_tensors(fd, 150, seed=2)
    within_f32_sum(fd, interpret(k, *ts, sms=2, schedule="random", seed=3, reference=False), ts)


def mutant_case():
    # one CTA walks both n tiles over a 2-stage ring: every stage is refilled, the accumulator stage reused
    fd = build_mxf4(n=200, k=384, bn=128, stages=2, acc_stages=1)
    return fd, kernel(fd, "sm_100a"), mxf4_tensors(fd, 100, seed=3)


# the protocol's mutants of the printed source (support/mx_defs.py protocol_mutants: three by default, the rest
# -m slow) and, -m slow, every default sync mutant (heddle.interpret's mutation_kill_rate)
@pytest.mark.parametrize("what,edit", protocol_mutants(4) + [
    pytest.param("sync", "sync", id="sync-mutants", marks=pytest.mark.slow)])
def test_mxf4_mutants_are_caught(what, edit):
    fd, k, ts = mutant_case()
    if edit == "sync":
        return assert_sync_mutants_caught(k, ts)
    # the expect-tx: sA, sB and one chunk each of A and B
    assert_protocol_mutant_caught(fd, k, ts, what, edit, 2 * 128 * 64 + 512 + 512)


def test_the_plan_names_the_mxf4_orderings_and_the_simulator_refuses_by_name():
    fd, k, ts = mutant_case()
    text = k.explain()
    assert "WAR tmem scale columns (mma -> tcgen05.cp)" in text and "not a pipelined pair" in text
    assert "WAR sA, sB, sSFA, sSFB (mma -> load)" in text  # the chunks ride the ring's empty / full barriers
    assert "tx 17408" in text  # 2 x 8192 + 2 x 512
    assert ("mx32 scales: the k tile's chunks (512 bytes of A, 512 of B) by TMA into the ring slot"
            in k.lowered.sync_summary)
    assert "8 scale columns and issues the two block-scaled MMAs" in k.lowered.sync_summary
    with pytest.raises(heddle.HeddleError, match="is the mx32 \\(MXFP4\\) block-scaled tcgen05 kernel"):
        heddle.simulate(k, ts)


@pytest.mark.slow
def test_mxf4_kernel_quantizes_with_right_numbers():
    """A computed output scale (heddle.ops.quantize: q e4m3, s per row and 128 columns) on the MXFP4 kernel: the plain
    tcgen05 epilogue warpgroup, 2 x 2 tiles over 2 CTAs, the second n tile's group partly past N = 200."""
    from support.quant_defs import dequantized_against_float64, interpreted_sm100
    fd = build_mxf4(n=200, k=352, bn=128, stages=2, acc_stages=1, quant=("e4m3", 128))
    ts = mxf4_tensors(fd, 130, seed=1)
    k, r = interpreted_sm100(fd, ts)
    assert "using Mma = heddle::MmaSm100Mxf4<128>;" in k.lowered.source and "_q128_" in k.name
    dequantized_against_float64(fd, ts, r.output, "e4m3", 128)
