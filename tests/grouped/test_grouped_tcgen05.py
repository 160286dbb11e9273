"""The sm_100a TMA + tcgen05 grouped kernel (issue 33 point 2, docs/grouped.md "sm_100a"): the schedule that
picks it and its refusals, the lowered kernel (one tile per CTA found by the device walk before any mbarrier
init or tensor-memory allocation, B's 3-D tensor map stepped by the expert, stores bounded by the group's
end), explain(), its printed source pinned, NVRTC for sm_100a without spills, the interpreter's numbers on
ragged group ends against float64 and the walk's source mutants caught."""
import hashlib
import re

import pytest
import torch

import heddle
from heddle.interpret import interpret, mutation_kill_rate
from support.env import requires_nvrtc, rt
from support.grouped_defs import (RAGGED_128, grouped_fusion, grouped_inputs, reference, scheduled_tcgen05,
                                  small_grouped_mm_case)
from support.interp_defs import kernel, needs_cxx

SM100 = "sm_100a"


def _lowered(**kw):
    return scheduled_tcgen05(n=72, k=48, **kw).lower(SM100)


# ---- schedule ---------------------------------------------------------------------------------------------

def test_auto_schedule_picks_the_tcgen05_kernel_on_sm100():
    fd, _, _ = grouped_fusion(n=4096, k=4096)
    fd.auto_schedule(SM100, -1, 4096, 4096)
    low = fd.lower(SM100)
    assert low.tile["mma"] == "tcgen05" and low.tile["grouped"]
    assert "_grouped" in low.name and "_ws3tc_a1" in low.name  # one accumulator stage: one tile per CTA
    maps = {m["operand"]: m for m in low.tensor_maps}
    assert not maps["A"]["batched"] and maps["B"]["batched"]  # A [T, K] 2-D at the absolute row; B over experts


def test_cp_async_caches_keep_the_mma_sync_kernel_reachable():
    fd, x, w = grouped_fusion(n=72, k=96)
    fd.cache_after(x, "cp_async")
    fd.cache_after(w, "cp_async")
    fd.auto_schedule(SM100, -1, 72, 96)
    low = fd.lower(SM100)
    assert low.tile["mma"] == "mma.sync" and low.tile["grouped"] and not low.tensor_maps
    fd, _, _ = grouped_fusion(n=72, k=96)
    fd.auto_schedule(SM100, -1, 72, 96, tma=False)  # operands TMA cannot take: the cp.async kernel
    assert fd.lower(SM100).tile["mma"] == "mma.sync"


def _refused(edit, needle):
    fd = scheduled_tcgen05(n=72, k=48)
    edit(fd)
    with pytest.raises(heddle.ScheduleError, match=needle):
        fd.lower(SM100)


@pytest.mark.parametrize("edit,needle", [
    # (split-K and stream-K are refused on sm_100a before the grouped rule: no grid flags there; either names it)
    (lambda fd: fd.matmul_tensor.split_k(2), "split_k.*drop (it|split_k)"),
    (lambda fd: fd.matmul_tensor.stream_k(3), "stream_k.*drop"),
    (lambda fd: fd.matmul_tensor.cluster(2, "m"), re.escape("cluster(2) is not supported by the grouped tile walk")),
    (lambda fd: fd.matmul_tensor.epilogue_store("tma"), re.escape("epilogue_store(") + ".*'tma'.*drop epilogue_store"),
    (lambda fd: fd.cache_after(next(t for t in fd.inputs if t.name == "bias"), "tma_load").circular_buffer(2),
     re.escape("cache_after(bias, 'tma_load'): the grouped sm_100a tcgen05 kernel reads its epilogue operands")),
], ids=["split_k", "stream_k", "cluster", "tma_store", "bias_tma_ring"])
def test_schedule_refuses_what_the_grouped_tcgen05_kernel_does_not_build(edit, needle):
    _refused(edit, needle)


