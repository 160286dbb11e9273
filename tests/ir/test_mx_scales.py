"""MXFP8 scales of a matmul (scales="mx32", docs/fp8.md "MX formats"): the definition (e4m3 / e5m2 operands, e8m0
scale inputs in torch's blocked layout [round_up(rows, 128), round_up(K/32, 4)]), its ScheduleErrors naming the
tensor and the rule, the e8m0 dtype's limits, the launch-time InputErrors naming each wrong scale, and the float64
reference decoding the blocked layout against a direct per-element sum. (The schedule: tests/schedule/
test_mx_schedule.py.)"""
import pytest
import torch

import heddle
from heddle.core.inputs import MatmulGeometry
from heddle.core.reference import evaluate, mx_scaled_matmul, unblock_mx_scales
from support.mx_defs import mx_definition as definition
from support.mx_defs import nv_definition
from support.mx_defs import to_blocked


def test_the_mx_scales_are_part_of_the_matmul():
    fd = definition()
    assert "matmul(a, b^T)  // layout NT, f32 accumulate, mx32 scales sa, sb" in str(fd)
    assert "input  sa (e8m0)[MP, 12]" in str(fd) and "input  sb (e8m0)[256, 12]" in str(fd), str(fd)
    e = next(e for e in fd.exprs() if e["op"] == "matmul")
    assert (e["scales"], e["scale_a"], e["scale_b"]) == ("mx32", "sa", "sb")
    assert [t.dtype for t in fd.inputs] == ["e4m3", "e4m3", "e8m0", "e8m0"]
    # e5m2 x e4m3 mixes, torch's dtype names map
    fd = heddle.Fusion()
    a, b = fd.input("a", torch.float8_e5m2, [256, 64]), fd.input("b", torch.float8_e4m3fn, [128, 64])
    sa, sb = fd.input("sa", torch.float8_e8m0fnu, [256, 4]), fd.input("sb", torch.float8_e8m0fnu, [128, 4])
    fd.matmul(a, b, trans_b=True, scale_a=sa, scale_b=sb, scales="mx32")
    assert fd.inputs[2].dtype == "e8m0"


@pytest.mark.parametrize("kw,want", [
    (dict(M=300, sa=[300, 12]), "scale_a sa (e8m0)[300, 12] has the wrong shape; mx32 scales need scale_a [384, 12]"),
    (dict(sb=[200, 12]), "scale_b sb (e8m0)[200, 12] has the wrong shape; mx32 scales need scale_b [256, 12]"),
    (dict(K=352, sb=[256, 11]), "need scale_b [256, 12]"),      # K/32 = 11 k blocks, padded to 12
    (dict(sa=["MP", 10]), "need scale_a [round_up(M, 128), 12]"),
    (dict(sa=[384, 12]), "need scale_a [round_up(M, 128), 12]"),  # M symbolic: the rows are a symbol too
    (dict(sb=[256, 12, 1]), "need scale_b [256, 12]"),
    (dict(K=300), "K = 300 (a) is not a multiple of 32; an MXFP8 scale covers 32 elements of K: pad K with zeros "
                  "to 320"),
    (dict(sdtype="f32"), "scale_a sa is f32; mx32 scales are e8m0 (torch.float8_e8m0fnu) of shape "
                         "[round_up(M, 128), 12]"),
    (dict(dtype="bf16"), "operand a is bf16; mx32 scales (MXFP8) take e4m3 or e5m2 operands"),
    (dict(bdtype="f16", dtype="e5m2"), "operands are e5m2 and f16"),  # the matmul's own rule first
    # NVFP4 (scales="nv16"): e2m1x2 operands, e4m3 (ue4m3) scales per 16 of K
    (dict(nvfp4=True, K=72), "K = 72 (a) is not a multiple of 16; an NVFP4 scale covers 16 elements of K: pad K "
                             "with zeros to 80"),
    (dict(nvfp4=True, sdtype="e8m0"), "scale_a sa is e8m0; nv16 scales are e4m3 (torch.float8_e4m3fn, sign bit "
                                      "clear: ue4m3)"),
    (dict(nvfp4=True, dtype="e4m3"), "operand a is e4m3; nv16 scales (NVFP4) take e2m1x2 operands"),
    (dict(nvfp4=True, M=300, sa=[300, 20]), "scale_a sa (e4m3)[300, 20] has the wrong shape; nv16 scales need "
                                            "scale_a [384, 20]"),
    (dict(nvfp4=True, K=336, sb=[256, 20]), "need scale_b [256, 24]"),  # K/16 = 21 k blocks, padded to 24
])
def test_definition_errors_name_the_tensor_and_the_rule(kw, want):
    kw = dict(kw)
    build = nv_definition if kw.pop("nvfp4", False) else definition
    with pytest.raises(heddle.ScheduleError) as e:
        build(**kw)
    assert want in str(e.value), str(e.value)


