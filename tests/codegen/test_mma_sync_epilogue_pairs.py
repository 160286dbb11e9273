"""The mma.sync (sm_80) register epilogue in column pairs (EpilogueStore::columnPairs, codegen/printer.cpp
CLikePrinter::pairEpilogue): per pair of adjacent columns of one fragment row (c0,c1 / c2,c3 of the m16n8
accumulator) one bounds check, the pair program with its activations called out of line (heddle::ool, one
copy per kernel), a bias / residual read in pairs under vec_e=2 (passes/vectorize_epilogue_reads.cpp: the
launch asks an even column count, so every pair read is whole), the result held packed and stored by one
32-bit store when the output's pairs are whole and aligned (heddle::pair_aligned, kernel-uniform), else by
scalar stores inside N.

Checked here: the printed source (and that AMD's MFMA fragment, whose registers walk rows, keeps the
per-element epilogue), NVRTC (32-bit stores, half the bias loads with vec_e=2, the pair program printed
once, no spills), the CPU interpreter of the printed source (float64-right numbers on ragged shapes: odd M,
odd N, bf16 / f16, an f32 operand and output, two outputs, batched, a matmul group) and source mutants it
catches (a pair store unguarded past an odd N, a misaligned pair read), and the even-column launch rule."""
import re
from collections import Counter

import pytest
import torch

import heddle
from support.env import requires_nvrtc
from support.group_defs import group_fusion, group_inputs, schedule_group
from heddle.core.interpret import _Mutated
from heddle.core.kernel import _pair_ok
from heddle.interpret import interpret
from heddle.pytorch.matmul import MatmulSpec
from support.wgmma_defs import assert_interprets_clean
from support.interp_defs import needs_cxx
from support.matmul_defs import schedule

DT = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
STORE = "heddle::store_pair(D + at, D_v[fn][h], pair_st, col + 1 < N);"
COLV = "const int colv = col;"


def spec(n=200, k=96, dtype="bf16", bias="bf16", residual=None, activation="gelu_erf", out=None, saved=None,
         batched=False):
    return MatmulSpec(dtype, batched, batched, k, n, False, False, (bias, 1) if bias else None,
                      (residual, 3 if batched else 2) if residual else None, activation, None, out or dtype,
                      saved=saved)


def vec_b(s):
    """The B copies an N of this parity allows (a row-major B of odd N has odd rows: 1-element copies)."""
    return 8 if s.n % 8 == 0 else 2 if s.n % 2 == 0 else 1


def small(s, bm=64, bn=64):
    """2x2 warps, 32-deep k slabs, 3 stages (cp.async; plain loads for an odd N, whose B rows are 2-byte
    aligned): ragged M, N and K against the tile."""
    fd = s.build_fusion()
    schedule(fd, fd.inputs[0], fd.inputs[1], bm=bm, bn=bn, bk=32, wm=2, wn=2, stages=3,
             kind="cp_async" if s.n % 2 == 0 else "plain")
    return fd


def data(fd, M, seed=0, batch=2):
    g = torch.Generator().manual_seed(seed)
    shape = lambda t: [M if s == "M" else batch if s == "B" else s for s in t.shape]  # noqa: E731
    return [(torch.randn(shape(t), generator=g) * 0.5).to(DT[t.dtype]) for t in fd.inputs]


def test_source_runs_in_column_pairs():
    fd = small(spec(saved="bf16"))
    low = fd.lower("sm_80", vec_e=2)
    src = low.source.split("extern \"C\"")[-1]
    assert "epilogue store -> D in column pairs" in low.kernel_ir
    assert low.name.endswith("_ev2") and low.pair_operands == ["bias"]
    assert "const int col = n0 + Mma::col_of(warp, lane, fn, 0);" in src
    assert "const heddle::pairf r0 = {acc.acc[fm][fn][2 * (h)], acc.acc[fm][fn][2 * (h) + 1]};" in src
    assert "heddle::load_pair(E_bias + (long long)colv);" in src and COLV in src
    assert src.count("heddle::ool::gelu_erf(") == 1 and "heddle::gelu_erf(" not in src  # out of line, once
    # one alignment flag for both outputs (the saved pre-activation: its own packed registers and pair store)
    assert "const bool pair_st = heddle::pair_aligned(D, ldd, N) && heddle::pair_aligned(D1, ldd, N);" in src
    assert STORE in src
    assert re.search(r"D1_v\[fn\]\[h\] = heddle::pack_pair<heddle::bf16>\(r\d+\);", src), src
    assert "heddle::store_pair(D1 + at, D1_v[fn][h], pair_st, col + 1 < N);" in src
    # vec_e=1: the same pairs, the bias read per column, the second column clamped inside N
    scalar = fd.lower("sm_80").source
    assert "load_pair" not in scalar and "{heddle::to_float(E_bias[(long long)col_0 * E_bias_s0]), " \
                                          "heddle::to_float(E_bias[(long long)col_1 * E_bias_s0])};" in scalar
    assert "col_1 = col + 1 < N ? col + 1 : col;" in scalar


def test_amd_fragment_keeps_the_element_epilogue():
    # MFMA registers of one lane are rows, not column pairs: the pair path is the mma.sync fragment's only
    fd = spec(dtype="f16", bias="f16").build_fusion()
    fd.auto_schedule("gfx942", -1, 200, 96)
    low = fd.lower("gfx942", vec_e=2)
    assert "heddle::pairf" not in low.source and "store_pair" not in low.source and "_ev2" not in low.name
    assert "for (int r = 0; r < 4; ++r)" in low.source and "in column pairs" not in low.kernel_ir


