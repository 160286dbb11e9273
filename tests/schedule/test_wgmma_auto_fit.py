"""The automatic sm_90a schedule within shared memory (schedule/wgmma_auto_schedule.cpp, fitAutoTile shared with
sm_100a): beside the operand stages it counts the TMA-store epilogue's staging chunk sD and the ring of a
bias / residual the user cached with cache_after(x, 'tma_load'), so it never picks a tile the lowering then
refuses for shared memory (a cached 4096-wide residual once got 128x256 and a ScheduleError).

Checked here: a grid of shapes x epilogues (bias, residual, both) x cached operand x epilogue_store lowers
without a refusal; the picked tile and stages for a few cases, each the largest that fits (one more stage,
or the next wider tile, scheduled by hand is refused by the lowering); split-K is not picked where the
cached operand needs its producer role; the named error where no tile fits; the kernel-IR simulator and
the CPU interpreter of the printed source on a picked fallback kernel (float64-right numbers); NVRTC for
sm_90a (no spills)."""
import itertools
import re

import pytest

import heddle
from support.env import requires_nvrtc, rt
from heddle import verify
from heddle.interpret import interpret
from support.wgmma_defs import inputs, schedule_sm90
from support.interp_defs import needs_cxx

LIMIT = 232448  # TargetInfo::smemLimit of sm_90a and sm_100a


def fusion(epi=("bias", "res"), cache=None, n=4096, k=4096, ring=None, res_dtype="bf16"):
    """a @ b (+ bias [N]) (+ res [M, N]) -> bf16; `cache`: the input cached with tma_load (ring: its stages)."""
    fd = heddle.Fusion()
    a = fd.input("a", "bf16", ["M", k]); b = fd.input("b", "bf16", [k, n])
    x = fd.matmul(a, b)
    ins = {}
    if "bias" in epi:
        ins["bias"] = fd.input("bias", "bf16", [n]); x = x + ins["bias"]
    if "res" in epi:
        ins["res"] = fd.input("res", res_dtype, ["M", n]); x = x + ins["res"]
    fd.output(x.to("bf16"))
    if cache:
        c = fd.cache_after(ins[cache], "tma_load")
        if ring:
            c.circular_buffer(ring)
    return fd, a, b


def choice(name):
    """(bm, bn, stages) from a kernel name (..._128x128x64_w8x1_s4p2_...)."""
    m = re.search(r"_(\d+)x(\d+)x64_w\d+x1_s(\d+)p", name)
    return int(m[1]), int(m[2]), int(m[3])


def auto(m=-1, sms=0, target="sm_90a", layout="auto", pairs=False, **kw):
    fd, _, _ = fusion(**kw)
    fd.auto_schedule(target, m, kw.get("n", 4096), kw.get("k", 4096), sms=sms, epilogue_layout=layout,
                     epilogue_pairs=pairs)
    return fd, fd.lower(target)


EPI_CACHE = [(("bias",), None), (("bias",), "bias"), (("res",), None), (("res",), "res"),
             (("bias", "res"), None), (("bias", "res"), "bias"), (("bias", "res"), "res")]


@pytest.mark.parametrize("epi,cache", EPI_CACHE)
def test_grid_never_refused(epi, cache):
    for n in (128, 256, 1024, 4096):
        for m, sms in ((-1, 0), (64, 0), (64, 132), (128, 132), (512, 132)):
            for store in (None, "tma", "direct"):
                fd, _, _ = fusion(epi, cache, n=n)
                fd.auto_schedule("sm_90a", m, n, 4096, sms=sms)
                low = fd.lower("sm_90a")
                if store and "_sk" not in low.name:  # the user's store over the automatic choice
                    fd.matmul_tensor.epilogue_store(store)
                    low = fd.lower("sm_90a")
                    assert ("_tmas" in low.name) == (store == "tma"), low.name
                assert low.smem_bytes <= LIMIT
                assert ("_tmae2" in low.name) == (cache is not None), low.name
                if cache:  # the producer role needs the warp-specialized kernel: no split-K
                    assert "_sk" not in low.name and "ws2coop" in low.name, low.name


