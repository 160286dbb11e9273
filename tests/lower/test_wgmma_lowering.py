"""Hopper lowering: exact sync placement of docs/sync-cases.md cases 8-12 for every stage count and prefetch, the
role graph, tensor maps, shared memory, and the schedule rules of the sm_90a path.

Index and parity expressions are checked by evaluating them (C integer semantics) against the
formulas of docs/sync-plan.md for the first 3s+1 items, so the tests do not depend on how an
expression happens to be printed."""
import pytest

import heddle
from heddle import ScheduleError
from support.wgmma_defs import VARIANTS, branch, build, loop, ops, walk, schedule_sm90, roles_for
from support.matmul_defs import matmul_fusion

SP = [(s, p) for s in range(2, 7) for p in range(s)]


def ev(expr, **env):
    """Evaluates a printed C index expression (ints, / truncates, heddle_ceil_div/min/max)."""
    py = expr.replace("/", "//")
    ns = {"heddle_ceil_div": lambda a, b: (a + b - 1) // b, "heddle_min": min, "heddle_max": max}
    return eval(py, ns, dict(env))


def syncs(nodes, kind=None):
    return [n for n in nodes if n["kind"] == "sync" and (kind is None or n["sync"] == kind)]


def lower(variant, s, p, **kw):
    return build(variant, stages=s, prefetch=p, **kw).lower("sm_90a")


# --- docs/sync-cases.md case 8: TMA ring with full/empty mbarriers, every thread computes ---------------------

@pytest.mark.parametrize("s,p", SP)
def test_case8_tma_ring_with_mbarrier_war(s, p):
    low = lower("pipeline", s, p)
    top = low.structure
    bufs = {m["buffer"]: m for m in low.smem_plan}
    assert bufs["full"]["bytes"] == 8 * s and bufs["empty"]["bytes"] == 8 * s  # 2s mbarriers
    init = branch(top, "tid == 0")
    counts = {(n["buf"], ev(n["index"])): n["count"] for n in syncs(init["then"], "mbarrier.init")}
    assert counts == {**{("full", i): 1 for i in range(s)}, **{("empty", i): 128 for i in range(s)}}
    i_init = top.index(init)
    assert ops(top[i_init + 1:i_init + 2]) == [("block_sync", "", "", "", 0)]
    pre = top[i_init + 2]
    assert pre["kind"] == "for" and (pre["start"], pre["stop"]) == ("0", str(p + 1))  # pre-arrives [0, p+1)
    assert [(n["sync"], n["buf"], n["index"]) for n in pre["body"]] == [("mbarrier.arrive", "empty", "st")]
    main = loop(top, "main")
    body = main["body"]
    issue = body[0]
    assert issue["kind"] == "if" and issue["cond"] == "tid == 0"
    assert [n["kind"] if n["kind"] != "sync" else n["sync"] for n in issue["then"]] == [
        "mbarrier.try_wait.parity", "mbarrier.arrive.expect_tx", "load", "load"]
    war, expect = issue["then"][0], issue["then"][1]
    assert [n["kind"] if n["kind"] != "sync" else n["sync"] for n in body[1:]] == [
        "mbarrier.try_wait.parity", "wgmma.fence", "mma", "wgmma.commit_group", "wgmma.wait_group", "if"]
    raw, wait, guard = body[1], body[5], body[6]
    assert wait["arg"] == s - p - 1
    assert expect["arg"] == 2 * (64 * 16 + 16 * 64)  # bytes of one stage of sA and sB
    # the release frees the slot of k-tile kt+p+1 and is made only when that k-tile exists: the last
    # main iteration's release has no load waiting for it (with nk in [s, s+p) it would complete a
    # second phase of an empty barrier whose pre-arrived phase was never awaited either)
    assert guard["else"] == [] and [(n["sync"], n["buf"]) for n in guard["then"]] == [("mbarrier.arrive", "empty")]
    rel = guard["then"][0]
    assert main["stop"] == f"heddle_ceil_div(K, 16) - {p}" if p else main["stop"] == "heddle_ceil_div(K, 16)"
    for kt in range(3 * s + 1):
        assert (war["buf"], ev(war["index"], kt=kt), ev(war["parity"], kt=kt)) == ("empty", (kt + p) % s, ((kt + p) // s) % 2)
        assert (raw["buf"], ev(raw["index"], kt=kt), ev(raw["parity"], kt=kt)) == ("full", kt % s, (kt // s) % 2)
        assert (rel["buf"], ev(rel["index"], kt=kt)) == ("empty", (kt + p + 1) % s)
        for nk in range(kt + p + 1, 3 * s + p + 2):  # every trip count whose main loop runs iteration kt
            assert bool(ev(guard["cond"], kt=kt, K=16 * nk)) == (kt + p + 1 < nk), (guard["cond"], kt, nk)
    if p:
        pro, epi = loop(top, "prologue"), loop(top, "epilogue")
        # the prologue's slots are fresh: no WAR wait; its issue skips k-tiles past the end (the
        # expect_tx with it); the epilogue releases nothing
        guard = pro["body"][0]
        assert guard["kind"] == "if" and guard["cond"] == "kt < heddle_ceil_div(K, 16)"
        assert [n["sync"] if n["kind"] == "sync" else n["kind"] for n in guard["then"][0]["then"]] == [
            "mbarrier.arrive.expect_tx", "load", "load"]
        assert [n["sync"] if n["kind"] == "sync" else n["kind"] for n in epi["body"]] == [
            "mbarrier.try_wait.parity", "wgmma.fence", "mma", "wgmma.commit_group"]
    else:
        assert [l["stage"] for l in walk(top) if l["kind"] == "for" and l["stage"] != "serial"] == ["main"]
    after = top[top.index(loop(top, "epilogue" if p else "main")) + 1:]
    assert ops(after)[:2] == [("wgmma.wait_group", "acc", "0", "0", 0), "epilogue"]
    assert low.count_syncs("block_sync") == 1  # only the init barrier


# --- docs/sync-cases.md case 9: the same ring without empty barriers: WAR by a block barrier -------------------

@pytest.mark.parametrize("s,p", SP)
def test_case9_tma_ring_with_block_sync_war(s, p):
    low = lower("block_sync", s, p)
    top = low.structure
    assert "empty" not in {m["buffer"] for m in low.smem_plan}
    assert low.count_syncs("mbarrier.arrive") == 0
    main = loop(top, "main")
    body = main["body"]
    assert [n["sync"] if n["kind"] == "sync" else n["kind"] for n in body[0]["then"]] == [
        "mbarrier.arrive.expect_tx", "load", "load"]  # thread 0 waits for nobody: the barrier did
    assert [n["kind"] if n["kind"] != "sync" else n["sync"] for n in body[1:]] == [
        "mbarrier.try_wait.parity", "wgmma.fence", "mma", "wgmma.commit_group", "wgmma.wait_group", "block_sync"]
    assert body[5]["arg"] == s - p - 1
    assert low.barriers_per_main_iteration == 1
    assert "WAR sA, sB" in low.sync_plan[body[6]["reason"]]["hazards"]


# --- docs/sync-cases.md case 10: warp-specialized load warp -> MMA warpgroups ---------------------------------

@pytest.mark.parametrize("s,p", SP)
@pytest.mark.parametrize("variant", ["coop", "pingpong"])
def test_case10_warp_specialized_ring(variant, s, p):
    low = lower(variant, s, p)
    top = low.structure
    assert low.threads == 384
    load = branch(top, "warp < 4")
    assert ops(load["then"][:1]) == [("setmaxnreg", "", "", "", 40)]
    elected = load["then"][1]
    assert elected["cond"] == "tid == 0"
    tiles = elected["then"][0]
    kl = tiles["body"][-1]
    assert [n["sync"] if n["kind"] == "sync" else n["kind"] for n in kl["body"]] == [
        "mbarrier.try_wait.parity", "mbarrier.arrive.expect_tx", "load", "load"]
    mma = load["else"]
    assert ops(mma[:1]) == [("setmaxnreg", "", "", "", 232)]
    coop = variant == "coop"
    pre = mma[1] if coop else mma[1]["then"][0]
    if not coop:
        assert mma[1]["cond"] == "warp < 8"  # one warpgroup pre-arrives: the other's items follow its own
    assert (pre["start"], pre["stop"]) == ("0", str(p + 1))
    ctile = mma[2]
    ck = loop(ctile["body"], "serial")
    names = [n["sync"] if n["kind"] == "sync" else n["kind"] for n in ck["body"]]
    assert names == ["mbarrier.try_wait.parity", "wgmma.fence", "mma", "wgmma.commit_group", "wgmma.wait_group",
                     "mbarrier.arrive"]
    assert ck["body"][4]["arg"] == s - p - 1  # case 10: wgmma.wait_group(s-p-1) before arriving on empty
    K = 16 * (3 * s + 1)
    war, raw, rel = kl["body"][0], ck["body"][0], ck["body"][5]
    for tl in range(3):
        for kt in range(ev("heddle_ceil_div(K, 16)", K=K)):
            g = tl * ev("heddle_ceil_div(K, 16)", K=K) + kt
            env = dict(tl=tl, kt=kt, K=K)
            assert (ev(war["index"], **env), ev(war["parity"], **env)) == (g % s, (g // s) % 2)
            assert (ev(raw["index"], **env), ev(raw["parity"], **env)) == (g % s, (g // s) % 2)
            assert ev(rel["index"], **env) == (g + p + 1) % s
    after = [n["sync"] if n["kind"] == "sync" else n["kind"] for n in ctile["body"][ctile["body"].index(ck) + 1:]]
    tail = (["wgmma.wait_group"] if s - p - 1 else []) + (["mbarrier.arrive"] if not coop else []) + ["epilogue"]
    assert after == tail
    counts = {n["buf"]: n["count"] for n in syncs(branch(top, "tid == 0")["then"], "mbarrier.init")}
    assert counts["full"] == 1 and counts["empty"] == (256 if coop else 128)
    if not coop:  # ping-pong: the two warpgroups take turns on the mainloop
        assert counts["order"] == 128
        wait = syncs(ctile["body"], "mbarrier.try_wait.parity")[0]
        assert wait["buf"] == "order"
        for u in range(4):
            for c in (0, 1):
                warp = 4 + 4 * c
                assert ev(wait["index"], warp=warp) == c and ev(wait["parity"], u=u, warp=warp) == (u + 1 - c) % 2


# --- docs/sync-cases.md cases 11 and 12: three roles, the accumulator ring and the TMA store --------------------

@pytest.mark.parametrize("s,p", [(2, 1), (3, 2), (4, 3), (4, 2), (5, 1), (6, 0)])
def test_case12_three_roles_one_ring_per_edge(s, p):
    low = lower("3role", s, p)
    top = low.structure
    init = branch(top, "tid == 0")
    counts = {}
    for n in syncs(init["then"], "mbarrier.init"):
        counts.setdefault(n["buf"], set()).add(n["count"])
    # one full/empty pair per edge per stage: load -> mma (sA, sB), mma -> epilogue (sC)
    assert counts == {"full": {1}, "empty": {128}, "fullC": {128}, "emptyC": {128}}
    plan = {m["buffer"]: m for m in low.smem_plan}
    acc_stages = plan["fullC"]["bytes"] // 8
    assert plan["full"]["bytes"] == 8 * s and plan["emptyC"]["bytes"] == 8 * acc_stages
    assert all(m["alias_of"] == "" for m in low.smem_plan)  # roles run at once: no aliasing
    assert plan["sA"]["offset"] % 1024 == 0 and plan["sB"]["offset"] % 1024 == 0 and plan["sD"]["offset"] % 1024 == 0
    mma = branch(top, "warp < 8")["then"]
    tiles = [n for n in mma if n["kind"] == "for"][-1]
    tail = tiles["body"][-3:]
    assert [n.get("sync", n["kind"]) for n in tail] == ["mbarrier.try_wait.parity", "epilogue", "mbarrier.arrive"]
    assert (tail[0]["buf"], tail[2]["buf"]) == ("emptyC", "fullC")
    epi = branch(top, "warp < 8")["else"]
    assert ops(epi[:1]) == [("setmaxnreg", "", "", "", 232)]
    pre = epi[1]
    assert (pre["stop"], pre["body"][0]["buf"]) == (str(acc_stages), "emptyC")
    et = epi[2]["body"]
    seq = [n["sync"] if n["kind"] == "sync" else n["kind"] for n in et if n["kind"] != "let"]
    assert seq == ["mbarrier.try_wait.parity", "bar.sync", "epilogue", "mbarrier.arrive", "fence.proxy.async",
                   "bar.sync", "if"]
    # case 11: fence.proxy.async in every writing thread, before the barrier that precedes the TMA store
    fence_i = next(i for i, n in enumerate(et) if n.get("sync") == "fence.proxy.async")
    assert et[fence_i + 1]["sync"] == "bar.sync" and et[fence_i + 1]["arg"] == 1
    store = et[-1]
    assert store["cond"] == "tid == 256"
    assert [n.get("sync", n["kind"]) for n in store["then"]] == [
        "tma_store", "cp.async.bulk.commit_group", "cp.async.bulk.wait_group.read"]
    assert "fence.proxy.async" in low.explain() and "generic-proxy writes are not visible" in low.explain()


def test_role_graph_and_summary():
    low = lower("3role", 4, 2)
    assert "load -(sA, sB)-> mma" in low.sync_summary
    assert "mma -(acc, staged in shared memory)-> epilogue" in low.sync_summary
    low2 = lower("coop", 4, 2)
    assert "load -(sA, sB)-> mma" in low2.sync_summary and "epilogue" not in low2.sync_summary.split(";")[0]


def test_every_hopper_sync_has_a_reason_and_explain_lists_role_code():
    for variant in VARIANTS:
        low = lower(variant, 4, 2)
        for n in walk(low.structure):
            if n["kind"] == "sync":
                assert n["reason"] >= 0, (variant, n)
        text = low.explain()
        assert "if (warp < 4)" in text or variant in ("pipeline", "block_sync")


def test_tensor_maps_follow_the_tile_layout():
    for layout, a, b in [("NN", (16, 64, 32), (64, 16, 128)), ("TT", (64, 16, 128), (16, 64, 32))]:
        low = lower("pipeline", 3, 2, layout=layout)
        maps = {m["param"]: m for m in low.tensor_maps}
        # K-major tiles: a 16-element (32-byte) row is one box with the 32-byte swizzle; M/N-major
        # tiles: 64-element boxes with the 128-byte swizzle
        for pname, (box_cols, box_rows, sw) in (("tmA", a), ("tmB", b)):
            assert (maps[pname]["box_cols"], maps[pname]["box_rows"], maps[pname]["swizzle"]) == (box_cols, box_rows, sw)
        assert [p[1] for p in low.params if p[0] in ("tmA", "tmB")] == ["tensormap", "tensormap"]
    low = lower("3role", 3, 2)
    d = next(m for m in low.tensor_maps if m["param"] == "tmD")
    assert (d["box_cols"], d["box_rows"], d["swizzle"]) == (64, 64, 128)


def test_source_and_names():
    low = lower("coop", 4, 2)
    src = low.source
    assert "__launch_bounds__(384, 1)" in src and "__align__(1024)" in src
    assert "heddle::MmaSm90<128, 64, 16, 2, true, true, false, T, 4>" in src
    assert "const __grid_constant__ heddle::TmaDesc tmA" in src and "int num_ctas" in src
    assert "setmaxnreg_dec<40>" in src and "setmaxnreg_inc<232>" in src
    assert "_ws2coop_40_232" in low.name and low.grid({"M": 100, "N": 72, "K": 64, "num_ctas": 3}) == (3, 1, 1)


def test_pass_dump_shows_the_hopper_passes():
    fd = build("coop", stages=3, prefetch=1)
    low = fd.lower("sm_90a", dump_passes=True)
    by = {p[0]: p for p in low.passes}
    assert "if (warp < 4)" in by["warp_specialize"][3]
    assert by["circular_buffer"][3] == "(unchanged)\n"  # the role loops are not cloned
    assert by["insert_syncs"][3] == "(unchanged)\n"     # the rings are placed by construction
    fd = build("pipeline", stages=3, prefetch=1)
    low = fd.lower("sm_90a", dump_passes=True)
    by = {p[0]: p for p in low.passes}
    assert by["warp_specialize"][3] == "(unchanged)\n" and "mbarrier" in by["tma_pipeline"][3]


def test_sm80_kernels_are_untouched_by_the_hopper_passes():
    fd, a, b = matmul_fusion()
    from support.matmul_defs import schedule
    schedule(fd, a, b)
    low = fd.lower("sm_80", dump_passes=True)
    by = {p[0]: p for p in low.passes}
    assert by["warp_specialize"][3] == "(unchanged)\n" and by["tma_pipeline"][3] == "(unchanged)\n"


# --- schedule rules ---------------------------------------------------------------------------------

def errmsg(fn):
    with pytest.raises(ScheduleError) as ei:
        fn()
    return str(ei.value)


def test_hopper_tile_rules():
    def sched(**kw):
        fd, a, b = matmul_fusion(n=256, k=256, dtype="bf16")
        mm = fd.schedule()
        bm, bn, wm, wn = kw.get("bm", 128), kw.get("bn", 128), kw.get("wm", 8), kw.get("wn", 1)
        mm.split("m", bm).split("n", bn).split("k", 64).split("m.i", bm // wm).split("n.i", bn // wn)
        mm.parallelize("m.o", "BIDy").parallelize("n.o", "BIDx").parallelize("m.i.o", "warp")
        mm.parallelize("n.i.o", "warp")
        mm.reorder(["m.o", "n.o", "k.o", "m.i.o", "n.i.o", "m.i.i", "n.i.i", "k.i"])
        for t in (a, b):
            c = fd.cache_after(t, "tma_load")
            if kw.get("stages", 4) > 1:
                c.circular_buffer(kw.get("stages", 4))
        return fd
    assert "bind only an m split to 'warp'" in errmsg(lambda: sched(wm=4, wn=2).lower("sm_90a"))
    assert "not whole warpgroups" in errmsg(lambda: sched(wm=2).lower("sm_90a"))
    assert "not a wgmma width" in errmsg(lambda: sched(bn=96, wm=8).lower("sm_90a"))
    assert "needs circular_buffer(stages >= 2)" in errmsg(lambda: sched(stages=1).lower("sm_90a"))
    assert "warp-specialized tcgen05 kernel" in errmsg(lambda: sched().lower("sm_100a"))  # test_tcgen05_lowering.py
    assert "sm_80 has none" in errmsg(lambda: sched().lower("sm_80"))


def test_role_rules():
    def with_roles(roles, variant_wgs=2, bm=128):
        fd, a, b = matmul_fusion(n=256, k=256, dtype="bf16")
        schedule_sm90(fd, a, b, bm=bm, bn=128, bk=64, wgs=variant_wgs, stages=4, roles=roles)
        return fd
    m = errmsg(lambda: with_roles({"load": 1, "mma": {"warpgroups": 1}}).lower("sm_90a"))
    assert "has 1 warpgroup(s) but the tile split gives 2" in m
    m = errmsg(lambda: with_roles({"load": 1, "mma": 6}).lower("sm_90a"))
    assert "MMA roles are whole warpgroups" in m
    m = errmsg(lambda: with_roles({"load": 8, "mma": {"warpgroups": 2}}).lower("sm_90a"))
    assert "1 warp is enough" in m
    m = errmsg(lambda: with_roles({"load": 1, "mma": {"warpgroups": 2}, "epilogue": {"warpgroups": 1}}).lower("sm_90a"))
    assert "needs the same 8 warps" in m
    m = errmsg(lambda: with_roles({"load": 1, "mma": {"warpgroups": 2, "registers": 240},
                                   "epilogue": {"warpgroups": 2, "registers": 240}}).lower("sm_90a"))
    assert "the role budgets need 135,168 registers" in m and "register pool" in m and "61,440" in m, m
    m = errmsg(lambda: with_roles({"load": 1, "mma": {"warpgroups": 2}, "epilogue": {"warpgroups": 2}}, 1,
                                  bm=64).lower("sm_90a"))
    assert "epilogue role needs cooperative MMA warpgroups" in m
    m = errmsg(lambda: with_roles({"load": {"warps": 1, "registers": 64}, "mma": {"warpgroups": 2, "registers": 168}},
                                  1, bm=128).lower("sm_90a"))
    assert "holds 128 accumulators per thread" in m and "at least 176 registers" in m
    fd, a, b = matmul_fusion(n=256, k=256, dtype="bf16")
    schedule_sm90(fd, a, b, bm=64, bn=128, bk=64, wgs=1, stages=4, war="block_sync", roles=roles_for("coop"))
    assert "circular_buffer(war='block_sync') is for kernels without roles" in errmsg(lambda: fd.lower("sm_90a"))


def test_roles_need_tma_on_sm90a():
    fd, a, b = matmul_fusion(n=256, k=256, dtype="bf16")
    from support.matmul_defs import schedule
    mm = schedule(fd, a, b)
    mm.warp_specialize({"load": 1, "mma": {"warpgroups": 1}})
    m = errmsg(lambda: fd.lower("sm_90a"))
    assert "fed by TMA" in m and "cache_after(a, 'tma_load')" in m


def test_circular_buffer_war_option_is_checked():
    fd, a, b = matmul_fusion()
    c = fd.cache_after(a, "tma_load")
    with pytest.raises(ScheduleError, match=r"war must be 'mbarrier' .* or 'block_sync'"):
        c.circular_buffer(4, 3, "fence")


def test_warp_specialized_loops_take_any_trip_count():
    low = lower("coop", 4, 3)
    low.check_launch({"M": 64, "N": 64, "K": 16, "batch": 1})  # one k-tile: fine for the roles
    with pytest.raises(heddle.InputError):
        low.check_launch({"M": 64, "N": 64, "K": 0, "batch": 1})  # a tile needs one k step


def test_non_specialized_pipeline_takes_any_trip_count():
    low = lower("pipeline", 4, 3)
    for K in (16, 32, 48):  # 1, 2, 3 k-tiles (tests/lower/test_short_trips.py runs them)
        low.check_launch({"M": 64, "N": 64, "K": K, "batch": 1})
    with pytest.raises(heddle.InputError, match=r"K >= 1"):
        low.check_launch({"M": 64, "N": 64, "K": 0, "batch": 1})