def _ptx_counts(low):
    r = heddle._C.runtime.compile(low.source, low.name, "sm_80", isolate=True)
    assert r.stats.spill_stores == 0 and r.stats.spill_loads == 0, r.stats
    return r, Counter(re.findall(r"\b((?:ld|st)\.global\.\S+?)\s", r.ptx))


@requires_nvrtc
def test_nvrtc_pair_stores_and_half_the_bias_loads():
    # the auto schedule's 128x128 bias + GELU kernel: 64 pairs per thread
    s = spec(n=4096, k=4096)
    fd = s.build_fusion()
    fd.auto_schedule("sm_80", -1, s.n, s.k)
    (_, c1), (r2, c2) = _ptx_counts(fd.lower("sm_80")), _ptx_counts(fd.lower("sm_80", vec_e=2))
    # one packed 32-bit store per pair (and the scalar fallback for an unaligned output: 2 per pair)
    assert c1["st.global.u32"] == 64 and c1["st.global.u16"] == 128, c1
    assert c1["ld.global.nc.u16"] == 128 and c2["ld.global.nc.u32"] == 64 and "ld.global.nc.u16" not in c2, (c1, c2)
    # the pair program is printed once (one call of the out-of-line GELU per pair), not once per branch
    assert len(re.findall(r"call\.uni", r2.ptx)) == 64, len(re.findall(r"call\.uni", r2.ptx))
    assert r2.stats.stack_frame == 0, r2.stats


@requires_nvrtc
def test_nvrtc_f32_output_and_operand_use_64_bit_pairs():
    fd = small(spec(bias="f32", out="f32"))
    _, c = _ptx_counts(fd.lower("sm_80", vec_e=2))
    assert c["ld.global.nc.v2.f32"] > 0 and c["st.global.v2.f32"] > 0 and "ld.global.nc.f32" not in c, c


@needs_cxx
@pytest.mark.parametrize("kw,M,vec_e", [
    (dict(), 77, 2),                                         # odd M, ragged N = 200 (even), bf16
    (dict(n=201, dtype="f16", bias="f16"), 70, 1),           # odd N: its last pair is cut, scalar stores
    (dict(bias="f32", out="f32", activation="silu"), 65, 2),  # f32 operand read as v2.f32, f32 pair stores
    (dict(saved="bf16", n=136), 50, 2),                      # two outputs: GELU and the saved pre-activation
    (dict(batched=True, residual="bf16", n=136, activation="gelu_tanh"), 45, 2),  # batched, residual in pairs
])
def test_interpreter_numbers_on_ragged_shapes(kw, M, vec_e):
    s = spec(**kw)
    fd = small(s)
    k = heddle.Kernel.build(fd, "sm_80", vec_b=vec_b(s), rtc=False, vec_e=vec_e)
    assert "in column pairs" in k.lowered.kernel_ir and bool(k.lowered.pair_operands) == (vec_e == 2)
    assert_interprets_clean(k, data(fd, M, seed=M), sms=2)


@needs_cxx
def test_interpreter_matmul_group_in_pairs():
    # a SwiGLU pair (two matmuls sharing A): member 1's accumulator slice read at the same pair; odd M, ragged N
    fd, x, ws = group_fusion(n=72, k=64)
    schedule_group(fd, x, ws[0])
    k = heddle.Kernel.build(fd, "sm_80", rtc=False)
    assert "Mma::part_col_of<2>(warp, lane, fn, 0)" in k.source
    assert re.search(r"\{acc\.acc\[fm\]\[\(fn\) \+ 1 \* \(Mma::FN / 2\)\]\[2 \* \(h\)\], ", k.source), k.source
    assert_interprets_clean(k, group_inputs(fd, 41, seed=4), sms=2)


@needs_cxx
@pytest.mark.parametrize("kw,vec_e,old,new,finding", [
    # the cut pair of an odd N stored whole: column N of the last row is past D
    (dict(n=201), 1, STORE, STORE.replace("col + 1 < N);", "true);"), "outside every tensor"),
    # the pair read one column off: a 4-byte load at an odd element
    (dict(), 2, COLV, "const int colv = col + 1;", "misaligned address"),
])
def test_interpreter_catches_pair_mutants(kw, vec_e, old, new, finding):
    s = spec(**kw)
    fd = small(s)
    k = heddle.Kernel.build(fd, "sm_80", vec_b=vec_b(s), rtc=False, vec_e=vec_e)
    assert old in k.source
    r = interpret(_Mutated(k, k.source.replace(old, new)), *data(fd, 70), sms=1)
    assert not r.ok and finding in r.report(), r.report()


def test_launch_asks_an_even_column_count_for_pair_reads():
    fd = small(spec(n=201))
    k = heddle.Kernel.build(fd, "sm_80", vec_b=1, rtc=False, vec_e=2)
    assert k.lowered.pair_operands == ["bias"]
    a, b, bias = data(fd, 64)
    assert not _pair_ok(bias) and _pair_ok(bias[:200]) and _pair_ok(torch.zeros(64, 1))
    with pytest.raises(heddle.InputError, match=r"input 'bias': the kernel reads it two columns per load \(vec_e=2\)"
                                                r", which needs an even number of contiguous columns \(201"):
        k.prepare([a, b, bias], sms=1)
