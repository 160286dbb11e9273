"""The sm_90a direct-store epilogue (registers -> D, no TMA store) in column pairs, like the staged one: each
pair of adjacent columns of the wgmma fragment runs the pair program (activations called out of line, once
per pair), is skipped when its row or first column is outside D, and is stored by one 32-bit store (16-bit
outputs; 64-bit for f32) when it is whole (col + 1 < N) and every output's pair stores are aligned (pair_st:
bases and ldd even), else by bounds-checked scalar stores. With vec_e=2 a bias / residual is read one pair
per load, except the pair that an odd N cuts (one scalar read at its even first column): never past the
operand's last column, never at an odd column (passes/vectorize_epilogue_reads.cpp).

The direct store is what kernels take when the TMA store is not: an odd N or rows that are not a multiple of
16 bytes, several outputs (training's saved pre-activation), split-K's reducing CTA, epilogue_store("direct").

Checked here: the printed source, NVRTC (no spills, setmaxnreg honoured, pair stores and pair reads counted
in the PTX, one out-of-line GELU per pair), the CPU interpreter of the printed source (float64-right numbers on
ragged shapes with odd N and odd M, bf16 and f32 operands and outputs, the two-output training kernel, a
split-K kernel) and source mutants it catches (a cut pair stored whole: out of bounds; a pair store at an odd
row start: misaligned; a cut pair read whole; the staged path's clamped column: misaligned; no row check)."""
import re

import pytest
import torch

import heddle
from conftest import requires_nvrtc
from heddle.core.interpret import _Mutated
from heddle.interpret import interpret
from heddle.pytorch.matmul import MatmulSpec
from hopper_defs import assert_interprets_clean, build, inputs, nvrtc_sm90
from interp_defs import needs_cxx

GUARD = "if (row < M && col < N) {"
WHOLE = "const bool whole = col + 1 < N;"
PAIR_IF = "if (whole && pair_st) {"
BIAS_READ = "heddle::sm90::load_pair_or_first(E_bias + (long long)col_0, whole);"


def spec(n=201, k=96, bias="bf16", residual=None, activation="gelu_tanh", out="bf16", saved=None):
    # B is [N, K] (trans_b): its rows stay 16-byte strided for TMA whatever N is
    return MatmulSpec("bf16", False, False, k, n, False, True, (bias, 1) if bias else None,
                      (residual, 2) if residual else None, activation, None, out, saved=saved)


def scheduled(s, store=None):
    fd = s.build_fusion()
    fd.auto_schedule("sm_90a", -1, s.n, s.k, tma=True, sms=132)
    if store:
        fd.matmul_tensor.epilogue_store(store)
    return fd


def data(fd, M, seed=0):
    return inputs(fd, M, seed=seed)


def direct(src):
    """The direct pair epilogue's macro body (asserting the kernel stores directly)."""
    assert "tma_store" not in src and "HEDDLE_FRAGMENT" not in src, "not a direct pair epilogue"
    return src.split("#define HEDDLE_PAIR(fm, fn, h)", 1)[1].split("} while (0)", 1)[0]


def test_odd_n_prints_the_direct_pair_epilogue():
    fd = scheduled(spec(n=201, residual="bf16"))  # rows of 402 bytes: no TMA store
    scalar, pairs = fd.lower("sm_90a"), fd.lower("sm_90a", vec_e=2)
    assert pairs.name == scalar.name + "_ev2" and pairs.pair_operands == ["bias", "residual"]
    assert "epilogue reads E_bias two columns per load (aligned pairs)" in pairs.kernel_ir
    body = direct(pairs.source)
    for line in (GUARD, WHOLE, "const int col_0 = col, col_1 = whole ? col + 1 : col;", BIAS_READ,
                 "heddle::sm90::load_pair_or_first(E_residual + (long long)row * E_residual_s0 + (long long)col_0, "
                 "whole);", "const long long at = (long long)row * ldd + col;", PAIR_IF,
                 "heddle::sm90::store_pair(D + at, r", "if (whole) D[at + 1] = heddle::from_float<heddle::bf16>(r"):
        assert line in body, line
    assert "colv" not in pairs.source  # the staged path's clamped column (N - 2 may be odd here)
    assert "const bool pair_st = heddle::sm90::pair_stores_ok(D, ldd);" in pairs.source
    # one pair program: the activation out of line, no per-element transcendental code in the kernel
    assert "heddle::sm90::ool::gelu_tanh(r2)" in body and "heddle::gelu_tanh(" not in body
    # every fragment pair (fm, fn, h) expanded once, both rows h of each 8-column block
    fm_fn_h = re.findall(r"HEDDLE_PAIR\((\d+), (\d+), (\d+)\);", pairs.source)
    assert len(fm_fn_h) == len(set(fm_fn_h)) and {h for *_, h in fm_fn_h} == {"0", "1"}
    # vec_e=1: both columns read apart, clamped to the last column
    assert "{heddle::to_float(E_bias[(long long)col_0 * E_bias_s0]), heddle::to_float(E_bias[(long long)col_1 * " \
           "E_bias_s0])};" in direct(scalar.source)


