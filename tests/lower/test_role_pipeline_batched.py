"""Batched GEMM on the warp-specialized persistent ring (sm_90a): the batch is the outer coordinate of the
persistent tile walk (tile -> batch_idx = tile / tiles per matrix, then the grouped m0, n0 of the rest),
the TMA loads of a batched operand take batch_idx as the third coordinate of a 3-D tensor map (a rank-2
B, a weight shared by every batch, is one 2-D map), and D is stored at batch_idx (a 3-D TMA store, or the
direct store indexed with batch_idx * batch_stride_d). Everything else -- roles, rings, register budgets,
epilogue variants -- is the unbatched kernel's.

Checked here: the lowered kernel IR (roles and rings present, the batch in the tile walk, no blockIdx.z),
NVRTC for sm_90a (no spills, setmaxnreg honoured, 3-D bulk tensor copies in the PTX), the kernel-IR
simulator (clean with float64-right numbers on ragged batched shapes and layouts, sync mutants killed),
the CPU interpreter of the printed source (numbers, source mutants including a wrong batch coordinate),
the automatic schedule and heddle.matmul, and the named errors (a broadcast batch through TMA, a batched
residual cached with tma_load)."""
import pytest
import torch

import heddle
from support.env import requires_nvrtc
from heddle import verify
from heddle.core.interpret import _Mutated
from heddle.interpret import interpret, mutation_kill_rate
from support.wgmma_defs import assert_interprets_clean, build, inputs, nvrtc_sm90, roles_for, schedule_sm90, walk
from support.interp_defs import needs_cxx
from support.matmul_defs import LAYOUTS


def shared_weight(layout="NN", n=72, k=16 * 7 - 8, dtype="bf16", roles="coop", stages=3, prefetch=1):
    """A batched A [B, M, K] times one B [K, N] (a weight shared by every batch) + bias, GELU."""
    ta, tb = LAYOUTS[layout]
    fd = heddle.Fusion()
    a = fd.input("a", dtype, ["B"] + ([k, "M"] if ta else ["M", k]))
    b = fd.input("b", dtype, [n, k] if tb else [k, n])
    fd.output(heddle.ops.gelu(fd.matmul(a, b, ta, tb) + fd.input("bias", dtype, [n])).to(dtype))
    schedule_sm90(fd, a, b, bm=128, bn=64, bk=16, wgs=2, stages=stages, prefetch=prefetch, roles=roles_for(roles))
    return fd


def batched(variant="coop", **kw):
    kw.setdefault("n", 72)
    kw.setdefault("k", 16 * 7 - 8)  # ragged: 7 k-tiles, the last one half full
    return build(variant, batched=True, **kw)


# --- lowering -----------------------------------------------------------------------------------------

def _lets_and_loops(low):
    return [n for n in walk(low.structure) if n["kind"] in ("let", "for", "if")]


def test_roles_rings_and_the_batch_in_the_tile_walk():
    low = batched("coop", stages=4, prefetch=2).lower("sm_90a")
    assert "_ws2coop_40_232" in low.name and low.tile["batch_walk"]
    src = low.source
    # the role branches, register budgets and the ring, as unbatched
    conds = [n["cond"] for n in walk(low.structure) if n["kind"] == "if"]
    assert "warp < 4" in conds and conds.count("tid == 0") == 2  # the mbarrier init, the load role's issue
    assert "setmaxnreg_dec<40>" in src and "setmaxnreg_inc<232>" in src
    assert src.count("heddle::sm90::mbar_init((full") == 4 and src.count("heddle::sm90::mbar_init((empty") == 4
    # both roles walk batch x m-tiles x n-tiles; the batch is the tile's, not blockIdx.z's
    tiles = "heddle_ceil_div(M, 128) * heddle_ceil_div(N, 64)"
    walks = [n for n in walk(low.structure) if n["kind"] == "for" and n["text"].startswith("for tl ")]
    assert len(walks) == 2
    for w in walks:
        assert w["stop"] == f"heddle_ceil_div({tiles} * batch - bid, num_ctas)"
        lets = [n["text"] for n in w["body"] if n["kind"] == "let"]
        assert lets[:3] == ["let tile = bid + tl * num_ctas", f"let batch_idx = tile / ({tiles})",
                            f"let mtile = tile % ({tiles})"]
        assert lets[3].startswith("let m0 = (mtile /") and lets[4].startswith("let n0 = mtile %")
    assert "blockIdx.z" not in src and "A += " not in src and "D += " not in src
    assert [p[:2] for p in low.params if p[0] in ("batch", "num_ctas")] == [("num_ctas", "i32"), ("batch", "i32")]
    assert low.grid({"M": 300, "N": 72, "K": 104, "batch": 3, "num_ctas": 5}) == (5, 1, 1)
    # both operands batched: 3-D maps with batch_idx the third coordinate; D indexed by the tile's batch
    assert {m["param"]: m["batched"] for m in low.tensor_maps} == {"tmA": True, "tmB": True}
    assert "&tmA, m0, kt * 16, batch_idx, (full + (" in src and "&tmB, kt * 16, n0, batch_idx, (full + (" in src
    assert "const long long at = (long long)batch_idx * batch_stride_d + (long long)row * ldd + col;" in src
    # its pair stores are aligned only if every batch's rows start at an even element too
    assert "heddle::pair_aligned(D, ldd | batch_stride_d, N)" in src


