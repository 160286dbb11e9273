"""The mbarrier-init fence (issue 28, item 3): every kernel family whose mbarriers the async proxy completes
(TMA complete_tx, tcgen05.commit) fences its inits with fence.mbarrier_init.release.cluster in the
initializing thread, before the barrier that publishes them (passes/fence_mbarrier_init.cpp; CUTLASS's
fence_barrier_init, DeepGEMM). The interpreter of the printed source and the kernel-IR simulator require
the fence before the first async-proxy use of each barrier: deleting it is a caught mutant."""
import re

import pytest

import heddle
from support.tcgen05_defs import build as build_sm100
from support.tcgen05_defs import build_epi as build_sm100_epi
from support.wgmma_defs import build, inputs
from support.interp_defs import needs_cxx

FENCE = "heddle::sm90::fence_mbarrier_init_cluster();"


def _stream_k():
    fd = build("coop", stages=4, prefetch=-1, bn=64, bk=16, n=72, k=16 * 13)
    fd.matmul_tensor.stream_k(3)
    return fd


def _cluster():
    fd = build("coop", stages=3, prefetch=1, n=72, bn=64)
    fd.matmul_tensor.cluster(2, "m")
    return fd


# every family that initializes mbarriers, and its target
FAMILIES = {
    "pipeline": (lambda: build("pipeline", stages=3, prefetch=1), "sm_90a"),
    "block_sync": (lambda: build("block_sync", stages=4, prefetch=1), "sm_90a"),
    "coop": (lambda: build("coop", stages=3, prefetch=1), "sm_90a"),
    "pingpong": (lambda: build("pingpong", stages=3, prefetch=1), "sm_90a"),
    "3role": (lambda: build("3role", stages=2, prefetch=0), "sm_90a"),
    "coop_tma_store": (lambda: build("coop", stages=3, prefetch=1, store="tma"), "sm_90a"),
    "pingpong_tma_store": (lambda: build("pingpong", stages=3, prefetch=1, store="tma"), "sm_90a"),
    "bias_tma": (lambda: build("coop", stages=3, prefetch=1, bias_tma=2), "sm_90a"),
    "batched": (lambda: build("coop", stages=3, prefetch=1, batched=True), "sm_90a"),
    "stream_k": (_stream_k, "sm_90a"),
    "cluster": (_cluster, "sm_90a"),
    "tcgen05": (lambda: build_sm100(stages=3, bn=64, bk=16, n=72, k=104), "sm_100a"),
    "tcgen05_bias_tma": (lambda: build_sm100_epi(), "sm_100a"),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_fences_its_inits_before_publishing_them(family):
    make, target = FAMILIES[family]
    src = make().lower(target).source
    lines = src.splitlines()
    assert src.count(FENCE) == 1, family
    fence = next(i for i, l in enumerate(lines) if FENCE in l)
    inits = [i for i, l in enumerate(lines) if "heddle::sm90::mbar_init(" in l]
    publish = next(i for i, l in enumerate(lines) if i > fence and re.search(r"block_sync\(\)|cluster_sync\(\)", l))
    assert inits and max(inits) < fence < publish, family
    # the fence sits in the initializing thread's block: nothing but inits between the first init and it
    assert all("mbar_init(" in lines[i] for i in range(min(inits), fence)), family


def test_plan_explains_the_fence():
    text = build("coop", stages=3, prefetch=1).lower("sm_90a").explain()
    assert "fence.mbarrier_init.release.cluster by the initializing thread" in text
    assert "async proxy" in text


def test_kernels_without_mbarriers_get_no_fence():
    from support.interp_defs import sm80
    assert "fence_mbarrier_init" not in sm80().lower("sm_80").source


@pytest.mark.parametrize("family", ["pipeline", "coop", "3role"])
def test_simulator_reports_the_deleted_fence(family):
    from heddle import verify
    fd = FAMILIES[family][0]()
    low = fd.lower("sm_90a")
    ms = [m for m in verify.mutants(low) if m.description.startswith("delete fence.mbarrier_init")]
    assert len(ms) == 1, [m.description for m in verify.mutants(low)]
    r = verify.simulate(ms[0].kernel(), inputs(fd, 77, seed=1), "adversarial", 0)
    assert any("not followed by fence.mbarrier_init" in x for x in r.async_misuse), r.report()


def _interpret_without_fence(fd, target, M=77):
    from heddle.core.interpret import _Mutated, source_mutants
    from heddle.interpret import interpret
    k = heddle.Kernel.build(fd, target, rtc=False)
    ms = [m for m in source_mutants(k.lowered.source) if m.kind == "delete_sync" and "fence_mbarrier_init" in m.what]
    assert len(ms) == 1, [m.what for m in source_mutants(k.lowered.source)]
    args = inputs(fd, M, seed=1)
    assert interpret(k, *args, sms=1).ok
    return interpret(_Mutated(k, ms[0].source), *args, sms=1)


@needs_cxx
@pytest.mark.parametrize("family", ["pipeline", "coop", "pingpong", "3role", "bias_tma"])
def test_interpreter_reports_the_deleted_fence(family):
    r = _interpret_without_fence(FAMILIES[family][0](), "sm_90a")
    assert any("is not followed by fence.mbarrier_init" in x for x in r.async_misuse), r.report()


@needs_cxx
def test_interpreter_reports_the_deleted_fence_tcgen05():
    fd = FAMILIES["tcgen05"][0]()
    r = _interpret_without_fence(fd, "sm_100a", M=130)
    assert any("is not followed by fence.mbarrier_init" in x for x in r.async_misuse), r.report()


@pytest.mark.nvrtc
@pytest.mark.parametrize("family", ["pipeline", "coop", "pingpong", "3role", "tcgen05"])
def test_nvrtc_keeps_the_fence_without_spills(family):
    from support.env import rt
    make, target = FAMILIES[family]
    low = make().lower(target)
    r = rt.compile(low.source, low.name, target, isolate=True)
    st = r.stats
    assert st.spill_stores == 0 and st.spill_loads == 0 and not st.setmaxnreg_ignored, r.ptxas
    assert r.ptx.count("fence.mbarrier_init.release.cluster") == 1, low.name
