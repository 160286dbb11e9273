"""The sm_90a direct-store epilogue (registers -> D, no TMA store) in column pairs, like the staged one: each
pair of adjacent columns of the wgmma fragment runs the pair program (activations called out of line, once
per pair), is skipped when its row or first column is outside D, and is stored by heddle::store_pair: one
32-bit store (16-bit outputs; 64-bit for f32) when every output's pairs are whole and aligned (pair_st =
heddle::pair_aligned: bases, ldd and N even, once per kernel), else scalar stores, the second only inside N.
With vec_e=2 a bias / residual is read one pair per load at the pair's own even column: the launch asks such
an operand for an even column count, so the pair is whole (an odd N takes vec_e=1; passes/vectorize_epilogue_reads.cpp).

The direct store is what kernels take when the TMA store is not: an odd N or rows that are not a multiple of
16 bytes, several outputs (training's saved pre-activation), split-K's reducing CTA, epilogue_store("direct").

Checked here: the printed source, NVRTC (no spills, setmaxnreg honoured, pair stores and pair reads counted
in the PTX, one out-of-line GELU per pair), the CPU interpreter of the printed source (float64-right numbers on
ragged shapes with odd N and odd M, bf16 and f32 operands and outputs, the two-output training kernel, a
split-K kernel), the launch rule, and source mutants the interpreter catches (pairs stored whole past an odd N:
out of bounds; pair stores without the alignment check: misaligned; a pair read at an odd column: misaligned;
no row check: out of bounds; the halves of a pair swapped: numbers)."""
import re

import pytest

import heddle
from support.env import requires_nvrtc
from heddle.core.interpret import _Mutated
from heddle.interpret import interpret
from heddle.pytorch.matmul import MatmulSpec
from support.wgmma_defs import assert_interprets_clean, build, inputs, nvrtc_sm90
from support.interp_defs import needs_cxx

GUARD = "if (row < M && col < N) {"
WHOLE = "const bool whole = col + 1 < N;"
COLV = "const int colv = col;"
BIAS_READ = "heddle::load_pair(E_bias + (long long)colv);"
PAIR_ST = "const bool pair_st = heddle::pair_aligned(D, ldd, N);"


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
    for line in (GUARD, WHOLE, "const int col_0 = col, col_1 = whole ? col + 1 : col;", COLV, BIAS_READ,
                 "heddle::load_pair(E_residual + (long long)row * E_residual_s0 + (long long)colv);",
                 "const long long at = (long long)row * ldd + col;",
                 "heddle::store_pair(D + at, heddle::pack_pair<heddle::bf16>(r"):
        assert line in body, line
    assert "min(" not in body and PAIR_ST in pairs.source
    # one pair program: the activation out of line, no per-element transcendental code in the kernel
    assert "heddle::ool::gelu_tanh(r2)" in body and "heddle::gelu_tanh(" not in body
    # every fragment pair (fm, fn, h) expanded once, both rows h of each 8-column block
    fm_fn_h = re.findall(r"HEDDLE_PAIR\((\d+), (\d+), (\d+)\);", pairs.source)
    assert len(fm_fn_h) == len(set(fm_fn_h)) and {h for *_, h in fm_fn_h} == {"0", "1"}
    # vec_e=1: both columns read apart, the second clamped to the last column
    assert "{heddle::to_float(E_bias[(long long)col_0 * E_bias_s0]), heddle::to_float(E_bias[(long long)col_1 * " \
           "E_bias_s0])};" in direct(scalar.source) and "colv" not in scalar.source


def test_two_outputs_store_both_in_pairs():
    fd = scheduled(spec(n=200, saved="bf16"), "direct")  # a saved pre-activation: two outputs, stored directly
    low = fd.lower("sm_90a", vec_e=2)
    body = direct(low.source)
    assert "const bool pair_st = heddle::pair_aligned(D, ldd, N) && heddle::pair_aligned(D1, ldd, N);" in low.source
    both = re.findall(r"heddle::store_pair\((D1?) \+ at, heddle::pack_pair<heddle::bf16>\((r\d+)\), pair_st, whole\);",
                      body)
    assert [d for d, _ in both] == ["D", "D1"] and both[0][1] != both[1][1], both


