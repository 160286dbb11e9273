"""The fused MXFP8 kernel (scales="mx32" on sm_100a, docs/fp8.md "MX formats"): the TMA + tcgen05 roles with the k
tile's scale chunks in the operand ring (lower/passes/mx_scale_ring.cpp) and MmaSm100Mx in the MMA role
(tcgen05.cp of the slot's chunks, four block-scaled tcgen05.mma, one commit), run by the CPU interpreter on its
printed source against heddle.reference.evaluate's float64 (itself checked against a per-element sum,
tests/ir/test_mx_scales.py). Ragged M, N, K (K a multiple of 32, not of 128: the last k tile's operands and scale
columns zero-filled), rings that wrap, n tiles of 128 and 256 (a 256-wide tile whose second 128 rows start past N
reads its second B chunk out of bounds: TMA's zero fill), mixed e5m2 x e4m3; the protocol's mutants caught."""

import pytest
import torch

import heddle
from heddle.interpret import interpret
from support.interp_defs import kernel, needs_cxx
from support.mx_defs import (assert_epilogue_operand_ring, assert_protocol_mutant_caught, assert_sync_mutants_caught,
                             protocol_mutants, build_mx, mx_tensors)

pytestmark = needs_cxx


def check(fd, r, ts, out="bf16"):
    assert r.ok, r.report()
    want = heddle.reference.evaluate(fd, ts, round_casts=False).double()
    got = r.output.double()
    assert not bool(torch.isnan(got).any())
    # an f32 sum of exactly scaled products (K roundings at most, each 2^-24 of the running sum, bounded by the sum of
    # the magnitudes), then one rounding to the output's format -- the reference's own output is rounded too, so the
    # two may lie one step of the format apart where the f32 error crosses a rounding midpoint (GELU and the bias do
    # not widen it). The interpreter runs without its own per-element check (reference=False): this bound is it.
    a, b, sa, sb = ts[:4]
    mag = heddle.reference.mx_scaled_matmul(a.double().abs(), b.double().abs().T, sa.double(), sb.double())
    rel = {"bf16": 2 ** -7, "f16": 2 ** -10, "f32": 2 ** -23}[out]
    bound = rel * want.abs() + a.shape[1] * 2 ** -24 * 1.2 * mag + 1e-6
    assert bool(((got - want).abs() <= bound).all()), float(((got - want).abs() - bound).max())


@pytest.mark.parametrize("fa,fb,bn,stages,acc,M,N,K,out,epi", [
    # 2 x 2 tiles over 2 CTAs (both rings wrap), K = 320: 2.5 k tiles, a bias + gelu epilogue
    ("e4m3", "e4m3", 128, 2, 1, 130, 200, 320, "bf16", "bias_gelu"),
    # mixed formats, a 256-wide tile: the second n tile's second 128 rows start past N = 300 (no chunk there)
    ("e5m2", "e4m3", 256, 2, 1, 100, 300, 384, "bf16", "bias_gelu"),
    pytest.param("e4m3", "e5m2", 128, 3, 2, 260, 136, 672, "f32", None, marks=pytest.mark.slow),
    pytest.param("e5m2", "e5m2", 256, 4, 1, 77, 200, 160, "f16", "bias", marks=pytest.mark.slow),
])
def test_mx_kernel_runs_with_right_numbers(fa, fb, bn, stages, acc, M, N, K, out, epi):
    fd = build_mx(fa, fb, n=N, k=K, bn=bn, stages=stages, acc_stages=acc, epilogue=epi, out=out)
    k = kernel(fd, "sm_100a")
    assert f"using Mma = heddle::MmaSm100Mx<{bn}, T, heddle::{fb}>;" in k.source
    assert k.source.count("heddle::sm90::tma_load_box<3>(") == 2
    ts = mx_tensors(fd, M, seed=1, codes=(116, 126) if out == "f16" else (120, 135))  # f16: below 65504
    check(fd, interpret(k, *ts, sms=2, reference=False), ts, out)