# ---- lowering and printing ----------------------------------------------------------------------------------

def test_kernel_is_one_tile_per_cta_over_the_walks_grid():
    low = _lowered()
    params = {name: kind for name, kind, _, _ in low.params}
    assert params["offs"] == "ptr" and params["tokens"] == "i32" and params["E"] == "i32"
    assert "M" not in params and "num_ctas" not in params  # not persistent: the grid is the walk's bound
    # ceil(N / 64) = 2 n tiles; ceil(T / 128) + E m-tile CTAs (sum_e ceil(rows_e / 128) <= T / 128 + E)
    assert tuple(low.grid({"tokens": 390, "E": 7, "N": 72, "K": 48})[:2]) == (2, 4 + 7)


def test_surplus_ctas_exit_before_any_init_or_tensor_memory_allocation():
    src = _lowered().source
    exit_at = src.index("if (g_e < 0) return;")
    for op in ("mbar_init", "heddle::sm100::tmem_alloc(", "heddle::block_sync()"):
        assert op in src and src.index(op) > exit_at, op
    # after the walk no path leaves early: the one alloc is paired with the one dealloc (PTX ISA 9.7.16.7.1)
    assert src.count("heddle::sm100::tmem_alloc(") == 1 and src.count("heddle::sm100::tmem_dealloc(") == 1
    assert "return" not in src[exit_at + len("if (g_e < 0) return;"):]


def test_loads_use_the_absolute_row_and_the_experts_map_and_stores_stop_at_the_groups_end():
    src = _lowered().source
    for line in ("const int end = offs[e];",
                 "const int tiles = end > start ? (end - start + 128 - 1) / 128 : 0;",
                 "const int M = g_end;",
                 "const int batch_idx = g_e;",
                 "if (row >= M || col >= N) continue;"):
        assert line in src, line
    assert re.search(r"tma_load_tile<Mma::TileB, 3>\([^;]*&tmB, [^;]*, batch_idx, ", src)  # w[e] by its map
    assert re.search(r"tma_load_tile<Mma::TileA, 2>\([^;]*&tmA, [^;]*, 0, ", src)  # x at the absolute row m0
    assert "B += " not in src and "num_ctas" not in src and "blockIdx.z" not in src


def test_explain_says_the_walks_reads_need_no_sync():
    text = heddle.Kernel.build(scheduled_tcgen05(n=72, k=48), SM100, rtc=False).explain()
    assert "grouped tile walk: every thread reads the group ends offs[0..E) with plain global loads" in text
    assert "no sync orders these reads" in text
    assert "grouped: one tile per CTA, found by the walk over offs before any init or alloc" in text


# The printed source of the grouped tcgen05 kernel, pinned here (not in tests/data/printed_sources.json): a
# change meant to alter it updates this digest on purpose.
PINNED = {
    "nn-bf16-bias-gelu": (dict(), "8ab41e64506f8dcd26e440bd520e8e1ff73db997c544e1a93100ea2ab6a98864"),
    "nt-f16-silu": (dict(trans_b=True, dtype="f16", epilogue="silu", out="f16", stages=3),
                    "0bb45455df0bffaf0cc902b1cd72688b513e6f0bc9caa8684ebf851230f5923e"),
}


@pytest.mark.parametrize("case", list(PINNED))
def test_printed_source_is_pinned(case):
    kw, digest = PINNED[case]
    src = scheduled_tcgen05(n=72, k=48, **kw).lower(SM100).source
    assert hashlib.sha256(src.encode()).hexdigest() == digest


@requires_nvrtc
@pytest.mark.parametrize("kw", [dict(), dict(trans_b=True, dtype="f16", epilogue="silu")],
                         ids=["nn-bf16-bias-gelu", "nt-f16-silu"])
