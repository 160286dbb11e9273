"""Fusions with several outputs (docs/scheduling.md, "Several outputs"): `pre = a @ b + bias;
out = gelu(pre)` with both `out` and `pre` marked as outputs (training keeps the pre-activation for the
backward). The kernel stores `pre` to D1 at D's index: kernel IR / printed source, NVRTC compiles for
sm_80 and sm_90a, and the interpreter's numbers of both outputs against float64 torch (sm_80, sm_90a,
gfx942), with mutants of the second store caught. An epilogue role (one TMA store of one tile) refuses a
second output; the MMA warpgroups' TMA-store epilogue stages both (test_tma_store_two_outputs.py)."""
import pytest
import torch

import heddle
from support.env import requires_nvrtc, rt
from heddle.interpret import _Mutated, interpret
from support.interp_defs import amd, inputs, kernel, needs_cxx, sm80, sm90

STORE_D1 = "D1[(long long)row * ldd + col] = heddle::from_float<heddle::bf16>("
# sm_90a stores column pairs (tests/codegen/test_wgmma_direct_pairs.py): D1's 32-bit pair store at D's index
STORE_D1_SM90 = "heddle::store_pair(D1 + at, heddle::pack_pair<heddle::bf16>("


# sm_80 holds each output's packed pairs, then stores them (docs/backends.md "The mma.sync epilogue in column pairs")
STORE_D1_SM80 = "D1_v[fn][h] = heddle::pack_pair<heddle::bf16>("


def store_d1(target):
    return {"sm_90a": STORE_D1_SM90, "sm_80": STORE_D1_SM80}.get(target, STORE_D1)


def saved(target, **kw):
    if target == "sm_80":
        return sm80(stages=2, prefetch=1, epilogue="bias_gelu_saved", k=32 * 3, **kw)
    if target == "gfx942":  # the AMD printer shares the C-like epilogue: D1 the same way
        return amd(kind="plain", epilogue="bias_gelu_saved", dtype="bf16", **kw)
    return sm90("pipeline", epilogue="bias_gelu_saved", k=16 * 5, **kw)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_second_output_is_a_pointer_param_stored_at_ds_index(target):
    low = saved(target).lower(target)
    params = [p[0] for p in low.params]
    assert "D" in params and "D1" in params
    assert low.name.endswith("_e_add_gelu_bf16_bf16_obf16")  # the output's dtype is in the name
    assert store_d1(target) in low.source
    # the stored register is the pre-activation's cast, not the gelu's: r3 = gelu(r2), r5 = bf16(r2)
    # both pair programs: both columns of a pair, the GELU out of line
    assert "heddle::ool::gelu_erf(r2)" in low.source and "heddle::bf16>(r2.y)" in low.source
    assert store_d1(target) + "r5)" in low.source


def test_batched_second_output_is_offset_per_batch():
    low = saved("sm_80", batched=True).lower("sm_80")
    assert "D1 += (long long)batch_idx * batch_stride_d;" in low.source