@pytest.mark.parametrize("fa,fb,bn,stages,M,N,K,epi,residual,tma", [
    # the bias cached with tma_load: its producer role (warp 2) and ring beside the operand ring that carries the
    # scale chunks; 2 x 2 tiles over 2 CTAs (every ring wraps), K = 320: 2.5 k tiles
    ("e4m3", "e4m3", 128, 2, 130, 200, 320, "bias_gelu", False, "bias"),
    # a residual [M, N] through TMA (a 128 x 128 box a tile; ragged M and N -- a multiple of 8: 16-byte rows -- read
    # past them as zero fill), 3 operand stages
    pytest.param("e5m2", "e4m3", 128, 3, 100, 296, 416, "bias", True, "res", marks=pytest.mark.slow),
    # the bias ring with a 256-wide tile whose second 128 rows of B start past N (B's chunk zero fill)
    pytest.param("e4m3", "e5m2", 256, 2, 77, 300, 384, "bias", False, "bias", marks=pytest.mark.slow),
])
def test_mx_kernel_with_a_tma_loaded_epilogue_operand(fa, fb, bn, stages, M, N, K, epi, residual, tma):
    fd = build_mx(fa, fb, n=N, k=K, bn=bn, stages=stages, acc_stages=1, epilogue=epi, residual=residual, tma=tma)
    k = kernel(fd, "sm_100a")
    assert_epilogue_operand_ring(k, tma)  # the chunks in the operand ring, the operand's own role and ring
    ts = mx_tensors(fd, M, seed=4)
    check(fd, interpret(k, *ts, sms=2, reference=False), ts)


@pytest.mark.slow
def test_mx_kernel_with_a_tma_loaded_bias_sync_mutants_are_caught():
    # one CTA walks three n tiles: the operand ring, the accumulator stage and the bias ring (2 stages, pre-arrived:
    # only a third tile waits for a release) all wrap
    fd = build_mx("e4m3", "e4m3", n=300, k=384, bn=128, stages=2, acc_stages=1, tma="bias")
    assert_sync_mutants_caught(kernel(fd, "sm_100a"), mx_tensors(fd, 100, seed=3))


@pytest.mark.slow
def test_mx_kernel_auto_schedule_runs_with_right_numbers():
    fd = build_mx("e4m3", "e4m3", n=512, k=256, auto=True)
    k = kernel(fd, "sm_100a")
    assert "MmaSm100Mx<256," in k.source
    ts = mx_tensors(fd, 150, seed=2)
    check(fd, interpret(k, *ts, sms=2, schedule="random", seed=3, reference=False), ts)


def mutant_case():
    # one CTA walks both n tiles over a 2-stage ring: every stage is refilled, the accumulator stage reused
    fd = build_mx("e4m3", "e4m3", n=200, k=384, bn=128, stages=2, acc_stages=1)
    return fd, kernel(fd, "sm_100a"), mx_tensors(fd, 100, seed=3)


MUTANTS = protocol_mutants(4)


@pytest.mark.parametrize("what,edit", MUTANTS)
def test_mx_protocol_mutants_are_caught(what, edit):
    fd, k, ts = mutant_case()
    # the expect-tx: sA, sB and the two chunks of a 128-wide tile
    assert_protocol_mutant_caught(fd, k, ts, what, edit, 2 * 128 * 128 + 512 + 512)


@pytest.mark.slow
def test_mx_kernel_sync_mutants_are_caught():
    fd, k, ts = mutant_case()
    assert_sync_mutants_caught(k, ts)


def test_the_plan_names_the_new_orderings_and_the_simulator_refuses_by_name():
    fd, k, ts = mutant_case()
    text = k.explain()
    assert "WAR tmem scale columns (mma -> tcgen05.cp)" in text and "not a pipelined pair" in text
    assert "WAR sA, sB, sSFA, sSFB (mma -> load)" in text  # the chunks ride the ring's empty / full barriers
    assert "mbarrier.arrive.expect_tx full" in text and "tx 33792" in text  # 2 x 16384 + 2 x 512
    assert "mx32 scales: the k tile's chunks (512 bytes of A, 512 of B) by TMA into the ring slot" in k.lowered.sync_summary
    with pytest.raises(heddle.HeddleError, match="is the mx32 \\(MXFP8\\) block-scaled tcgen05 kernel, whose "
                       "tcgen05.cp of the scale chunks and block-scaled MMAs the kernel-IR simulator does not model"):
        heddle.simulate(k, ts)
