"""Schedule fuzz through the public API (issue 16): random definitions and schedules, some of them
hostile (odd tiles, bad warp splits, zero or negative factors, floats, None, vector widths heddle does
not have, load kinds the target lacks). Every outcome must be a heddle error or a kernel that lowers
and -- for the accepted ones drawn for compilation -- compiles with NVRTC without register spills
(a schedule whose kernel would spill is a ScheduleError from Kernel.build, naming what to change).
Never another exception, a crash or a hang. A bounded set runs in CI, a larger one under -m slow."""
import random

import pytest

import heddle
from support.env import nvrtc_unavailable_reason
from support.matmul_defs import matmul_fusion

TILES = [16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256]
HOSTILE = [0, -1, 3, 1.5, None, 2**31, 7]


def draw(rng):
    """One (definition, schedule, target, vec) draw: mostly plausible, with a hostile value now and then
    (an odd tile, a bad warp split, a load kind the target lacks, a value of the wrong type)."""
    def pick(good, rare=TILES):
        r = rng.random()
        return rng.choice(HOSTILE) if r < 0.03 else rng.choice(rare) if r < 0.12 else rng.choice(good)
    target = rng.choice(["sm_80", "sm_80", "sm_86", "gfx90a", "gfx942", "gfx1200"])
    kinds = ["cp_async", "plain"] if target.startswith("sm_") else ["async_lds", "plain"]
    if target == "gfx1200":
        kinds = ["plain"]
    return dict(layout=rng.choice(["NN", "NT", "TN", "TT"]), dtype=rng.choice(["f16", "bf16"]),
                epilogue=rng.choice([None, "bias_gelu", "silu_scale"]),
                bm=pick([32, 64, 128]), bn=pick([32, 64, 128]), bk=pick([16, 32, 64], [128, 48]),
                wm=pick([1, 2], [4]), wn=pick([1, 2], [4]), stages=pick([1, 2, 3, 4], [5, 6]),
                prefetch=rng.choice([-1, -1, 0, 1, 2, 5]),
                kind=rng.choice(kinds) if rng.random() > 0.05 else rng.choice(["tma_load", "async_lds", "cp_async"]),
                target=target, vec=(pick([8, 4], [2, 1, 16]), pick([8, 4], [2, 1, 16])))


def build(cfg):
    fd, a, b = matmul_fusion(m="M", n="N", k=512, layout=cfg["layout"], dtype=cfg["dtype"], epilogue=cfg["epilogue"])
    mm = fd.schedule()
    bm, bn, wm, wn = cfg["bm"], cfg["bn"], cfg["wm"], cfg["wn"]
    sub_m = bm // wm if isinstance(bm, int) and isinstance(wm, int) and wm else wm
    sub_n = bn // wn if isinstance(bn, int) and isinstance(wn, int) and wn else wn
    mm.split("m", bm).split("n", bn).split("k", cfg["bk"]).split("m.i", sub_m).split("n.i", sub_n)
    mm.parallelize("m.o", "BIDy").parallelize("n.o", "BIDx")
    mm.parallelize("m.i.o", "warp").parallelize("n.i.o", "warp")
    mm.reorder(["m.o", "n.o", "k.o", "m.i.o", "n.i.o", "m.i.i", "n.i.i", "k.i"])
    for t in (a, b):
        c = fd.cache_after(t, cfg["kind"])
        if cfg["stages"] != 1:
            c.circular_buffer(cfg["stages"], cfg["prefetch"])
    return fd


def outcome(cfg, compile_it):
    """'refused: <error class>', 'lowered' or 'compiled'; anything else fails the test."""
    try:
        fd = build(cfg)
        va, vb = cfg["vec"]
        fd.lower(cfg["target"], vec_a=va, vec_b=vb)
        if not compile_it:
            return "lowered"
        k = fd.compile(cfg["target"], vec_a=va, vec_b=vb)
    except heddle.HeddleError as e:
        assert str(e).strip(), f"{cfg}: an empty {type(e).__name__}"
        if isinstance(e, heddle.CompileError):
            pytest.fail(f"{cfg}: the schedule was accepted but NVRTC refused it:\n{e}")
        return f"refused: {type(e).__name__}"
    st = k.stats
    assert not (st.spill_stores or st.spill_loads), f"{cfg}: a spilling kernel was returned ({st.registers} registers)"
    return "compiled"


def run(seeds, compiles):
    nvrtc = nvrtc_unavailable_reason() is None
    counts = {}
    compiled = 0
    for seed in seeds:
        cfg = draw(random.Random(seed))
        want = nvrtc and compiled < compiles and cfg["target"].startswith("sm_")
        r = outcome(cfg, want)
        if want and r == "lowered":  # accepted: compile it
            r = outcome(cfg, True)
        compiled += r.startswith("compiled")
        counts[r] = counts.get(r, 0) + 1
    return counts


def test_every_schedule_is_a_kernel_or_a_heddle_error():
    counts = run(range(300), compiles=8)
    print(counts)
    assert sum(v for k, v in counts.items() if k.startswith("refused")) > 30, counts  # hostile values do arrive
    assert counts.get("lowered", 0) + counts.get("compiled", 0) > 30, counts      # and many schedules pass


@pytest.mark.slow
def test_schedule_fuzz_large():
    counts = run(range(300, 3300), compiles=150)
    print(counts)