@needs_cxx
@pytest.mark.parametrize("target", ["sm_80", "sm_90a", "gfx942"])
def test_interpreter_numbers_of_both_outputs(target):
    fd = saved(target)
    k = kernel(fd, target)
    ins = inputs(fd, 72, seed=3)
    r = interpret(k, *ins)
    assert r.ok, r.report()
    out, pre = r.output
    a, b, bias = (t.double() for t in ins)
    want_pre = a @ b + bias
    torch.testing.assert_close(pre.double(), want_pre, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(out.double(), torch.nn.functional.gelu(want_pre), atol=2e-2, rtol=2e-2)
    # the second store edited: it writes the activation (wrong numbers) or nothing (never written)
    src, store = k.source, store_d1(target)
    reg = src.split(store, 1)[1].split(")", 1)[0]
    for bad in (src.replace(store + reg + ")", store + "r3)"),
                src.replace(store, "if (0) " + store)):
        assert bad != src
        rb = interpret(_Mutated(k, bad), *ins)
        assert not rb.ok and any("output" in m for m in rb.mismatches), rb.report()


@needs_cxx
def test_interpreter_roles_and_split_k_store_both_outputs():
    # sm_90a load + mma roles (the mma warpgroups store every output) and sm_80 / sm_90a split-K (the
    # reducing CTA applies the epilogue): both outputs against float64
    from support.matmul_defs import matmul_fusion, schedule
    fd = sm90("coop", epilogue="bias_gelu_saved", k=16 * 7)
    r = interpret(kernel(fd, "sm_90a"), *inputs(fd, 200, seed=1), sms=2)
    assert r.ok and len(r.output) == 2, r.report()
    fd, a, b = matmul_fusion(n=200, k=32 * 4, dtype="bf16", epilogue="bias_gelu_saved")
    schedule(fd, a, b, bm=64, bn=64, bk=32, wm=2, wn=2, stages=2, prefetch=1).split_k(2)
    r = interpret(kernel(fd, "sm_80"), *inputs(fd, 72, seed=1))
    assert r.ok and r.ctas == 2 * 4 * 2, r.report()
    from support.wgmma_defs import schedule_sm90   # sm_90a split-K: the TMA pipeline's reducing CTA stores both
    fd, a, b = matmul_fusion(n=72, k=16 * 8, dtype="bf16", epilogue="bias_gelu_saved")
    schedule_sm90(fd, a, b, bm=64, bn=64, bk=16, wgs=1, stages=3, prefetch=1).split_k(2)
    r = interpret(kernel(fd, "sm_90a"), *inputs(fd, 72, seed=2))
    assert r.ok and len(r.output) == 2, r.report()


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_simulator_runs_two_output_kernels_clean(target):
    # the kernel-IR simulator checks both outputs' numbers (D1 is stored at D's index by the same thread)
    fd = saved(target) if target == "sm_80" else sm90("coop", epilogue="bias_gelu_saved", k=16 * 7)
    r = heddle.simulate(fd.lower(target), inputs(fd, 72, seed=1), fusion=fd)
    assert r.ok and len(r.outputs) == 2 and not torch.isnan(r.outputs[1]).any(), r
    from heddle.reference import evaluate
    d, d1 = evaluate(fd, inputs(fd, 72, seed=1))
    bad = heddle.simulate(fd.lower(target), inputs(fd, 72, seed=1), fusion=fd, reference=(d, d1 * 2))
    assert not bad.ok and "D1[0][" in bad.report(), bad.report()


@needs_cxx
def test_reference_tuple_must_match_the_outputs():
    fd = saved("sm_80")
    k = kernel(fd, "sm_80")
    ins = inputs(fd, 8, seed=1)
    with pytest.raises(heddle.InputError, match="2 outputs but the reference gives 1"):
        interpret(k, *ins, reference=(torch.zeros(8, 200),))


def test_epilogue_role_refuses_a_second_output():
    fd = sm90("3role", epilogue="bias_gelu_saved", k=16 * 5)
    with pytest.raises(heddle.ScheduleError, match="2 outputs, but an epilogue role stores one tile"):
        fd.lower("sm_90a")


def test_output_not_computed_from_the_matmul_is_refused():
    fd = heddle.Fusion()
    a = fd.input("a", "bf16", ["M", 64])
    b = fd.input("b", "bf16", [64, 64])
    fd.output(fd.matmul(a, b, False, False).to("bf16"))
    with pytest.raises(heddle.ScheduleError, match="is an input"):
        fd.output(a)


@requires_nvrtc
@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_two_output_kernels_compile_without_spills(target):
    def ptx(epilogue):
        fd = sm80(stages=2, prefetch=1, epilogue=epilogue, k=32 * 3) if target == "sm_80" else \
            sm90("pipeline", epilogue=epilogue, k=16 * 5)
        low = fd.lower(target)
        r = rt.compile(low.source, low.name, target, isolate=True)
        assert r.stats.spill_stores == 0 and r.stats.spill_loads == 0, r.ptxas
        return r.ptx
    one, two = ptx("bias_gelu"), ptx("bias_gelu_saved")
    # D1's stores are in the binary: twice the 32-bit pair stores of the one-output kernel, and twice the
    # 16-bit stores of cut or misaligned pairs
    assert two.count("st.global.u16") == 2 * one.count("st.global.u16") > 0
    # 16 pair stores per thread per output: sm_90a 64x64 tile, one warpgroup; sm_80 64x64 tile, 2x2 warps
    pairs = 32
    assert two.count("st.global.u32") == 2 * one.count("st.global.u32") == pairs


# --- the torch op that keeps the pre-activation (heddle.pytorch: MatmulSpec.saved, the training backend) ---
def _saved_spec():
    from heddle.pytorch.matmul import MatmulSpec
    return MatmulSpec(dtype="bf16", batched=False, batched_b=False, k=96, n=72, trans_a=False, trans_b=True,
                      bias=("bf16", 1), residual=None, activation="gelu", alpha=None, out_dtype="bf16", saved="bf16")


def _operands(seed, grad=False):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(s, generator=g) * 0.5).to(torch.bfloat16).requires_grad_(grad)
            for s in ((40, 96), (72, 96), (72,))]


def test_saved_op_name_round_trips_and_returns_two_tensors():
    from heddle.pytorch import op_names
    from heddle.pytorch.matmul import MatmulSpec, fused_matmul_op
    spec = _saved_spec()
    assert "_Agelu_Sbf16_obf16" in spec.op_name()
    assert MatmulSpec(**op_names.decode(spec.op_name())) == spec
    a, w, bias = _operands(0)
    out, pre = fused_matmul_op(spec).op(a, w, bias)   # CPU: the fusion evaluated with torch
    want = a.double() @ w.double().T + bias.double()
    torch.testing.assert_close(pre.double(), want, atol=3e-2, rtol=2e-2)
    torch.testing.assert_close(out.double(), torch.nn.functional.gelu(want), atol=3e-2, rtol=2e-2)


@needs_cxx
def test_saved_op_kernel_interpreted_against_float64():
    from heddle.pytorch.matmul import fused_matmul_op
    k = fused_matmul_op(_saved_spec()).kernel("sm_80", 8, 8, m=40, rtc=False, sms=132)  # heddle's own schedule
    r = interpret(k, *_operands(1))
    assert r.ok and len(r.output) == 2, r.report()


def test_saved_op_gradients_include_the_pre_activations():
    from heddle.pytorch.matmul import fused_matmul_op
    xs = _operands(2, grad=True)
    out, pre = fused_matmul_op(_saved_spec()).op(*xs)
    (out.float().square().sum() + 3 * pre.float().sum()).backward()
    ref = [x.detach().float().requires_grad_() for x in xs]
    z = ref[0] @ ref[1].T + ref[2]
    (torch.nn.functional.gelu(z).square().sum() + 3 * z.sum()).backward()
    for x, r in zip(xs, ref):
        scale = max(r.grad.abs().max().item(), 1.0)
        torch.testing.assert_close(x.grad.float(), r.grad, atol=3e-2 * scale, rtol=3e-2)
