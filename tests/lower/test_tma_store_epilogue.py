"""The TMA-store epilogue of the sm_90a two-role cooperative kernel (epilogue_store("tma"),
passes/tma_store_epilogue.cpp): the MMA warpgroups compute the epilogue on column pairs, stage the tile
in 128-byte-wide column chunks through sD with stmatrix, fence.proxy.async + a named barrier publish each
chunk, and one elected thread writes it with a TMA store (bulk group; cp.async.bulk.wait_group.read before
the slot is rewritten and before the CTA ends). D's ragged edges are clipped by the store's bounds.

Checked here: the lowered plan (every new sync with its reason), the printed pair program (activations
out of line, no per-element bounds check), the kernel-IR simulator (clean, right numbers, every mutant
killed -- the proxy fence, the wait_group.read and the barrier before the store among them), the CPU
interpreter of the printed source (float64 numbers on ragged shapes, source mutants and a wrong stmatrix
row mapping caught), NVRTC for sm_90a (no spills, stmatrix and the bulk tensor store in the PTX, no
st.global left), and the ScheduleErrors for what is not built. Two outputs: test_tma_store_two_outputs.py."""
import pytest

import heddle
from support.env import requires_nvrtc
from heddle.core.interpret import _Mutated
from heddle.interpret import interpret
from support.wgmma_defs import (assert_every_source_mutant_killed, assert_interprets_clean, assert_simulates_clean,
                         assert_store_protocol_mutants_killed, build, inputs, killed_sync_mutants, nvrtc_sm90)
from support.interp_defs import needs_cxx
from support.matmul_defs import matmul_fusion


def tma_store(n=200, bn=128, stages=3, prefetch=1, **kw):
    return build("coop", stages=stages, prefetch=prefetch, n=n, bn=bn, store="tma", **kw)


def test_plan_stages_chunks_through_sd_with_every_sync_reasoned():
    low = tma_store().lower("sm_90a")
    assert low.name.endswith("_ws2coop_40_232_tmas2")
    text, src = low.explain(), low.source
    assert "TMA store of D in 2 chunk(s) of 64 columns through sD[2]" in text.splitlines()[0]
    for what in ("cp.async.bulk.wait_group.read(1): the store of chunk q-2",
                 "fence.proxy.async in every writing thread",
                 "every fenced write of the chunk happens before thread 128 issues its TMA store",
                 "cp.async.bulk.wait_group.read(0): after the last tile"):
        assert what in text, what
    # two chunks per tile, each: wait_read, barrier, stmatrix, fence, barrier, store + commit
    assert src.count("heddle::sm90::bulk_wait_read<1>();") == 2 and src.count("bulk_wait_read<0>();") == 1
    assert src.count("heddle::sm90::named_barrier(2, 256);") == 4
    assert src.count("heddle::sm90::fence_proxy_async();") == 2
    assert ("heddle::sm90::tma_store_tile<heddle::sm90::TmaTile<128, 64, heddle::bf16>, 2>(&tmD, m0, n0 + 64, 0, "
            "sD + ((tl * 2 + 1) % 2) * 8192);") in src
    assert "HEDDLE_STMATRIX(0, 8);" in src and "heddle::sm90::stmatrix_x4(" in src
    # the pair program: no per-element bounds check or global store; GELU out of line, once per pair
    assert "if (row < M && col < N)" not in src and "D[(long long)" not in src
    assert "heddle::ool::gelu_erf(r2)" in src and "heddle::gelu_erf(" not in src.split("extern")[-1]


def test_direct_store_stays_selectable_and_is_the_default():
    for store in (None, "direct"):
        src = build("coop", stages=3, n=200, bn=128, store=store).lower("sm_90a").source
        # the direct store: bounds-checked column pairs into D (tests/codegen/test_wgmma_direct_pairs.py)
        assert "tma_store" not in src and "const long long at = (long long)row * ldd + col;" in src
        assert "heddle::store_pair(D + at, heddle::pack_pair<heddle::bf16>(r" in src and "pair_st, whole);" in src


@pytest.mark.parametrize("kw", [dict(), dict(bias_tma=2), dict(bn=64, n=72, stages=2, prefetch=0),
                                dict(dtype="f16", epilogue="silu_scale")])
def test_simulator_clean_with_right_numbers(kw):
    assert_simulates_clean(tma_store(**kw), label=str(kw))


def test_every_simulator_mutant_is_killed():
    killed = killed_sync_mutants(tma_store(), at_least=40)
    for sync in ("fence.proxy.async", "cp.async.bulk.wait_group.read", "bar.sync 2"):
        assert sync in killed, (sync, killed)


@needs_cxx
@pytest.mark.parametrize("kw,M,sms", [(dict(), 77, 1), (dict(bias_tma=2), 200, 2),
                                      (dict(n=72, bn=64, dtype="f16", epilogue="silu_scale"), 130, 1)])
def test_interpreter_numbers_on_ragged_shapes(kw, M, sms):
    # ragged M, N, K against 128 x {64, 128} x 16 tiles (TMA needs 16-byte rows: N, K multiples of 8)
    fd = tma_store(k=16 * 7 - 8, **kw)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    assert_interprets_clean(k, inputs(fd, M, seed=M), sms=sms)


