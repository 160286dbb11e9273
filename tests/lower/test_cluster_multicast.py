"""Clusters of 2 with TMA multicast on the sm_90a warp-specialized cooperative kernel (mm.cluster(2,
along), passes/cluster_multicast.cpp; docs/hopper.md "Clusters of 2 with TMA multicast"): the two CTAs of
a cluster compute neighbouring tiles along m (sharing B) or n (sharing A), each loads half of the shared
tile and multicasts it to both; the empty barriers count both CTAs' consumers (remote arrivals), the
mbarrier inits are fenced for the cluster and published by a cluster barrier, a cluster barrier precedes
the exit, and an odd tile count's absent partner tile is walked in step (loads, waits and releases,
computes and stores nothing).

Checked here: the ScheduleErrors for what is not built, the lowered plan (every new sync with its reason),
the printed source, the kernel-IR simulator's two-CTA cluster model (clean with right numbers, every mutant
killed: the peer's release, expect_tx without the peer's half, the init fence, the exit barrier), the CPU interpreter of the printed source in clusters of 2 (float64 numbers on ragged
shapes with odd tile counts along the cluster axis, every source mutant of the cluster protocol caught),
whole clusters in the launch (num_ctas; the launch plan's cluster dimension: tests/runtime/test_cluster_launch.py),
and NVRTC for sm_90a (no spills, setmaxnreg honoured, the multicast / mapa / cluster barrier in the PTX)."""
import pytest

import heddle
from support.env import requires_nvrtc, rt
from heddle import verify
from heddle.core import tma
from heddle.core.interpret import _Mutated
from heddle.interpret import interpret, mutation_kill_rate
from support.wgmma_defs import assert_interprets_clean, build, clustered, inputs
from support.interp_defs import needs_cxx


# --- the schedule ---------------------------------------------------------------------------------

@pytest.mark.parametrize("variant,kw,cl,match", [
    ("pipeline", {}, (2, "m"), "clusters are built on the warp-specialized ring"),
    ("pingpong", {}, (2, "m"), "ping-pong MMA warpgroups walk the tiles in turns"),
    ("coop", dict(batched=True), (2, "m"), None),  # refused before (batched roles) or by the cluster rule
])
def test_schedules_not_built_are_named_errors(variant, kw, cl, match):
    fd = build(variant, stages=3, n=72, **kw)
    fd.matmul_tensor.cluster(*cl)
    with pytest.raises(heddle.ScheduleError, match=match or "batched"):
        fd.lower("sm_90a")


def test_cluster_on_targets_without_the_ring_is_a_named_error():
    from support.matmul_defs import matmul_fusion, schedule
    fd, a, b = matmul_fusion(n=72, k=64, dtype="bf16")
    schedule(fd, a, b)
    fd.matmul_tensor.cluster(2, "m")
    with pytest.raises(heddle.ScheduleError, match="multicast TMA loads of the sm_90a warp-specialized kernels"):
        fd.lower("sm_90a")


@pytest.mark.parametrize("size,along,match", [(3, "m", "clusters of 2 CTAs"), (2, "k", "is not 'm'"),
                                              (0, "m", "clusters of 2 CTAs")])
def test_bad_cluster_options_are_schedule_errors(size, along, match):
    fd = build("coop", stages=3, n=72)
    with pytest.raises(heddle.ScheduleError, match=match):
        fd.matmul_tensor.cluster(size, along)


RAGGED = [  # (variant, along, kw, M, N, sms): odd tile counts along the cluster axis leave a partner absent
    ("coop", "m", dict(), 300, 72, 2),             # 3 m tiles: the second pair's rank 1 is beyond M
    ("coop", "m", dict(bias_tma=2), 77, 136, 4),    # 1 m tile (rank 1 always absent), 3 n tiles
    ("coop", "n", dict(), 130, 200, 2),             # 4 n tiles, 2 m tiles
    ("coop", "m", dict(store="tma", bn=128), 300, 136, 2),  # TMA-store epilogue: the absent tile's store clipped
    ("3role", "n", dict(dtype="f16", epilogue="silu_scale"), 70, 136, 2),  # 3 n tiles, an epilogue role
]


