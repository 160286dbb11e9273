"""Lowering structure: the pass list, circular-buffer cloning and the exact sync placement of the
cp.async pipeline (docs/sync-cases.md cases 2, 5, 6), for every stage count and prefetch."""
import pytest

import heddle
from support.matmul_defs import loops, matmul_fusion, schedule, syncs_in, walk

CASES = [(s, p) for s in (2, 3, 4, 5) for p in range(-s, s)]


def lower(stages, prefetch, kind="cp_async", **kw):
    fd, a, b = matmul_fusion(**kw)
    schedule(fd, a, b, stages=stages, prefetch=prefetch, kind=kind)
    return fd.lower("sm_80")


def test_pass_list_order():
    assert heddle.pass_names() == ["validate_schedule", "build_matmul_loops", "build_epilogue", "split_k",
                                   "stream_k", "block_scale_ring", "mx_scale_ring", "warp_specialize", "block_scale_promotion", "tma_store_epilogue",
                                   "vectorize_epilogue_reads", "stream_k_roles",
                                   "cluster_multicast",
                                   "tcgen05_specialize",
                                   "circular_buffer", "tma_pipeline", "fence_mbarrier_init", "plan_smem", "insert_syncs",
                                   "reduce_splits",
                                   "stream_k_fixup", "check_uniformity", "drop_unused_lets"]


@pytest.mark.parametrize("stages,prefetch", CASES)
def test_circular_buffer_structure(stages, prefetch):
    p = prefetch + stages if prefetch < 0 else prefetch
    lowered = lower(stages, prefetch)
    ls = loops(lowered)
    kinds = [l["stage"] for l in ls]
    if p == 0:
        assert kinds == ["main"]  # no prologue / epilogue
        assert ls[0]["start"] == "0" and ls[0]["stop"] == "heddle_ceil_div(K, 32)"
    else:
        assert kinds == ["prologue", "main", "epilogue"]
        pro, main, epi = ls
        assert (pro["start"], pro["stop"]) == ("0", str(p))
        assert (main["start"], main["stop"]) == ("0", f"heddle_ceil_div(K, 32) - {p}")
        assert (epi["start"], epi["stop"]) == (f"heddle_max(heddle_ceil_div(K, 32) - {p}, 0)", "heddle_ceil_div(K, 32)")
        # prologue issues p stages (loads past the end predicated), each committed; the epilogue only computes
        assert [n["kind"] for n in pro["body"]] == ["if", "sync"]
        assert [n["kind"] for n in pro["body"][0]["then"]] == ["load", "load"]
        assert [n["kind"] for n in epi["body"]] == ["mma"]
    main = next(l for l in ls if l["stage"] == "main")
    loads = [n for n in main["body"] if n["kind"] == "load"]
    mma = next(n for n in main["body"] if n["kind"] == "mma")
    # modulo stage indexing: loads run p iterations ahead of the mma
    want_load = f"(kt + {p}) % {stages}" if p else f"kt % {stages}"
    assert all(l["stage"] == want_load for l in loads)
    assert mma["stage"] == f"kt % {stages}"


