"""Every kernel heddle.matmul's automatic schedule picks compiles without spills (NVRTC, no GPU): for each
target, epilogue (bias, residual, activation, a saved pre-activation), M bucket and operand alignment class
(vec_e: whether the bias / residual suit pair reads). A residual read by scalar loads (vec_e=1) is the
tightest: it keeps the cooperative 128x128 kernel (ping-pong spilled 8-40 bytes, cooperative 128x256 4).

Every epilogue dtype too (issue 28 item 8): bias / residual / output in f32, bf16, f16. An f32 residual
with a 16-bit output left the sm_90a ping-pong kernel over its register budget (4-16 bytes spilled), an f32
output with an f32 residual read by scalar loads the sm_80 kernel (76 bytes); the epilogue budget of the
automatic schedules (schedule/epilogue_layout.h epilogueFits, matmul_schedule.cpp) picks around them. The
default run compiles a representative subset (the reported cases, each dtype in each role); `-m slow` the
whole cross product on both targets."""
import itertools

import pytest

import heddle
from support.env import requires_nvrtc
from heddle.pytorch.matmul import FusedMatmul, MatmulSpec


def auto_kernel(target, residual, act, saved, bucket, vec_e, n=4096, bias=("bf16", 1), out="bf16"):
    spec = MatmulSpec("bf16", False, False, 4096, n, False, True, bias, residual, act, None, out, saved=saved)
    fm = FusedMatmul.__new__(FusedMatmul)  # the schedule alone: no op registered
    fm.spec = spec
    fd = FusedMatmul.schedule(fm, target, 8, 8, bucket, 132, True, vec_e)
    return fd.lower(target, 8, 8, vec_e=vec_e)


def assert_no_spills(low, target):
    r = heddle._C.runtime.compile(low.source, low.name, target, isolate=True)
    st = r.stats
    assert st.spill_stores == 0 and st.spill_loads == 0 and st.stack_frame == 0, (low.name, r.ptxas)


@requires_nvrtc
@pytest.mark.parametrize("act,n", [(None, 4096), ("gelu", 4096), ("gelu_tanh", 4096), (None, 4095)])
def test_scalar_residual_kernels_do_not_spill(act, n):
    low = auto_kernel("sm_90a", ("bf16", 2), act, None, -1, 1, n)
    assert "_ws2coop_" in low.name and "128x128x64" in low.name, low.name
    assert_no_spills(low, "sm_90a")


SWEEP = [(t, r, a, s, b, v) for t, r, a, s, b, v in itertools.product(
    ("sm_90a", "sm_80"), (None, ("bf16", 2)), (None, "gelu"), (None, "bf16"), (64, -1), (1, 2)) if a or not s]


@requires_nvrtc
@pytest.mark.slow
@pytest.mark.parametrize("target,residual,act,saved,bucket,vec_e", SWEEP)
def test_every_auto_kernel_compiles_without_spills(target, residual, act, saved, bucket, vec_e):
    assert_no_spills(auto_kernel(target, residual, act, saved, bucket, vec_e), target)


DTYPES = ("f32", "bf16", "f16")


def dtype_kernel(target, bias, residual, out, bucket, vec_e):
    return auto_kernel(target, residual and (residual, 2), None, None, bucket, vec_e,
                       bias=bias and (bias, 1), out=out)


# (target, bias, residual, output, M bucket, vec_e): the reported kernels first, then each dtype in each role
DTYPE_SUBSET = [
    ("sm_90a", "f32", "f32", "bf16", -1, 2),   # ping-pong spilled 12 bytes
    ("sm_90a", "bf16", "f32", "f16", -1, 2),   # ping-pong spilled 16 bytes
    ("sm_90a", "f32", "bf16", "f32", -1, 1),   # the Fusion case's epilogue, read by scalar loads
    ("sm_90a", "f16", "f16", "f32", -1, 2),
    ("sm_90a", "f32", "f32", "f32", 64, 1),
    ("sm_80", None, "f32", "f32", -1, 1),      # spilled 76 bytes
    ("sm_80", "f32", "f16", "f32", -1, 2),
    ("sm_80", "f16", "f32", "bf16", -1, 1),
]


@requires_nvrtc
@pytest.mark.parametrize("target,bias,residual,out,bucket,vec_e", DTYPE_SUBSET)
def test_epilogue_dtypes_compile_without_spills(target, bias, residual, out, bucket, vec_e):
    assert_no_spills(dtype_kernel(target, bias, residual, out, bucket, vec_e), target)


def test_an_f32_residual_with_a_16_bit_output_leaves_ping_pong():
    """The budget's choice, without compiling: the f32 residual's chunk does not fit beside a ping-pong
    warpgroup's 128 accumulators (cooperative 128x256: half the rows per warpgroup), a bf16 one does."""
    assert "_ws2coop_" in dtype_kernel("sm_90a", "f32", "f32", "bf16", -1, 2).name
    assert "_ws2pp_" in dtype_kernel("sm_90a", "f32", "bf16", "bf16", -1, 2).name
    assert "_ws2pp_" in dtype_kernel("sm_90a", "f32", "f32", "f32", -1, 2).name  # 32-column f32 chunks fit
    assert "_w2x4_" in dtype_kernel("sm_80", None, "f32", "f32", -1, 1).name      # 8 warps on sm_80
    assert "_w2x2_" in dtype_kernel("sm_80", None, "f32", "f32", -1, 2).name


DTYPE_SWEEP = [(t, bi, r, o, b, v) for t, bi, r, o, b, v in itertools.product(
    ("sm_90a", "sm_80"), (None,) + DTYPES, (None,) + DTYPES, DTYPES, (64, -1), (1, 2)) if bi or r or v == 1]


@requires_nvrtc
@pytest.mark.slow
@pytest.mark.parametrize("target,bias,residual,out,bucket,vec_e", DTYPE_SWEEP)
def test_every_epilogue_dtype_compiles_without_spills(target, bias, residual, out, bucket, vec_e):
    assert_no_spills(dtype_kernel(target, bias, residual, out, bucket, vec_e), target)


@requires_nvrtc
def test_a_spilling_automatic_kernel_is_replaced_not_warned(monkeypatch, recwarn):
    """Should the budget miss, heddle.matmul compiles the next candidate (cooperative MMA warpgroups) instead
    of warning the caller about heddle's own choice. Simulated: "auto" forced to the ping-pong kernel with a
    residual read by scalar loads, which spills."""
    spec = MatmulSpec("bf16", False, False, 4096, 4096, False, True, ("bf16", 1), ("bf16", 2), None, None, "bf16")
    fm = FusedMatmul(spec)
    real = FusedMatmul.schedule
    monkeypatch.setattr(FusedMatmul, "schedule",
                        lambda self, *a, layout=None, **kw: real(self, *a, layout=layout or "pingpong", **kw))
    k = fm.kernel("sm_90a", 8, 8, m=4096, sms=132, vec_e=1)
    assert "_ws2coop_" in k.name, k.name
    st = k.binary.stats
    assert st.spill_stores == 0 and st.spill_loads == 0, k.binary.ptxas
    assert not [w for w in recwarn if "spills" in str(w.message)]
