"""An MX-format output (docs/fp8.md "MX formats", "An MX-format output"): heddle.ops.quantize(y, fmt, group="mx32")
defines q e4m3 / e5m2 [M, N] and s e8m0 per row and 32 columns in torch's blocked layout [round_up(M, 128),
round_up(N/32, 4)] -- the scale_a of the next scales="mx32" matmul. The definition and str(fusion), its
ScheduleErrors (N not a multiple of 32, a target without tcgen05), the float64 reference against a per-element
loop (the OCP MX v1.0 FLOOR shared exponent written out with math.log2) and, where torchao is installed, its to_mx,
the blocked layout against torch's own to_blocked, and the chain into the next mx32 matmul."""
import math

import pytest
import torch

import heddle
from heddle.core.reference import evaluate, unblock_mx_scales
from support.mx_defs import to_blocked

TORCH = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
FMAX = {"e4m3": 448.0, "e5m2": 57344.0}


def layer(n=96, k=64, fmt="e4m3", m="M", dtype="bf16"):
    """y = x @ w.T (f32 accumulate); (q, s) = quantize(y, fmt, group="mx32"); outputs q then s."""
    fd = heddle.Fusion()
    x = fd.input("x", dtype, [m, k])
    w = fd.input("w", dtype, [n, k])
    q, s = heddle.ops.quantize(fd.matmul(x, w, trans_b=True), fmt, group="mx32")
    fd.output(q)
    fd.output(s)
    return fd, q, s


