"""The sm_90a warp-specialized kernel with a TMA-loaded bias or residual (cache_after(x, 'tma_load')): a
second producer role (warp 1 of the load warpgroup) loads each tile's bias slice [bn] (residual tile
[bm, bn]) by TMA into its own ring sE (fullE/emptyE, expect_tx of the box bytes), consumed by the role
running the epilogue program (the MMA warpgroups, or the epilogue role) instead of a scalar global load
per element.

Checked here: the role graph and the lowered plan (every new mbarrier with its reason), the Mermaid
picture, the kernel-IR simulator (clean, right numbers, every mutant killed), the CPU interpreter of
the printed source (float64 numbers on ragged shapes, source mutants caught), NVRTC for sm_90a
(no spills, no global loads left), and the ScheduleErrors / InputErrors for what is not built."""
import pytest
import torch

import heddle
from support.env import requires_nvrtc, rt
from heddle import verify
from heddle.interpret import interpret, mutation_kill_rate
from support.wgmma_defs import assert_interprets_clean, build, inputs, nvrtc_sm90, roles_for, schedule_sm90
from support.interp_defs import needs_cxx


def lowered(variant, bias_stages=2, stages=3, prefetch=1, **kw):
    fd = build(variant, stages=stages, prefetch=prefetch, bias_tma=bias_stages, **kw)
    return fd, fd.lower("sm_90a")


def residual(variant="coop", res_stages=2, stages=3, prefetch=1, n=72, k=104, bm=None, bn=64, bk=16,
             regs=(40, 232)):
    """gelu(a @ b + res) with res [M, N] loaded by TMA, one [bm, bn] box per tile."""
    wgs = 2 if variant == "coop" else 1
    fd = heddle.Fusion()
    a = fd.input("a", "bf16", ["M", k]); b = fd.input("b", "bf16", [k, n]); res = fd.input("res", "bf16", ["M", n])
    fd.output(heddle.ops.gelu(fd.matmul(a, b) + res).to("bf16"))
    schedule_sm90(fd, a, b, bm=bm or 64 * wgs, bn=bn, bk=bk, wgs=wgs, stages=stages, prefetch=prefetch,
                  roles=roles_for(variant, regs))
    fd.cache_after(res, "tma_load").circular_buffer(res_stages)
    return fd


@pytest.mark.parametrize("variant,consumer", [("coop", "mma"), ("3role", "epilogue")])
def test_role_graph_has_the_bias_edge_and_every_mbarrier_its_reason(variant, consumer):
    _, low = lowered(variant)
    text = low.explain()
    assert f"bias_load -(sE)-> {consumer}" in text.splitlines()[0]  # the plan's summary
    assert low.name.endswith("_tmae2")
    src = low.source
    assert "heddle::sm90::tma_load_plain<1, 64>(sE + (tl % 2) * 64, &tmE, 0, n0, (fullE + (tl % 2)));" in src
    # both pair epilogues -- the MMA warpgroups' direct store (coop), the epilogue role's staged store
    # (3role) -- read a column pair of the ring slot as one 32-bit word
    assert "heddle::unpack2(sE[(tl % 2) * 64 + lc0]);" in src and "to_float(sE[" not in src
    assert "E_bias[" not in src  # no per-element global load of the bias is left
    for bar, count in (("fullE", 1), ("emptyE", 128 * (2 if variant == "coop" else 1))):
        for st in (0, 1):
            assert f"mbarrier.init {bar}[{st}] count {count}" in text
    assert f"edge bias_load -> {consumer} (sE (bias))" in text
    assert "128 TMA bytes" in text  # expect_tx of the [1, 64] bf16 box
    assert f"RAW sE (bias) (bias_load -> {consumer})" in text and f"WAR sE (bias) ({consumer} -> bias_load)" in text