def test_the_walk_covers_every_batch_and_tile_once():
    # evaluate the walk's lets as written in the kernel IR for every CTA: each (batch, m0, n0) exactly once
    low = batched("coop", stages=3, prefetch=1).lower("sm_90a")
    w = next(n for n in walk(low.structure) if n["kind"] == "for" and n["text"].startswith("for tl "))
    lets = [n["text"][4:].split(" = ", 1) for n in w["body"] if n["kind"] == "let"]
    fns = {"heddle_ceil_div": lambda a, b: -(-a // b), "heddle_min": min}
    py = lambda e: e.replace("/", "//")
    for M, N, batch, ctas in ((300, 72, 3, 5), (128, 64, 1, 1), (65, 200, 2, 7)):
        seen = []
        for bid in range(ctas):
            env = dict(fns, M=M, N=N, batch=batch, num_ctas=ctas, bid=bid)
            for tl in range(eval(py(w["stop"]), env)):
                env["tl"] = tl
                for var, expr in lets:
                    env[var] = eval(py(expr), env)
                seen.append((env["batch_idx"], env["m0"], env["n0"]))
        want = [(b, m, n) for b in range(batch) for m in range(0, M, 128) for n in range(0, N, 64)]
        assert sorted(seen) == sorted(want)


def test_shared_weight_is_one_2d_map():
    low = shared_weight().lower("sm_90a")
    maps = {m["param"]: m["batched"] for m in low.tensor_maps}
    assert maps == {"tmA": True, "tmB": False}
    src = low.source
    assert "tma_load_tile<Mma::TileA, 3>(" in src and "tma_load_tile<Mma::TileB, 2>(" in src


@pytest.mark.parametrize("variant,kw,store", [
    ("coop", dict(store="tma", bm=128, bn=64), "tma_store_tile<heddle::sm90::TmaTile<128, 64, heddle::bf16>, 3>("
                                               "&tmD, m0, n0, batch_idx, "),
    ("3role", dict(), "tma_store_tile<heddle::sm90::TmaTile<64, 64, heddle::bf16>, 3>(&tmD, m0, n0, batch_idx, "),
])
def test_tma_store_epilogues_store_a_3d_box(variant, kw, store):
    low = batched(variant, **kw).lower("sm_90a")
    assert store in low.source
    assert {m["param"]: m["batched"] for m in low.tensor_maps}["tmD"] is True


def test_bias_ring_and_ping_pong_lower_batched():
    # every role walking tiles derives the batch: load, bias_load and mma; load and the ping-pong warpgroups
    for fd, walks, name in ((batched("coop", bias_tma=2, bm=128), 3, "_ws2coop_40_232_tmae2"),
                            (batched("pingpong"), 2, "_ws2pp_40_232")):
        low = fd.lower("sm_90a")
        assert low.name.endswith(name), low.name
        assert low.source.count("const int batch_idx = tile / (") == walks and "blockIdx.z" not in low.source


# --- NVRTC --------------------------------------------------------------------------------------------

def nvrtc(fd):
    r = nvrtc_sm90(fd.lower("sm_90a"))
    assert "cp.async.bulk.tensor.3d.shared::cluster.global" in r.ptx and "wgmma.mma_async" in r.ptx
    return r


@requires_nvrtc
@pytest.mark.parametrize("variant,kw", [
    ("coop", dict(stages=4, prefetch=2, bm=128, bn=256, bk=64)),
    ("coop", dict(stages=3, prefetch=1, bm=128, bn=256, bk=64, store="tma")),
    ("coop", dict(stages=5, prefetch=3, bm=128, bn=128, bk=64, bias_tma=2, store="tma", dtype="f16")),
    ("3role", dict(stages=4, prefetch=2, bm=64, bn=128, bk=64)),
])
def test_nvrtc_compiles_without_spills(variant, kw):
    r = nvrtc(batched(variant, n=1024, k=4096, **kw))
    if kw.get("store") or variant == "3role":
        assert "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group" in r.ptx


# --- the kernel-IR simulator --------------------------------------------------------------------------

@pytest.mark.parametrize("variant,layout,batch,M,kw", [
    ("coop", "NN", 1, 200, dict()),
    ("coop", "TT", 3, 77, dict(stages=4, prefetch=2)),
    ("coop", "NT", 2, 130, dict(store="tma", bm=128, bn=64)),
    ("pingpong", "TN", 3, 65, dict()),
    ("3role", "NN", 2, 70, dict(stages=2, prefetch=0)),
    ("coop", "NN", 3, 100, dict(bias_tma=2, bm=128, dtype="f16")),
])
def test_simulator_clean_with_right_numbers(variant, layout, batch, M, kw):
    kw.setdefault("stages", 3)
    kw.setdefault("prefetch", 1)
    fd = batched(variant, layout=layout, **kw)
    low = fd.lower("sm_90a")
    for sched, seed in (("adversarial", 0), ("random", batch)):
        r = verify.simulate(low, inputs(fd, M, seed=M, batch=batch), sched, seed)
        assert r.ok, f"{variant} {layout} batch={batch} M={M} {sched}:\n{r.report()}"


@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_simulator_shared_weight(layout):
    fd = shared_weight(layout)
    r = verify.simulate(fd.lower("sm_90a"), inputs(fd, 150, seed=4, batch=3), "random", 2)
    assert r.ok, r.report()


@pytest.mark.parametrize("variant,kw", [("coop", dict()), ("3role", dict())])
def test_every_simulator_mutant_is_killed(variant, kw):
    fd = batched(variant, stages=3, prefetch=1, k=16 * 10, **kw)
    report = verify.kill_rate(fd.lower("sm_90a"), [inputs(fd, 130, seed=1, batch=2)])
    assert report.total >= 30 and not report.survivors, str(report)


# --- the CPU interpreter of the printed source --------------------------------------------------------

@needs_cxx
@pytest.mark.parametrize("variant,layout,batch,M,kw,sms", [
    ("coop", "NN", 3, 77, dict(), 2),
    ("coop", "TT", 2, 136, dict(store="tma", bm=128, bn=64), 3),  # TMA: a transposed A needs 16-byte rows
    ("3role", "NT", 1, 70, dict(), 1),
])
def test_interpreter_numbers_on_ragged_batched_shapes(variant, layout, batch, M, kw, sms):
    fd = batched(variant, layout=layout, stages=3, prefetch=1, **kw)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    assert_interprets_clean(k, inputs(fd, M, seed=M, batch=batch), sms=sms)


@needs_cxx
def test_interpreter_shared_weight():
    fd = shared_weight("NT")
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    r = interpret(k, *inputs(fd, 100, seed=9, batch=3), sms=2)
    assert r.ok, r.report()


@needs_cxx
def test_interpreter_strided_batch_is_read_in_place():
    # A a slice of a larger tensor: batch stride 90 * 104 elements, not M * K; the 3-D map carries it
    fd = batched("coop", stages=3, prefetch=1)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    a, b, bias = inputs(fd, 90, seed=7, batch=3)
    a = a[:, 5:82, :]
    assert a.stride(0) == 90 * 104 and not a.is_contiguous()
    r = interpret(k, a, b, bias, sms=3)
    assert r.ok, r.report()


@needs_cxx
@pytest.mark.parametrize("good,bad", [
    # the batch of a tile: its boundary one tile off
    ("const int batch_idx = tile / (heddle_ceil_div(M, 128) * heddle_ceil_div(N, 64));",
     "const int batch_idx = (tile + 1) / (heddle_ceil_div(M, 128) * heddle_ceil_div(N, 64));"),
    # the operand's batch coordinate dropped: every batch reads matrix 0
    (", batch_idx, (full + (", ", 0, (full + ("),
    # D stored without its batch offset
    ("const long long at = (long long)batch_idx * batch_stride_d + ",
     "const long long at = (long long)0 * batch_stride_d + "),
])
def test_interpreter_catches_a_wrong_batch_coordinate(good, bad):
    fd = batched("coop", stages=3, prefetch=1)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    assert good in k.lowered.source
    r = interpret(_Mutated(k, k.lowered.source.replace(good, bad, 1)), *inputs(fd, 77, seed=5, batch=2), sms=2)
    assert not r.ok, r.report()


@needs_cxx
def test_interpreter_sync_mutants_killed():
    fd = batched("coop", stages=3, prefetch=1, k=16 * 4)
    res = mutation_kill_rate(heddle.Kernel.build(fd, "sm_90a", rtc=False), *inputs(fd, 77, seed=1, batch=2), sms=2,
                             kinds=("delete_sync",), where=lambda mu: "mbar" in mu.what)
    assert res["total"] >= 4 and not res["survivors"], (res["total"], res["survivors"])


# --- the automatic schedule, heddle.matmul, named errors ----------------------------------------------

@pytest.mark.parametrize("n,tma_store", [(1024, True), (1028, False)])
def test_auto_schedule_takes_the_warp_specialized_kernel_for_batched(n, tma_store):
    from support.matmul_defs import matmul_fusion
    fd, _, _ = matmul_fusion(n=n, k=4096, dtype="bf16", layout="NT", batched=True)
    low = fd.auto_schedule("sm_90a", m=4096, n=n, k=4096).lower("sm_90a")
    assert "_ws2coop_40_232" in low.name and low.tile["batch_walk"], low.name
    assert low.name.endswith("_tmas2") == tma_store
    # a short K (one k-tile) keeps the same kernel: the ring takes any trip count
    fd, _, _ = matmul_fusion(n=n, k=16, dtype="bf16", batched=True)
    assert "_ws2coop_" in fd.auto_schedule("sm_90a", m=4096, n=n, k=16).lower("sm_90a").name


@needs_cxx
def test_heddle_matmul_runs_batched_on_the_warp_specialized_kernel(monkeypatch):
    from heddle.api import MatmulSpec, fused_matmul_op
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    monkeypatch.setenv("HEDDLE_INTERPRET_TARGET", "sm_90a")
    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 70, 64, generator=g).to(torch.bfloat16)
    b = torch.randn(3, 64, 72, generator=g).to(torch.bfloat16)
    spec = MatmulSpec(dtype="bf16", batched=True, batched_b=True, k=64, n=72, trans_a=False, trans_b=False,
                      bias=None, residual=None, activation=None, alpha=None, out_dtype="bf16")
    fm = fused_matmul_op(spec)
    fm.kernels.clear()
    out = heddle.matmul(a, b)
    assert out.shape == (3, 70, 72)
    assert torch.allclose(out.double(), a.double() @ b.double(), atol=0.05, rtol=0.02)
    (k,) = fm.kernels.values()
    assert "_ws2coop_" in k.name and k.lowered.tile["batch_walk"], k.name
    # a B broadcast over the batch (stride 0) is not given to TMA: the cp.async kernel runs it
    fm.kernels.clear()
    bb = b[:1].expand(3, -1, -1)
    out = heddle.matmul(a, bb)
    assert torch.allclose(out.double(), a.double() @ bb.double(), atol=0.05, rtol=0.02)
    (k,) = fm.kernels.values()
    assert not k.lowered.tensor_maps and "cp_async" in k.name, k.name


@needs_cxx
def test_a_broadcast_batch_through_tma_is_an_input_error():
    fd = batched("coop", stages=3, prefetch=1)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    a, b, bias = inputs(fd, 77, seed=5, batch=2)
    with pytest.raises(heddle.InputError, match=r"input 'b': its batch stride is 0 .* pass b\[0\]"):
        interpret(k, a, b[:1].expand(2, -1, -1), bias, sms=2)


def test_a_batched_residual_cached_with_tma_is_a_schedule_error():
    fd = heddle.Fusion()
    a = fd.input("a", "bf16", ["B", "M", 64])
    b = fd.input("b", "bf16", ["B", 64, 72])
    res = fd.input("res", "bf16", ["B", "M", 72])
    fd.output((fd.matmul(a, b) + res).to("bf16"))
    schedule_sm90(fd, a, b, bm=128, bn=64, bk=16, wgs=2, stages=3, prefetch=1, roles=roles_for("coop"))
    fd.cache_after(res, "tma_load").circular_buffer(2)
    with pytest.raises(heddle.ScheduleError, match=r"TMA loads a bias row \[N\] or a residual \[M, N\]"):
        fd.lower("sm_90a")
