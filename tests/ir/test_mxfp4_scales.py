"""MXFP4 scales of a matmul (scales="mx32" with e2m1x2 operands, docs/fp8.md "MX formats"): packed e2m1 operands
(stored [M, K/2] and [N, K/2]) with one e8m0 scale per row and 32 of K in torch's blocked layout [round_up(rows, 128),
round_up(K/32, 4)] -- torch's own convention (its _scaled_mm meta: e8m0 scales mean block 32, an e2m1x2 operand counts
K = 2 * its stored columns). The definition's errors, and the float64 reference against a per-element sum on ragged
shapes."""
import pytest
import torch

import heddle
from heddle.core.reference import decode_e2m1x2, evaluate
from support.mx_defs import mxf4_definition as definition
from support.mx_defs import to_blocked


def test_mx32_scales_with_e2m1x2_operands_are_mxfp4():
    fd = definition()
    assert "matmul(a, b^T)  // layout NT, f32 accumulate, mx32 scales sa, sb" in str(fd)
    assert "input  a (e2m1x2)[M, 160]" in str(fd) and "input  sb (e8m0)[256, 12]" in str(fd), str(fd)
    definition().auto_schedule("sm_100a").validate("sm_100a")


@pytest.mark.parametrize("kwargs, msg", [
    (dict(K=336), r"block_scales\(T\d+\): K = 336 \(a\) is not a multiple of 32; an MXFP4 scale covers 32 elements "
                  r"of K: pad K with zeros to 352"),
    (dict(sa=[128, 8]), r"scale_a sa \(e8m0\)\[128, 8\] has the wrong shape; mx32 scales need scale_a "
                        r"\[round_up\(M, 128\), 12\]"),
    (dict(M=130, sa=[130, 12]), r"scale_a sa \(e8m0\)\[130, 12\] has the wrong shape; mx32 scales need scale_a "
                                r"\[256, 12\]: one e8m0 byte per row of A and 32 of K"),
    (dict(sdtype="e4m3"), r"scale_a sa is e4m3; mx32 scales are e8m0 \(torch.float8_e8m0fnu\) of shape"),
    (dict(sdtype="f32"), r"scale_a sa is f32; mx32 scales are e8m0"),
])
def test_definition_errors_name_the_tensor(kwargs, msg):
    with pytest.raises(heddle.ScheduleError, match=msg):
        definition(**kwargs)


def test_an_fp4_operand_beside_an_fp8_one_is_refused():
    fd = heddle.Fusion()
    a, b = fd.input("a", "e2m1x2", [128, 64]), fd.input("b", "e4m3", [128, 128])
    sa, sb = fd.input("sa", "e8m0", [128, 4]), fd.input("sb", "e8m0", [128, 4])
    with pytest.raises(heddle.ScheduleError, match=r"matmul\(a, b\): operands are e2m1x2 and e4m3"):
        fd.matmul(a, b, trans_b=True, scale_a=sa, scale_b=sb, scales="mx32")


def test_schedule_refusals():
    with pytest.raises(heddle.ScheduleError, match=r"mx32 \(MXFP4\) scales are applied by sm_100a's block-scaled "
                                                   r"tcgen05.mma \(kind::mxf4\); target sm_90a has no"):
        definition().auto_schedule("sm_90a").validate("sm_90a")


def test_reference_against_a_direct_sum_on_ragged_shapes():
    M, N, K = 9, 7, 96  # K / 32 = 3 k blocks: padded to 4, the last 128-chunk of K partial
    g = torch.Generator().manual_seed(3)
    a8 = torch.randint(0, 256, (M, K // 2), generator=g, dtype=torch.uint8)
    b8 = torch.randint(0, 256, (N, K // 2), generator=g, dtype=torch.uint8)
    sa8 = torch.randint(120, 134, (M, K // 32), generator=g, dtype=torch.uint8)  # ue8m0: 2^-7 .. 2^6
    sb8 = torch.randint(120, 134, (N, K // 32), generator=g, dtype=torch.uint8)
    av, bv = decode_e2m1x2(a8.view(torch.float4_e2m1fn_x2)), decode_e2m1x2(b8.view(torch.float4_e2m1fn_x2))
    want = torch.zeros(M, N, dtype=torch.float64)
    for m in range(M):
        for n in range(N):
            want[m, n] = sum(float(av[m, k]) * 2.0 ** (int(sa8[m, k // 32]) - 127) * float(bv[n, k]) *
                             2.0 ** (int(sb8[n, k // 32]) - 127) for k in range(K))
    fd = heddle.Fusion()  # the f32 matmul output itself: no bf16 cast
    ta, tb = fd.input("a", "e2m1x2", [M, K // 2]), fd.input("b", "e2m1x2", [N, K // 2])
    tsa, tsb = fd.input("sa", "e8m0", [128, 4]), fd.input("sb", "e8m0", [128, 4])
    fd.output(fd.matmul(ta, tb, trans_b=True, scale_a=tsa, scale_b=tsb, scales="mx32"))
    blocked = [to_blocked(s).view(torch.float8_e8m0fnu).view(128, 4) for s in (sa8, sb8)]
    out = evaluate(fd, [a8.view(torch.float4_e2m1fn_x2), b8.view(torch.float4_e2m1fn_x2), *blocked],
                   round_casts=False)
    assert torch.allclose(out.double(), want, rtol=1e-6, atol=1e-6)  # the f32 output: one rounding
    assert want.abs().max() > 1e-3  # the products are not all zero


def test_launch_checks_count_k_in_e2m1_elements():
    from heddle.core.inputs import MatmulGeometry
    fd = definition(M="M", N=256, K="K")  # a [M, K] bytes: K / 2 ... bound at launch
    mexpr = next(e for e in fd.exprs() if e["op"] == "matmul")

    def geometry(kbytes=80, sa_cols=8):
        fp4, e8 = torch.float4_e2m1fn_x2, torch.float8_e8m0fnu
        by = {"a": torch.zeros(130, kbytes, dtype=torch.uint8).view(fp4),
              "b": torch.zeros(256, kbytes, dtype=torch.uint8).view(fp4),
              "sa": torch.zeros(256, sa_cols, dtype=e8), "sb": torch.zeros(256, 8, dtype=e8)}
        return MatmulGeometry(mexpr, by)

    assert geometry().K == 80  # 80 bytes a row: K = 160, 5 k blocks of 32 padded to 8
    with pytest.raises(heddle.InputError, match=r"input 'sa' \(scale_a\): shape \[256, 4\], but M=130, N=256, K=160 "
                                                r"need scale_a \[256, 8\] \(mx32 scales"):
        geometry(sa_cols=4)
    with pytest.raises(heddle.InputError, match=r"input 'a': K = 144 is not a multiple of 32"):
        geometry(kbytes=72)