def test_two_outputs_store_both_in_pairs():
    fd = scheduled(spec(n=200, saved="bf16"))  # a saved pre-activation: two outputs, stored directly
    low = fd.lower("sm_90a", vec_e=2)
    body = direct(low.source)
    assert ("const bool pair_st = heddle::sm90::pair_stores_ok(D, ldd) && heddle::sm90::pair_stores_ok(D1, ldd);"
            in low.source)
    both = re.findall(r"heddle::sm90::store_pair\((D1?) \+ at, (r\d+)\);", body)
    assert [d for d, _ in both] == ["D", "D1"] and both[0][1] != both[1][1], both
    assert f"D1[at] = heddle::from_float<heddle::bf16>({both[1][1]}.x);" in body


def test_what_stays_as_it_was():
    # the staged (TMA-store) epilogue keeps its clamped aligned pair read; sm_80 keeps its element epilogue
    src = scheduled(spec(n=200)).lower("sm_90a", vec_e=2).source
    assert "colv" in src and "load_pair_or_first" not in src and "HEDDLE_STMATRIX" in src
    fd = spec().build_fusion()
    fd.auto_schedule("sm_80", -1, 201, 96)
    assert fd.lower("sm_80", vec_e=2).source == fd.lower("sm_80").source


@requires_nvrtc
@pytest.mark.parametrize("vec_e", [1, 2])
def test_nvrtc_pair_stores_and_reads(vec_e):
    # 128x256 tile, two cooperative MMA warpgroups: 128 accumulators = 64 pairs per thread
    fd = build("coop", stages=4, prefetch=2, bm=128, bn=256, bk=64, n=1024, k=4096, store="direct")
    r = nvrtc_sm90(fd.lower("sm_90a", vec_e=vec_e))  # no spills, no stack, setmaxnreg honoured
    st = re.findall(r"st\.global\.(\w+)", r.ptx)
    ld = re.findall(r"ld\.global\.nc\.(\w+)", r.ptx)
    # one 32-bit store per pair; the scalar stores of a cut or misaligned pair behind it (two per pair)
    assert st.count("u32") == 64 and st.count("u16") == 128 and len(st) == 192, st
    if vec_e == 2:  # one 32-bit read per pair; a cut pair's one scalar read behind it
        assert ld.count("u32") == 64 and ld.count("u16") == 64 and len(ld) == 128, ld
    else:
        assert ld == ["u16"] * 128, ld
    # the GELU is one function called once per pair, not inlined per accumulator
    assert len(re.findall(r"call\.uni \(retval0\),\s*\n\s*\S*ool8gelu_erf", r.ptx)) == 64
    assert len(set(re.findall(r"^\.func .*ool8gelu_erf\w*", r.ptx, re.M))) == 1  # (declared, then defined)


@requires_nvrtc
def test_nvrtc_f32_output_and_operands_use_64_bit_pairs():
    fd = scheduled(spec(n=198, bias="f32", residual="f32", out="f32"))  # f32 rows of 792 bytes: direct
    low = fd.lower("sm_90a", vec_e=2)
    assert "store_pair(D + at" in direct(low.source)
    r = nvrtc_sm90(low)
    assert "st.global.v2.f32" in r.ptx and "ld.global.nc.v2.f32" in r.ptx