def loop_codes(y, fmt):
    """The codes [M, N/32] written out block by block: e = floor(log2 amax) - emax with emax = floor(log2 F) (the
    exponent of the format's largest power of two), clamped to [-127, 127]; code e + 127; amax 0: code 0."""
    M, N = y.shape
    emax = math.floor(math.log2(FMAX[fmt]))
    codes = torch.empty(M, N // 32, dtype=torch.int64)
    for m in range(M):
        for j in range(N // 32):
            amax = max(abs(float(v)) for v in y[m, 32 * j:32 * j + 32])
            e = -127 if amax == 0 else min(max(math.floor(math.log2(amax)) - emax, -127), 127)
            codes[m, j] = e + 127
    return codes


def test_definition_and_its_shapes():
    fd, q, s = layer(n=96)
    text = str(fd)
    assert "(e8m0)[round_up(M, 128), 4] = amax_scale(T2, e4m3, group=mx32)" in text
    assert "(e4m3)[M, 96] = quantize(T2, T3, e4m3, group=mx32)" in text
    fd2, _, s2 = layer(n=320, m=130, fmt="e5m2")  # N/32 = 10 blocks: padded to 12; 130 rows to 256
    assert s2.dtype == "e8m0" and list(s2.shape) == [256, 12]
    assert "2^(floor(log2 amax|T2| per 32) - 15)" in str(fd2)


@pytest.mark.parametrize("n,msg", [
    (100, r"quantize\(T2, e4m3, group=mx32\): N = 100 \(T2\) is not a multiple of 32; .* pad N with zeros to 128"),
    ("N", r"group=mx32\): the last axis of T2 .* is symbolic \(N\); the e8m0 scale's block count"),
])
def test_bad_n_is_named(n, msg):
    with pytest.raises(heddle.ScheduleError, match=msg):
        layer(n=n)


def test_other_groups_are_named():
    fd = heddle.Fusion()
    y = fd.matmul(fd.input("x", "bf16", ["M", 64]), fd.input("w", "bf16", [96, 64]), trans_b=True)
    with pytest.raises(heddle.ScheduleError, match=r"group='mx16'; use group=128 .* or group='mx32'"):
        heddle.ops.quantize(y, "e4m3", group="mx16")


@pytest.mark.parametrize("target", ["sm_90a", "sm_80", "gfx942"])
def test_targets_without_tcgen05_refuse_it_by_name(target):
    fd, _, _ = layer(n=96, dtype="e4m3" if target == "sm_90a" else "bf16")
    with pytest.raises(heddle.ScheduleError,
                       match=rf"group=mx32\): an MX-format output .* sm_100a tcgen05 kernels only; target {target}"):
        fd.auto_schedule(target)
        heddle.Kernel.build(fd, target, rtc=False)


def test_e8m0_stays_a_scale_byte_elsewhere():
    fd, q, s = layer()
    with pytest.raises(heddle.ScheduleError, match=r"s is e8m0|T3 is e8m0"):
        s * 2.0


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_reference_against_the_loop(fmt):
    M, N, K = 70, 160, 64  # 5 blocks: padded to 8; 70 rows to 128
    fd, _, _ = layer(n=N, k=K, fmt=fmt)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(M, K, generator=g).to(torch.bfloat16)
    w = torch.randn(N, K, generator=g).to(torch.bfloat16)
    x[5] = 0  # an all-zero row: code 0 (2^-127), q = 0, never the NaN code
    x[6] *= 2.0 ** -60  # a tiny row: codes far below 127
    w[40:72] *= 1000.0  # a block of large values
    q, s = evaluate(fd, [x, w])
    y = x.double() @ w.double().T
    codes = loop_codes(y, fmt)
    assert s.dtype == torch.float8_e8m0fnu and s.shape == (128, 8)
    raw = s.view(torch.uint8)
    got = unblock_mx_scales(raw, M, N // 32).to(torch.int64)
    assert torch.equal(got, codes)
    assert int(codes[5].max()) == 0 and int(codes[6].max()) < 127 - 40
    # padding: rows past M and blocks past N/32 hold code 0
    full = unblock_mx_scales(raw, 128, 8)
    assert int(full[M:].max()) == 0 and int(full[:, N // 32:].max()) == 0
    # the blocked bytes are torch's to_blocked of the [M, N/32] codes
    assert torch.equal(raw.flatten(), to_blocked(codes.to(torch.uint8)).flatten())
    # q = satfinite(y / 2^(code - 127)) rounded to fmt, element by element
    per_col = torch.pow(2.0, (codes - 127).double()).repeat_interleave(32, dim=1)
    want = (y / per_col).clamp(-FMAX[fmt], FMAX[fmt]).to(TORCH[fmt])
    assert torch.equal(q.view(torch.uint8), want.view(torch.uint8))
    # the FLOOR convention: |y| / 2^e reaches [2^emax, 2^(emax+1)) at the amax, clipped to F above it
    assert float(q.double().abs().max()) == FMAX[fmt]


def test_reference_against_torchao_to_mx():
    mx = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor")
    M, N, K = 64, 128, 64
    fd, _, _ = layer(n=N, k=K)
    g = torch.Generator().manual_seed(4)
    x, w = torch.randn(M, K, generator=g).bfloat16(), torch.randn(N, K, generator=g).bfloat16()
    q, s = evaluate(fd, [x, w])
    y = (x.double() @ w.double().T).float()
    scale, data = mx.to_mx(y, torch.float8_e4m3fn, 32)  # FLOOR, the default scale calculation
    ref_codes = scale.view(torch.uint8).reshape(M, N // 32).to(torch.int64)
    got = unblock_mx_scales(s.view(torch.uint8), M, N // 32).to(torch.int64)
    assert int((got - ref_codes).abs().max()) <= 1  # one apart only where amax lies within f32 rounding of 2^p
    same = (got == ref_codes).repeat_interleave(32, dim=1)
    assert torch.equal(q.view(torch.uint8)[same], data.reshape(M, N).view(torch.uint8)[same])


def test_q_and_s_chain_into_the_next_mx32_matmul():
    """Layer 1's (q, s) are layer 2's (a, scale_a) as they are: the mx32 reference of layer 2 on them equals the
    float64 sum over the dequantized q."""
    M, N, N2 = 70, 128, 96
    fd1, _, _ = layer(n=N, k=64)
    g = torch.Generator().manual_seed(5)
    x, w = torch.randn(M, 64, generator=g).bfloat16(), torch.randn(N, 64, generator=g).bfloat16()
    q, s = evaluate(fd1, [x, w])
    fd2 = heddle.Fusion()
    a = fd2.input("a", "e4m3", [M, N])
    b = fd2.input("b", "e4m3", [N2, N])
    sa = fd2.input("sa", "e8m0", [128, 4])
    sb = fd2.input("sb", "e8m0", [128, 4])
    fd2.output(fd2.matmul(a, b, trans_b=True, scale_a=sa, scale_b=sb, scales="mx32"))
    b_q = torch.randn(N2, N, generator=g).to(torch.float8_e4m3fn)
    sb_v = torch.full((128, 4), 1.0).to(torch.float8_e8m0fnu)  # code 127: 1
    y2 = evaluate(fd2, [q, b_q, s, sb_v])
    per_col = torch.pow(2.0, unblock_mx_scales(s.view(torch.uint8), M, N // 32).double() - 127
                        ).repeat_interleave(32, dim=1)
    deq = q.double() * per_col
    assert torch.allclose(y2.double(), deq @ b_q.double().T, rtol=2 ** -20, atol=0)
    # and the dequantized q is y to half a step of e4m3 (a subnormal quantum 2^-9 of the block's scale near 0),
    # where y / 2^e passes 448 (FLOOR lets the amax reach 2^9 - ulp) clipped to +-448 * 2^e
    y = x.double() @ w.double().T
    yc = torch.maximum(torch.minimum(y, 448 * per_col), -448 * per_col)
    assert torch.all((deq - yc).abs() <= yc.abs() * 2 ** -4 + per_col * 2.0 ** -10)
    assert bool((y.abs() > 448 * per_col).any())  # the seed has clipped elements