def test_e8m0_is_a_scale_input_only():
    fd = heddle.Fusion()
    s = fd.input("s", "e8m0", [128, 4])
    x = fd.input("x", "f32", [128, 4])
    with pytest.raises(heddle.ScheduleError, match=r"mul\(s\): s is e8m0, the scale byte of the MX formats"):
        s * x
    with pytest.raises(heddle.ScheduleError,
                       match=r"cast\(x, e8m0\): e8m0 is an input format only \(MX scales, NVFP4 operands\)"):
        x.to(torch.float8_e8m0fnu)
    a, b = fd.input("a", "e4m3", [128, 64]), fd.input("b", "e4m3", [128, 64])
    f32 = fd.input("f", "f32", [128, 1])
    with pytest.raises(heddle.ScheduleError, match=r"scale_a s is e8m0; block scales are f32 .* pass scales='mx32'"):
        fd.matmul(a, b, trans_b=True, scale_a=s, scale_b=f32)  # e8m0 under block128: f32 wanted
    fd2 = heddle.Fusion()
    p, q = fd2.input("p", "e8m0", [128, 64]), fd2.input("q", "e8m0", [128, 64])
    with pytest.raises(heddle.ScheduleError, match=r"matmul\(p\): p is e8m0, the scale byte of the MX formats"):
        fd2.matmul(p, q, trans_b=True)


