"""The CPU interpreter of the printed sm_100a tcgen05 kernel (heddle.interpret; heddle_sm100.cuh under
HEDDLE_INTERPRET -> interp/rt/hrt_tcgen05.cpp on hrt_ptx_tcgen05.h): the printed source -- its TMA, mbarrier,
tcgen05.alloc / mma / commit / ld / dealloc calls, its descriptors, instruction descriptor and 32x32b lane
mapping -- runs with the numbers of a float64 reference on ragged shapes with a bias + gelu (and other)
epilogue, and every source mutant (each sync line deleted, each parity flipped, each expect_tx dropped or
halved, each TMA destination moved to the next stage, tcgen05.commit / alloc / dealloc deleted) is caught.
The tcgen05 fences' ordering and tensor memory's race shadow are tests/interp/test_tcgen05_ordering.py's."""
import pytest

from heddle.interpret import interpret, mutation_kill_rate, source_mutants
from support.tcgen05_defs import build
from support.wgmma_defs import inputs
from support.interp_defs import kernel, needs_cxx

pytestmark = needs_cxx


@pytest.mark.parametrize("s,a,bn,layout,dtype,epilogue,M,N,K", [
    (2, 2, 64, "NN", "bf16", "bias_gelu", 130, 72, 72),     # ragged M, N, K (K: 4.5 k-tiles of 16)
    (3, 1, 64, "TT", "f16", "bias_gelu", 264, 136, 40),    # TMA: a transposed A needs M % 8 == 0
    (4, 2, 128, "NT", "bf16", "bias_tanh", 200, 200, 104),
    (2, 1, 64, "TN", "f16", "silu_scale", 136, 64, 16),      # one k-tile
])
def test_printed_kernel_runs_with_right_numbers(s, a, bn, layout, dtype, epilogue, M, N, K):
    fd = build(stages=s, acc_stages=a, bn=bn, bk=16, n=N, k=K, layout=layout, dtype=dtype, epilogue=epilogue)
    k = kernel(fd, "sm_100a")
    assert "heddle::sm100::commit(" in k.source and "Mma::mma(" in k.source
    for sched, seed in (("adversarial", 0), ("random", 3)):
        r = interpret(k, *inputs(fd, M, seed=2), schedule=sched, seed=seed, sms=2)
        assert r.ok, r.report()


def test_source_mutants_are_caught():
    fd = build(stages=2, acc_stages=2, bn=64, bk=16, n=136, k=72)
    k = kernel(fd, "sm_100a")
    ms = source_mutants(k.source)
    deleted = " ".join(m.what for m in ms if m.kind == "delete_sync")
    for op in ("sm100::commit((empty", "sm100::commit((accFull", "sm100::tmem_alloc(", "sm100::tmem_dealloc("):
        assert op in deleted, op
    res = mutation_kill_rate(k, *inputs(fd, 260, seed=1), sms=2)
    assert {"delete_sync", "flip_parity", "drop_expect_tx", "shrink_expect_tx", "swap_stage"} <= set(res["by_kind"])
    assert res["total"] >= 25 and not res["survivors"], res["survivors"]
