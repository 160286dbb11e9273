"""NVRTC compile checks of the sm_100a tcgen05 multi-role kernel (no GPU needed; docs/sync-cases.md case 13): operand
stages {2..6} x accumulator stages {1, 2} x tiles 128x128x64 and 128x256x32 (bk 32 keeps six 128x256
stages in shared memory). Every kernel must compile through heddle's runtime (crash-isolated) with no
spills, setmaxnreg honoured where the roles set budgets, and PTX holding tcgen05.mma, tcgen05.commit,
tcgen05.ld / wait::ld, tcgen05.alloc / dealloc and the TMA copies. The CI set covers every stage count,
both accumulator stage counts, both tiles, every layout and both dtypes; the full product runs with -m slow."""
import itertools

import pytest

from support.tcgen05_defs import build
from support.env import requires_nvrtc, rt

pytestmark = requires_nvrtc

TILES = {128: 64, 256: 32}  # bn -> bk


def check(low):
    r = rt.compile(low.source, low.name, "sm_100a", isolate=True)
    st = r.stats
    assert st.spill_stores == 0 and st.spill_loads == 0 and st.stack_frame == 0, (low.name, r.ptxas)
    assert not st.setmaxnreg_ignored, (low.name, r.ptxas)
    assert ".target sm_100a" in r.ptx
    for op in ("tcgen05.mma.cta_group::1.kind::f16", "tcgen05.commit.cta_group::1.mbarrier::arrive::one",
               "tcgen05.ld.sync.aligned.32x32b.x32", "tcgen05.wait::ld", "tcgen05.alloc.cta_group::1",
               "tcgen05.dealloc.cta_group::1", "tcgen05.relinquish_alloc_permit", "tcgen05.fence::after_thread_sync",
               "tcgen05.fence::before_thread_sync", "cp.async.bulk.tensor", "mbarrier.try_wait.parity", "elect.sync"):
        assert op in r.ptx, (low.name, op)
    assert "wgmma" not in r.ptx
    return r


CI = [(2, 1, 128, "NN", "bf16", (0, 0)), (3, 2, 256, "TT", "f16", (56, 232)), (4, 1, 256, "NT", "bf16", (40, 0)),
      (5, 2, 128, "TN", "f16", (0, 0)), (6, 2, 256, "NN", "bf16", (56, 240)), (6, 1, 128, "TT", "bf16", (0, 0))]


@pytest.mark.parametrize("s,a,bn,layout,dtype,regs", CI)
def test_tcgen05_kernel_compiles_clean(s, a, bn, layout, dtype, regs):
    low = build(stages=s, acc_stages=a, bn=bn, bk=TILES[bn], layout=layout, dtype=dtype, regs=regs).lower("sm_100a")
    r = check(low)
    assert low.threads == 256
    if any(regs):
        assert "setmaxnreg.dec.sync.aligned.u32" in r.ptx
    else:
        assert "setmaxnreg" not in r.ptx


def test_auto_schedule_compiles():
    from support.matmul_defs import matmul_fusion
    fd, a, b = matmul_fusion(n=4096, k=4096, dtype="bf16")
    fd.auto_schedule("sm_100a", -1, 4096, 4096)
    check(fd.lower("sm_100a"))


@pytest.mark.slow
@pytest.mark.parametrize("s,a,bn", list(itertools.product(range(2, 7), (1, 2), (128, 256))))
def test_tcgen05_sweep(s, a, bn):
    check(build(stages=s, acc_stages=a, bn=bn, bk=TILES[bn]).lower("sm_100a"))
