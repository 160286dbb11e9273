"""The kernel-IR simulator on the sm_100a tcgen05 kernel (docs/sync-cases.md cases 13 and 17): the real plan simulates
clean (no race, deadlock, mbarrier or tensor-memory misuse; numbers against float64) under the adversarial
and a random schedule for k trip counts {1, s-1, s, s+1, 3s+1} with ragged M, N, K; every mutant -- each
sync deleted (mbarrier ops, tcgen05.commit, the tcgen05 fences, tcgen05.alloc / dealloc, the block
barriers), each parity flipped, each mbarrier over- or under-arrived, each wait moved to its partner
barrier -- is flagged, except the two fences that order nothing the block barriers do not (tcgen05.alloc
and tcgen05.dealloc are synchronous, PTX ISA 9.7.16.6.1). Tensor memory is modelled in
verify/tcgen05_sim.cpp (docs/blackwell.md)."""
import pytest

from heddle import verify
from support.tcgen05_defs import build, redundant_fence_mutants
from support.wgmma_defs import inputs

M = 300   # 3 m-tiles x 2 n-tiles (n=72, bn=64): >= 3 tiles per CTA, both accumulator slots reused


def lowered(s, a, trips, layout="NN", dtype="bf16", n=72):
    k = 16 * trips - (5 if trips > 1 else 0)  # ragged K (TMA zero-fills the last k-tile)
    fd = build(stages=s, acc_stages=a, bn=64, bk=16, n=n, k=k, layout=layout, dtype=dtype)
    return fd, fd.lower("sm_100a")


@pytest.mark.parametrize("s,a", [(2, 1), (2, 2), (3, 2), (4, 1)])
def test_real_plan_simulates_clean(s, a):
    for t in sorted({1, s - 1, s, s + 1, 3 * s + 1} - {0}):
        fd, low = lowered(s, a, t)
        for sched, seed in (("adversarial", 0), ("random", t)):
            r = verify.simulate(low, inputs(fd, M - 37, seed=t), sched, seed)
            assert r.ok, f"s={s} a={a} trips={t} {sched}:\n{r.report()}"


@pytest.mark.parametrize("layout,dtype,epilogue", [("TT", "f16", "bias_gelu"), ("NT", "bf16", "silu_scale"),
                                                   ("TN", "f16", "bias_tanh")])
def test_layouts_dtypes_and_epilogues(layout, dtype, epilogue):
    fd = build(stages=3, acc_stages=2, bn=64, bk=16, n=100, k=16 * 5 - 3, layout=layout, dtype=dtype,
               epilogue=epilogue)
    r = verify.simulate(fd.lower("sm_100a"), inputs(fd, 257, seed=4), "random", 3)
    assert r.ok, r.report()


@pytest.mark.parametrize("s,a", [(2, 2), (3, 1)])
def test_every_tcgen05_mutant_is_flagged(s, a):
    fd, low = lowered(s, a, 3 * s + 1, n=144)
    report = verify.kill_rate(low, [inputs(fd, 260, seed=1)])
    kinds = {m.kind for m, _ in report.verdicts}
    assert {"delete_sync", "flip_parity", "over_arrive", "under_arrive", "role_cycle"} <= kinds
    deleted = " ".join(m.description for m, _ in report.verdicts if m.kind == "delete_sync")
    for op in ("tcgen05.commit empty", "tcgen05.commit accFull", "tcgen05.fence::before_thread_sync",
               "tcgen05.fence::after_thread_sync", "tcgen05.alloc", "tcgen05.dealloc"):
        assert op in deleted, op
    redundant = redundant_fence_mutants(report.survivors)  # alloc / dealloc are synchronous
    assert len(redundant) == 2, str(report)
    assert report.survivors == redundant, str(report)


def mutant(low, kind, text):
    return next(m for m in verify.mutants(low) if m.kind == kind and text in m.description).kernel()


def test_missing_fences_and_commits_are_named():
    fd, low = lowered(2, 2, 5)
    ins = inputs(fd, M)
    r = verify.simulate(mutant(low, "delete_sync", "delete tcgen05.fence::before_thread_sync [serial loop"), ins)
    assert r.races and "WAR race on acc" in r.races[0] and "tcgen05.mma" in r.races[0], r.report()
    r = verify.simulate(mutant(low, "delete_sync", "delete tcgen05.commit accFull"), ins)
    assert r.deadlocks and "accFull" in r.deadlocks[0]
    r = verify.simulate(mutant(low, "delete_sync", "delete tcgen05.dealloc"), ins)
    assert any("tensor-memory columns allocated" in m for m in r.async_misuse), r.report()
    r = verify.simulate(mutant(low, "delete_sync", "delete tcgen05.alloc"), ins)
    assert any("not allocated" in m for m in r.async_misuse), r.report()


@pytest.mark.parametrize("fa,fb,scales,bk", [("e4m3", "e5m2", "row", 128), ("e5m2", "e5m2", "tensor", 32)])
def test_fp8_kernel_simulates_clean(fa, fb, scales, bk):
    """The kind::f8f6f4 kernel (docs/fp8.md "sm_100a"): the same rings with 1-byte stages, clean, with the numbers
    of the float64 reference on ragged M, N, K (the simulator computes the MMA from the operand values)."""
    from support.tcgen05_defs import build_fp8
    fd = build_fp8(fa, fb, scales, stages=3, bn=64, bk=bk, n=72, k=208)
    r = verify.simulate(fd.lower("sm_100a"), inputs(fd, 130, seed=4), "random", 3)
    assert r.ok, r.report()
