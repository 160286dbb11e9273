"""The sm_100a FP8 GEMM (tcgen05.mma kind::f8f6f4, docs/fp8.md "sm_100a") run by the CPU interpreter of its printed
source: heddle_sm100.cuh's MmaSm100 with 8-bit operand types under HEDDLE_INTERPRET calls
interp/rt/hrt_tcgen05.cpp, whose kind::f8f6f4 model (hrt_ptx_tcgen05.h: the instruction descriptor's E4M3 / E5M2
format fields, K = 32 per instruction, 16 elements per 16-byte chunk, decoded with hrt_fp8.h) was written from the
PTX ISA independently of the header. Ragged M, N, K for e4m3, e5m2 and mixed operands, per-tensor and per-row f32
scales on the accumulator, a bf16 bias + gelu epilogue: the numbers of a float64 reference; the sync mutants of
the printed source are caught, and so are mutants of the new fields (A's and B's format in the instruction
descriptor, the MMA's k steps per k tile)."""
import pytest
import torch

from heddle.interpret import _Mutated, interpret, mutation_kill_rate
from support.interp_defs import kernel, needs_cxx
from support.tcgen05_defs import build_fp8
from support.wgmma_defs import inputs

pytestmark = needs_cxx


def reference(fd, ts):
    """gelu((a @ b^T) * scale_a * scale_b + bias) in float64, written out here (not heddle.reference)."""
    x = {t.name: v.double() for t, v in zip(fd.inputs, ts)}
    y = x["a"] @ x["b"].T
    if "scale_a" in x:
        y = y * x["scale_a"] * x["scale_b"]
    y = y + x["bias"]
    return torch.nn.functional.gelu(y)


@pytest.mark.parametrize("fa,fb,scales,bn,bk,s,M,N,K", [
    ("e4m3", "e4m3", "row", 64, 128, 3, 130, 72, 208),     # ragged M, N, K: K is 1.6 k tiles of 128
    ("e5m2", "e5m2", "tensor", 128, 64, 2, 136, 200, 80),  # K 1.25 k tiles; one 128-wide n tile ragged
    ("e4m3", "e5m2", None, 64, 32, 4, 200, 64, 48),        # mixed formats; k tile 32 (one instruction)
])
def test_fp8_kernel_runs_with_right_numbers(fa, fb, scales, bn, bk, s, M, N, K):
    fd = build_fp8(fa, fb, scales, stages=s, bn=bn, bk=bk, n=N, k=K)
    k = kernel(fd, "sm_100a")
    assert f"heddle::MmaSm100<128, {bn}, {bk}, true, true, T, heddle::{fb}>" in k.source
    assert f"using T = heddle::{fa};" in k.source
    ts = inputs(fd, M, seed=2)
    want = reference(fd, ts)
    for sched, seed in (("adversarial", 0), ("random", 3))[:2 if scales == "row" else 1]:
        r = interpret(k, *ts, schedule=sched, seed=seed, sms=2)
        assert r.ok, r.report()
        err = (r.output.double() - want).abs()
        assert float(err.max()) <= 2e-2 * float(want.abs().max()), float(err.max())  # bf16 output rounding


def mutant_inputs():
    # one accumulator stage: with two tiles per CTA the accumulator ring wraps (every accEmpty arrive is awaited)
    fd = build_fp8("e4m3", "e5m2", "row", stages=2, acc_stages=1, bn=64, bk=64, n=72, k=208)
    return fd, kernel(fd, "sm_100a"), inputs(fd, 130, seed=1)


def test_byte_count_mutant_is_caught():
    """The mutant whose meaning changes with 1-byte elements: the full barrier's expect_tx halved (the bytes of
    16-bit elements counted as 8-bit ones, or the reverse, are off by two)."""
    fd, k, ts = mutant_inputs()
    res = mutation_kill_rate(k, *ts, sms=2, kinds=("shrink_expect_tx",), schedules=(("adversarial", 0),))
    assert set(res["by_kind"]) == {"shrink_expect_tx"} and res["total"] >= 1 and not res["survivors"], res


@pytest.mark.slow
def test_sync_mutants_are_caught():  # every sync mutant (the bf16 kernel's run in the default suite)
    fd, k, ts = mutant_inputs()
    res = mutation_kill_rate(k, *ts, sms=2)
    assert {"delete_sync", "flip_parity", "drop_expect_tx", "shrink_expect_tx", "swap_stage"} <= set(res["by_kind"])
    assert res["total"] >= 25 and not res["survivors"], res["survivors"]


@pytest.mark.parametrize("what,old,new", [
    ("B's format in the instruction descriptor (bits 10-12) E5M2 -> E4M3", "T, heddle::e5m2>", "T, heddle::e4m3>"),
    ("A's format in the instruction descriptor (bits 7-9) E4M3 -> E5M2", "using T = heddle::e4m3;",
     "using T = heddle::e5m2;"),
    ("the MMA's k tile halved: one k step of 32 per 64-wide k tile", "MmaSm100<128, 64, 64,", "MmaSm100<128, 64, 32,"),
])
def test_format_and_k_step_mutants_are_caught(what, old, new):
    fd, k, ts = mutant_inputs()
    assert old in k.source, what
    r = interpret(_Mutated(k, k.source.replace(old, new)), *ts, sms=2)
    assert not r.ok, what
