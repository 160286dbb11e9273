"""The computed output scale's fusions (heddle.ops.quantize; docs/fp8.md "Computed output scales"), shared by
its interpreter tests (sm_90a and sm_100a) and the mutation family sm90_fp8_amax: an e4m3 GEMM with per-row / per-column scales,
a bias and an activation, quantized with a scale per row and 128 columns (or per row); outputs q, then s."""
import torch

import heddle
from heddle.core.reference import evaluate
from support.fp8_defs import fp8_schedule, inputs
from support.tcgen05_defs import roles
from support.wgmma_defs import schedule_sm90

FMAX = {"e4m3": 448.0, "e5m2": 57344.0}


def quant_fusion(n=300, k=144, fmt="e4m3", group=128, act="gelu", residual=False):
    """(a @ b.T) * scale_a [M, 1] * scale_b [1, N] + bias [+ res [M, N]] -> act -> quantize(fmt, group).
    (fusion, a, b)."""
    fd = heddle.Fusion()
    a = fd.input("a", "e4m3", ["M", k])
    b = fd.input("b", "e4m3", [n, k])
    y = fd.matmul(a, b, False, True) * fd.input("scale_a", "f32", ["M", 1]) * fd.input("scale_b", "f32", [1, n])
    y = y + fd.input("bias", "bf16", [n])
    if residual:
        y = y + fd.input("res", "bf16", ["M", n])
    if act:
        y = getattr(heddle.ops, act)(y)
    q, s = heddle.ops.quantize(y, fmt, group=group)
    fd.output(q)
    fd.output(s)
    return fd, a, b


def bare_quant(dtype="e4m3", k=256, n=256, s_first=False):
    """quantize(matmul(a, b.T), "e4m3") with no other epilogue, a and b of `dtype`; outputs q, then s (s_first:
    the other order). (fusion, a, b)."""
    fd = heddle.Fusion()
    a, b = fd.input("a", dtype, ["M", k]), fd.input("b", dtype, [n, k])
    q, s = heddle.ops.quantize(fd.matmul(a, b, False, True), "e4m3")
    for t in (s, q) if s_first else (q, s):
        fd.output(t)
    return fd, a, b


def scheduled(variant="coop", n=136, k=144, stages=4, prefetch=2, store="direct", **kw):
    """quant_fusion on the sm_90a warp-specialized kernel with 128 x 128 x 128 tiles (bn holds whole groups).
    store="tma": q through the TMA-store epilogue (ping-pong then with 64 x 128 warpgroup tiles, the largest
    the schedule takes for 8-bit staging there; N a multiple of 16)."""
    fd, a, b = quant_fusion(n=n, k=k, **kw)
    bm = 64 if store == "tma" and variant == "pingpong" else 128
    mm = fp8_schedule(fd, a, b, variant=variant, bm=bm, bn=128, stages=stages, prefetch=prefetch)
    if store == "tma":
        mm.epilogue_store("tma")
    return fd


def scheduled_sm100(n=200, k=80, bn=128, bk=64, stages=2, tma=None, store=None, acc_stages=2, **kw):
    """quant_fusion on the sm_100a tcgen05 kernel (load warp, MMA warp, epilogue warpgroup storing directly from
    tensor memory; tile 128 x bn x bk, acc_stages accumulator stages). tma: the epilogue operand ("bias" or "res")
    cached with tma_load (its producer warp and 2-stage ring); store: epilogue_store(store) ("tma": q through the
    staged TMA store)."""
    fd, a, b = quant_fusion(n=n, k=k, **kw)
    mm = schedule_sm90(fd, a, b, bm=128, bn=bn, bk=bk, wgs=1, stages=stages, roles=roles(acc_stages))
    if tma:
        fd.cache_after(next(t for t in fd.inputs if t.name == tma), "tma_load").circular_buffer(2)
    if store:
        mm.epilogue_store(store)
    return fd


# the quantize source mutants that apply on the sm_100a tcgen05 kernels (quant_shuffle: no shuffle there)
QUANT_KINDS_SM100 = ("quant_mask", "quant_group", "quant_divisor")