@pytest.mark.parametrize("stages,prefetch", CASES)
def test_cp_async_sync_placement(stages, prefetch):
    """Exact waits and barriers (docs/sync-cases.md cases 5, 6); docs/sync-plan.md explains each layout."""
    p = prefetch + stages if prefetch < 0 else prefetch
    lowered = lower(stages, prefetch)
    top = lowered.structure
    ls = loops(lowered)
    main = next(l for l in ls if l["stage"] == "main")
    body = [n["kind"] if n["kind"] != "sync" else (n["sync"], n["arg"]) for n in main["body"]]
    commit = ("cp.async.commit_group", 0)
    if p == 0:
        # wait right after the commit, one barrier serves RAW and WAR; nothing outside the loop
        assert body == ["load", "load", commit, ("cp.async.wait_group", 0), ("block_sync", 0), "mma"]
        assert syncs_in(top) == []
    elif p == stages - 1:
        # nvFuser's layout: wait(p-1) + barrier before the loop and at the end of each iteration
        assert body == ["load", "load", commit, "mma", ("cp.async.wait_group", p - 1), ("block_sync", 0)]
        i_main = next(i for i, n in enumerate(top) if n.get("stage") == "main")
        assert syncs_in(top[:i_main]) == [("cp.async.wait_group", p - 1), ("block_sync", 0)]
    else:
        # slack in the ring: the barrier after the issue serves both hazards, wait(p) keeps p in flight
        assert body == ["load", "load", commit, ("cp.async.wait_group", p), ("block_sync", 0), "mma"]
        i_main = next(i for i, n in enumerate(top) if n.get("stage") == "main")
        assert syncs_in(top[:i_main]) == []
    steady_wait = p - 1 if p == stages - 1 else p
    if steady_wait > 0:
        # drain after the main loop: the epilogue reads the last p stages, which the steady-state
        # wait leaves in flight (with a steady wait of 0 the last iteration already drained)
        i_main = next(i for i, n in enumerate(top) if n.get("stage") == "main")
        i_epi = next(i for i, n in enumerate(top) if n.get("stage") == "epilogue")
        assert syncs_in(top[i_main + 1:i_epi]) == [("cp.async.wait_group", 0), ("block_sync", 0)]
    assert lowered.barriers_per_main_iteration == 1
    # no sync inside the prologue or the epilogue
    for l in ls:
        if l["stage"] in ("prologue", "epilogue"):
            assert syncs_in(l["body"]) == []


def test_every_sync_has_a_reason():
    lowered = lower(4, 3)
    for n in walk(lowered.structure):
        if n["kind"] == "sync" and n["sync"] != "cp.async.commit_group":
            assert n["reason"] >= 0
    text = lowered.explain()
    assert "RAW sA" in text and "WAR sA" in text and "cp.async.wait_group(2)" in text
    assert sum(line.split()[1:2] == ["block_sync"] for line in text.splitlines() if line.startswith("[")) == 3


def test_unbuffered_loop_needs_two_barriers():
    lowered = lower(1, 0)
    (loop,) = loops(lowered)
    body = [n["kind"] if n["kind"] != "sync" else (n["sync"], n["arg"]) for n in loop["body"]]
    assert body == ["load", "load", ("cp.async.commit_group", 0), ("cp.async.wait_group", 0), ("block_sync", 0),
                    "mma", ("block_sync", 0)]
    assert lowered.barriers_per_main_iteration == 2


def test_plain_loads_have_barriers_but_no_waits():
    lowered = lower(3, 2, kind="plain")
    assert lowered.count_syncs("cp.async.wait_group") == 0
    assert lowered.count_syncs("cp.async.commit_group") == 0
    assert lowered.barriers_per_main_iteration == 1


def test_trip_count_below_stages_launches():
    lowered = lower(4, 3)
    for K in (1, 32, 96, 128):  # 1, 1, 3, 4 k-tiles: no refusal (tests/lower/test_short_trips.py runs them)
        lowered.check_launch({"M": 64, "N": 64, "K": K, "batch": 1})
    pro, main, epi = loops(lowered)
    assert epi["start"] == "heddle_max(heddle_ceil_div(K, 32) - 3, 0)" and main["stop"] == "heddle_ceil_div(K, 32) - 3"
    guard = [n for n in pro["body"] if n["kind"] == "if"]
    assert len(guard) == 1 and guard[0]["cond"] == "kt < heddle_ceil_div(K, 32)"
    assert [n["kind"] for n in guard[0]["then"]] == ["load", "load"]
    assert [n.get("sync") for n in pro["body"]] == [None, "cp.async.commit_group"]  # outside the if: p groups


