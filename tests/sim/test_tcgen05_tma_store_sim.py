"""The kernel-IR simulator on the sm_100a tcgen05 kernel with the TMA-store epilogue (epilogue_store("tma");
docs/blackwell.md "The TMA-store epilogue", docs/sync-cases.md case 11): the epilogue warpgroup's chunk writes are
generic-proxy stores into sD (verify/tcgen05_sim.cpp), ordered before the TMA store's async-proxy reads by each
writer's fence.proxy.async and bar.sync 1; the slot's rewrite waits for the store's reads (wait_group.read + the
barrier). The real plan simulates clean with the float64 reference's numbers (ragged M, N: the store clips; a TMA
-loaded residual ring); every sync mutant is flagged -- each proxy fence, bulk wait, named barrier and bulk commit
deleted among them -- but the two redundant fences around alloc / dealloc."""
import pytest

from heddle import verify
from support.tcgen05_defs import build_epi, build_tma_store, redundant_fence_mutants
from support.wgmma_defs import inputs


@pytest.mark.parametrize("case", ["bf16_bias_gelu", "residual_ring"])
def test_real_plan_simulates_clean(case):
    if case == "bf16_bias_gelu":  # 3 x 2 tiles of 128 x 128 on 2 CTAs: slots and accumulator stages wrap
        fd, M = build_tma_store(stages=2, acc_stages=2, bn=128, bk=16, n=200, k=40), 300
    else:
        fd, M = build_epi(("bias", "res"), tma="res", e_stages=2, stages=2, acc_stages=2, bn=64, n=72, k=40), 260
        fd.matmul_tensor.epilogue_store("tma")
    low = fd.lower("sm_100a")
    for sched, seed in (("adversarial", 0), ("random", 3)):
        r = verify.simulate(low, inputs(fd, M, seed=1), sched, seed)
        assert r.ok, r.report()


def test_every_mutant_is_flagged():
    fd = build_tma_store(stages=2, acc_stages=2, bn=128, bk=16, n=200, k=40)
    low = fd.lower("sm_100a")
    report = verify.kill_rate(low, [inputs(fd, 260, seed=1)])
    deleted = [m.description for m, _ in report.verdicts if m.kind == "delete_sync"]
    for op, n in (("delete fence.proxy.async", 2), ("delete cp.async.bulk.wait_group.read(1)", 2),
                  ("delete cp.async.bulk.wait_group.read(0)", 1), ("delete bar.sync 1, 128", 4),
                  ("delete cp.async.bulk.commit_group", 2)):
        assert sum(d.startswith(op) for d in deleted) == n, (op, deleted)
    redundant = redundant_fence_mutants(report.survivors)  # alloc / dealloc are synchronous
    assert len(redundant) == 2 and report.survivors == redundant, str(report)
