"""The block-scaled sm_90a kernel (docs/fp8.md "Block scales and promotion"), on its 16-bit vehicle (bf16
operands, K-major; the promotion does not depend on the operand type): the MMA role's wgmma accumulates each
promotion interval into `tmp`, waits for it (wgmma.wait_group(0), a sync-plan entry of its own) and adds
tmp * scale_a[m, kb] * scale_b[n/128, kb] into the f32 accumulators in registers.

Checked here: the lowered IR and the printed promotion, explain(), the ScheduleErrors of what is not built,
NVRTC for sm_90a (no spills, no ptxas advisory), the CPU interpreter of the printed source against float64
on ragged shapes with a partial last k-block, and the promotion's source mutants."""
import pytest

import heddle
from heddle.interpret import interpret, mutation_kill_rate
from support.block_scale_defs import block_scaled as fusion, block_scaled_inputs as tensors
from support.env import requires_nvrtc
from support.interp_defs import needs_cxx
from support.wgmma_defs import nvrtc_sm90, roles_for, walk


def test_the_mma_role_promotes_every_interval():
    low = fusion().lower("sm_90a")
    assert low.name.endswith("_bs128p128")
    src = low.source
    assert "tmp.step(" in src and "acc.step(" not in src  # the wgmma accumulates into tmp only
    # promotion interval 128 = 2 k-tiles of 64: after every second k-tile, and after K's last one
    assert "if (heddle_min((kt + 1) % 2, heddle_ceil_div(K, 64) - kt - 1) == 0) {" in src
    line = next(ln.strip() for ln in src.splitlines() if ".promote(" in ln)
    # scale_a from the k-tile's own ring slot (the wgmma's stage of sA), scale_b from global memory
    assert line == ("acc.promote(tmp, sSA + ((tl * heddle_ceil_div(K, 64) + kt) % 4) * 128, scale_b, M, N, "
                    "heddle_ceil_div(K, 128), m0, n0, kt * 64 / 128, kt < 2, warp, lane);"), line
    assert "tmp.step(sA + ((tl * heddle_ceil_div(K, 64) + kt) % 4) * 8192," in src
    after = src.splitlines()[next(i for i, ln in enumerate(src.splitlines()) if ".promote(" in ln) + 1]
    assert after.strip().startswith("tmp.zero();")
    # the promotion's wait sits right before it, inside the interval's last k-tile
    nodes = list(walk(low.structure))
    prom = next(i for i, n in enumerate(nodes) if n["kind"] == "promote")
    assert nodes[prom - 1]["kind"] == "sync" and nodes[prom - 1]["sync"] == "wgmma.wait_group" and nodes[prom - 1]["arg"] == 0
    text = low.explain()
    assert "RAW tmp (wgmma -> promotion)" in text and "block_scale_promotion" in text
    assert "promotion every 128 of K" in text.splitlines()[0]
    assert [p for p in low.params if p[0].startswith("scale_") or p[0] == "tmSA"] == [("tmSA", "tensormap", "f32", "sa"),
                                                                                      ("scale_b", "ptr", "f32", "sb")]


def test_scale_a_rides_the_operand_ring():
    """The load role's TMA brings each k-tile's scale_a [BM] into the slot beside sA and sB, its bytes in the
    full barrier's expect-tx; the MMA role's promotion reads that slot and only then releases the k-tile's
    ring slot (the arrive moved after the promotion, listed in explain() with its origin)."""
    low = fusion().lower("sm_90a")
    lines = [ln.strip() for ln in low.source.splitlines()]
    load = next(i for i, ln in enumerate(lines) if "&tmSA," in ln)
    assert lines[load] == ("heddle::sm90::tma_load_plain<1, 128>(sSA + ((tl * heddle_ceil_div(K, 64) + kt) % 4) * 128, "
                           "&tmSA, kt * 64 / 128, m0, (full + ((tl * heddle_ceil_div(K, 64) + kt) % 4)));")
    assert "&tmA," in lines[load - 1] and "&tmB," in lines[load + 1]  # the same item's A and B, the same barrier
    # 128 x 64 bf16 + 64 x 64 bf16 + 128 f32 scales per slot
    assert f"mbar_arrive_expect_tx((full + ((tl * heddle_ceil_div(K, 64) + kt) % 4)), {128 * 64 * 2 + 64 * 64 * 2 + 512});" \
        in lines[load - 2]
    assert [m for m in low.tensor_maps if m["param"] == "tmSA"] == [
        {"param": "tmSA", "operand": "sa", "box_cols": 128, "box_rows": 1, "swizzle": 0, "batched": False,
         "l2_promotion": 128, "box_depth": 1}]
    prom = next(i for i, ln in enumerate(lines) if ln.startswith("acc.promote("))
    rel = next(i for i, ln in enumerate(lines) if ln.startswith("heddle::sm90::mbar_arrive((empty + ((tl"))
    assert prom < rel and lines[rel - 1] == "}"  # the release follows the promotion's `if`
    text = low.explain()
    entry = text[text.index("] mbarrier.arrive empty[(tl"):]
    entry = entry[:entry.index("\n[")] if "\n[" in entry else entry
    assert "WAR sSA (promotion -> load)" in entry and "placed by: block_scale_promotion / mbarrier ring" in entry
    assert "roles: load -(sA, sB, sSA)-> mma" in text.splitlines()[0]
    assert "sa through the operand ring: TMA into sSA, 512 bytes of each slot's expect-tx" in text.splitlines()[0]