# --- the CPU interpreter of the printed source: float64-right numbers, nothing out of bounds or misaligned ---
@needs_cxx
@pytest.mark.parametrize("kw,store,M", [
    (dict(n=201), None, 77),                                        # odd N, odd M: cut pairs, scalar stores
    (dict(n=201, bias="f32", residual="bf16"), None, 130),          # f32 bias read in pairs, cut at N - 1
    (dict(n=200, bias="f32", residual="f32", activation=None), "direct", 131),  # even N: pair stores
    (dict(n=198, out="f32", residual="bf16"), None, 65),            # f32 output: 64-bit pair stores
    (dict(n=202, saved="bf16"), None, 99),                          # training: two outputs in pairs
    (dict(n=201, saved="bf16", activation="gelu"), None, 33),       # two outputs, odd N
])
def test_interpreter_numbers_on_ragged_shapes(kw, store, M):
    fd = scheduled(spec(**kw), store)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False, vec_e=2)
    assert k.lowered.pair_operands and PAIR_IF in direct(k.source)
    ins = data(fd, M, seed=M)
    if kw.get("residual") and kw["n"] % 2:  # an odd-N residual's rows start at odd elements: pad its stride
        ins[-1] = torch.empty(M, kw["n"] + 1, dtype=ins[-1].dtype)[:, :kw["n"]].copy_(ins[-1])
    assert_interprets_clean(k, ins, sms=2)


@needs_cxx
def test_interpreter_split_k_reducing_cta_stores_pairs():
    # sm_90a split-K (the TMA pipeline, no roles): the last split reduces and stores both outputs directly
    from hopper_defs import schedule_sm90
    from matmul_defs import matmul_fusion
    fd, a, b = matmul_fusion(n=73, k=16 * 8, dtype="bf16", layout="NT", epilogue="bias_gelu_saved")
    schedule_sm90(fd, a, b, bm=64, bn=64, bk=16, wgs=1, stages=3, prefetch=1).split_k(2)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False, vec_e=2)
    assert k.lowered.pair_operands == ["bias"] and "store_pair(D1 + at" in direct(k.source)
    r = interpret(k, *data(fd, 75, seed=4))
    assert r.ok and len(r.output) == 2 and r.ctas == 2 * 2 * 2, r.report()


def _mutant(fd, M, old, new, vec_e=2):
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False, vec_e=vec_e)
    assert k.source.count(old) >= 1, old
    return interpret(_Mutated(k, k.source.replace(old, new)), *data(fd, M, seed=5), sms=1)


@needs_cxx
@pytest.mark.parametrize("n,M,old,new,finding", [
    # every pair stored whole, the last odd column's cut pair too: one row (aligned), its last store passes D
    (201, 1, PAIR_IF, "if (true) {", "outside every tensor"),
    # pair stores without the alignment check: odd N, so rows start at odd elements
    (201, 77, PAIR_IF, "if (whole) {", "misaligned address"),
    # the cut pair's operand read whole: the bias read passes its last column
    (201, 77, BIAS_READ, "heddle::sm90::load_pair(E_bias + (long long)col_0);", "outside every tensor"),
    # the staged path's clamped column min(col, N - 2): odd when N is odd
    (201, 77, BIAS_READ, "heddle::sm90::load_pair_or_first(E_bias + (long long)(col_0 < N - 2 ? col_0 : N - 2), "
                         "true);", "misaligned address"),
    # no row check: the ragged last m-tile stores past D
    (200, 77, GUARD, "if (col < N) {", "outside every tensor"),
])
def test_interpreter_catches_pair_mutants(n, M, old, new, finding):
    fd = scheduled(spec(n=n), "direct")
    r = _mutant(fd, M, old, new)
    assert not r.ok and finding in r.report(), r.report()


@needs_cxx
def test_interpreter_catches_a_wrong_cut_pair_store():
    # the scalar stores (odd N: every pair's) store the wrong half of the pair: wrong numbers
    fd = scheduled(spec(n=201), "direct")
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False, vec_e=2)
    res = re.search(r"D\[at\] = heddle::from_float<heddle::bf16>\((r\d+)\.x\);", k.source).group(1)
    r = _mutant(fd, 77, f"D[at] = heddle::from_float<heddle::bf16>({res}.x);",
                f"D[at] = heddle::from_float<heddle::bf16>({res}.y);")
    assert not r.ok and any("output" in m for m in r.mismatches), r.report()