def test_residual_tile_is_one_box_per_tile():
    low = residual("coop").lower("sm_90a")
    src, text = low.source, low.explain()
    assert "res_load -(sE)-> mma" in text.splitlines()[0]
    assert "heddle::sm90::tma_load_plain<128, 64>(sE + (tl % 2) * 8192, &tmE, m0, n0, (fullE + (tl % 2)));" in src
    assert "heddle::unpack2(sE[(tl % 2) * 8192 + lr * 64 + lc0]);" in src and "E_res[" not in src
    assert "16384 TMA bytes" in text  # expect_tx: the whole [128, 64] bf16 box
    # L2 promotion: 256 bytes for the operand tiles, 128 for the per-tile residual box
    assert {m["param"]: m["l2_promotion"] for m in low.tensor_maps} == {"tmA": 256, "tmB": 256, "tmE": 128}


@pytest.mark.parametrize("variant,rs", [("coop", 2), ("3role", 3)])
def test_residual_simulates_clean_and_kills_every_mutant(variant, rs):
    for M, n in ((200, 72), (77, 130)):
        fd = residual(variant, rs, n=n)
        r = verify.simulate(fd.lower("sm_90a"), inputs(fd, M, seed=M), "adversarial", 0)
        assert r.ok, r.report()
    fd = residual(variant, rs)
    report = verify.kill_rate(fd.lower("sm_90a"), [inputs(fd, 200, seed=1)])
    assert report.total >= 50 and not report.survivors, str(report)


@needs_cxx
def test_residual_interpreter_numbers():
    fd = residual("coop", n=200)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    for M in (77, 200):
        r = interpret(k, *inputs(fd, M, seed=M), schedule="random", seed=M, sms=1)
        assert r.ok, r.report()


@needs_cxx
@pytest.mark.slow
def test_residual_interpreter_mutants():
    fd = residual("coop")
    res = mutation_kill_rate(heddle.Kernel.build(fd, "sm_90a", rtc=False), *inputs(fd, 200, seed=1), sms=1)
    assert "swap_stage" in res["by_kind"] and not res["survivors"], res["survivors"]


def test_mermaid_draws_the_second_producer():
    _, low = lowered("3role")
    m = low.explain("mermaid")
    assert 'r1["bias_load<br/>warp 1"]' in m
    assert 'e1[("sE (bias)<br/>2 stages<br/>fullE[2], emptyE[2]")]' in m
    assert 'r1 -->|"arrive.expect_tx fullE[j%2], TMA"| e1' in m
    assert 'e1 -->|"wait fullE[i%2] parity (i/2)%2"| r3' in m
    assert 'r3 -.->|"arrive emptyE[(i+2)%2]; producer waits parity (j/2)%2"| r1' in m


@pytest.mark.parametrize("variant,bs,s,p", [("coop", 2, 3, 1), ("coop", 3, 2, 0), ("3role", 2, 3, 2),
                                            ("3role", 4, 2, 1)])
def test_simulator_clean_with_right_numbers(variant, bs, s, p):
    for i, M in enumerate((200, 130, 64)):
        fd, low = lowered(variant, bs, s, p, n=[72, 130, 64][i], k=16 * (3 * s + 1) - 5)
        for sched, seed in (("adversarial", 0), ("random", i + 1)):
            r = verify.simulate(low, inputs(fd, M, seed=i), sched, seed)
            assert r.ok, f"{variant} bias stages {bs} M={M} {sched}:\n{r.report()}"


@pytest.mark.parametrize("variant,bs", [("coop", 2), ("3role", 3)])
def test_every_simulator_mutant_is_killed(variant, bs):
    fd, low = lowered(variant, bs)
    report = verify.kill_rate(low, [inputs(fd, 200, seed=1)])
    kinds = {m.description.split(":")[0] for m in report.survivors}
    assert report.total >= 50 and not report.survivors, (str(report), kinds)


@needs_cxx
@pytest.mark.parametrize("variant,M,N,sms", [("coop", 200, 72, 1), ("coop", 77, 200, 2), ("3role", 130, 72, 1)])
def test_interpreter_numbers_on_ragged_shapes(variant, M, N, sms):
    # ragged M, N and K against 128/64 x 64 x 16 tiles (TMA needs 16-byte rows: N, K multiples of 8)
    fd = build(variant, stages=3, prefetch=1, n=N, k=16 * 7 - 8, bias_tma=2)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    assert_interprets_clean(k, inputs(fd, M, seed=M), sms=sms)


