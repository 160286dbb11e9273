"""The sm_100a tcgen05 kernel's TMA-store epilogue (epilogue_store("tma"); docs/blackwell.md "The TMA-store
epilogue", lower/build/staged_store.h, passes/tcgen05_specialize.cpp, codegen/tcgen05_printer.cpp): the epilogue
warpgroup's thread of tile row lr (tcgen05.ld 32x32b) writes each 128-byte chunk of its row into a 128-byte
swizzled staging slot, fence.proxy.async, bar.sync 1 over the 128 epilogue threads, and thread 128 issues the TMA
store and its bulk group; the slot is rewritten only after that thread's wait_group.read and the barrier, and the
accumulator stage is released after the tile's last chunk of tcgen05.ld, before its store.

The CPU interpreter runs the printed kernels against float64 on ragged shapes (M, N not tile multiples: TMA clips;
one CTA walking six tiles, so the staging slots and the accumulator ring wrap): 16-bit operands with bias + GELU to
bf16, an f32 output, a TMA-loaded residual, 8-bit operands with per-row scales (kind::f8f6f4); mx32 under -m slow.
Source mutants of the new spots are caught: the proxy fence, each bulk wait and each named barrier deleted, the
staging writes unswizzled, the accumulator released before the last chunk's tcgen05.ld."""
import pytest
import torch

import heddle
from heddle.interpret import _Mutated, interpret, source_mutants
from support.interp_defs import kernel, needs_cxx
from support.tcgen05_defs import build_epi, build_fp8, build_tma_store, tma_store_mutants
from support.wgmma_defs import inputs


def _reference(fd, ts):
    """gelu(a @ b + bias) in float64, written out here (not heddle.reference)."""
    x = {t.name: v.double() for t, v in zip(fd.inputs, ts)}
    return torch.nn.functional.gelu(x["a"] @ x["b"] + x["bias"])


def _staged(k, cols, dtype="bf16", sd=2):
    src = k.lowered.source
    tile = f"heddle::sm90::TmaTile<128, {cols}, {'float' if dtype == 'f32' else 'heddle::' + dtype}>"
    assert k.name.endswith(f"_tmas{sd}"), k.name
    assert f"heddle::sm100::stage_16<{tile}>(slot, lr, " in src
    assert f"tma_store_tile<{tile}, 2>(&tmD, m0, n0" in src
    assert "heddle::sm90::named_barrier(1, 128);" in src and "heddle::sm90::fence_proxy_async();" in src
    assert f"bulk_wait_read<{sd - 1}>()" in src and "bulk_wait_read<0>()" in src
    assert "D[(long long)row * ldd + col]" not in src  # no direct store left
    return src


@needs_cxx
def test_bf16_bias_gelu_ragged_through_the_tma_store():
    # M = 300, N = 200: 3 x 2 tiles of 128 x 128 (the last 44 rows / 72 columns clipped by TMA), one CTA walks all
    # six, so the two staging slots (2 chunks of 64 columns a tile) and the two accumulator stages wrap; K = 40
    fd = build_tma_store(stages=2, acc_stages=2, bn=128, bk=16, n=200, k=40)
    k = kernel(fd, "sm_100a")
    src = _staged(k, 64)
    # the accumulator stage is freed after the last chunk's tcgen05.ld, before the chunk's store
    i_rel = src.index("mbar_arrive((accEmpty + ((tl + 1 + 1) % 2)))")
    assert src.rindex("tmem_load_32", 0, i_rel) > src.rindex("epilogue store -> sD[(tl * 2 + 1) % 2]", 0, i_rel)
    assert i_rel < src.rindex("tma_store_tile")
    ts = inputs(fd, 300, seed=2)
    want = _reference(fd, ts)
    for sched, seed in (("adversarial", 0), ("random", 3)):
        r = interpret(k, *ts, schedule=sched, seed=seed, sms=1)
        assert r.ok, r.report()
        err = (r.output.double() - want).abs()
        assert float(err.max()) <= 2e-2 * float(want.abs().max()), float(err.max())  # bf16 output rounding


@needs_cxx
@pytest.mark.parametrize("case", ["f32_out", "residual_tma", "fp8_row"])
def test_other_epilogues_through_the_tma_store(case):
    if case == "f32_out":  # chunks of 32 f32 columns; a 64-wide n tile: two chunks a tile; NT layout
        fd = build_tma_store(stages=3, acc_stages=1, bn=64, bk=32, n=72, k=72, layout="NT", out="f32")
        M, cols, dt = 130, 32, "f32"
    elif case == "residual_tma":  # a TMA-loaded residual ring read in every chunk, released after the last
        fd = build_epi(("bias", "res"), tma="res", e_stages=2, stages=2, acc_stages=2, bn=64, n=72, k=40)
        fd.matmul_tensor.epilogue_store("tma")
        M, cols, dt = 260, 64, "bf16"
    else:  # e4m3 x e5m2 (kind::f8f6f4), per-row scales, bf16 bias + gelu, 8-bit operands' k tile 128
        fd = build_fp8("e4m3", "e5m2", "row", stages=2, acc_stages=2, bn=128, bk=128, n=200, k=208)
        fd.matmul_tensor.epilogue_store("tma")
        M, cols, dt = 300, 64, "bf16"
    k = kernel(fd, "sm_100a")
    _staged(k, cols, dt)
    r = interpret(k, *inputs(fd, M, seed=1), sms=1)
    assert r.ok, f"{k.name}:\n{r.report()}"


