"""Block scales of a matmul (docs/fp8.md "Block scales and promotion"): the definition (scale_a [M, ceil(K/128)],
scale_b [ceil(N/128), ceil(K/128)], f32 inputs), its ScheduleErrors naming the scale tensor and the shape it
needs, the schedule rules (promotion(k), K-major operands, wgmma targets) and the float64 reference."""
import pytest
import torch

import heddle
from heddle.core.reference import block_scaled_matmul, evaluate


def definition(M="M", N=200, K=300, sa=None, sb=None, dtype="bf16", trans_a=False, trans_b=True, sdtype="f32"):
    fd = heddle.Fusion()
    a = fd.input("a", dtype, [K, M] if trans_a else [M, K])
    b = fd.input("b", dtype, [N, K] if trans_b else [K, N])
    kb = -(-K // 128) if isinstance(K, int) else "KB"
    s_a = fd.input("sa", sdtype, sa or [M, kb])
    s_b = fd.input("sb", sdtype, sb or [-(-N // 128), kb])
    mm = fd.matmul(a, b, trans_a=trans_a, trans_b=trans_b, scale_a=s_a, scale_b=s_b)
    fd.output(mm.to("bf16"))
    return fd


def test_the_scales_are_part_of_the_matmul():
    fd = definition()
    assert "matmul(a, b^T)  // layout NT, f32 accumulate, block128 scales sa, sb" in str(fd)
    e = next(e for e in fd.exprs() if e["op"] == "matmul")
    assert (e["scales"], e["scale_a"], e["scale_b"]) == ("block128", "sa", "sb")
    plain = heddle.Fusion()
    x = plain.input("x", "bf16", ["M", 64])
    y = plain.input("y", "bf16", [64, 64])
    plain.matmul(x, y)
    assert next(e for e in plain.exprs() if e["op"] == "matmul")["scales"] is None


@pytest.mark.parametrize("sa,sb,bad,want", [
    (["M", 2], None, "sa", "[M, 3 (ceil(300/128))]"),    # K = 300: three blocks, the last partial
    (["N", 3], None, "sa", "[M, 3 (ceil(300/128))]"),    # the rows of A are M, not another symbol
    (None, [1, 3], "sb", "[2 (ceil(200/128)), 3 (ceil(300/128))]"),
    (None, [2, 3, 1], "sb", "[2 (ceil(200/128)), 3 (ceil(300/128))]"),
])
def test_a_wrong_scale_shape_names_the_tensor_and_the_shape_it_needs(sa, sb, bad, want):
    with pytest.raises(heddle.ScheduleError) as e:
        definition(sa=sa, sb=sb)
    msg = str(e.value)
    assert f"scale_{bad[1]} {bad} (f32)" in msg and want in msg, msg


def test_other_definition_errors():
    with pytest.raises(heddle.ScheduleError, match=r"scale_a sa is bf16; block scales are f32"):
        definition(sdtype="bf16")
    with pytest.raises(heddle.ScheduleError, match="symbolic block count"):  # K symbolic: KB symbolic too
        definition(K="K", sa=["M", 3])
    assert "block128 scales" in str(definition(K="K"))
    fd = heddle.Fusion()
    a, b = fd.input("a", "bf16", ["M", 256]), fd.input("b", "bf16", [128, 256])
    s = fd.input("s", "f32", ["M", 2])
    with pytest.raises(heddle.ScheduleError, match="block scales come in pairs"):
        fd.matmul(a, b, trans_b=True, scale_a=s)
    with pytest.raises(heddle.ScheduleError, match="unknown scale kind 'block32'"):
        fd.matmul(a, b, trans_b=True, scale_a=s, scale_b=fd.input("t", "f32", [1, 2]), scales="block32")


def lowered_error(fd, target="sm_90a"):
    with pytest.raises(heddle.ScheduleError) as e:
        fd.auto_schedule(target).validate(target)
    return str(e.value)


def test_schedule_rules():
    assert "has none" in lowered_error(definition(), "sm_80") and "target sm_80" in lowered_error(definition(), "sm_80")
    assert "operand a is stored [K, M]" in lowered_error(definition(trans_a=True))
    assert "operand b is stored [K, N] (trans_b=False)" in lowered_error(definition(trans_b=False))
    fd = definition()
    with pytest.raises(heddle.ScheduleError, match="k = 48 elements of K per promotion"):
        fd.matmul_tensor.promotion(48)
    assert fd.matmul_tensor.promotion_k == 128 and fd.matmul_tensor.promotion(64).promotion_k == 64
    plain = heddle.Fusion()
    x, y = plain.input("x", "bf16", ["M", 64]), plain.input("y", "bf16", [64, 64])
    plain.output(plain.matmul(x, y).to("bf16"))
    plain.matmul_tensor.promotion(64)
    assert "the matmul has no block scales" in lowered_error(plain)


def test_fp8_promotion_shorter_than_one_wgmma_is_refused():
    fd = definition(dtype="e4m3", K=256)
    fd.matmul_tensor.promotion(16)
    assert "promotion(16) is shorter than one wgmma of e4m3 operands (K = 32)" in lowered_error(fd)


def test_reference_sums_scaled_blocks():
    g = torch.Generator().manual_seed(0)
    M, N, K = 5, 200, 300
    a, b = torch.randn(M, K, generator=g, dtype=torch.float64), torch.randn(K, N, generator=g, dtype=torch.float64)
    sa, sb = torch.rand(M, 3, generator=g, dtype=torch.float64) + 0.5, torch.rand(2, 3, generator=g,
                                                                                    dtype=torch.float64) + 0.5
    want = torch.zeros(M, N, dtype=torch.float64)  # element by element, from the definition
    for m in range(M):
        for n in range(N):
            want[m, n] = sum(float(a[m, kb * 128:(kb + 1) * 128] @ b[kb * 128:(kb + 1) * 128, n]) * sa[m, kb] *
                             sb[n // 128, kb] for kb in range(3))
    for p in (128, 64, 16):
        assert torch.allclose(block_scaled_matmul(a, b, sa, sb, promotion=p), want, rtol=1e-12, atol=1e-12)
    fd = definition(M=M, N=N, K=K)
    got = evaluate(fd, [a, b.t().contiguous(), sa, sb])
    assert torch.allclose(got.double(), want.to(torch.bfloat16).double())
    with pytest.raises(heddle.InputError, match=r"scale_b has shape \[2, 2\], but M=5, N=200, K=300 need scale_b "
                                                r"\[2, 3\]"):
        block_scaled_matmul(a, b, sa, sb[:, :2])