def direct(a, b_nk, sa, sb):
    """sum over k of a[m, k] sa[m, k/32] b[n, k] sb[n, k/32], one element at a time in float64."""
    M, K = a.shape
    N = b_nk.shape[0]
    out = torch.zeros(M, N, dtype=torch.float64)
    for m in range(M):
        for n in range(N):
            out[m, n] = sum(float(a[m, k]) * float(sa[m, k // 32]) * float(b_nk[n, k]) * float(sb[n, k // 32])
                            for k in range(K))
    return out


def mx_inputs(M, N, K, seed=0, fa=torch.float8_e4m3fn, fb=torch.float8_e4m3fn):
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(M, K, generator=g) * 2).to(fa)
    b = (torch.randn(N, K, generator=g) * 2).to(fb)
    # e8m0 codes 120..134: 2^-7 .. 2^7
    sa = torch.randint(120, 135, (M, K // 32), generator=g, dtype=torch.uint8).view(torch.float8_e8m0fnu)
    sb = torch.randint(120, 135, (N, K // 32), generator=g, dtype=torch.uint8).view(torch.float8_e8m0fnu)
    return a, b, sa, sb


def test_the_blocked_layout_decodes_to_torch_to_blocked():
    for rows, kb in ((5, 3), (130, 8), (256, 5)):
        x = torch.randint(0, 255, (rows, kb), dtype=torch.uint8)
        blocked = to_blocked(x)  # flat, torch's own function
        assert torch.equal(unblock_mx_scales(blocked, rows, kb), x)
        assert torch.equal(unblock_mx_scales(blocked.view(-(-rows // 128) * 128, -(-kb // 4) * 4), rows, kb), x)
    with pytest.raises(heddle.InputError, match=r"MX scales: sb has 100 elements .* need \[256, 8\]"):
        unblock_mx_scales(torch.zeros(100), 130, 8, "sb")


def test_reference_against_a_direct_sum_on_ragged_shapes():
    # M, N ragged (not multiples of 128), K / 32 = 5 k blocks: the last 128-chunk of K partial, padded to 8
    M, N, K = 9, 7, 160
    a, b, sa, sb = mx_inputs(M, N, K, fa=torch.float8_e5m2)
    ba, bb = to_blocked(sa.view(torch.uint8)).view(torch.float8_e8m0fnu), to_blocked(sb.view(torch.uint8)).view(
        torch.float8_e8m0fnu)
    want = direct(a, b, sa.double(), sb.double())
    got = mx_scaled_matmul(a.double(), b.double().T, ba.double(), bb.double())
    assert torch.allclose(got, want, rtol=1e-12, atol=0)
    fd = heddle.Fusion()
    ta, tb = fd.input("a", "e5m2", [M, K]), fd.input("b", "e4m3", [N, K])
    tsa = fd.input("sa", "e8m0", [128, 8])
    tsb = fd.input("sb", "e8m0", [128, 8])
    y = fd.matmul(ta, tb, trans_b=True, scale_a=tsa, scale_b=tsb, scales="mx32")
    fd.output(y)
    out = evaluate(fd, [a, b, ba.view(128, 8), bb.view(128, 8)])
    assert out.dtype == torch.float32
    assert torch.allclose(out.double(), want, rtol=1e-6, atol=1e-6)
    # a scale is not a constant: doubling one byte's power changes exactly that row's 32-wide k block
    sa2 = sa.view(torch.uint8).clone()
    sa2[3, 2] += 1
    ba2 = to_blocked(sa2).view(torch.float8_e8m0fnu)
    got2 = mx_scaled_matmul(a.double(), b.double().T, ba2.double(), bb.double())
    part = (a.double()[3, 64:96] * sa.double()[3, 2]) @ (b.double()[:, 64:96] * sb.double()[:, 2:3]).T
    assert torch.allclose(got2[3] - got[3], part, rtol=1e-12, atol=1e-9)
    assert torch.equal(torch.cat([got2[:3], got2[4:]]), torch.cat([got[:3], got[4:]]))


def test_launch_checks_name_each_wrong_scale():
    fd = definition(M="M", N=256, K="K")  # M and K bound at launch: the scale extents are checked there
    mexpr = next(e for e in fd.exprs() if e["op"] == "matmul")
    M, K = 130, 160

    def geometry(sa_shape=(256, 8), sb_shape=(256, 8), k=K, sa=None):
        e8 = torch.float8_e8m0fnu
        by = {"a": torch.zeros(M, k, dtype=torch.float8_e4m3fn), "b": torch.zeros(256, k, dtype=torch.float8_e4m3fn),
              "sa": torch.zeros(sa_shape, dtype=torch.uint8).view(e8) if sa is None else sa,
              "sb": torch.zeros(sb_shape, dtype=torch.uint8).view(e8)}
        return MatmulGeometry(mexpr, by)

    assert geometry().K == K  # round_up(130, 128) = 256 rows, round_up(160/32, 4) = 8 k blocks
    with pytest.raises(heddle.InputError, match=r"input 'sa' \(scale_a\): shape \[128, 8\], but M=130, N=256, K=160 "
                                                r"need scale_a \[256, 8\]"):
        geometry(sa_shape=(128, 8))
    with pytest.raises(heddle.InputError, match=r"input 'sb' \(scale_b\): shape \[256, 5\].* need scale_b \[256, 8\]"):
        geometry(sb_shape=(256, 5))
    with pytest.raises(heddle.InputError, match=r"input 'a': K = 144 is not a multiple of 32.*pad K with zeros to 160"):
        geometry(k=144)
    strided = torch.zeros(8, 256, dtype=torch.uint8).view(torch.float8_e8m0fnu).t()
    with pytest.raises(heddle.InputError, match=r"input 'sa' \(scale_a\): strides \[1, 256\].*contiguous"):
        geometry(sa=strided)
    offset = torch.zeros(256 * 8 + 1, dtype=torch.uint8)[1:].view(torch.float8_e8m0fnu).view(256, 8)
    with pytest.raises(heddle.InputError, match=r"input 'sa' \(scale_a\).*16-byte aligned"):
        geometry(sa=offset)