def hand(bm, bn, stages, **kw):
    """The automatic schedule's kernel with the tile and stages given: split, roles, epilogue_store('tma')."""
    fd, a, b = fusion(**kw)
    wgs = 2 if bm == 128 else 1
    roles = {"load": {"warps": 1, "registers": 40}, "mma": {"warpgroups": 2, "registers": 232}} if wgs == 2 \
        else {"load": {"warps": 1}, "mma": {"warpgroups": 1}}
    schedule_sm90(fd, a, b, bm=bm, bn=bn, bk=64, wgs=wgs, stages=stages,
                  prefetch=stages - 2 if stages >= 3 else stages - 1, roles=roles)
    fd.matmul_tensor.epilogue_store("tma")
    return fd


# (auto_schedule m, fusion) -> (bm, bn, stages): the largest tile, then the most stages (<= 4), that fit
CASES = [
    (-1, dict(epi=("res",), cache=None), (128, 256, 4)),
    (-1, dict(epi=("bias",), cache="bias"), (128, 256, 4)),
    (-1, dict(epi=("res",), cache="res"), (128, 128, 4)),           # the reported case: not 128x256
    (-1, dict(epi=("bias", "res"), cache="res"), (128, 128, 4)),
    (-1, dict(epi=("res",), cache="res", ring=3), (128, 128, 3)),  # 3 ring stages leave room for 3
    (-1, dict(epi=("res",), cache="res", ring=6), (128, 64, 4)),   # 128 wide leaves no two stages
    (-1, dict(epi=("res",), cache="res", n=1024, ring=4), (128, 128, 2)),
    (64, dict(epi=("res",), cache="res"), (64, 128, 4)),
]


@pytest.mark.parametrize("m,kw,want", CASES)
def test_picks_the_largest_fitting_tile_and_stages(m, kw, want):
    # the tile fit of the cooperative kernel (hand() builds it) for pair reads (a residual read by scalar
    # loads keeps 128x128)
    fd, low = auto(m, layout="cooperative", pairs=True, **kw)
    assert choice(low.name) == want, low.name
    plan = {s["buffer"]: s["bytes"] for s in low.smem_plan}
    assert low.smem_bytes <= LIMIT and ("_tmae" in low.name) == bool(kw.get("cache"))
    # two-warpgroup tiles store by TMA through staging chunk(s) sD of bm x 128 bytes (counted by the rule)
    assert plan.get("sD", 0) >= (want[0] * 128 if want[0] == 128 else 0)
    if kw.get("cache"):  # the cached operand's ring: stages x its [bm, bn] tile (or [bn] slice)
        rows = want[0] if kw["cache"] == "res" else 1
        assert plan["sE"] == kw.get("ring", 2) * rows * want[1] * 2
    bm, bn, stages = want
    if m != -1:
        return  # M <= 128 keeps n at 128 by choice, not for room
    larger = [(bn, stages + 1)] if stages < 4 else []
    if bn < (256 if kw.get("n", 4096) >= 256 else 128):
        larger.append((2 * bn, 2))
    for bn2, st2 in larger:  # the next larger choice is refused for shared memory
        with pytest.raises(heddle.ScheduleError, match=r"shared memory"):
            hand(bm, bn2, st2, **kw).lower("sm_90a")
    hand(bm, bn, stages, **kw).lower("sm_90a")  # and the choice itself by hand lowers the same


def test_blackwell_shares_the_rule():
    _, low = auto(target="sm_100a", epi=("res",), cache="res", ring=6)
    assert "128x64x64" in low.name and "_s5" in low.name and low.name.endswith("_tmae6"), low.name
    _, low = auto(target="sm_100a", epi=("res",), cache="res")
    assert "128x128x64" in low.name and "_s4" in low.name, low.name


def test_no_tile_fits_is_a_named_error():
    fd, _, _ = fusion(("res",), "res", ring=8, res_dtype="f32")
    with pytest.raises(heddle.ScheduleError, match=r"auto schedule: on sm_90a even a 128x64x64 tile with two operand "
                       r"stages and the ring of res \(cache res_smem, 8 stages of its \[128, 64\] tile\) needs "
                       r"\d+ bytes .*drop cache_after\(res\)"):
        fd.auto_schedule("sm_90a", -1, 4096, 4096)


def test_the_fallback_kernel_simulates_clean_with_right_numbers():
    # N = 256 would get 128x256 without the ring; the cached residual's ring makes it 128x128, 4 stages
    fd, low = auto(epi=("bias", "res"), cache="res", n=256, k=256)
    assert choice(low.name) == (128, 128, 4) and "_tmae2_tmas2" in low.name, low.name
    r = verify.simulate(low, inputs(fd, 130, seed=3), "adversarial", 0)
    assert r.ok, r.report()


