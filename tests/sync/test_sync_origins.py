"""Every sync of every kernel family names its origin: the pass that placed it (stamped by the pass manager,
lower/lower.cpp) and the builder inside it (src/heddle/sync/origin.cpp, plan.h). explain() prints it as
"placed by: <pass> / <builder>" under every sync; the sync plan carries it as "origin"."""
import re

import pytest

from heddle import _C
from test_printed_sources import cases

PASSES = {"split_k", "stream_k", "warp_specialize", "block_scale_promotion", "tma_store_epilogue", "stream_k_roles",
          "cluster_multicast",
          "tcgen05_specialize", "tma_pipeline", "fence_mbarrier_init", "insert_syncs", "reduce_splits",
          "stream_k_fixup"}


def _one_per_family():
    """The first case of every family, on each target it has (cp.async, split-K, stream-K, the sm_90a pipeline,
    cooperative, ping-pong, cluster, the AMD and tcgen05 families...)."""
    seen, out = set(), []
    for name, target, make in cases():
        fam = name.split(".")[0] + ("." + name.split(".")[1] if name.startswith(("amd.", "tcgen05.")) else "")
        if (fam, target) not in seen:
            seen.add((fam, target))
            out.append((name, target, make))
    return out


CASES = _one_per_family()


def _origin_ok(origin):
    pass_, _, builder = origin.partition(" / ")
    return pass_ in PASSES and builder not in ("", "?")


@pytest.mark.parametrize("name,target,make", CASES, ids=[c[0] for c in CASES])
def test_every_sync_names_its_origin(name, target, make):
    low = make(target).lower(target)
    plan = low.sync_plan
    assert plan, name
    bad = [e for e in plan if not _origin_ok(e["origin"])]
    assert not bad, (name, bad[:3])
    text = low.explain()
    syncs = re.findall(r"^\[\d+\] ", text, re.M)
    placed = re.findall(r"^    placed by: (.*)$", text, re.M)
    assert len(syncs) == len(placed) > 0, name
    assert all(_origin_ok(p) for p in placed), (name, placed)


def test_the_families_are_all_there():
    names = {c[0].split(".")[0] for c in CASES}
    for fam in ("cp_async", "cp_async_split_k", "cp_async_stream_k", "sm90_pipeline", "sm90_coop", "sm90_pingpong",
                "sm90_cluster", "sm90_split_k", "sm90_stream_k", "amd", "tcgen05"):
        assert fam in names, fam


def _origins(low):
    return {e["origin"] for e in low.sync_plan}


def test_planner_and_ring_origins_name_pass_and_builder():
    by = {c[0]: c for c in CASES}
    cp = next(c for n, c in by.items() if n.startswith("cp_async.") and c[1] == "sm_80")
    assert _origins(cp[2](cp[1]).lower(cp[1])) == {"insert_syncs / hazard planner"}
    ws = next(c for n, c in by.items() if n.startswith("sm90_coop."))
    assert "warp_specialize / mbarrier ring" in _origins(ws[2](ws[1]).lower(ws[1]))
    sk = next(c for n, c in by.items() if n.startswith("cp_async_split_k.") and c[1] == "sm_80")
    got = _origins(sk[2](sk[1]).lower(sk[1]))
    assert "insert_syncs / hazard planner" in got and any(o.startswith("reduce_splits / ") for o in got), got


def test_split_barriers_and_the_pass_dump_name_the_origin():
    amd = next(c for c in CASES if c[1] == "gfx1200")
    low = amd[2](amd[1]).lower(amd[1], dump_passes=True)
    assert "insert_syncs / hazard planner + split barriers" in _origins(low)
    assert "(placed by insert_syncs / hazard planner" in str(low.kernel_ir)


def test_sync_lab_stamps_its_own_pass():
    lab = _C.sync_lab([("loop", "i", 0, "N", "serial", [("write", "X", "i % 2", "copy"),
                                                         ("read", "X", "i % 2", "mma")])], 2)
    assert lab.sync_plan and {e["origin"] for e in lab.sync_plan} == {"sync_lab / hazard planner"}


def test_named_barrier_roles_name_the_pass_and_the_protocol():
    """The AMD named-barrier protocol of a wave split (lower/build/named_barrier_roles.cpp, run by sync_lab)
    places every op with a reason: explain() names it under each one."""
    from support.sync_defs import roles
    low = _C.sync_lab(roles(2), 2, target="gfx1250", roles=True)
    ops = [line for line in low.kernel_ir.splitlines() if "s_barrier" in line]
    assert len(low.sync_plan) == len(ops) > 0
    assert {e["origin"] for e in low.sync_plan} == {"named_barrier_roles / split / named barrier objects"}
    text = low.explain()
    assert len(re.findall(r"^\[\d+\] ", text, re.M)) == len(ops)
    assert set(re.findall(r"^    placed by: (.*)$", text, re.M)) == {"named_barrier_roles / split / named barrier objects"}
    hazards = {e["hazards"] for e in low.sync_plan}
    assert {"RAW stage 0 (producer -> consumer)", "WAR stage 1 (consumer -> producer)",
            "barrier init -> every use"} <= hazards
