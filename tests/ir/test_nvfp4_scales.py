"""NVFP4 scales of a matmul (scales="nv16", docs/fp8.md "MX formats"): e2m1x2 operands (two e2m1 a byte, stored
[M, K/2] and [N, K/2]), ue4m3 scale inputs (e4m3 codes, sign bit clear) per 16 of K in torch's blocked layout
[round_up(rows, 128), round_up(K/16, 4)]; the limits of e2m1x2, the schedule's refusals (the definition's
errors: tests/ir/test_mx_scales.py), the e2m1 decoding against the format's formula for all 256 bytes, and the
float64 reference against a direct per-element sum on ragged shapes."""
import pytest
import torch

import heddle
from heddle.core.reference import decode_e2m1x2, evaluate
from support.mx_defs import nv_definition as definition
from support.mx_defs import to_blocked


def test_the_nvfp4_scales_are_part_of_the_matmul():
    fd = definition()
    assert "matmul(a, b^T)  // layout NT, f32 accumulate, nv16 scales sa, sb" in str(fd)
    assert "input  a (e2m1x2)[M, 160]" in str(fd) and "input  sb (e4m3)[256, 20]" in str(fd), str(fd)
    assert next(e for e in fd.exprs() if e["op"] == "matmul")["scales"] == "nv16"
    fd = heddle.Fusion()
    assert fd.input("x", torch.float4_e2m1fn_x2, [128, 64]).dtype == "e2m1x2"


def test_packed_fp4_is_an_operand_of_nv16_matmuls_only():
    fd = heddle.Fusion()
    a, b = fd.input("a", "e2m1x2", [128, 64]), fd.input("b", "e2m1x2", [128, 64])
    x = fd.input("x", "f32", [128, 64])
    with pytest.raises(heddle.ScheduleError, match=r"add\(a\): a is e2m1x2, packed FP4 pairs; it is only an operand "
                                                   r"of fd.matmul\(..., scales='nv16'\)"):
        a + x
    with pytest.raises(heddle.ScheduleError, match=r"cast\(x, e2m1x2\): e2m1x2 is an input format only"):
        x.to(torch.float4_e2m1fn_x2)
    fd.output(fd.matmul(a, b, trans_b=True).to("bf16"))
    with pytest.raises(heddle.ScheduleError, match=r"operands a and b are e2m1x2 \(packed FP4\), NVFP4 or MXFP4 "
                                                   r"data that needs its block scales.*scales='nv16'.*scales='mx32'"):
        fd.auto_schedule("sm_100a").validate("sm_100a")


def test_schedule_refusals():
    with pytest.raises(heddle.ScheduleError, match=r"nv16 \(NVFP4\) scales are applied by sm_100a's block-scaled "
                                                   r"tcgen05.mma \(kind::mxf4nvf4\); target sm_90a has no"):
        definition().auto_schedule("sm_90a").validate("sm_90a")
    definition().auto_schedule("sm_100a").validate("sm_100a")  # lowered (tests/schedule/test_nvfp4_schedule.py)


def test_e2m1_decoding_for_every_byte():
    codes = torch.arange(256, dtype=torch.uint8)
    got = decode_e2m1x2(codes.view(torch.float4_e2m1fn_x2))
    assert got.shape == (512,)

    def e2m1(c):  # OCP MX v1.0 FP4 E2M1: sign, 2 exponent bits (bias 1), 1 mantissa bit; no inf / NaN
        s, e, m = c >> 3, (c >> 1) & 3, c & 1
        v = m * 0.5 if e == 0 else 2.0 ** (e - 1) * (1 + m / 2)
        return -v if s else v

    want = torch.tensor([e2m1(c & 0xF) if j == 0 else e2m1(c >> 4) for c in range(256) for j in (0, 1)],
                        dtype=torch.float64)
    assert torch.equal(got, want)
    assert got.max() == 6.0 and got.min() == -6.0


