"""Quantize with a computed scale (docs/fp8.md "Computed output scales"): heddle.ops.quantize(y, fmt, group)
defines s = max(amax |y| over a group of the last axis, 1e-4) / max_finite(fmt) and q = satfinite(y / s);
the definition, str(fusion), its ScheduleErrors, the float64 reference on ragged N (checked element by element
against a loop written out here), and the chain into the next layer's block128 matmul (q and s are its a and
scale_a as they are)."""
import pytest
import torch

import heddle
from heddle.core.reference import evaluate

FMAX = {"e4m3": 448.0, "e5m2": 57344.0}
TORCH = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def layer(n=300, k=64, fmt="e4m3", group=128, symbolic_n=False):
    """y = x @ w (bf16 operands, f32 accumulate); (q, s) = quantize(y); outputs q then s."""
    fd = heddle.Fusion()
    x = fd.input("x", "bf16", ["M", k])
    w = fd.input("w", "bf16", ["N" if symbolic_n else n, k])
    q, s = heddle.ops.quantize(fd.matmul(x, w, trans_b=True), fmt, group=group)
    fd.output(q)
    fd.output(s)
    return fd, q, s


def loop_reference(y, fmt, group):
    """s and q written out group by group in float64 (only the columns n < N enter a group's amax)."""
    M, N = y.shape
    g = N if group == "row" else group
    s = torch.empty(M, -(-N // g), dtype=torch.float64)
    q = torch.empty(M, N, dtype=torch.float64)
    for m in range(M):
        for j in range(s.shape[1]):
            cols = range(j * g, min((j + 1) * g, N))
            amax = max(abs(float(y[m, n])) for n in cols)
            s[m, j] = float(torch.tensor(max(amax, 1e-4) / FMAX[fmt], dtype=torch.float32))  # an f32 tensor
            for n in cols:
                v = min(max(float(y[m, n]) / float(s[m, j]), -FMAX[fmt]), FMAX[fmt])
                q[m, n] = float(torch.tensor(v, dtype=torch.float64).to(TORCH[fmt]).double())
    return q, s


def test_definition_and_str():
    fd, q, s = layer(n=300)
    text = str(fd)
    assert "T3 (f32)[M, 3] = amax_scale(T2, e4m3, group=128)  // max(amax|T2|, 1e-4) / 448" in text, text
    assert "T4 (e4m3)[M, 300] = quantize(T2, T3, e4m3, group=128)" in text, text
    assert (q.dtype, s.dtype, s.shape) == ("e4m3", "f32", ["M", 3])
    ops = {e["op"]: e for e in fd.exprs()}
    assert (ops["amax_scale"]["group"], ops["quantize"]["cast"], ops["quantize"]["inputs"]) == (128, "e4m3",
                                                                                                 ["T2", "T3"])
    fd, q, s = layer(n=200, fmt="e5m2", group="row", symbolic_n=False)
    assert s.shape == ["M", 1] and "amax_scale(T2, e5m2, group=row)  // max(amax|T2|, 1e-4) / 57344" in str(fd)
    fd, q, s = layer(fmt="e4m3", group="row", symbolic_n=True)  # per row: one scale whatever N is
    assert s.shape == ["M", 1] and q.shape == ["M", "N"]


@pytest.mark.parametrize("kw,msg", [
    (dict(fmt="bf16"), r"quantize\(T2, bf16, group=128\): the format is bf16; a computed scale quantizes to an "
                       r"8-bit float: e4m3 \(largest 448\) or e5m2"),
    (dict(group=64), r"quantize\(T2, e4m3, group=64\): group 64 is not supported; use group=128"),
    (dict(symbolic_n=True), r"the last axis of T2 \(f32\)\[M, N\] is symbolic \(N\); the scale's group count "
                            r"ceil\(N/128\) needs a concrete N"),
    (dict(group=0), r"quantize\(T2\): group=0; use group=128 \(1 x 128 blocks\), group='row' or group='mx32'"),
])
def test_definition_errors_name_the_rule(kw, msg):
    with pytest.raises(heddle.ScheduleError, match=msg):
        layer(**kw)


def test_an_8bit_value_is_not_quantized_again():
    fd = heddle.Fusion()
    y = fd.matmul(fd.input("x", "bf16", ["M", 64]), fd.input("w", "bf16", [64, 128]))
    with pytest.raises(heddle.ScheduleError, match=r"T\d \(e4m3\)\[M, 128\] is already e4m3; quantize the f32"):
        heddle.ops.quantize(y.to("e4m3"), "e4m3")


@pytest.mark.parametrize("fmt,group,n", [("e4m3", 128, 300), ("e5m2", 128, 256), ("e4m3", "row", 200),
                                         ("e5m2", "row", 37)])
def test_reference_against_the_written_out_loop(fmt, group, n):
    # N = 300: groups of 128, 128 and 44 (the last partial); a row of zeros takes the 1e-4 floor; large values
    # in the last real columns (299) must set the last group's scale, and padding must not enter it
    M, K = 5, 64
    fd, _, _ = layer(n=n, k=K, fmt=fmt, group=group)
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(M, K, generator=g)).to(torch.bfloat16)
    x[2] = 0  # an all-zero row: every group's amax is 0
    w = (torch.randn(n, K, generator=g) * 0.25).to(torch.bfloat16)
    w[n - 1] *= 64  # the last column: the largest values of the last group
    q, s = evaluate(fd, [x, w])
    assert (q.dtype, s.dtype) == (TORCH[fmt], torch.float32)
    y = x.double() @ w.double().t()
    q_ref, s_ref = loop_reference(y, fmt, group)
    assert torch.equal(s.double(), s_ref), (s.double() - s_ref).abs().max()
    assert torch.equal(q.double(), q_ref)
    assert torch.all(s[2] == torch.tensor(1e-4 / FMAX[fmt], dtype=torch.float32))
    assert torch.all(q[2].double() == 0)
    # each group's largest magnitude quantizes to the format's largest finite value (up to the f32 scale)
    big = q.double().abs().amax(dim=1)
    assert torch.all((big[[0, 1, 3, 4]] - FMAX[fmt]).abs() <= FMAX[fmt] * 2 ** -3)
    # dequantized: q * s is y within the format's rounding (3 / 2 mantissa bits; subnormals near zero)
    per_col = s.double().repeat_interleave(n if group == "row" else group, dim=1)[:, :n]
    mant = 3 if fmt == "e4m3" else 2
    tol = y.abs() * 2.0 ** -(mant + 1) + per_col * 2.0 ** (-9 if fmt == "e4m3" else -16)
    assert torch.all((q.double() * per_col - y).abs() <= tol * 1.0001)


def test_float32_evaluation_matches_float64_up_to_f32_rounding():
    fd, _, _ = layer(n=300)
    g = torch.Generator().manual_seed(2)
    x, w = torch.randn(7, 64, generator=g).to(torch.bfloat16), torch.randn(300, 64, generator=g).to(torch.bfloat16)
    q64, s64 = evaluate(fd, [x, w])
    q32, s32 = evaluate(fd, [x, w], compute_dtype=torch.float32)
    assert torch.allclose(s32, s64, rtol=2 ** -22, atol=0)
    # a quotient on a rounding tie may round differently in f32: at most one e4m3 step apart, rarely
    d = (q32.double() - q64.double()).abs() / q64.double().abs().clamp(min=2 ** -9)
    assert d.max() <= 2 ** -3 and (d > 0).float().mean() < 0.01


def test_the_quantized_output_chains_into_the_next_block128_matmul():
    # layer 1: y1 = x @ w1 -> (q, s) with group 128; layer 2: the block128 matmul of q [M, K2] with scale_a = s
    # [M, ceil(K2/128)] as they come out (K2 = 300: three k blocks, the last partial), against float64 of y1
    M, K1, K2, N2 = 9, 64, 300, 136
    fd1, q1, s1 = layer(n=K2, k=K1)
    fd2 = heddle.Fusion()
    a = fd2.input("a", q1.dtype, ["M", K2])
    b = fd2.input("b", "e4m3", [N2, K2])
    sa = fd2.input("sa", s1.dtype, s1.shape)  # the definition accepts s's shape as its scale_a
    sb = fd2.input("sb", "f32", [-(-N2 // 128), -(-K2 // 128)])
    fd2.output(fd2.matmul(a, b, trans_b=True, scale_a=sa, scale_b=sb).to("bf16"))
    g = torch.Generator().manual_seed(3)
    x = torch.randn(M, K1, generator=g).to(torch.bfloat16)
    w1 = (torch.randn(K2, K1, generator=g) * 0.3).to(torch.bfloat16)
    w1[130:140] *= 20  # y1 columns 130..139: the middle k block of layer 2 gets a larger scale of its own
    b2 = torch.randn(N2, K2, generator=g).to(torch.float8_e4m3fn)
    sb2 = torch.rand(2, 3, generator=g) + 0.5
    q, s = evaluate(fd1, [x, w1])
    assert s.shape == (M, 3) and s[:, 1].min() > 4 * s[:, 0].max()
    out = evaluate(fd2, [q, b2, s, sb2])  # fd2's inputs in order: a, b, sa, sb
    y1 = x.double() @ w1.double().t()
    bd = b2.double() * sb2.double().repeat_interleave(128, 0)[:N2].repeat_interleave(128, 1)[:, :K2]
    ref = y1 @ bd.t()
    err = (out.double() - ref).abs().max() / ref.abs().max()
    # e4m3's relative step is 2^-3 at worst (2^-4 rounding): the sums of 300 such products stay well inside 2^-4
    assert err < 2 ** -4, err
    naive = evaluate(fd2, [q, b2, torch.ones_like(s), sb2])  # the scales dropped: far off
    assert (naive.double() - ref).abs().max() / ref.abs().max() > 0.5