# --- the lowered plan -----------------------------------------------------------------------------

def test_plan_names_every_cluster_sync_with_its_reason():
    low = clustered().lower("sm_90a")
    assert low.name.endswith("_ws2coop_40_232_cl2m") and low.cluster == 2 and low.cluster_along == "m"
    text, src = low.explain(), low.source
    assert "cluster of 2 along m: sB multicast (each CTA loads half)" in text
    for what in ("fence.mbarrier_init.release.cluster: the peer CTA arrives remotely on empty",
                 "barrier.cluster (arrive.release + wait.acquire, every thread of both CTAs)",
                 "barrier.cluster before exit: the peer's consumers arrive on this CTA's empty",
                 "each consumer thread also arrives on the peer's empty",
                 "doubled for the cluster: the consumers of both CTAs release each slot",
                 "the peer's multicast half (the whole shared tile's bytes)",
                 "the absent partner tile (m0 >= M): no wgmma reads the slot"):
        assert what in text, what
    # one multicast load of B (A plain), half-box tensor map for B, both CTAs' 256 consumers on empty
    assert src.count("heddle::sm90::tma_load_tile_multicast<Mma::TileB, 2>(") == 1
    assert "heddle::sm90::tma_load_tile<Mma::TileA, 2>(" in src
    assert src.count("heddle::sm90::mbar_init((empty + (0)), 512);") == 1
    # the release and the pre-arrive each have their remote twin (the release also in the absent partner
    # tile's k loop, which waits and releases without a wgmma); the inits are fenced; two cluster barriers
    assert src.count("heddle::sm90::mbar_arrive_cluster(") == 3
    assert "if (m0 < M) {" in src and src.count("acc.step(") == 1
    assert src.count("heddle::sm90::fence_mbarrier_init_cluster();") == 1
    assert src.count("heddle::sm90::cluster_sync();") == 2 and "block_sync" not in src
    assert "const int crank = bid % 2;" in src and "heddle_cta_smem = heddle::sm90::cta_smem(heddle_smem);" in src
    expect = [l for l in src.splitlines() if "mbar_arrive_expect_tx" in l]
    assert len(expect) == 1 and f", {(128 * 16 + 16 * 64) * 2});" in expect[0], expect  # A 128x16 + B 16x64
    maps = {m["param"]: m for m in low.tensor_maps}
    assert maps["tmB"]["box_rows"] == 8 and maps["tmA"]["box_rows"] == 128  # B N-major: 16 k rows, 8 each


def test_along_n_multicasts_a_and_pairs_n_tiles():
    low = clustered(along="n", n=200).lower("sm_90a")
    src = low.source
    assert low.name.endswith("_cl2n") and "tma_load_tile_multicast<Mma::TileA, 2>(" in src
    assert "n0 = " in src and "* 2 + crank) * 64" in src
    assert {m["param"]: m["box_rows"] for m in low.tensor_maps}["tmA"] == 64


@pytest.mark.parametrize("variant,along,kw,M,N", [(v, a, kw, M, N) for v, a, kw, M, N, _ in RAGGED])
def test_simulator_runs_both_ctas_clean_with_right_numbers(variant, along, kw, M, N):
    fd = clustered(variant, along, n=N, k=16 * 7 - 8, **kw)
    low = fd.lower("sm_90a")
    for sched, seed in (("adversarial", 0), ("random", 1)):
        r = verify.simulate(low, inputs(fd, M, seed=M), sched, seed)
        assert r.ok, f"{variant} {along} {kw} M={M} {sched}:\n{r.report()}"


def test_every_simulator_mutant_is_killed():
    # among them: the peer's release and pre-arrive deleted, expect_tx counting only the own half of the
    # shared tile, the init fence deleted, either cluster barrier deleted
    fd = clustered()
    report = verify.kill_rate(fd.lower("sm_90a"), [inputs(fd, 300, seed=1)])
    assert report.total >= 30 and not report.survivors, str(report)
    killed = {m.description: by for m, by in report.verdicts}
    def by(what):
        return [b for d, b in killed.items() if d.startswith(what)]
    assert len(by("delete mbarrier.arrive.cluster(peer)")) == 3  # pre-arrive, release, the absent tile's release
    assert any("after CTA rank" in b and "exited" in b for b in by("delete barrier.cluster")), by("delete barrier.cluster")
    assert any("not followed by fence.mbarrier_init.release.cluster" in b
               for b in by("delete fence.mbarrier_init.release.cluster"))
    assert by("count only this CTA's half of the shared tile")