@needs_cxx
def test_interpreter_catches_a_wrong_stmatrix_row_mapping():
    # matrix l/8 of the x4 takes fragment column fn + l/16: lanes 8..15 giving fn + 1 store the wrong columns
    fd = tma_store(n=128, bn=128)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    good = "const int sc = 8 * (fn) + ((lane >> 4) << 3);"
    assert good in k.lowered.source
    bad = _Mutated(k, k.lowered.source.replace(good, "const int sc = 8 * (fn) + ((lane >> 3) & 1) * 8;"))
    r = interpret(bad, *inputs(fd, 128, seed=5), sms=1)
    assert not r.ok and "mismatch" in r.report().lower(), r.report()


@needs_cxx
@pytest.mark.slow
def test_interpreter_source_mutants_killed():
    assert_every_source_mutant_killed(tma_store(n=128, bn=128))


@needs_cxx
def test_interpreter_source_mutants_of_the_store_protocol_killed():
    # the three syncs the store rests on: the proxy fence, the wait_group.read, the barrier before the store
    assert_store_protocol_mutants_killed(tma_store(n=128, bn=128))


def nvrtc(fd):
    return nvrtc_sm90(fd.lower("sm_90a"))


@requires_nvrtc
@pytest.mark.parametrize("kw", [dict(bm=128, bn=256, bk=64), dict(bm=128, bn=256, bk=64, bias_tma=2),
                                dict(bm=128, bn=128, bk=64, dtype="f16", epilogue="silu_scale")])
def test_nvrtc_compiles_with_stmatrix_and_bulk_store(kw):
    r = nvrtc(build("coop", stages=4, prefetch=2, n=1024, k=4096, store="tma", **kw))
    assert "stmatrix.sync.aligned.m8n8.x4.shared.b16" in r.ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in r.ptx
    assert "cp.async.bulk.wait_group.read" in r.ptx and "fence.proxy.async" in r.ptx
    assert "st.global" not in r.ptx  # every output element goes through the TMA store
    if kw.get("bias_tma"):
        assert "ld.global" not in r.ptx


@requires_nvrtc
def test_nvrtc_compiles_the_epilogue_role_on_pairs():
    r = nvrtc(build("3role", stages=4, prefetch=2, n=1024, k=4096, bm=64, bn=128, bk=64))
    assert "stmatrix.sync.aligned.m8n8.x4.shared.b16" in r.ptx and "st.global" not in r.ptx


@pytest.mark.parametrize("variant,kw,match", [
    ("pipeline", dict(store="tma"), "built for the warp-specialized sm_90a kernels"),
    ("3role", dict(store="direct"), "the epilogue role stores its tile by TMA"),
])
def test_schedules_not_built_are_named_errors(variant, kw, match):
    with pytest.raises(heddle.ScheduleError, match=match):
        build(variant, **kw).lower("sm_90a")


def test_tma_store_on_sm100a_is_taken_and_not_the_default():
    # the tcgen05 kernel's epilogue warpgroup stages through sD when asked (tests/interp/test_tcgen05_tma_store.py);
    # the automatic schedule keeps the direct store (no GPU measurement says otherwise, docs/blackwell.md)
    for n, tile in ((512, "128x256x64"), (200, "128x128x64")):  # both automatic bf16 tiles: two staging slots fit
        fd, _, _ = matmul_fusion(n=n, k=512, dtype="bf16")
        fd.auto_schedule("sm_100a", m=512, n=n, k=512)
        low = fd.lower("sm_100a")
        assert tile in low.name and "_tmas" not in low.name and "tma_store_tile" not in low.source
        fd.matmul_tensor.epilogue_store("tma")
        low = fd.lower("sm_100a")
        assert low.name.endswith("_tmas2") and "heddle::sm100::stage_16<" in low.source


def test_unknown_kind_is_a_schedule_error():
    fd = build("coop")
    with pytest.raises(heddle.ScheduleError, match="kind 'smem' is not one of 'tma'"):
        fd.matmul_tensor.epilogue_store("smem")


@pytest.mark.parametrize("n,epilogue,tma", [(1024, "plain", True), (1028, "plain", False),
                                            (1024, "bias_gelu_saved", True), (1028, "bias_gelu_saved", False)])
def test_auto_schedule_takes_the_tma_store_where_the_output_is_tma_able(n, epilogue, tma):
    # the two-warpgroup cooperative kernel (M > 64, a plain store; a fused epilogue gets ping-pong: see
    # test_epilogue_layout.py), N known: 16-byte output rows (two outputs of one element size: each staged,
    # test_tma_store_two_outputs.py)
    fd, _, _ = matmul_fusion(n=n, k=4096, dtype="bf16", layout="NT", epilogue=epilogue)
    low = fd.auto_schedule("sm_90a", m=4096, n=n, k=4096, epilogue_layout="cooperative"
                           if epilogue == "bias_gelu_saved" else "auto").lower("sm_90a")
    assert "_ws2coop_" in low.name and low.name.endswith("_tmas2") == tma, low.name
    assert ("stmatrix_x4" in low.source) == tma