def test_the_release_follows_the_promotion_when_nothing_stays_in_flight():
    # stages = prefetch + 1: wait_group(0) and the k-tile releases its own slot -- after the promotion read it
    low = fusion(stages=2, prefetch=1, promotion=64).lower("sm_90a")
    lines = [ln.strip() for ln in low.source.splitlines()]
    prom = next(i for i, ln in enumerate(lines) if ln.startswith("acc.promote("))
    assert "sSA + ((tl * heddle_ceil_div(K, 64) + kt) % 2) * 128" in lines[prom]
    # item i + 1 + 1 - 2 = i: this k-tile's own slot, whose scales the promotion just read, after wait_group(0)
    assert lines[prom + 2].startswith("heddle::sm90::mbar_arrive((empty + ((tl * heddle_ceil_div(K, 64) + kt + 1 + 1) "
                                      "% 2)));"), lines[prom + 2]
    assert lines[prom + 2].endswith("WAR sA, sB, sSA (mma -> load), WAR sSA (promotion -> load)")
    assert lines[prom - 2].startswith("tmp.wait<0>();  // sync") and lines[prom - 2].endswith("WAR sA, sB (wgmma -> tma)")


def test_promotion_interval_in_k_tiles():
    low = fusion(promotion=64).lower("sm_90a")
    assert low.name.endswith("_bs128p64")
    lines = [ln.strip() for ln in low.source.splitlines()]
    at = next(i for i, ln in enumerate(lines) if ln.startswith("acc.promote("))
    assert lines[at - 1].startswith("tmp.wait<0>();") and lines[at - 2].startswith("tmp.wait<2>();")
    assert lines[at + 2].startswith("heddle::sm90::mbar_arrive((empty")  # promote, tmp.zero(), then the release
    assert "heddle_min((kt + 1)" not in low.source  # one k-tile per interval: every k-tile promotes, no condition
    assert lines[at].endswith(", kt * 64 / 128, kt < 1, warp, lane);")
    low = fusion(bk=32, promotion=64).lower("sm_90a")  # 2 k-tiles of 32 per promotion, 2 promotions per block
    assert "if (heddle_min((kt + 1) % 2, heddle_ceil_div(K, 32) - kt - 1) == 0) {" in low.source
    assert ", kt * 32 / 128, kt < 2, warp, lane);" in low.source