def test_per_pass_dump_and_timing():
    fd, a, b = matmul_fusion()
    schedule(fd, a, b)
    lowered = fd.lower("sm_80", dump_passes=True)
    names = [p[0] for p in lowered.passes]
    assert names == heddle.pass_names()
    by = {p[0]: p for p in lowered.passes}
    assert by["validate_schedule"][3] == "(unchanged)\n"
    assert "prologue" in by["circular_buffer"][3]
    assert "block_sync" in by["insert_syncs"][3]
    assert all(p[1] >= 0 for p in lowered.passes)


WHEN = {"split_k": "split-K schedules", "insert_syncs": "kernels whose syncs no builder placed",
        "warp_specialize": "role-pipeline kernels with wgmma", "check_uniformity": "always"}


@pytest.mark.parametrize("split", [1, 2])
def test_pass_dump_says_which_passes_ran_and_when(split):
    """Every pass is listed, ran or skipped, with its `when` text; a skipped pass left the IR as it was (the
    IR is compared before and after it, not assumed), took no time, and the dump says why it was skipped."""
    fd, a, b = matmul_fusion()
    mm = schedule(fd, a, b)
    if split > 1:
        mm.split_k(split)
    lowered = fd.lower("sm_80", dump_passes=True)
    recs = lowered.passes
    assert [r[0] for r in recs] == heddle.pass_names()
    by = {r[0]: r for r in recs}
    for name, ms, changed, ir, ran, when in recs:
        assert when and (ran or (not changed and ir == "(unchanged)\n" and ms == 0)), name
    for name, text in WHEN.items():
        assert by[name][5].startswith(text), (name, by[name][5])
    did = {r[0] for r in recs if r[4]}
    assert {"validate_schedule", "build_matmul_loops", "circular_buffer", "insert_syncs", "check_uniformity"} <= did
    assert ("split_k" in did) == ("reduce_splits" in did) == (split > 1)
    assert not did & {"stream_k", "warp_specialize", "tcgen05_specialize", "tma_pipeline", "stream_k_fixup"}
    if split > 1:
        assert "_sk2" in by["split_k"][3] and by["split_k"][2]
    heads = [line for line in lowered.pass_dump.splitlines() if line.startswith("--- ")]
    assert len(heads) == len(recs)
    for line, (name, _, _, _, ran, when) in zip(heads, recs):
        if ran:
            assert line.startswith(f"--- after {name} (") and line.endswith(f" ms; runs when: {when})"), line
        else:
            assert line == f"--- skipped {name} (runs when: {when})"


def test_smem_plan_alignment_and_sizes():
    lowered = lower(4, 3)
    plan = {s["buffer"]: s for s in lowered.smem_plan}
    assert plan["sA"]["bytes"] == 4 * 128 * 32 * 2 and plan["sB"]["bytes"] == 4 * 32 * 128 * 2
    assert all(s["offset"] % 128 == 0 for s in plan.values())
    assert lowered.smem_bytes == 65536


def test_layouts_change_tile_storage():
    for layout, want in {"NN": ("128x32", "32x128"), "TT": ("32x128", "128x32")}.items():
        fd, a, b = matmul_fusion(layout=layout)
        schedule(fd, a, b)
        ir = fd.lower("sm_80").kernel_ir
        assert f"sA: shared f16[4][{want[0].replace('x', '][')}]" in ir
        assert f"sB: shared f16[4][{want[1].replace('x', '][')}]" in ir


def test_kernel_name_includes_the_epilogue():
    # two epilogues on one tile never share a kernel name (issue 14)
    names = {}
    for epi in ("bias_gelu", "silu_scale", None):
        fd, a, b = matmul_fusion(epilogue=epi)
        schedule(fd, a, b, stages=3, prefetch=2)
        names[epi] = fd.lower("sm_80").name
    assert names["bias_gelu"].endswith("_e_add_gelu_f16")
    assert names["silu_scale"].endswith("_e_mul_silu_f16")
    assert names[None].endswith("_e_f16")
    assert len({n.rsplit("_e_", 1)[0] for n in names.values()}) == 1  # the same tile otherwise
