"""The TMA-store epilogue of the sm_90a ping-pong kernel (two MMA warpgroups on alternating tiles,
passes/tma_store_epilogue.cpp): each warpgroup stages its tile in 128-byte column chunks through its own
slots of sD with stmatrix, publishes them with its own named barrier (bar.sync 2 + c, 128 threads), and its
first thread issues the TMA stores and owns their bulk group. The epilogue follows the warpgroup's
`arrive order[1-c]`, so its stores overlap the other warpgroup's mainloop.

Checked here: the lowered plan (slots, barriers and issuing thread per warpgroup, the epilogue after the
order hand-over), the kernel-IR simulator (clean, right numbers, every mutant killed), the CPU interpreter
of the printed source (float64 numbers on ragged shapes; source mutants of the proxy fence, the
wait_group.read, the ping-pong order and a slot shared by both warpgroups caught), and NVRTC for sm_90a (no
spills, setmaxnreg honoured, stmatrix and the bulk tensor store in the PTX, no st.global left)."""
import pytest

import heddle
from support.env import requires_nvrtc
from heddle.core.interpret import _Mutated
from heddle.interpret import interpret, mutation_kill_rate
from support.wgmma_defs import (assert_every_source_mutant_killed, assert_interprets_clean, assert_simulates_clean,
                         build, inputs, killed_sync_mutants, nvrtc_sm90)
from support.interp_defs import needs_cxx


def pp_store(n=200, bn=128, stages=3, prefetch=1, **kw):
    return build("pingpong", stages=stages, prefetch=prefetch, n=n, bn=bn, store="tma", **kw)


def test_plan_gives_each_warpgroup_its_slots_barrier_and_issuer():
    low = pp_store().lower("sm_90a")
    assert low.name.endswith("_ws2pp_40_232_tmas2"), low.name
    text, src = low.explain(), low.source
    assert ("TMA store of D in 2 chunk(s) of 64 columns through sD[2] per warpgroup (stmatrix, bar.sync 2 + c; "
            "overlapping the other warpgroup's mainloop)") in text.splitlines()[0]
    assert "named barrier (128 threads of this warpgroup)" in text
    assert "happens before thread 128 + 128 c (its warpgroup's first) issues its TMA store" in text
    # per warpgroup: its own barrier id and its own slots (2 per warpgroup: sD holds 4)
    assert src.count("heddle::sm90::named_barrier(2 + (warp - 4) / 4, 128);") == 4
    assert "named_barrier(2, 256)" not in src
    assert ("heddle::sm90::tma_store_tile<heddle::sm90::TmaTile<64, 64, heddle::bf16>, 2>(&tmD, m0, n0 + 64, 0, "
            "sD + ((warp - 4) / 4 * 2 + (u * 2 + 1) % 2) * 4096);") in src
    assert src.count("if (tid % 128 == 0) {") == 5  # 2 chunks x (wait_read, store) + the final wait_read
    # the epilogue follows the hand-over of the tensor cores: it overlaps the other warpgroup's mainloop
    body = src[src.index("for (int u = 0;"):]
    assert body.index("mbar_arrive((order + (1 - (warp - 4) / 4)))") < body.index("bulk_wait_read<1>()") \
        < body.index("stmatrix_x4(")
    assert src.index("bulk_wait_read<0>();") > src.rindex("bulk_commit();")


def test_staging_smem_is_per_warpgroup():
    low = pp_store(bm=128, bn=128, bk=64, stages=4, prefetch=2, n=1024, k=4096).lower("sm_90a")
    sd = next(s for s in low.smem_plan if s["buffer"] == "sD")
    assert sd["bytes"] == 2 * 2 * 128 * 128, sd  # 2 warpgroups x 2 slots x 128 rows x 128 bytes


@pytest.mark.parametrize("kw", [dict(), dict(bn=64, n=72, stages=2, prefetch=0),
                                dict(dtype="f16", epilogue="silu_scale")])
def test_simulator_clean_with_right_numbers(kw):
    assert_simulates_clean(pp_store(**kw), label=str(kw))


def test_every_simulator_mutant_is_killed():
    killed = killed_sync_mutants(pp_store(), at_least=50)
    for sync in ("fence.proxy.async", "cp.async.bulk.wait_group.read", "bar.sync 2 + (warp - 4) / 4",
                 "mbarrier.try_wait.parity order", "mbarrier.arrive order"):
        assert sync in killed, (sync, killed)


@needs_cxx
@pytest.mark.parametrize("kw,M", [(dict(), 77), (dict(n=72, bn=64, dtype="f16", epilogue="silu_scale"), 130)])
def test_interpreter_numbers_on_ragged_shapes(kw, M):
    # ragged M, N, K against 64 x {64, 128} x 16 tiles; one SM: both warpgroups walk several tiles
    fd = pp_store(k=16 * 7 - 8, **kw)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    assert_interprets_clean(k, inputs(fd, M, seed=M), sms=1)


@needs_cxx
def test_interpreter_catches_a_slot_shared_by_both_warpgroups():
    fd = pp_store(n=128, bn=128)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    own = "sD + ((warp - 4) / 4 * 2 + "
    assert own in k.lowered.source
    r = interpret(_Mutated(k, k.lowered.source.replace(own, "sD + (0 * 2 + ")), *inputs(fd, 200, seed=1), sms=1)
    assert not r.ok and "race" in r.report().lower(), r.report()


@needs_cxx
def test_interpreter_source_mutants_of_the_store_and_order_protocol_killed():
    # the store rests on the proxy fence, the wait_group.read and the barrier before the store; the
    # mainloops on the ping-pong order wait
    fd = pp_store(n=128, bn=128)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    keys = ("fence_proxy_async", "bulk_wait_read", "named_barrier", "mbar_wait((order")
    res = mutation_kill_rate(k, *inputs(fd, 200, seed=1), sms=1, kinds=("delete_sync",),
                             where=lambda mu: any(x in mu.what for x in keys))
    assert res["total"] >= 4 and not res["survivors"], (res["total"], res["survivors"])


@needs_cxx
@pytest.mark.slow
def test_interpreter_every_source_mutant_killed():
    assert_every_source_mutant_killed(pp_store(n=128, bn=128))


@requires_nvrtc
@pytest.mark.parametrize("kw", [dict(), dict(dtype="f16", epilogue="silu_scale")])
def test_nvrtc_compiles_with_stmatrix_and_bulk_store(kw):
    r = nvrtc_sm90(pp_store(bm=128, bn=128, bk=64, stages=4, prefetch=2, n=1024, k=4096, **kw).lower("sm_90a"))
    assert "stmatrix.sync.aligned.m8n8.x4.shared.b16" in r.ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in r.ptx
    assert "cp.async.bulk.wait_group.read" in r.ptx and "fence.proxy.async" in r.ptx
    assert "st.global" not in r.ptx


def test_tma_bias_ring_with_ping_pong_stays_a_named_error():
    with pytest.raises(heddle.ScheduleError, match="ping-pong warpgroups would consume its ring out of order"):
        pp_store(bias_tma=2).lower("sm_90a")