def test_compiles_for_sm100a_without_spills(kw):
    fd, _, _ = grouped_fusion(n=4096, k=4096, **kw)
    fd.auto_schedule(SM100, -1, 4096, 4096)
    low = fd.lower(SM100)
    r = rt.compile(low.source, low.name, SM100, isolate=True)
    st = r.stats
    assert st.spill_stores == 0 and st.spill_loads == 0 and st.stack_frame == 0, (low.name, r.ptxas)
    for op in ("tcgen05.mma.cta_group::1.kind::f16", "tcgen05.alloc.cta_group::1", "tcgen05.dealloc.cta_group::1",
               "cp.async.bulk.tensor.3d", "cp.async.bulk.tensor.2d"):
        assert op in r.ptx, op


# ---- the interpreter ----------------------------------------------------------------------------------------

@needs_cxx
@pytest.mark.parametrize("pattern", list(RAGGED_128))
def test_ragged_groups_match_float64(pattern):
    ends = RAGGED_128[pattern]
    fd = scheduled_tcgen05(n=72, k=48)
    k = kernel(fd, SM100)
    x, w, bias, offs = grouped_inputs(fd, ends, seed=3)
    ref = reference(x, w, offs, bias=bias, activation="gelu")
    r = interpret(k, x, w, bias, offs, reference=ref.to(torch.bfloat16))
    assert r.ok, r.report()
    assert r.ctas == 2 * (-(-ends[-1] // 128) + len(ends))  # every CTA of the bound ran (surplus ones exit)
    if pattern == "mixed":  # the check can fail: the experts' weights rolled by one mismatch
        wrong = reference(x, w.roll(1, 0), offs, bias=bias, activation="gelu")
        assert not interpret(k, x, w, bias, offs, reference=wrong.to(torch.bfloat16)).ok



@needs_cxx
def test_transposed_weights_f16_silu_and_a_wrong_expert_would_show():
    fd = scheduled_tcgen05(n=72, k=48, trans_b=True, dtype="f16", epilogue="silu", out="f16", stages=3)
    k = kernel(fd, SM100)
    x, w, offs = grouped_inputs(fd, RAGGED_128["mixed"], seed=4)
    ref = reference(x, w, offs, trans_b=True, activation="silu")
    r = interpret(k, x, w, offs, reference=ref.to(torch.float16), schedule="random", seed=5)
    assert r.ok, r.report()
    wrong = reference(x, w.roll(1, 0), offs, trans_b=True, activation="silu")
    r = interpret(k, x, w, offs, reference=wrong.to(torch.float16))
    assert not r.ok and r.mismatches


@needs_cxx
@pytest.mark.parametrize("kinds", [("group_walk_bound",), ("group_walk_offset",)])
def test_group_walk_mutants_are_caught(kinds):
    fd = scheduled_tcgen05(n=72, k=48)
    k = kernel(fd, SM100)
    ins = grouped_inputs(fd, RAGGED_128["mixed"], seed=6)
    res = mutation_kill_rate(k, *ins, kinds=kinds, schedules=(("adversarial", 0),))
    assert res["total"] == 3 and not res["survivors"], res["survivors"]


@needs_cxx
def test_grouped_mm_runs_the_tcgen05_kernel_under_interpret(monkeypatch):
    import heddle.core.interpret as interp_mod
    ran = []
    real = interp_mod.run_checked
    monkeypatch.setattr(interp_mod, "run_checked", lambda k, ts: ran.append(k.lowered.tile["mma"]) or real(k, ts))
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    monkeypatch.setenv("HEDDLE_INTERPRET_TARGET", SM100)
    x, w_nk, bias, offs, ref = small_grouped_mm_case()  # w_nk [E, N, K], passed as [E, K, N] view
    y = heddle.grouped_mm(x, w_nk.transpose(-1, -2), offs, bias=bias, activation="silu", out_dtype=torch.float32)
    assert ran == ["tcgen05"]
    assert y.dtype == torch.float32 and y.shape == (100, 48)
    assert torch.allclose(y.double(), ref, atol=2e-2, rtol=2e-2)