def test_the_staged_epilogue_keeps_its_clamped_pair_read():
    src = scheduled(spec(n=200)).lower("sm_90a", vec_e=2).source
    assert "const int colv = n0 + lc0 < N - 2 ? n0 + lc0 : N - 2;" in src and "HEDDLE_STMATRIX" in src


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
    assert ld == (["u32"] * 64 if vec_e == 2 else ["u16"] * 128), ld  # one 32-bit read per pair
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
@pytest.mark.parametrize("kw,store,M,vec_e", [
    (dict(n=201), None, 77, 1),                                        # odd N, odd M: cut pairs, scalar stores
    (dict(n=201, bias="f32", residual="bf16"), None, 130, 1),          # odd N: scalar reads (vec_e=1)
    (dict(n=200, bias="f32", residual="f32", activation=None), "direct", 131, 2),  # even N: pair stores
    (dict(n=198, out="f32", residual="bf16"), None, 65, 2),            # f32 output: 64-bit pair stores
    (dict(n=202, saved="bf16"), None, 99, 2),                          # training: two outputs in pairs
    (dict(n=201, saved="bf16", activation="gelu"), None, 33, 1),       # two outputs, odd N
])
def test_interpreter_numbers_on_ragged_shapes(kw, store, M, vec_e):
    fd = scheduled(spec(**kw), store)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False, vec_e=vec_e)
    assert bool(k.lowered.pair_operands) == (vec_e == 2) and "heddle::store_pair(D + at" in direct(k.source)
    assert_interprets_clean(k, data(fd, M, seed=M), sms=2)


def test_vec_e_2_refuses_an_odd_column_count():
    fd = scheduled(spec(n=201))
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False, vec_e=2)
    with pytest.raises(heddle.InputError, match=r"input 'bias': the kernel reads it two columns per load"):
        k.prepare(data(fd, 8), tensor_map_encoder=lambda *a, **kw: b"\0" * 128, sms=1)


@needs_cxx
def test_interpreter_split_k_reducing_cta_stores_pairs():
    # sm_90a split-K (the TMA pipeline, no roles): the last split reduces and stores both outputs directly
    from support.wgmma_defs import schedule_sm90
    from support.matmul_defs import matmul_fusion
    fd, a, b = matmul_fusion(n=74, k=16 * 8, dtype="bf16", layout="NT", epilogue="bias_gelu_saved")
    schedule_sm90(fd, a, b, bm=64, bn=64, bk=16, wgs=1, stages=3, prefetch=1).split_k(2)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False, vec_e=2)
    assert k.lowered.pair_operands == ["bias"] and "store_pair(D1 + at" in direct(k.source)
    r = interpret(k, *data(fd, 75, seed=4))
    assert r.ok and len(r.output) == 2 and r.ctas == 2 * 2 * 2, r.report()


def _mutant(fd, M, old, new, vec_e):
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False, vec_e=vec_e)
    assert k.source.count(old) >= 1, old
    return interpret(_Mutated(k, k.source.replace(old, new)), *data(fd, M, seed=5), sms=1)


@needs_cxx
@pytest.mark.parametrize("n,M,vec_e,old,new,finding", [
    # every pair stored whole, the last odd column's cut pair too: one row (aligned), its last store passes D
    (201, 1, 1, "pair_st, whole);", "true, true);", "outside every tensor"),
    # pair stores without the alignment check: odd N, so rows start at odd elements
    (201, 77, 1, "pair_st, whole);", "whole, whole);", "misaligned address"),
    # the operand's pair read at the odd column next to the pair's own
    (200, 77, 2, COLV, "const int colv = col + 1;", "misaligned address"),
    # no row check: the ragged last m-tile stores past D
    (200, 77, 2, GUARD, "if (col < N) {", "outside every tensor"),
])
def test_interpreter_catches_pair_mutants(n, M, vec_e, old, new, finding):
    fd = scheduled(spec(n=n), "direct")
    r = _mutant(fd, M, old, new, vec_e)
    assert not r.ok and finding in r.report(), r.report()


@needs_cxx
@pytest.mark.parametrize("n", [200, 201])
def test_interpreter_catches_swapped_halves(n):
    # the pair's halves swapped before the store (pair stores for even N, scalar ones for odd N): wrong numbers
    fd = scheduled(spec(n=n), "direct")
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    res = re.search(r"heddle::store_pair\(D \+ at, heddle::pack_pair<heddle::bf16>\((r\d+)\)", k.source).group(1)
    old = f"heddle::pack_pair<heddle::bf16>({res})"
    r = _mutant(fd, 77, old, f"heddle::pack_pair<heddle::bf16>(heddle::pairf{{{res}.y, {res}.x}})", 1)
    assert not r.ok and any("output" in m for m in r.mismatches), r.report()
