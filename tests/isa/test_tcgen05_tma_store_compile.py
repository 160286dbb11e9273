"""NVRTC compile checks of the sm_100a tcgen05 kernel with the TMA-store epilogue (epilogue_store("tma"); docs/blackwell.md
"The TMA-store epilogue"): no spills and no stack frame (the chunk's v / y arrays stay in registers), the staging
writes one st.shared.v4.b32 each, the proxy fence, the named barrier over the 128 epilogue threads, the TMA store
(cp.async.bulk.tensor ... global.shared::cta), its bulk group and both wait_group.read counts in the PTX."""
import pytest

from support.env import requires_nvrtc, rt
from support.tcgen05_defs import build_fp8, build_tma_store

pytestmark = requires_nvrtc

CASES = {
    "bf16_128x256x64_s4": lambda: build_tma_store(stages=4, acc_stages=2, bn=256, bk=64, n=4096, k=4096),
    "bf16_128x128x64_s6": lambda: build_tma_store(stages=6, acc_stages=2, bn=128, bk=64, n=4096, k=4096),
    "f32_128x128x32_nt": lambda: build_tma_store(stages=4, acc_stages=2, bn=128, bk=32, layout="NT", n=1024, k=1024,
                                                 out="f32"),
    "fp8_row_128x128x128": lambda: build_fp8("e4m3", "e4m3", "row", stages=4, bn=128, bk=128, n=1024, k=1024),
}


@pytest.mark.parametrize("case", list(CASES))
def test_tma_store_kernel_compiles_clean(case):
    fd = CASES[case]()
    fd.matmul_tensor.epilogue_store("tma")
    low = fd.lower("sm_100a")
    assert "_tmas" in low.name
    r = rt.compile(low.source, low.name, "sm_100a", isolate=True)
    st = r.stats
    assert st.spill_stores == 0 and st.spill_loads == 0 and st.stack_frame == 0, (low.name, r.ptxas)
    assert "tcgen05.mma.cta_group::1.kind::" + ("f8f6f4" if case.startswith("fp8") else "f16") in r.ptx
    assert "tcgen05.ld.sync.aligned.32x32b.x32" in r.ptx and "tcgen05.fence::before_thread_sync" in r.ptx
    for op in ("st.shared.v4.b32", "fence.proxy.async.shared::cta", "cp.async.bulk.tensor.2d.global.shared::cta",
               "cp.async.bulk.commit_group", "cp.async.bulk.wait_group.read"):
        assert op in r.ptx, (low.name, op)
    # bar.sync id, count with registers for both (the inline asm's operands): one pair per chunk, twice
    chunks = low.tile["bn"] // (32 if case.startswith("f32") else 64)
    assert r.ptx.count("bar.sync %r") == 2 * chunks, low.name