@needs_cxx
@pytest.mark.slow  # ~20 s of C++ compile of the 128x128 printed source on a cold cache
def test_the_fallback_kernel_interprets_with_right_numbers():
    fd, _ = auto(epi=("bias", "res"), cache="res", n=256, k=256)
    r = interpret(heddle.Kernel.build(fd, "sm_90a", rtc=False), *inputs(fd, 200, seed=5), schedule="random", seed=5,
                  sms=1)
    assert r.ok, r.report()


@requires_nvrtc
def test_nvrtc_compiles_the_automatic_residual_kernel():
    _, low = auto(epi=("bias", "res"), cache="res", n=1024)
    assert choice(low.name) == (128, 128, 4) and "_tmae2_tmas2" in low.name, low.name
    r = rt.compile(low.source, low.name, "sm_90a", isolate=True)
    st = r.stats
    assert st.spill_stores == 0 and st.spill_loads == 0 and st.stack_frame == 0, r.ptxas
    assert not st.setmaxnreg_ignored and "cp.async.bulk.tensor.2d" in r.ptx, r.ptxas


# --- the epilogue register budget (issue 28 item 8): every epilogue dtype --------------------------------

def dtype_fusion(bias, res, out, n=256):
    """a @ b (+ bias [N]) (+ res [M, N]) -> out, each in the dtype given (None: no such operand)."""
    fd = heddle.Fusion()
    a = fd.input("a", "bf16", ["M", 4096]); b = fd.input("b", "bf16", [4096, n])
    x = fd.matmul(a, b)
    if bias:
        x = x + fd.input("bias", bias, [n])
    if res:
        x = x + fd.input("res", res, ["M", n])
    fd.output(x.to(out))
    return fd


def compiled_clean(fd, target="sm_90a", vec_e=1):
    """fd.compile refuses a spilling kernel (ScheduleError); ptxas's stats say so again."""
    k = fd.compile(target, vec_e=vec_e)
    st = k.binary.stats
    assert st.spill_stores == 0 and st.spill_loads == 0 and st.stack_frame == 0, (k.name, k.binary.ptxas)
    return k


@requires_nvrtc
def test_the_reported_f32_epilogue_compiles():
    """N = 256, f32 bias, bf16 residual, f32 output: auto_schedule('sm_90a') then compile() with their defaults
    once gave the ping-pong kernel for pair reads, which compile's scalar reads spilled (8 + 8 bytes: a
    ScheduleError telling the user to fix heddle's schedule). The defaults now agree (epilogue_pairs=False)."""
    fd = dtype_fusion("f32", "bf16", "f32")
    fd.auto_schedule("sm_90a")
    k = compiled_clean(fd)
    assert "_ws2coop_" in k.name, k.name


# (bias, residual, output, epilogue_pairs / vec_e): each dtype in each role, both read widths
FUSION_SUBSET = [("f32", "f32", "bf16", True), ("bf16", "f32", "f16", True), ("f16", "bf16", "f32", False)]


@requires_nvrtc
@pytest.mark.parametrize("bias,res,out,pairs", FUSION_SUBSET)
def test_auto_schedule_epilogue_dtypes_compile(bias, res, out, pairs):
    fd = dtype_fusion(bias, res, out, n=4096)
    fd.auto_schedule("sm_90a", epilogue_pairs=pairs)
    compiled_clean(fd, vec_e=2 if pairs else 1)


FUSION_SWEEP = [c for c in itertools.product(
    (None, "f32", "bf16", "f16"), (None, "f32", "bf16", "f16"), ("f32", "bf16", "f16"), (False, True),
    (256, 4096)) if c[0] or c[1] or not c[3]]


@requires_nvrtc
@pytest.mark.slow
@pytest.mark.parametrize("bias,res,out,pairs,n", FUSION_SWEEP)
def test_every_auto_schedule_epilogue_dtype_compiles(bias, res, out, pairs, n):
    fd = dtype_fusion(bias, res, out, n=n)
    fd.auto_schedule("sm_90a", epilogue_pairs=pairs)
    compiled_clean(fd, vec_e=2 if pairs else 1)