@pytest.mark.parametrize("change,msg", [
    (lambda fd: fd.matmul_tensor.promotion(32), "promotion(32) is shorter than or not a multiple of the k tile bk = 64"),
    (lambda fd: fd.matmul_tensor.stream_k(4), "stream_k is not built with block scales"),
    (lambda fd: fd.matmul_tensor.cluster(2, "m"), "cluster(2) is not built with block scales"),
])
def test_what_is_not_built_is_refused(change, msg):
    fd = fusion()
    change(fd)
    with pytest.raises(heddle.ScheduleError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        fd.lower("sm_90a")


@pytest.mark.parametrize("kw,msg", [
    # 96 + 96 of 232 registers: NVRTC spilled with the TMA-store epilogue and ping-pong e4m3 (block_scales.cpp)
    (dict(bn=192), r"tile 64 x 192 holds 96 accumulators per thread, twice over .*: 192 of the MMA role's 232 "
                   r"registers leave fewer than 48 .* use bn = 128"),
    (dict(bn=256), r"tile 64 x 256 holds 128 accumulators .* use bn = 128"),
    # the rule counts the MMA role's setmaxnreg budget: 64 + 64 in 168 leaves 40
    (dict(bn=128, regs=(64, 168)), r"128 of the MMA role's 168 registers .* use bn = 64 .* give the mma role 176 "
                                   r"registers"),
])
def test_a_tile_whose_two_accumulator_sets_spill_is_refused(kw, msg):
    with pytest.raises(heddle.ScheduleError, match=msg):
        with_registers(**kw).lower("sm_90a")


def with_registers(regs=None, variant="coop", **kw):
    """fusion(**kw), its roles given `regs` = (load, mma) setmaxnreg budgets where set."""
    fd = fusion(variant=variant, **kw)
    if regs:
        fd.matmul_tensor.warp_specialize(roles_for(variant, regs))
    return fd


def test_the_epilogue_role_is_refused():
    with pytest.raises(heddle.ScheduleError, match="an epilogue role is not built with block scales"):
        fusion(variant="3role").lower("sm_90a")


@requires_nvrtc
@pytest.mark.parametrize("variant", ["coop", "pingpong"])
def test_compiles_for_sm90a_without_spills(variant):
    nvrtc_sm90(fusion(variant=variant).lower("sm_90a"))


# The 128-wide n tile: 64 + 64 accumulators per MMA thread (acc and tmp) in the MMA role's 232 registers (and at
# the rule's edge, 176); ptxas allocates the MMA role under its setmaxnreg budget, not the 168 of the launch cap
@requires_nvrtc
@pytest.mark.parametrize("kw", [dict(), dict(variant="pingpong"), dict(dtype="e4m3", bk=128),
                                dict(dtype="e5m2", bk=128, variant="pingpong", out="f32", bias=False),
                                dict(store="tma"), dict(regs=(64, 176))],
                         ids=["coop", "pingpong", "e4m3", "e5m2-pingpong-f32", "tma-store", "mma176"])
def test_the_128_wide_tile_compiles_without_spills(kw):
    store = kw.pop("store", None)
    fd = with_registers(bn=128, N=4096, K=7168, **kw)
    if store:
        fd.matmul_tensor.epilogue_store(store)
    low = fd.lower("sm_90a")
    assert "x128x" in low.name and "_bs128p128" in low.name, low.name  # bm x 128 x bk
    nvrtc_sm90(low)


def test_the_128_wide_tile_lowers():
    low = fusion(bn=128, N=300).lower("sm_90a")
    assert "using Mma = heddle::MmaSm90<128, 128, 64, 2, true, true, true, T, 4>;" in low.source
    assert "heddle_ceil_div(M, 128) * heddle_ceil_div(N, 128) - bid" in low.source  # the walk over 128 x 128 tiles
    # each slot: A 128 x 64 and B 128 x 64 bf16, and the 128 rows' scale_a
    assert f"mbar_arrive_expect_tx((full + ((tl * heddle_ceil_div(K, 64) + kt) % 4)), {2 * 128 * 64 * 2 + 512});" \
        in low.source
    line = next(ln.strip() for ln in low.source.splitlines() if ".promote(" in ln)
    assert line.endswith("heddle_ceil_div(K, 128), m0, n0, kt * 64 / 128, kt < 2, warp, lane);"), line


def interprets_clean(variant, M, N, K, schedules=(("adversarial", 0),), **kw):
    fd = fusion(variant=variant, N=N, K=K, **kw)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    for sched, seed in schedules:
        r = interpret(k, *tensors(fd, M, seed=M), schedule=sched, seed=seed, sms=2)
        assert r.ok, r.report()


@needs_cxx
def test_interprets_against_float64_with_a_partial_last_block():
    # K = 264: blocks of 128, 128 and 8 (the TMA loads fill the rest of the last k-tile with zeros); M, N ragged
    interprets_clean("coop", 70, 72, 264)


@needs_cxx
def test_the_128_wide_tile_interprets_against_float64():
    # N = 300: n tiles of 128, 128 and 44 columns, each inside one scale_b block; K = 264 a partial last block
    interprets_clean("coop", 70, 300, 264, bn=128)


@needs_cxx
@pytest.mark.slow
@pytest.mark.parametrize("variant,M,N,K,p,bn", [("coop", 200, 136, 264, 128, 64), ("pingpong", 77, 136, 520, 128, 64),
                                                ("coop", 130, 72, 392, 64, 64), ("coop", 200, 264, 392, 64, 128),
                                                ("pingpong", 77, 300, 520, 128, 128)])
def test_interprets_against_float64_on_ragged_shapes(variant, M, N, K, p, bn):
    interprets_clean(variant, M, N, K, (("adversarial", 0), ("random", 2)), promotion=p, bn=bn)


@requires_nvrtc
def test_e4m3_operands_compile_for_sm90a_without_spills():
    # FP8 wgmma (k = 32 per instruction): bk = 128 is one interval of 4 wgmma k-steps, promoted every k-tile
    low = fusion(dtype="e4m3", K=272, N=72, bk=128).lower("sm_90a")
    assert low.name.endswith("_bs128p128") and "heddle_min((kt + 1)" not in low.source
    nvrtc_sm90(low)


def test_e4m3_promotion_shorter_than_the_k_tile_is_refused():
    with pytest.raises(heddle.ScheduleError, match=r"promotion\(64\) is shorter than or not a multiple of the k tile "
                                                   r"bk = 128"):
        fusion(dtype="e4m3", K=272, N=72, bk=128, promotion=64).lower("sm_90a")


@needs_cxx
@pytest.mark.slow
@pytest.mark.parametrize("dtype,N,bn", [("e4m3", 72, 64), ("e5m2", 72, 64), ("e4m3", 300, 128)])
def test_fp8_operands_interpret_against_float64(dtype, N, bn):
    # K = 272: blocks of 128, 128 and 16 (a partial last block); 8-bit rows need K a multiple of 16
    interprets_clean("coop", 70, N, 272, dtype=dtype, bk=128, bn=bn)


# Equivalent mutants of the promotion kernel (promotion every 2 k-tiles, keep = 2): the ring's wait_group(2) in the
# k loop (item g-2, whose slot it releases, was retired by the promotion's wait_group(0) at the end of the previous
# interval whenever keep >= the interval's k-tiles) and the wait_group(0) after the k loop (K's last k-tile
# promoted after its own wait_group(0)). Both stay in the kernel (placed by warp_specialize with their plan entries).
EQUIVALENT = [("delete_sync", "tmp.wait<2>();"), ("delete_sync", "tmp.wait<0>();")]


# the 128-wide tile (N = 200: a whole and a partial n tile) is held to the same catalogue as the 64-wide one
WIDTHS = pytest.mark.parametrize("N,bn", [(72, 64), (200, 128)])


@needs_cxx
@pytest.mark.slow
@WIDTHS
def test_promotion_mutants_are_caught(N, bn):
    fd = fusion(N=N, K=264, bn=bn)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    lines = k.lowered.source.split("\n")
    wait = 1 + next(i for i, ln in enumerate(lines) if "RAW tmp (wgmma -> promotion)" in ln)  # the promotion's wait

    def mine(mu):
        return (mu.kind == "promotion" or (mu.kind == "delete_sync" and "tmp" in mu.what) or
                (mu.kind == "loosen_wait" and mu.line == wait))
    res = mutation_kill_rate(k, *tensors(fd, 70, seed=1), sms=2, kinds=("promotion", "delete_sync", "loosen_wait"),
                             where=mine)
    # the promotion's own wait deleted, the scale block moved, `first` dropped, tmp.zero() deleted: all caught;
    # the promotion's wait_group(0) loosened to wait_group(1) (it reads the last group's accumulators in flight)
    assert res["by_kind"]["promotion"] == (4, 4), res["by_kind"]
    assert res["by_kind"]["loosen_wait"] == (1, 1), res["by_kind"]
    assert sorted((m.kind, m.what) for m in res["survivors"]) == sorted(EQUIVALENT), res["survivors"]


@needs_cxx
@pytest.mark.slow
@pytest.mark.parametrize("stages,prefetch", [(4, 1), (2, 1)])
@WIDTHS
def test_scale_ring_mutants_are_caught(stages, prefetch, N, bn):
    """The scale ring's protocol broken one fact at a time (source mutants, kind scale_ring, and the flipped
    parity of the full-barrier wait that guards the slot's scales): the slot's scale bytes missing from the
    expect-tx, the promotion reading the next item's slot, the release moved before the promotion. With 4
    stages (keep = 2) the moved release frees item i - 2, which no promotion reads any more: equivalent; with 2
    stages (keep = 0) it frees the slot the promotion is about to read, and the next fill lands on it."""
    fd = fusion(N=N, K=264, stages=stages, prefetch=prefetch, bn=bn)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    lines = k.lowered.source.split("\n")
    full = 1 + next(i for i, ln in enumerate(lines) if "mbar_wait((full" in ln)  # the MMA role's wait for item i

    def mine(mu):
        return mu.kind == "scale_ring" or (mu.kind == "flip_parity" and mu.line == full)
    res = mutation_kill_rate(k, *tensors(fd, 70, seed=1), sms=2, kinds=("scale_ring", "flip_parity"), where=mine)
    assert res["by_kind"]["flip_parity"] == (1, 1), res["by_kind"]
    survivors = sorted(m.what for m in res["survivors"])
    if stages - prefetch - 1 >= 1:
        assert res["by_kind"]["scale_ring"] == (2, 3), res["by_kind"]
        assert survivors == ["the k-tile's release moved before the promotion that reads its scale_a slot"], survivors
    else:
        assert res["by_kind"]["scale_ring"] == (3, 3), (res["by_kind"], survivors)
