"""The CPU simulator on the AMD matmul kernels (docs/sync-cases.md cases 15-17): wave64 / wave32 threads, LDS, LDS DMA
retired by s_waitcnt vmcnt, s_barrier and GFX12 split barriers, MFMA / WMMA fragment ownership. Every
plan simulates clean with the right numbers, and every single-sync mutant of it is flagged."""
import pytest
import torch

import heddle
from heddle import verify
from support.amd_defs import operands, small
from support.matmul_defs import matmul_fusion, schedule

# (target, load kind, stages, warps m x n): LDS DMA on CDNA, register-staged copies on GFX12
PLANS = [("gfx90a", "async_lds", 2, (2, 1)), ("gfx90a", "async_lds", 3, (2, 1)), ("gfx942", "async_lds", 4, (1, 2)),
         ("gfx90a", "plain", 2, (2, 1)), ("gfx1200", "plain", 2, (2, 2)), ("gfx1200", "plain", 3, (1, 2))]


@pytest.mark.parametrize("target,kind,stages,warps", PLANS, ids=[f"{p[0]}-{p[1]}-s{p[2]}" for p in PLANS])
def test_plan_simulates_clean_and_every_mutant_is_flagged(target, kind, stages, warps):
    l = small(target, kind, stages, warps)
    assert l.barriers_per_main_iteration == 1
    cases = [operands(70, 32 * nk, 64, seed=nk) for nk in (stages, stages + 1, 3 * stages + 1)]
    for ins in cases[:1]:
        r = verify.simulate(l, ins, "random", 5)
        assert r.ok, r.report()
    report = verify.kill_rate(l, cases)
    assert report.total >= 2 and not report.survivors, str(report)


def test_split_barrier_mutants_name_the_misuse():
    l = small("gfx1200", "plain", 2, (2, 2))
    ins = operands(64, 96, 64)
    by_desc = {m.description: m for m in verify.mutants(l)}
    no_signal = next(m for d, m in by_desc.items() if d.startswith("delete s_barrier_signal [main"))
    r = verify.simulate(no_signal.kernel(), ins)
    assert any("without a s_barrier_signal of its own" in d for d in r.deadlocks), r.report()
    no_wait = next(m for d, m in by_desc.items() if d.startswith("delete s_barrier_wait [main"))
    r = verify.simulate(no_wait.kernel(), ins)
    assert not r.ok


def test_split_barrier_overlaps_the_mma_and_sliding_either_half_is_caught():
    # 3 stages, prefetch 1: this iteration's MMA reads a stage the previous barrier published, so it
    # runs between s_barrier_signal and s_barrier_wait (split_barriers.cpp)
    fd, a, b = matmul_fusion(m="M", n=64, k="K", epilogue="none")
    schedule(fd, a, b, bm=64, bn=64, bk=32, wm=2, wn=2, stages=3, prefetch=1, kind="plain")
    l = fd.lower("gfx1200")
    main = next(n for n in l.structure if n["kind"] == "for" and n["stage"] == "main")["body"]
    assert [n["kind"] if n["kind"] != "sync" else n["text"] for n in main] == [
        "load", "load", "s_barrier_signal", "mma", "s_barrier_wait"], l.kernel_ir
    ins = operands(70, 32 * 5, 64)
    r = verify.simulate(l, ins, "random", 4)
    assert r.ok, r.report()
    torch.testing.assert_close(r.output[:70, :64], (ins[0].double() @ ins[1].double()).float(), atol=2e-2, rtol=2e-2)
    slides = [m for m in verify.mutants(l) if m.kind == "slide_barrier"]
    # the wait ends the loop body (no access after it); the signal's hoist across the B copy must be caught
    assert [m.description.split()[0] for m in slides if "[main loop" in m.description] == ["hoist"]
    for m in slides:
        assert not verify.simulate(m.kernel(), ins, "random", 4).ok, m.description


def test_loosened_vmcnt_reads_a_dma_in_flight():
    l = small("gfx90a", "async_lds", 3, (2, 1))
    ins = operands(64, 32 * 5, 64)
    loose = next(m for m in verify.mutants(l) if m.kind == "loosen_wait" and "main loop" in m.description)
    assert "s_waitcnt vmcnt(16) to s_waitcnt vmcnt(17)" in loose.description
    r = verify.simulate(loose.kernel(), ins)
    assert r.async_misuse and "read of async result before its wait" in r.async_misuse[0]


@pytest.mark.parametrize("target", ["gfx90a", "gfx942", "gfx1200"])
def test_auto_scheduled_kernel_simulates_with_the_right_numbers(target):
    fd, a, b = matmul_fusion(m="M", n=128, k=160, epilogue="bias_gelu")
    fd.auto_schedule(target)
    l = fd.lower(target)
    g = torch.Generator().manual_seed(3)
    ins = [torch.randn(100, 160, generator=g).half(), torch.randn(160, 128, generator=g).half(),
           torch.randn(128, generator=g).half()]
    r = verify.simulate(l, ins, ctas=[(0, 0, 0)])
    assert r.ok, r.report()
    ref = heddle.reference.evaluate(fd, ins)
    torch.testing.assert_close(r.output[:100, :128], ref.float(), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("layout", ["NT", "TN", "TT"])
def test_transposed_layouts_and_bf16(layout):
    l = small("gfx90a", "async_lds", 2, (2, 1), layout=layout, dtype="bf16")
    ins = operands(70, 96, 64, layout, torch.bfloat16)
    r = verify.simulate(l, ins, "random", 2)
    assert r.ok, r.report()
