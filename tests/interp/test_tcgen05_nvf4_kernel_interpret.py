"""The fused NVFP4 kernel (scales="nv16" on sm_100a, docs/fp8.md "MX formats"): the MXFP8 kernel's machinery with
packed e2m1 operands (A [M, K/2], B [N, K/2] bytes, a k tile of 128 e2m1 = 64 bytes a row, the 64-byte swizzle) and
two 512-byte ue4m3 scale chunks per 128 rows and k tile in the operand ring (lower/passes/mx_scale_ring.cpp), then
MmaSm100Nvf4 in the MMA role (tcgen05.cp of the slot's chunks, two K = 64 block-scaled tcgen05.mma with
scale_vec::4X, one commit), run by the CPU interpreter on its printed source against heddle.reference.evaluate's
float64 (decode_e2m1x2 and the blocked scales, checked against a direct sum in tests/ir/test_nvfp4_scales.py).
Ragged M, N, K (K a multiple of 32, not of 128: the last k tile's operand bytes zero-filled, and with K/64 odd its
second scale chunk wholly past the scale tensor's rows: TMA zero fill), rings that wrap, n tiles of 128 and 256
(a 256-wide tile whose second 128 rows start past N); a TMA-loaded bias / residual (its producer role and ring beside
the operand ring that carries the chunks); the protocol's mutants caught."""

import pytest

import heddle
from heddle.interpret import interpret
from support.interp_defs import kernel, needs_cxx
from support.mx_defs import (assert_epilogue_operand_ring, assert_protocol_mutant_caught, assert_sync_mutants_caught,
                             build_nv, fp4_within_f32_sum, nv_tensors, protocol_mutants)

pytestmark = needs_cxx


def within_f32_sum(fd, r, ts, out="bf16"):
    fp4_within_f32_sum(fd, r, ts, out, block=16)