def test_reference_against_a_direct_sum_on_ragged_shapes():
    M, N, K = 9, 7, 80  # K / 16 = 5 k blocks: padded to 8, the last 64-chunk of K partial
    g = torch.Generator().manual_seed(1)
    a8 = torch.randint(0, 256, (M, K // 2), generator=g, dtype=torch.uint8)
    b8 = torch.randint(0, 256, (N, K // 2), generator=g, dtype=torch.uint8)
    # ue4m3 scales: positive e4m3 codes 0x20..0x50 (2^-5 .. 2^1 and between)
    sa8 = torch.randint(0x20, 0x50, (M, K // 16), generator=g, dtype=torch.uint8)
    sb8 = torch.randint(0x20, 0x50, (N, K // 16), generator=g, dtype=torch.uint8)
    av, bv = decode_e2m1x2(a8.view(torch.float4_e2m1fn_x2)), decode_e2m1x2(b8.view(torch.float4_e2m1fn_x2))
    sav, sbv = sa8.view(torch.float8_e4m3fn).double(), sb8.view(torch.float8_e4m3fn).double()
    want = torch.zeros(M, N, dtype=torch.float64)
    for m in range(M):
        for n in range(N):
            want[m, n] = sum(float(av[m, k]) * float(sav[m, k // 16]) * float(bv[n, k]) * float(sbv[n, k // 16])
                             for k in range(K))
    fd = heddle.Fusion()
    ta, tb = fd.input("a", "e2m1x2", [M, K // 2]), fd.input("b", "e2m1x2", [N, K // 2])
    tsa, tsb = fd.input("sa", "e4m3", [128, 8]), fd.input("sb", "e4m3", [128, 8])
    fd.output(fd.matmul(ta, tb, trans_b=True, scale_a=tsa, scale_b=tsb, scales="nv16"))
    blocked = [to_blocked(s).view(torch.float8_e4m3fn).view(128, 8) for s in (sa8, sb8)]
    out = evaluate(fd, [a8.view(torch.float4_e2m1fn_x2), b8.view(torch.float4_e2m1fn_x2), *blocked])
    assert torch.allclose(out.double(), want, rtol=1e-6, atol=1e-6)
    assert want.abs().max() > 1.0  # the products are not all zero
    neg = sa8.clone()
    neg[0, 0] |= 0x80  # a signed scale: ue4m3 has no sign
    with pytest.raises(heddle.InputError, match="sa holds a negative scale; MX / NVFP4 scales are unsigned"):
        evaluate(fd, [a8.view(torch.float4_e2m1fn_x2), b8.view(torch.float4_e2m1fn_x2),
                      to_blocked(neg).view(torch.float8_e4m3fn).view(128, 8), blocked[1]])


def test_launch_checks_count_k_in_e2m1_elements():
    from heddle.core.inputs import MatmulGeometry
    fd = definition(M="M", N=256, K="K")  # a [M, K] bytes: K / 2 ... bound at launch
    mexpr = next(e for e in fd.exprs() if e["op"] == "matmul")

    def geometry(kbytes=40, sa_cols=8):
        fp4, f8 = torch.float4_e2m1fn_x2, torch.float8_e4m3fn
        by = {"a": torch.zeros(130, kbytes, dtype=torch.uint8).view(fp4),
              "b": torch.zeros(256, kbytes, dtype=torch.uint8).view(fp4),
              "sa": torch.zeros(256, sa_cols, dtype=f8), "sb": torch.zeros(256, 8, dtype=f8)}
        return MatmulGeometry(mexpr, by)

    assert geometry().K == 40  # 40 bytes a row: K = 80, 5 k blocks of 16 padded to 8
    with pytest.raises(heddle.InputError, match=r"input 'sa' \(scale_a\): shape \[256, 4\], but M=130, N=256, K=80 "
                                                r"need scale_a \[256, 8\] \(nv16 scales"):
        geometry(sa_cols=4)
    with pytest.raises(heddle.InputError, match=r"input 'a': K = 72 is not a multiple of 16"):
        geometry(kbytes=36)
