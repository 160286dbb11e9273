"""NVRTC compile checks of the Hopper kernels for sm_90a (no GPU needed): stages {2..6} x prefetch x
register pairs {(40,232), (64,168), (24,240)} x roles {2-role cooperative, 2-role ping-pong, 3-role}
x layouts. Every kernel must compile through heddle's runtime (crash-isolated: NVRTC 13's ptxas has
crashed on constant wgmma descriptors) with no spills, setmaxnreg honoured (a register cap at entry),
no serialised wgmma pipeline (ptxas C7515 / C7519), and its PTX must contain wgmma.mma_async and
cp.async.bulk.tensor (and elect.sync, its single-thread issue). The CI set covers every stage count, register pair, role kind and layout; the
full product runs with `-m slow` (or HEDDLE_SLOW=1; slow sweeps are skipped otherwise, tests/conftest.py)."""

import pytest

from support.env import requires_nvrtc, rt
from support.wgmma_defs import REG_PAIRS, build

pytestmark = requires_nvrtc

LAYOUTS = ["NN", "NT", "TN", "TT"]
ROLE_KINDS = ["coop", "pingpong", "3role"]
TILES = {"coop": dict(bm=128, bn=128, bk=64), "pingpong": dict(bm=128, bn=128, bk=64),
         "3role": dict(bm=64, bn=128, bk=64), "pipeline": dict(bm=128, bn=128, bk=64),
         "block_sync": dict(bm=64, bn=128, bk=64)}


def kernel(variant, s, p, regs, layout, dtype="bf16"):
    kw = dict(TILES[variant])
    if variant == "pingpong" and regs[1] < 200:  # 128 accumulators per thread need a larger budget
        kw["bm"] = 64
    if variant == "pipeline":  # two warpgroups split the tile
        fd = build_pipeline2(s, p, layout, dtype)
    else:
        fd = build(variant, stages=s, prefetch=p, layout=layout, dtype=dtype, regs=regs, n=1024, k=4096, **kw)
    return fd.lower("sm_90a")


def build_pipeline2(s, p, layout, dtype):
    from support.wgmma_defs import schedule_sm90
    from support.matmul_defs import matmul_fusion
    fd, a, b = matmul_fusion(n=1024, k=4096, dtype=dtype, layout=layout)
    schedule_sm90(fd, a, b, bm=128, bn=128, bk=64, wgs=2, stages=s, prefetch=p)
    return fd


def check(low):
    r = rt.compile(low.source, low.name, "sm_90a", isolate=True)
    st = r.stats
    assert st.spill_stores == 0 and st.spill_loads == 0 and st.stack_frame == 0, (low.name, r.ptxas)
    assert not st.setmaxnreg_ignored, (low.name, r.ptxas)
    assert "C7515" not in r.ptxas and "C7519" not in r.ptxas, (low.name, r.ptxas)  # wgmma not serialised
    assert "wgmma.mma_async.sync.aligned" in r.ptx and "cp.async.bulk.tensor" in r.ptx
    assert "mbarrier.try_wait.parity" in r.ptx
    assert "elect.sync" in r.ptx  # single-thread issue elected (tests/lower/test_elect_sync.py)
    return r


# every stage count, register pair, role kind and layout at least once (and both dtypes)
CI = [
    ("coop", 2, 1, (40, 232), "NN"), ("coop", 4, 2, (64, 168), "TT"), ("coop", 6, 5, (24, 240), "NT"),
    ("coop", 5, 0, (40, 232), "TN"),
    ("pingpong", 3, 2, (40, 232), "NT"), ("pingpong", 4, 1, (24, 240), "NN"), ("pingpong", 6, 3, (64, 168), "TN"),
    ("3role", 2, 0, (64, 168), "TN"), ("3role", 3, 1, (24, 240), "TT"), ("3role", 5, 3, (40, 232), "NN"),
    ("pipeline", 4, 3, None, "NN"), ("pipeline", 3, 0, None, "TT"),
    ("block_sync", 4, 2, None, "NT"), ("block_sync", 2, 1, None, "TN"),
]


@pytest.mark.parametrize("variant,s,p,regs,layout", CI)
def test_hopper_kernel_compiles_clean(variant, s, p, regs, layout):
    low = kernel(variant, s, p, regs or (40, 232), layout)
    r = check(low)
    if variant in ROLE_KINDS:
        assert "setmaxnreg.inc.sync.aligned.u32" in r.ptx or "setmaxnreg.dec.sync.aligned.u32" in r.ptx
        assert low.threads == 384


def test_f16_and_ragged_epilogue_operands_compile():
    fd = build("coop", stages=4, prefetch=2, dtype="f16", bm=128, bn=256, bk=64, n=1000, k=4096)
    check(fd.lower("sm_90a"))


def test_batched_pipeline_compiles():
    fd = build("pipeline", stages=4, prefetch=3, bm=64, bn=128, bk=64, batched=True, k=512)
    r = check(fd.lower("sm_90a"))
    assert "cp.async.bulk.tensor.3d" in r.ptx


def test_auto_schedule_compiles():
    from support.matmul_defs import matmul_fusion
    for m in (-1, 48):
        fd, a, b = matmul_fusion(n=4096, k=4096, dtype="bf16")
        fd.auto_schedule("sm_90a", m, 4096, 4096)
        low = fd.lower("sm_90a")
        check(low)
        # bias + GELU: ping-pong MMA warpgroups, except for decode-sized M (one 64-row tile per n column)
        assert low.tensor_maps and (("_ws2coop" if m == 48 else "_ws2pp") in low.name), low.name


SWEEP = [(v, s, p, regs, lay) for v in ROLE_KINDS for s in range(2, 7) for p in range(s)
         for regs in REG_PAIRS for lay in LAYOUTS]


@pytest.mark.slow
@pytest.mark.parametrize("variant,s,p,regs,layout", SWEEP)
def test_hopper_sweep(variant, s, p, regs, layout):
    check(kernel(variant, s, p, regs, layout))
