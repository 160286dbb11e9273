"""The sm_100a tcgen05 kernel with a TMA-loaded bias or residual (cache_after(x, 'tma_load')): a second
producer role on warp 2 of the load warpgroup (warp 0 loads the operands, warp 1 issues tcgen05.mma) loads
each tile's bias slice [bn] (residual tile [bm, bn]) by TMA into its own ring sE (fullE/emptyE, expect_tx of
the box bytes); the epilogue warpgroup waits fullE, reads its slot instead of global memory and releases
emptyE (docs/blackwell.md).

Checked here: the role graph, the lowered plan (every new mbarrier with its index, parity and reason), the
Mermaid picture, the kernel-IR simulator (clean with float64-right numbers on ragged shapes, every mutant of
the new syncs killed), the CPU interpreter of the printed source (numbers, source mutants caught), NVRTC for
sm_100a (no spills, no global loads of the cached operand left), the automatic schedule and the refusals."""
import pytest

import heddle
from heddle import ScheduleError, verify
from heddle.interpret import mutation_kill_rate, source_mutants
from support.tcgen05_defs import build_epi, redundant_fence_mutants
from support.env import requires_nvrtc, rt
from support.wgmma_defs import assert_interprets_clean, branch, inputs
from support.interp_defs import kernel, needs_cxx


def ev(expr, **env):
    return eval(expr.replace("/", "//"), {}, dict(env))


def kinds(nodes):
    return [n["sync"] if n["kind"] == "sync" else n["kind"] for n in nodes]