@needs_cxx
@pytest.mark.slow
def test_mx32_through_the_tma_store():
    from support.mx_defs import build_mx
    fd = build_mx("e4m3", "e5m2", n=200, k=384, bn=128, stages=2, acc_stages=1)
    fd.matmul_tensor.epilogue_store("tma")
    k = kernel(fd, "sm_100a")
    _staged(k, 64)
    r = interpret(k, *inputs(fd, 100, seed=1), sms=1)
    assert r.ok, f"{k.name}:\n{r.report()}"


@needs_cxx
def test_tma_store_mutants_are_caught():
    # the proxy fence before each chunk's store, each bulk wait and each named barrier deleted; the staging writes
    # unswizzled; the accumulator stage released before the last chunk's tcgen05.ld: each caught on a 2 x 2 tile
    # walk by one CTA (sms 1), the slots and both accumulator stages wrapping
    fd = build_tma_store(stages=2, acc_stages=2, bn=128, bk=16, n=200, k=40)
    k = kernel(fd, "sm_100a")
    ins = inputs(fd, 200, seed=1)
    muts = [m for m in source_mutants(k.lowered.source, kinds=("delete_sync",))
            if any(s in m.what for s in ("fence_proxy_async", "bulk_wait_read", "named_barrier(1"))]
    own = tma_store_mutants(k.lowered.source)
    assert len(muts) == 2 + 3 + 4 and {m.kind for m in own} == {"stage_swizzle", "early_release"}, muts + own
    for mu in muts + own:
        r = interpret(_Mutated(k, mu.source), *ins, sms=1, max_findings=2)
        assert not r.ok, f"survived: {mu.kind} line {mu.line} {mu.what}"


def test_sync_plan_and_explain_name_the_store():
    low = build_tma_store(stages=2, acc_stages=2, bn=128, bk=16, n=200, k=40).lower("sm_100a")
    hz = [e["hazards"] for e in low.sync_plan]
    assert hz.count("RAW sD (st.shared -> tma_store)") == 4  # per chunk: the proxy fence and the barrier
    assert hz.count("WAR sD (tma_store -> epilogue)") == 4 and "WAR sD (tma_store -> exit)" in hz
    text = low.explain()
    assert "TMA store of D in 2 chunk(s) of 64 columns through sD[2]" in text
    assert "fence.proxy.async in every writing thread" in text and "cp.async.bulk.wait_group.read(1)" in text
    assert "named barrier (128 epilogue threads)" in text
    assert "(after the tile's last chunk of tcgen05.ld, before its TMA store" in text


def test_staging_counts_in_the_shared_memory_budget():
    # 128 x 192 x 64 bf16: 40 KiB an operand stage. 5 stages (200 KiB): one 16 KiB staging slot fits beside them,
    # two do not; 4 stages take two; 6 stages leave no room for one (sm_100a: 232448 bytes)
    for stages, sd in ((5, 1), (4, 2)):
        k = kernel(build_tma_store(stages=stages, acc_stages=1, bn=192, bk=64, n=384, k=512), "sm_100a")
        assert k.name.endswith(f"_tmas{sd}"), k.name
        assert k.lowered.smem_bytes <= 232448 and f"through sD[{sd}]" in k.lowered.explain()
    fd = build_tma_store(stages=6, acc_stages=1, bn=192, bk=64, n=384, k=512)
    with pytest.raises(heddle.ScheduleError, match=r"epilogue_store\(T\d+, 'tma'\): the operand ring \(245760 bytes\) "
                                                   r"and one staging slot of 16384 bytes exceed sm_100a's 232448"):
        kernel(fd, "sm_100a")


@pytest.mark.parametrize("how,msg", [
    ("grouped", r"a grouped matmul stores with predicated direct stores \(row < the group's end: a TMA store of the "
                r"tile would write the next group's rows\)"),
    ("two_outputs", r"2 outputs; the sm_100a tcgen05 TMA-store epilogue stages D only in this build"),
])
def test_refusals_name_the_rule(how, msg):
    if how == "grouped":
        from support.grouped_defs import scheduled_tcgen05
        fd = scheduled_tcgen05(n=72, k=48)
    elif how == "two_outputs":  # the pre-activation a training backward keeps, beside gelu of it
        fd = build_epi((), tma=None, n=128, k=64)
        fd.output(fd.matmul_tensor)
    fd.matmul_tensor.epilogue_store("tma")
    with pytest.raises(heddle.ScheduleError, match=msg):
        kernel(fd, "sm_100a")