def interpreted_sm100(fd, ins):
    """fd built for sm_100a (no NVRTC) and its printed kernel interpreted on `ins` over 2 CTAs, clean (no finding);
    the numbers are the caller's (dequantized_against_float64). (kernel, result)."""
    from heddle.interpret import interpret
    k = heddle.Kernel.build(fd, "sm_100a", rtc=False)
    r = interpret(k, *ins, sms=2, reference=False)
    assert r.ok, f"{k.name}:\n{r.report()}"
    return k, r


def tensors(fd, M, seed=0):
    """fd's inputs (support.fp8_defs.inputs) with the last column set up so that a column past N would show:
    a large bias under a negative column scale, so most rows' real value there is small while a column past
    N (its operand reads clamped to this one, its accumulator zero) would be large."""
    ins = inputs(fd, M, seed=seed)
    n = ins[1].shape[0]
    ins[3][0, n - 1] = -8.0  # scale_b [1, N]
    ins[4][n - 1] = 48.0     # bias [N]
    return ins


def dequantized_against_float64(fd, ins, out, fmt, group):
    """A kernel's (q, s) against heddle.reference in float64: s up to f32 rounding, q * s within one step of
    the format."""
    q, s = out
    q_ref, s_ref = evaluate(fd, ins)
    # s: the amax of f32 epilogue values against float64 ones: equal up to f32 rounding of the sums
    assert torch.allclose(s.double(), s_ref.double(), rtol=2 ** -16, atol=0), (s - s_ref).abs().max()
    n = q.shape[1]
    per_col = s.double().repeat_interleave(n if group == "row" else group, dim=1)[:, :n]
    y = q_ref.double() * s_ref.double().repeat_interleave(n if group == "row" else group, dim=1)[:, :n]
    err = (q.double() * per_col - y).abs()
    step = 2.0 ** -3 if fmt == "e4m3" else 2.0 ** -2  # one step of the format, relative (a rounding tie apart)
    assert torch.all(err <= y.abs() * step + per_col * 2.0 ** -8), err.max()
    assert q.double().abs().max() <= FMAX[fmt]


def out_scale_against_float64(q, s, y, dt, out_scale):
    """heddle.scaled_mm's (q, s) of out_scale="1x128" | "row" (torch dtype dt) against y, the float64 value it
    quantizes: s = max(amax of y per row and 128 columns (or per row), 1e-4) / F up to f32 rounding, q * s within one
    step of the format."""
    import torch.nn.functional as F
    fmt = {torch.float8_e4m3fn: "e4m3", torch.float8_e5m2: "e5m2"}[dt]
    m, n = y.shape
    g = n if out_scale == "row" else 128
    assert q.dtype == dt and q.shape == (m, n)
    assert s.dtype == torch.float32 and s.shape == ((m, 1) if out_scale == "row" else (m, -(-n // 128)))
    s_ref = F.pad(y, (0, -n % g)).view(m, -1, g).abs().amax(dim=-1).clamp(min=1e-4) / FMAX[fmt]
    # s comes from f32 epilogue values: equal to float64's up to f32 rounding
    assert torch.allclose(s.double(), s_ref, rtol=2 ** -14, atol=0), (s.double() - s_ref).abs().max()
    per_col = s.double().repeat_interleave(g, dim=1)[:, :n]
    err = (q.double() * per_col - y).abs()
    step = 2.0 ** -3 if fmt == "e4m3" else 2.0 ** -2  # one step of the format, relative (a rounding tie apart)
    assert torch.all(err <= y.abs() * step + per_col * 2.0 ** -6), err.max()
    assert q.double().abs().max() <= FMAX[fmt]


def assert_quant_mutants_caught(k, ins, kinds, present):
    """The source mutants of kernel k of `kinds` (the kinds that find something to mutate: exactly `present`) are
    each caught by the interpreter's own check against float64 (e4m3: q within one step) on inputs `ins`."""
    from heddle.core.source_mutants import source_mutants
    from heddle.interpret import _Mutated, interpret
    muts = source_mutants(k.lowered.source, kinds=kinds)
    assert {m.kind for m in muts} == set(present)
    for mu in muts:
        r = interpret(_Mutated(k, mu.source), *ins, sms=2, max_findings=2)
        assert not r.ok, f"survived: {mu.kind} {mu.what}"
