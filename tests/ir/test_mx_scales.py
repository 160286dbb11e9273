"""MXFP8 scales of a matmul (scales="mx32", docs/fp8.md "MX formats"): the definition (e4m3 / e5m2 operands, e8m0
scale inputs in torch's blocked layout [round_up(rows, 128), round_up(K/32, 4)]), its ScheduleErrors naming the
tensor and the rule, the e8m0 dtype's limits, the schedule rules, and the float64 reference decoding the blocked
layout against a direct per-element sum."""
import pytest
import torch

import heddle
from heddle.core.reference import evaluate, mx_scaled_matmul, unblock_mx_scales
from support.mx_defs import to_blocked


def definition(M="M", N=200, K=320, sa=None, sb=None, dtype="e4m3", trans_a=False, trans_b=True, sdtype="e8m0",
               bdtype=None):
    fd = heddle.Fusion()
    a = fd.input("a", dtype, [K, M] if trans_a else [M, K])
    b = fd.input("b", bdtype or dtype, [N, K] if trans_b else [K, N])
    kb = -(-K // 32 // 4) * 4 if isinstance(K, int) else "KB"
    pad = (lambda r: -(-r // 128) * 128 if isinstance(r, int) else "R" + r)
    s_a = fd.input("sa", sdtype, sa or [pad(M) if isinstance(M, int) else "MP", kb])
    s_b = fd.input("sb", sdtype, sb or [pad(N), kb])
    mm = fd.matmul(a, b, trans_a=trans_a, trans_b=trans_b, scale_a=s_a, scale_b=s_b, scales="mx32")
    fd.output(mm.to("bf16"))
    return fd


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
])
def test_definition_errors_name_the_tensor_and_the_rule(kw, want):
    with pytest.raises(heddle.ScheduleError) as e:
        definition(**kw)
    assert want in str(e.value), str(e.value)


def test_e8m0_is_a_scale_input_only():
    fd = heddle.Fusion()
    s = fd.input("s", "e8m0", [128, 4])
    x = fd.input("x", "f32", [128, 4])
    with pytest.raises(heddle.ScheduleError, match=r"mul\(s\): s is e8m0, the scale byte of the MX formats"):
        s * x
    with pytest.raises(heddle.ScheduleError, match=r"cast\(x, e8m0\): e8m0 is the MX formats' scale byte"):
        x.to(torch.float8_e8m0fnu)
    a, b = fd.input("a", "e4m3", [128, 64]), fd.input("b", "e4m3", [128, 64])
    f32 = fd.input("f", "f32", [128, 1])
    with pytest.raises(heddle.ScheduleError, match=r"scale_a s is e8m0; block scales are f32 .* pass scales='mx32'"):
        fd.matmul(a, b, trans_b=True, scale_a=s, scale_b=f32)  # e8m0 under block128: f32 wanted
    fd2 = heddle.Fusion()
    p, q = fd2.input("p", "e8m0", [128, 64]), fd2.input("q", "e8m0", [128, 64])
    with pytest.raises(heddle.ScheduleError, match=r"matmul\(p\): p is e8m0, the scale byte of the MX formats"):
        fd2.matmul(p, q, trans_b=True)


def schedule_error(fd, target):
    with pytest.raises(heddle.ScheduleError) as e:
        fd.auto_schedule(target).validate(target)
    return str(e.value)


def test_schedule_rules():
    fd = definition()
    msg = schedule_error(fd, "sm_90a")
    assert f"mx32-scaled matmul {fd.matmul_tensor.name}: mx32 (MXFP8) scales are applied by sm_100a's " \
        "block-scaled tcgen05.mma" in msg and "target sm_90a has no block-scaled MMA" in msg, msg
    assert "target sm_80 has no 8-bit float tensor-core instruction" in schedule_error(definition(), "sm_80")
    assert "operand a is stored [K, M] (trans_a=True)" in schedule_error(definition(trans_a=True), "sm_100a")
    assert "operand b is stored [K, N] (trans_b=False)" in schedule_error(definition(trans_b=False), "sm_100a")
    fd = definition()
    fd.matmul_tensor.promotion(64)
    assert "promotion(64) on mx32-scaled matmul" in schedule_error(fd, "sm_100a")
    assert "block-scaled tcgen05 kernel" in schedule_error(definition(), "sm_100a")


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


def lower_error(fd):
    with pytest.raises(heddle.ScheduleError) as e:
        fd.lower("sm_100a")
    return str(e.value)


def mx_tiling(bn=128, bk=128, stages=4, acc_stages=0, N=512):
    from support.tcgen05_defs import roles
    from support.wgmma_defs import schedule_sm90
    fd = definition(N=N, K=512)
    a, b = fd.inputs[0], fd.inputs[1]
    schedule_sm90(fd, a, b, bm=128, bn=bn, bk=bk, wgs=1, stages=stages, roles=roles(acc_stages))
    return fd


@pytest.mark.parametrize("kw,want", [
    (dict(bk=64), "k tile 64; the MXFP8 step (MmaSm100Mx) takes k tiles of 128"),
    (dict(bn=64), "n tile 64; B's scales come in chunks of 128 rows of B"),
    (dict(bn=192), "n tile 192; B's scales come in chunks of 128 rows of B"),
    # 2 x 256 accumulator columns and 4 x (4 + 8) scale columns: more than tensor memory's 512
    (dict(bn=256, acc_stages=2), "2 accumulator stages of 256 columns and 48 MX scale columns (4 operand stages) "
                                 "exceed the 512 tensor-memory columns of sm_100a; use stages=1 or a smaller n tile "
                                 "(or fewer operand stages)"),
])
def test_tcgen05_tiling_rules(kw, want):
    msg = lower_error(mx_tiling(**kw))
    assert want in msg, msg


@pytest.mark.parametrize("kw", [dict(bn=256, acc_stages=1), dict(bn=128, acc_stages=2, stages=6), dict(bn=128)])
def test_tilings_that_fit_reach_the_kernel(kw):
    # one accumulator stage of 256 + 48 scale columns fits (alloc 512); 2 x 128 + 6 x 8 = 304 fits too
    msg = lower_error(mx_tiling(**kw))
    assert "block-scaled tcgen05 kernel (scale chunks in the operand ring, tcgen05.cp into tensor memory) is not " \
           "lowered yet" in msg, msg


@pytest.mark.parametrize("N,bn", [(512, 256), (200, 128)])
def test_automatic_schedule(N, bn):
    fd = definition(N=N, K=512)
    fd.auto_schedule("sm_100a")
    assert f"n.i{{{bn}}}, k.i(r){{128}}]" in fd.matmul_tensor.domain, fd.matmul_tensor.domain
    assert "not lowered yet" in lower_error(fd)  # every rule above passed