@needs_cxx
@pytest.mark.parametrize("variant", ["coop", pytest.param("3role", marks=pytest.mark.slow)])
def test_interpreter_source_mutants_killed(variant):
    # one CTA walks every tile, so the 2-slot bias ring wraps (its WAR edge is exercised)
    fd = build(variant, stages=3, prefetch=1, bias_tma=2)
    res = mutation_kill_rate(heddle.Kernel.build(fd, "sm_90a", rtc=False), *inputs(fd, 200, seed=1), sms=1)
    assert {"delete_sync", "flip_parity", "drop_expect_tx", "shrink_expect_tx", "swap_stage"} <= set(res["by_kind"])
    assert not res["survivors"], res["survivors"]


@requires_nvrtc
@pytest.mark.parametrize("variant,tile,bs", [("coop", dict(bm=128, bn=256, bk=64), 2),
                                             ("3role", dict(bm=64, bn=128, bk=64), 4)])
def test_nvrtc_compiles_without_spills_or_global_loads(variant, tile, bs):
    fd = build(variant, stages=4, prefetch=2, n=1024, k=4096, bias_tma=bs, **tile)
    r = nvrtc_sm90(fd.lower("sm_90a"))
    assert "cp.async.bulk.tensor.2d" in r.ptx and "mbarrier.try_wait.parity" in r.ptx
    assert "ld.global" not in r.ptx  # the bias comes through shared memory


@requires_nvrtc
def test_nvrtc_compiles_the_residual_kernel():
    fd = residual("coop", stages=4, prefetch=2, n=1024, k=4096, bm=128, bn=128, bk=64)
    low = fd.lower("sm_90a")
    r = rt.compile(low.source, low.name, "sm_90a", isolate=True)
    st = r.stats
    assert st.spill_stores == 0 and st.spill_loads == 0 and st.stack_frame == 0, r.ptxas
    assert not st.setmaxnreg_ignored and "ld.global" not in r.ptx, r.ptxas


def _bias(fd):
    return next(t for t in fd.inputs if t.name == "bias")


@pytest.mark.parametrize("variant,match", [
    ("pingpong", "built for cooperative MMA warpgroups"),
    ("pipeline", "comes from a producer role through an mbarrier ring; schedule warp_specialize"),
])
def test_schedules_not_built_are_named_errors(variant, match):
    with pytest.raises(heddle.ScheduleError, match=match):
        build(variant, bias_tma=2).lower("sm_90a")


def test_other_cache_kinds_ranks_and_stage_counts_are_refused():
    fd = build("coop")
    fd.cache_after(_bias(fd), "cp_async")
    with pytest.raises(heddle.ScheduleError, match="cached only with 'tma_load'.*not 'cp_async'"):
        fd.lower("sm_90a")
    with pytest.raises(heddle.ScheduleError, match="the ring of bias allows at most 8 stages"):
        build("coop", bias_tma=9).lower("sm_90a")
    fd2 = heddle.Fusion()
    a = fd2.input("a", "bf16", ["M", 64]); b = fd2.input("b", "bf16", [64, 72])
    r1 = fd2.input("r1", "bf16", ["M", 72]); r2 = fd2.input("r2", "bf16", [72])
    fd2.output((fd2.matmul(a, b) + r1 + r2).to("bf16"))
    schedule_sm90(fd2, a, b, bm=128, bn=64, bk=16, wgs=2, stages=3, roles=roles_for("coop"))
    fd2.cache_after(r1, "tma_load"); fd2.cache_after(r2, "tma_load")
    with pytest.raises(heddle.ScheduleError, match="a second TMA-loaded epilogue operand"):
        fd2.lower("sm_90a")


@needs_cxx
def test_a_bias_tma_cannot_read_is_an_input_error():
    fd = build("coop", bias_tma=2)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    ins = inputs(fd, 130)
    ins[2] = torch.randn(144).to(torch.bfloat16)[::2]  # stride 2
    with pytest.raises(heddle.InputError, match="input 'bias'.*loads it with TMA.*last axis has stride 2"):
        interpret(k, *ins, sms=1)
