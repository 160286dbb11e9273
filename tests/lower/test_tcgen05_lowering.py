"""The sm_100a tcgen05 multi-role kernel (docs/blackwell.md, docs/sync-cases.md case 13): the schedule switch
(tma_load on sm_100a, auto_schedule and heddle.matmul choose it), its rules, the kernel IR of its three roles (rings from the
role graph, tcgen05 commits, fences, tensor-memory allocation) and explain()."""
import pytest

from heddle import ScheduleError
from support.tcgen05_defs import build
from support.wgmma_defs import branch, schedule_sm90, walk
from support.matmul_defs import matmul_fusion


def errmsg(fn):
    with pytest.raises(ScheduleError) as ei:
        fn()
    return str(ei.value)


def ev(expr, **env):
    """Evaluates a printed C index expression (ints, / truncates, heddle_ceil_div/min/max)."""
    ns = {"heddle_ceil_div": lambda a, b: (a + b - 1) // b, "heddle_min": min, "heddle_max": max}
    return eval(expr.replace("/", "//"), ns, dict(env))


def kinds(nodes):
    return [n["sync"] if n["kind"] == "sync" else n["kind"] for n in nodes]


def test_auto_schedule_sm100a_picks_the_tcgen05_kernel():
    fd, a, b = matmul_fusion(n=512, k=512, dtype="bf16")
    fd.auto_schedule("sm_100a", -1, 512, 512)
    low = fd.lower("sm_100a")
    assert "_sm100" in low.name and "_ws3tc_a2" in low.name and "128x256x64" in low.name
    assert low.threads == 256 and low.tensor_maps
    assert "Mma::mma(" in low.source and "heddle::sm100::commit(" in low.source
    fd, a, b = matmul_fusion(n=200, k=512, dtype="f16")
    fd.auto_schedule("sm_100a", -1, 200, 512)
    assert "128x128x64" in fd.lower("sm_100a").name
    fd, a, b = matmul_fusion(n=256, k=512, dtype="bf16", batched=True)  # batched: the cp.async kernel
    fd.auto_schedule("sm_100a", -1, 256, 512)
    assert "cp_async" in fd.lower("sm_100a").name
    fd, a, b = matmul_fusion(n=256, k=512, dtype="bf16")  # operands TMA cannot take: cp.async
    fd.auto_schedule("sm_100a", -1, 256, 512, tma=False)
    assert "cp_async" in fd.lower("sm_100a").name


def test_heddle_matmul_on_sm100a_uses_it():
    from heddle.pytorch.matmul import MatmulSpec, fused_matmul_op
    spec = MatmulSpec(dtype="bf16", batched=False, batched_b=False, k=512, n=256, trans_a=False, trans_b=False,
                      bias=None, residual=None, activation=None, alpha=None, out_dtype="bf16")
    text = fused_matmul_op(spec).describe("sm_100a")
    assert "_sm100" in text and "_ws3tc" in text


@pytest.mark.parametrize("s,a", [(2, 1), (4, 2), (6, 1)])
def test_roles_rings_and_tcgen05_ops(s, a):
    low = build(stages=s, acc_stages=a, n=1024, k=4096).lower("sm_100a")
    top = low.structure
    bufs = {m["buffer"]: m for m in low.smem_plan}
    assert bufs["full"]["bytes"] == 8 * s and bufs["empty"]["bytes"] == 8 * s
    assert bufs["accFull"]["bytes"] == 8 * a and bufs["accEmpty"]["bytes"] == 8 * a and "tmem_slot" in bufs
    init = branch(top, "tid == 0")
    counts = {(n["buf"], int(n["index"])): n["count"] for n in init["then"] if n.get("sync") == "mbarrier.init"}
    assert counts == {**{("full", i): 1 for i in range(s)}, **{("empty", i): 1 for i in range(s)},
                      **{("accFull", i): 1 for i in range(a)}, **{("accEmpty", i): 128 for i in range(a)}}
    # tensor memory: warp 1 allocates bn x a columns (a power of two >= 32), fenced around the block barrier
    alloc = next(n for n in top if n["kind"] == "if" and n["cond"] == "warp == 1")
    assert [(n["sync"], n["arg"]) for n in alloc["then"]] == [("tcgen05.alloc", 128 * a),
                                                            ("tcgen05.relinquish_alloc_permit", 0)]
    i = top.index(alloc)
    # the allocation is published by fence::before + the block barrier; each role's first tensor-memory use
    # follows its own fence::after_thread_sync after a ring wait (no block-wide after-fence needed)
    assert kinds(top[i + 1:i + 3]) == ["tcgen05.fence::before_thread_sync", "block_sync"]
    assert top[i + 3]["kind"] == "if" and top[i + 3]["cond"] == "warp < 4"
    teardown = top[-1]
    assert teardown["cond"] == "warp == 1" and kinds(top[-2:-1]) == ["block_sync"]
    assert [(n["sync"], n["arg"]) for n in teardown["then"]] == [("tcgen05.fence::after_thread_sync", 0),
                                                               ("tcgen05.dealloc", 128 * a)]
    # load: warp 0's elected thread; mma: warp 1's elected thread; epilogue: warps 4-7
    load = branch(top, "warp < 4")
    issuers = [n for n in load["then"] if n["kind"] == "if"]
    assert [n.get("elect_warp") for n in issuers] == [0, 1]
    kl = next(n for n in walk(issuers[0]["then"]) if n["kind"] == "for" and n["stop"].startswith("heddle_ceil_div(K"))
    assert kinds(kl["body"]) == ["mbarrier.try_wait.parity", "mbarrier.arrive.expect_tx", "load", "load"]
    mma = issuers[1]["then"]
    assert kinds(mma) == ["for", "for"]
    assert kinds(mma[0]["body"]) == ["mbarrier.arrive"] and mma[0]["stop"] == str(s)  # pre-arrive every slot
    tiles = mma[1]["body"]
    assert kinds(tiles) == ["mbarrier.try_wait.parity", "tcgen05.fence::after_thread_sync", "for", "tcgen05.commit"]
    assert tiles[0]["buf"] == "accEmpty" and tiles[3]["buf"] == "accFull"
    k = tiles[2]["body"]
    assert kinds(k) == ["mbarrier.try_wait.parity", "mma", "tcgen05.commit"]
    assert k[0]["buf"] == "full" and k[2]["buf"] == "empty" and k[0]["index"] == k[2]["index"] == k[1]["stage"]
    K = 4096
    for tl in range(3 * a + 1):  # tile t: accumulator slot t % a, parity (t / a) % 2
        assert (ev(tiles[0]["index"], tl=tl), ev(tiles[0]["parity"], tl=tl)) == (tl % a, (tl // a) % 2)
        assert ev(tiles[3]["index"], tl=tl) == tl % a
        for kt in (0, 1, s):  # item g = tl * nk + kt: slot g % s, parity (g / s) % 2
            g = tl * (K // 64) + kt
            assert (ev(k[0]["index"], tl=tl, kt=kt, K=K), ev(k[0]["parity"], tl=tl, kt=kt, K=K)) == (g % s, (g // s) % 2)
    epi = load["else"]
    assert kinds(epi) == ["for", "for"] and kinds(epi[0]["body"]) == ["mbarrier.arrive"] and epi[0]["stop"] == str(a)
    rel = epi[1]["body"][-1]
    assert rel["buf"] == "accEmpty" and all(ev(rel["index"], tl=t) == t % a for t in range(5))
    assert kinds(epi[1]["body"])[3:] == ["mbarrier.try_wait.parity", "tcgen05.fence::after_thread_sync", "epilogue",
                                         "tcgen05.fence::before_thread_sync", "mbarrier.arrive"]
    # every sync op has its reason in explain()
    text = low.explain()
    for word in ("tcgen05.commit -> empty", "tcgen05.commit -> accFull", "tcgen05.alloc", "tcgen05.dealloc",
                 "parity (t/%d)%%2" % a):
        assert word in text, word


def test_mermaid_picture_of_the_role_graph():
    pic = build(stages=4, acc_stages=2).lower("sm_100a").explain(format="mermaid")
    assert pic.startswith("flowchart LR")
    assert '"load<br/>warp 0' in pic and '"mma<br/>warp 1' in pic and '"epilogue<br/>warps 4-7' in pic
    assert "accumulator in tensor memory<br/>2 stages<br/>accFull[2], accEmpty[2]" in pic
    assert "tcgen05.commit -> empty[i%4]" in pic and "tcgen05.commit -> accFull[t%2]" in pic


def test_setmaxnreg_per_warpgroup():
    low = build(regs=(56, 232)).lower("sm_100a")
    regs = [n["text"] for n in walk(low.structure) if n.get("sync") == "setmaxnreg"]
    assert regs == ["setmaxnreg.dec 56", "setmaxnreg.dec 232"]  # 256 threads enter with 256 registers each
    assert not [n for n in walk(build().lower("sm_100a").structure) if n.get("sync") == "setmaxnreg"]


def test_rules():
    def sched(**kw):
        fd, a, b = matmul_fusion(n=256, k=256, dtype="bf16")
        r = kw.pop("roles", {"load": 1, "mma": 1, "epilogue": 4})
        schedule_sm90(fd, a, b, bm=kw.get("bm", 128), bn=kw.get("bn", 128), bk=64, wgs=kw.get("wgs", 1),
                      stages=kw.get("stages", 3), roles=r)
        return fd
    assert "add warp_specialize({'load': 1, 'mma': 1, 'epilogue': 4})" in errmsg(
        lambda: sched(roles=None).lower("sm_100a"))
    assert "use an m tile of 128" in errmsg(lambda: sched(bm=256).lower("sm_100a"))
    assert "bind an m split of 4 warps" in errmsg(lambda: sched(bm=128, wgs=2).lower("sm_100a"))
    assert "use 64, 128, 192 or 256" in errmsg(lambda: sched(bn=96).lower("sm_100a"))
    assert "give it 1 warp" in errmsg(lambda: sched(roles={"load": 1, "mma": 4, "epilogue": 4}).lower("sm_100a"))
    assert "it is one warpgroup: give it 4 warps" in errmsg(
        lambda: sched(roles={"load": 1, "mma": 1, "epilogue": 8}).lower("sm_100a"))
    assert "has three roles" in errmsg(lambda: sched(roles={"load": 1, "mma": 1}).lower("sm_100a"))
    assert "1 or 2 stages" in errmsg(
        lambda: sched(roles={"load": 1, "mma": 1, "epilogue": {"warps": 4, "stages": 3}}).lower("sm_100a"))
    assert "share warps 0-3" in errmsg(lambda: sched(roles={"load": {"warps": 1, "registers": 40}, "mma": {
        "warps": 1, "registers": 56}, "epilogue": 4}).lower("sm_100a"))
    assert "move it there" in errmsg(
        lambda: sched(roles={"load": 1, "mma": {"warps": 1, "stages": 2}, "epilogue": 4}).lower("sm_100a"))
    # stages= is the sm_100a epilogue's: refused on sm_90a
    assert "drop stages=" in errmsg(lambda: sched(roles={"load": 1, "mma": 4, "epilogue": {"warps": 4, "stages": 2}})
                                    .lower("sm_90a"))
    # an epilogue operand is cached only with tma_load (its producer role: tests/lower/test_tcgen05_bias_tma.py)
    fd = sched()
    fd.cache_after(next(t for t in fd.inputs if t.name == "bias"), "cp_async")
    assert "cached only with 'tma_load'" in errmsg(lambda: fd.lower("sm_100a"))
