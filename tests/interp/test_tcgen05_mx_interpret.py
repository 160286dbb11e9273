"""The block-scaled tcgen05 primitives of heddle_sm100.cuh (tcgen05.cp.32x128b.warpx4 of the scales into tensor
memory; MmaSm100Mx: tcgen05.mma kind::mxf8f6f4.block_scale.scale_vec::1X, MXFP8; MmaSm100Nvf4: kind::mxf4nvf4
.block_scale.scale_vec::4X, NVFP4; docs/fp8.md "MX formats") in the hand-written probe kernel of
tests/support/mx_defs.py, run by the CPU interpreter, whose model (interp/rt/hrt_ptx_tcgen05_mx.h) was written
from the PTX ISA apart from the header: float64-right numbers for e4m3, e5m2 x e4m3 (ue8m0 scales per 32) and
packed e2m1 (ue4m3 scales per 16) operands with the scales in torch's blocked layout, over several k tiles, and
the probe's mutants (the scale chunks of the wrong k tile, a missing proxy fence, a missing wait for the commit,
a missing fence::after_thread_sync before the next scale copy) caught. Each case compiles the interpreter once (~1-2 minutes on 2 cores): one runs by default, the rest -m slow."""
import pytest
import torch

from support.interp_defs import needs_cxx
from support.mx_defs import findings, run

pytestmark = needs_cxx


def close(d, want):
    return not bool(torch.isnan(d).any()) and float((d.double() - want).abs().max()) <= 1e-5 * float(want.abs().max())


@pytest.mark.parametrize("bn,k,fa,fb", [
    (128, 256, "e4m3", "e4m3"),
    pytest.param(256, 384, "e5m2", "e4m3", marks=pytest.mark.slow),
    pytest.param(128, 256, "e2m1", "e2m1", marks=pytest.mark.slow),
    pytest.param(256, 384, "e2m1", "e2m1", marks=pytest.mark.slow),
])
def test_block_scaled_primitives_interpret_with_right_numbers(bn, k, fa, fb):
    d, want, raw = run(bn, k, fa, fb)
    assert not findings(raw), raw["findings"]
    assert close(d, want), float((d.double() - want).abs().max())


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["e4m3", "e2m1"])
@pytest.mark.parametrize("what,mutate", [
    ("the scale chunks of the next k tile", {"SCALE_KT": "((kt + 1) % nk)"}),
    ("no fence.proxy.async between the generic stores and tcgen05.cp / mma", {"PROXY_FENCE": "(void)0"}),
    ("no wait for the commit before the stage is refilled", {"MBAR_WAIT": "(void)0"}),
])
def test_probe_mutants_are_caught(fmt, what, mutate):
    d, want, raw = run(128, 256, fmt, fmt, **mutate)
    assert findings(raw) or not close(d, want), what


@pytest.mark.slow
def test_scale_copy_after_mma_needs_the_commit_wait_and_fence():
    """tcgen05.mma -> tcgen05.cp is not a pipelined pair (PTX ISA 9.7.16.6.2): the next k tile's copy over the
    scale columns the previous MMAs read must follow their commit's mbarrier wait and a
    tcgen05.fence::after_thread_sync. Without the fences (the one after the last k tile kept, so the accumulator
    reads stay ordered) the scale columns' write-after-read shows: the interpreter's tensor-memory shadow records the
    block-scaled MMA's reads of its scale columns (hrt_tmem_shadow.cpp)."""
    _, _, raw = run(128, 384, "e4m3", "e4m3", WAIT_FENCE="if (kt == nk - 1) heddle::sm100::fence_after()",
                    ISSUE_FENCE="(void)0")
    races = [t for k, t in findings(raw) if k == "race"]
    assert any("write-after-read" in t and "scale read" in t for t in races), findings(raw)