@pytest.mark.parametrize("bn,stages,acc,M,N,K,out,epi", [
    # 2 x 2 tiles over 2 CTAs (both rings wrap), K = 320: 2.5 k tiles, the last one's second chunk past Kp = 20 rows
    (128, 2, 1, 130, 200, 320, "bf16", "bias_gelu"),
    # a 256-wide tile: the second n tile's second 128 rows start past N = 300 (no row block there); K = 352 = 2.75
    # k tiles (K/16 = 22 scale columns, padded to 24 by torch)
    (256, 2, 1, 100, 300, 352, "bf16", "bias_gelu"),
    pytest.param(128, 3, 2, 260, 136, 672, "f32", None, marks=pytest.mark.slow),
    pytest.param(256, 4, 1, 77, 200, 160, "f16", "bias", marks=pytest.mark.slow),
])
def test_nvf4_kernel_runs_with_right_numbers(bn, stages, acc, M, N, K, out, epi):
    fd = build_nv(n=N, k=K, bn=bn, stages=stages, acc_stages=acc, epilogue=epi, out=out)
    k = kernel(fd, "sm_100a")
    assert f"using Mma = heddle::MmaSm100Nvf4<{bn}>;" in k.source
    # one box of two chunks per operand and k tile: rows 8 kt .. 8 kt + 7 of the row block
    assert k.source.count("heddle::sm90::tma_load_box<3>(") == 2 and k.source.count(", 0, kt * 8, ") == 2
    assert k.lowered.tile["bk"] == 64  # stored bytes: 128 e2m1
    maps = {m["param"]: m for m in k.lowered.tensor_maps}
    assert maps["tmA"]["swizzle"] == 64 and maps["tmA"]["box_cols"] == 64  # 64 bytes a row, the 64-byte swizzle
    assert (maps["tmSFA"]["box_rows"], maps["tmSFA"]["box_depth"]) == (8, 1)
    assert (maps["tmSFB"]["box_rows"], maps["tmSFB"]["box_depth"]) == (8, bn // 128)
    ts = nv_tensors(fd, M, seed=1, codes=(0x28, 0x40) if out == "f16" else (0x28, 0x48))
    within_f32_sum(fd, interpret(k, *ts, sms=2, reference=False), ts, out)


@pytest.mark.parametrize("bn,stages,M,N,K,epi,residual,tma", [
    # the bias cached with tma_load: its producer role (warp 2) and ring beside the operand ring that carries the two
    # scale chunks a k tile; 2 x 2 tiles over 2 CTAs (every ring wraps), K = 320: 2.5 k tiles
    (128, 2, 130, 200, 320, "bias_gelu", False, "bias"),
    # a residual [M, N] through TMA (ragged M and N, a multiple of 8: 16-byte rows), 3 operand stages
    pytest.param(128, 3, 100, 296, 416, "bias", True, "res", marks=pytest.mark.slow),
    # the bias ring with a 256-wide tile whose second 128 rows of B start past N (B's chunks zero fill)
    pytest.param(256, 2, 77, 300, 384, "bias", False, "bias", marks=pytest.mark.slow),
])
def test_nvf4_kernel_with_a_tma_loaded_epilogue_operand(bn, stages, M, N, K, epi, residual, tma):
    fd = build_nv(n=N, k=K, bn=bn, stages=stages, acc_stages=1, epilogue=epi, residual=residual, tma=tma)
    k = kernel(fd, "sm_100a")
    assert f"using Mma = heddle::MmaSm100Nvf4<{bn}>;" in k.source
    assert_epilogue_operand_ring(k, tma)  # the chunks in the operand ring, the operand's own role and ring
    ts = nv_tensors(fd, M, seed=4)
    within_f32_sum(fd, interpret(k, *ts, sms=2, reference=False), ts)


@pytest.mark.slow
def test_nvf4_kernel_with_a_tma_loaded_bias_sync_mutants_are_caught():
    # one CTA walks three n tiles: the operand ring, the accumulator stage and the bias ring (2 stages, pre-arrived:
    # only a third tile waits for a release) all wrap
    fd = build_nv(n=300, k=384, bn=128, stages=2, acc_stages=1, tma="bias")
    assert_sync_mutants_caught(kernel(fd, "sm_100a"), nv_tensors(fd, 100, seed=3))


@pytest.mark.slow
def test_nvf4_kernel_auto_schedule_runs_with_right_numbers():
    fd = build_nv(n=512, k=256, auto=True)
    k = kernel(fd, "sm_100a")
    assert "MmaSm100Nvf4<256>" in k.source
    ts = nv_tensors(fd, 150, seed=2)
    within_f32_sum(fd, interpret(k, *ts, sms=2, schedule="random", seed=3, reference=False), ts)


def mutant_case():
    # one CTA walks both n tiles over a 2-stage ring: every stage is refilled, the accumulator stage reused
    fd = build_nv(n=200, k=384, bn=128, stages=2, acc_stages=1)
    return fd, kernel(fd, "sm_100a"), nv_tensors(fd, 100, seed=3)


# the protocol's mutants of the printed source (support/mx_defs.py protocol_mutants: three by default, the rest
# -m slow) and, -m slow, every default sync mutant (heddle.interpret's mutation_kill_rate)
@pytest.mark.parametrize("what,edit", protocol_mutants(8) + [
    pytest.param("every sync mutant", "sync", id="sync-mutants", marks=pytest.mark.slow)])
def test_nvf4_mutants_are_caught(what, edit):
    fd, k, ts = mutant_case()
    if edit == "sync":
        return assert_sync_mutants_caught(k, ts)
    # the expect-tx: sA, sB and two chunks each of A and B
    assert_protocol_mutant_caught(fd, k, ts, what, edit, 2 * 128 * 64 + 1024 + 1024)


def test_the_plan_names_the_nvf4_orderings_and_the_simulator_refuses_by_name():
    fd, k, ts = mutant_case()
    text = k.explain()
    assert "WAR tmem scale columns (mma -> tcgen05.cp)" in text and "not a pipelined pair" in text
    assert "WAR sA, sB, sSFA, sSFB (mma -> load)" in text  # the chunks ride the ring's empty / full barriers
    assert "tx 18432" in text  # 2 x 8192 + 2 x 1024
    assert ("nv16 scales: the k tile's chunks (1024 bytes of A, 1024 of B) by TMA into the ring slot"
            in k.lowered.sync_summary)
    assert "16 scale columns and issues the two block-scaled MMAs" in k.lowered.sync_summary
    with pytest.raises(heddle.HeddleError, match="is the nv16 \\(NVFP4\\) block-scaled tcgen05 kernel"):
        heddle.simulate(k, ts)