# --- launch in whole clusters ---------------------------------------------------------------------

def test_num_ctas_is_whole_clusters_of_tile_pairs():
    low = clustered().lower("sm_90a")
    env = {"M": 300, "N": 72, "K": 160}  # 3 m tiles (the third pair's partner absent) x 2 n tiles
    assert tma._tiles(low, env) == 8
    assert tma.num_ctas(low, env, None, sms=132) == 8
    assert tma.num_ctas(low, env, None, sms=7) == 6  # an odd SM count: one idle
    assert tma.num_ctas(low, env, None, sms=1) == 2  # at least one cluster
    assert tma.simulated_ctas(low, env) == 2


# --- the interpreter of the printed source --------------------------------------------------------



@needs_cxx
@pytest.mark.parametrize("variant,along,kw,M,N,sms", RAGGED)
def test_interpreter_numbers_on_ragged_shapes(variant, along, kw, M, N, sms):
    fd = clustered(variant, along, n=N, k=16 * 7 - 8, **kw)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    assert_interprets_clean(k, inputs(fd, M, seed=M), sms=sms)


CLUSTER_SYNCS = ("mbar_arrive_cluster", "fence_mbarrier_init_cluster", "cluster_sync")


@needs_cxx
def test_interpreter_kills_the_cluster_protocol_mutants():
    # each remote release, the init fence, both cluster barriers deleted; expect_tx halved or dropped;
    # the empty count not doubled; the multicast sent to this CTA only
    fd = clustered(n=72)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    args = inputs(fd, 300, seed=2)
    res = mutation_kill_rate(k, *args, sms=2, kinds=("delete_sync", "shrink_expect_tx", "drop_expect_tx"),
                             where=lambda mu: mu.kind != "delete_sync" or any(x in mu.what for x in CLUSTER_SYNCS))
    assert res["total"] >= 7 and not res["survivors"], (res["total"], res["survivors"])
    src = k.lowered.source
    for good, bad in (("mbar_init((empty + (0)), 512);", "mbar_init((empty + (0)), 256);"),
                      (", crank, 3);", ", crank, 1);")):
        assert good in src
        r = interpret(_Mutated(k, src.replace(good, bad)), *args, sms=2, max_findings=3)
        assert not r.ok, bad


@needs_cxx
@pytest.mark.slow
def test_interpreter_every_source_mutant_killed():
    fd = clustered(n=72)
    res = mutation_kill_rate(heddle.Kernel.build(fd, "sm_90a", rtc=False), *inputs(fd, 300, seed=1), sms=2)
    assert "delete_sync" in res["by_kind"] and not res["survivors"], res["survivors"]


# --- NVRTC ----------------------------------------------------------------------------------------

@requires_nvrtc
@pytest.mark.parametrize("variant,along,kw", [("coop", "m", dict(bm=128, bn=256, bk=64)),
                                              ("coop", "n", dict(bm=128, bn=256, bk=64, store="tma", bias_tma=2)),
                                              ("3role", "m", dict(bm=64, bn=128, bk=64))])
def test_nvrtc_compiles_without_spills_with_the_cluster_ops(variant, along, kw):
    low = clustered(variant, along, stages=4, prefetch=2, n=1024, k=4096, **kw).lower("sm_90a")
    r = rt.compile(low.source, low.name, "sm_90a", isolate=True)
    st = r.stats
    assert st.spill_stores == 0 and st.spill_loads == 0 and st.stack_frame == 0, r.ptxas
    assert not st.setmaxnreg_ignored and "C7515" not in r.ptxas and "C7519" not in r.ptxas, r.ptxas
    for op in (".multicast::cluster", "mapa.shared::cluster", "mbarrier.arrive.release.cluster.shared::cluster",
               "fence.mbarrier_init.release.cluster", "barrier.cluster.arrive", "barrier.cluster.wait"):
        assert op in r.ptx, op