@pytest.mark.parametrize("se", [2, 3])
def test_lowered_ring_its_roles_and_reasons(se):
    low = build_epi(("bias",), "bias", se).lower("sm_100a")
    assert low.name.endswith("_tmae%d" % se)
    top = low.structure
    init = branch(top, "tid == 0")
    counts = {(n["buf"], int(n["index"])): n["count"] for n in init["then"] if n.get("sync") == "mbarrier.init"}
    for st in range(se):
        assert counts[("fullE", st)] == 1 and counts[("emptyE", st)] == 128  # TMA arrival; 128 epilogue threads
    assert ("fullE", se) not in counts
    wg0 = branch(top, "warp < 4")
    issuers = [n for n in wg0["then"] if n["kind"] == "if"]
    assert [n.get("elect_warp") for n in issuers] == [0, 1, 2]  # load, mma, bias_load
    tiles = issuers[2]["then"][0]
    # the walk's tile and n0 (its m0 is never read: the bias row's box sits at column n0; drop_unused_lets)
    assert kinds(tiles["body"]) == ["let", "let", "mbarrier.try_wait.parity", "mbarrier.arrive.expect_tx", "load"]
    wait, tx = tiles["body"][2], tiles["body"][3]
    assert wait["buf"] == "emptyE" and tx["buf"] == "fullE" and tx["arg"] == 128  # one [1, 64] bf16 box
    epi = wg0["else"]
    assert kinds(epi[:2]) == ["for", "for"] and epi[1]["body"][0]["buf"] == "emptyE" and epi[1]["stop"] == str(se)
    body = epi[2]["body"]
    assert kinds(body[3:]) == ["mbarrier.try_wait.parity", "tcgen05.fence::after_thread_sync",
                               "mbarrier.try_wait.parity", "epilogue", "mbarrier.arrive",
                               "tcgen05.fence::before_thread_sync", "mbarrier.arrive"]
    full, rel = body[5], body[7]
    assert full["buf"] == "fullE" and rel["buf"] == "emptyE" and body[9]["buf"] == "accEmpty"
    for tl in range(3 * se + 1):  # tile t: slot t % se, parity (t / se) % 2 on both sides; released in place
        assert (ev(full["index"], tl=tl), ev(full["parity"], tl=tl)) == (tl % se, (tl // se) % 2)
        assert (ev(wait["index"], tl=tl), ev(wait["parity"], tl=tl)) == (tl % se, (tl // se) % 2)
        assert ev(rel["index"], tl=tl) == ev(tx["index"], tl=tl) == tl % se
    text = low.explain()
    assert "bias ring sE: %d stage(s), TMA by role 'bias_load' (warp 2) -> epilogue" % se in text.splitlines()[0]
    assert "edge bias_load -> epilogue (sE (bias))" in text and "128 TMA bytes" in text
    assert "RAW sE (bias) (bias_load -> epilogue)" in text and "WAR sE (bias) (epilogue -> bias_load)" in text
    src = low.source
    assert ("heddle::sm90::tma_load_plain<1, 64>(sE + (tl %% %d) * 64, &tmE, 0, n0, (fullE + (tl %% %d)));"
            % (se, se)) in src
    assert "heddle::to_float(sE[(tl %% %d) * 64 + lc])" % se in src and "E_bias[" not in src


def test_residual_is_one_box_per_tile_and_bias_stays_global():
    low = build_epi(("bias", "res"), "res").lower("sm_100a")
    src, text = low.source, low.explain()
    assert "res ring sE" in text.splitlines()[0] and "16384 TMA bytes" in text  # [128, 64] bf16
    assert "heddle::sm90::tma_load_plain<128, 64>(sE + (tl % 2) * 8192, &tmE, m0, n0, (fullE + (tl % 2)));" in src
    assert "heddle::to_float(sE[(tl % 2) * 8192 + lr * 64 + lc])" in src and "E_res[" not in src
    assert "E_bias[" in src  # the uncached operand is still read per element
    assert {m["param"]: m["l2_promotion"] for m in low.tensor_maps} == {"tmA": 256, "tmB": 256, "tmE": 128}


def test_mermaid_draws_the_second_producer():
    m = build_epi(("bias",), "bias").lower("sm_100a").explain("mermaid")
    assert 'r2["bias_load<br/>warp 2"]' in m and 'r3["epilogue<br/>warps 4-7"]' in m
    assert 'e2[("sE (bias)<br/>2 stages<br/>fullE[2], emptyE[2]")]' in m
    assert 'r2 -->|"arrive.expect_tx fullE[j%2], TMA"| e2' in m
    assert 'e2 -->|"wait fullE[i%2] parity (i/2)%2"| r3' in m
    assert 'r3 -.->|"ld.shared in the epilogue; arrive emptyE[t%2]; producer waits parity (j/2)%2"| r2' in m


@pytest.mark.parametrize("ops,tma,se,s,a", [(("bias",), "bias", 2, 2, 2), (("bias",), "bias", 3, 3, 1),
                                            (("res",), "res", 2, 3, 2), (("bias", "res"), "res", 3, 2, 1),
                                            (("bias", "res"), "bias", 2, 4, 2)])
def test_simulator_clean_with_right_numbers(ops, tma, se, s, a):
    for i, (M, n, trips) in enumerate(((300, 72, 3 * s + 1), (137, 130, s), (64, 64, 1))):
        fd = build_epi(ops, tma, se, stages=s, acc_stages=a, n=n, k=16 * trips - (5 if trips > 1 else 0))
        low = fd.lower("sm_100a")
        for sched, seed in (("adversarial", 0), ("random", i + 1)):
            r = verify.simulate(low, inputs(fd, M, seed=i), sched, seed)
            assert r.ok, f"{ops} {tma} se={se} M={M} N={n} {sched}:\n{r.report()}"


@pytest.mark.parametrize("layout,dtype", [("TT", "f16"), ("NT", "bf16"), ("TN", "f16")])
def test_simulator_layouts_and_dtypes(layout, dtype):
    fd = build_epi(("bias", "res"), "res" if layout == "NT" else "bias", 2, n=100, k=77, layout=layout, dtype=dtype)
    r = verify.simulate(fd.lower("sm_100a"), inputs(fd, 264, seed=4), "random", 3)
    assert r.ok, r.report()


@pytest.mark.parametrize("ops,tma,k", [(("bias",), "bias", 104), (("bias", "res"), "res", 40)])
def test_every_simulator_mutant_is_killed(ops, tma, k):
    se = 2  # 3 x 3 tiles, 3 per simulated CTA: the 2-slot ring wraps (its WAR edge is exercised)
    fd = build_epi(ops, tma, se, stages=2, acc_stages=2, n=144, k=k)
    low = fd.lower("sm_100a")
    report = verify.kill_rate(low, [inputs(fd, 300, seed=1)])
    new = [m for m, _ in report.verdicts if "fullE" in m.description.split(" [")[0]
           or "emptyE" in m.description.split(" [")[0]]
    new_kinds = {m.kind for m in new}
    # each new wait / arrive / expect_tx deleted, each parity flipped, each count changed, each wait moved
    assert {"delete_sync", "flip_parity", "over_arrive", "under_arrive", "role_cycle"} <= new_kinds, new_kinds
    assert sum(m.kind == "delete_sync" for m in new) == 2 * se + 5  # inits, 2 waits, expect_tx, 2 arrives
    redundant = redundant_fence_mutants(report.survivors)  # alloc / dealloc are synchronous
    assert report.total >= 60 and len(redundant) == 2 and report.survivors == redundant, str(report)


def test_missing_syncs_are_named():
    fd = build_epi(("bias",), "bias", 2, stages=2, n=144, k=104)
    low, ins = fd.lower("sm_100a"), inputs(fd, 300, seed=1)

    def run(kind, text):
        m = next(m for m in verify.mutants(low) if m.kind == kind and text in m.description)
        return verify.simulate(m.kernel(), ins)
    r = run("delete_sync", "delete mbarrier.try_wait.parity fullE")
    assert not r.ok and any("sE" in x for x in r.races + r.mismatches + r.async_misuse), r.report()
    r = run("delete_sync", "delete mbarrier.arrive emptyE[(tl")
    assert r.deadlocks and "emptyE" in r.deadlocks[0], r.report()
    r = run("delete_sync", "delete mbarrier.arrive.expect_tx fullE")
    assert not r.ok, r.report()


@needs_cxx
@pytest.mark.parametrize("ops,tma,M,N,K,sms", [(("bias",), "bias", 200, 72, 104, 1),
                                               (("res",), "res", 130, 136, 40, 2),
                                               pytest.param(("bias", "res"), "res", 77, 200, 16, 2,
                                                            marks=pytest.mark.slow)])
def test_interpreter_numbers_on_ragged_shapes(ops, tma, M, N, K, sms):
    fd = build_epi(ops, tma, 2, stages=2, n=N, k=K)
    k = kernel(fd, "sm_100a")
    assert_interprets_clean(k, inputs(fd, M, seed=M), sms=sms)


@needs_cxx
def test_interpreter_source_mutants_killed():
    # one CTA walks every tile, so the 2-slot bias ring wraps (its WAR edge is exercised)
    fd = build_epi(("bias",), "bias", 2, stages=2, n=136, k=72)
    k = kernel(fd, "sm_100a")
    ms = source_mutants(k.source)
    new = " ".join(m.what for m in ms if "fullE" in m.what or "emptyE" in m.what or "tmE" in m.what)
    for op in ("mbar_wait((fullE", "mbar_wait((emptyE", "mbar_arrive((emptyE", "mbar_arrive_expect_tx((fullE"):
        assert op in new, op
    res = mutation_kill_rate(k, *inputs(fd, 260, seed=1), sms=1)
    assert {"delete_sync", "flip_parity", "drop_expect_tx", "shrink_expect_tx", "swap_stage"} <= set(res["by_kind"])
    assert res["total"] >= 30 and not res["survivors"], res["survivors"]


@requires_nvrtc
@pytest.mark.parametrize("ops,tma,bn,bk,s,a,regs", [(("bias",), "bias", 256, 32, 4, 2, (0, 0)),
                                                    (("res",), "res", 128, 64, 3, 2, (56, 232)),
                                                    (("bias", "res"), "res", 128, 64, 4, 1, (0, 0))])
def test_nvrtc_compiles_without_spills(ops, tma, bn, bk, s, a, regs):
    low = build_epi(ops, tma, 2, stages=s, acc_stages=a, bn=bn, bk=bk, n=1024, k=4096, regs=regs).lower("sm_100a")
    r = rt.compile(low.source, low.name, "sm_100a", isolate=True)
    st = r.stats
    assert st.spill_stores == 0 and st.spill_loads == 0 and st.stack_frame == 0, r.ptxas
    assert not st.setmaxnreg_ignored, r.ptxas
    assert "tcgen05.mma.cta_group::1.kind::f16" in r.ptx and "tcgen05.ld.sync.aligned.32x32b.x32" in r.ptx
    assert "cp.async.bulk.tensor.2d" in r.ptx and "mbarrier.try_wait.parity" in r.ptx
    if len(ops) == 1:
        assert "ld.global" not in r.ptx  # the cached operand comes through shared memory
    if any(regs):
        assert "setmaxnreg.dec.sync.aligned.u32" in r.ptx


def test_auto_schedule_keeps_a_users_cache_and_fits_its_ring():
    fd = heddle.Fusion()
    a = fd.input("a", "bf16", ["M", 4096]); b = fd.input("b", "bf16", [4096, 4096])
    res = fd.input("res", "bf16", ["M", 4096])
    fd.output((fd.matmul(a, b) + res).to("bf16"))
    fd.cache_after(res, "tma_load")
    fd.auto_schedule("sm_100a", -1, 4096, 4096)
    low = fd.lower("sm_100a")  # 128x256 would leave no two operand stages beside the residual's 128 KB
    assert "128x128x64" in low.name and "_s4" in low.name and low.name.endswith("_tmae2")
    from support.matmul_defs import matmul_fusion
    fd, a, b = matmul_fusion(n=512, k=512, dtype="bf16")
    fd.auto_schedule("sm_100a", -1, 512, 512)  # like sm_90a, it does not cache the bias by itself
    assert "_tmae" not in fd.lower("sm_100a").name


def test_refusals_are_named():
    with pytest.raises(ScheduleError, match="the ring of bias allows at most 8 stages"):
        build_epi(("bias",), "bias", 9).lower("sm_100a")
    fd = build_epi(("bias", "res"), "res")
    fd.cache_after(next(t for t in fd.inputs if t.name == "bias"), "tma_load")
    with pytest.raises(ScheduleError, match="a second TMA-loaded epilogue operand"):
        fd.lower("sm_100a")
