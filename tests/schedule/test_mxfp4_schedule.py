"""The schedule of an MXFP4 matmul (scales="mx32" with e2m1x2 operands, docs/fp8.md "The MXFP4 kernel",
schedule/mx_scales.cpp): NVFP4's k tile (128 e2m1 = 64 stored bytes) with MXFP8's one scale chunk a k tile (4 + bn/32
scale columns per operand stage), the rules both share (n tiles of 128 or 256, the tensor-memory budget); the
automatic schedule and its expect-tx; a computed output scale; a symbolic K checked at launch. CPU only."""
import pytest

import heddle
from support.mx_defs import assert_scale_columns_lowered
from support.mx_defs import mxf4_definition as definition


def lower_error(fd):
    with pytest.raises(heddle.ScheduleError) as e:
        fd.lower("sm_100a")
    return str(e.value)


def mxf4_tiling(bn=128, bk=64, stages=4, acc_stages=0, N=512):
    """An MXFP4 matmul [M, 512 e2m1] x [N, 512] on the tcgen05 roles at 128 x bn x bk (stored bytes)."""
    from support.tcgen05_defs import roles
    from support.wgmma_defs import schedule_sm90
    fd = definition(N=N, K=512)
    schedule_sm90(fd, *fd.inputs[:2], bm=128, bn=bn, bk=bk, wgs=1, stages=stages, roles=roles(acc_stages))
    return fd


@pytest.mark.parametrize("kw,want", [
    (dict(bk=128), "mx32-scaled matmul T4: k tile 128 (stored e2m1x2 bytes); the MXFP4 step (MmaSm100Mxf4) takes k "
                   "tiles of 128 e2m1 = 64 bytes a row"),
    (dict(bk=32), "k tile 32 (stored e2m1x2 bytes)"),
    (dict(bn=192), "n tile 192; B's scales come in chunks of 128 rows of B"),
    # 2 x 256 accumulator columns and 8 x (4 + 8) scale columns: more than tensor memory's 512
    (dict(bn=256, acc_stages=2, stages=8), "2 accumulator stages of 256 columns and 96 MX scale columns (8 operand "
                                           "stages) exceed the 512 tensor-memory columns of sm_100a"),
])
def test_tcgen05_tiling_rules(kw, want):
    msg = lower_error(mxf4_tiling(**kw))
    assert want in msg, msg


@pytest.mark.parametrize("kw,cols,alloc", [
    (dict(bn=256, acc_stages=1), 256 + 4 * 12, 512),           # one accumulator stage of 256 + 4 x (4 + 8)
    (dict(bn=128, acc_stages=2, stages=6), 256 + 6 * 8, 512),   # 2 x 128 + 6 x (4 + 4)
    (dict(bn=128, acc_stages=1, stages=2), 128 + 2 * 8, 256),
])
def test_tilings_that_fit_are_lowered(kw, cols, alloc):
    assert_scale_columns_lowered(mxf4_tiling(**kw).lower("sm_100a"), "MmaSm100Mxf4", kw["bn"], kw.get("stages", 4),
                                 4 + kw["bn"] // 32, cols, alloc)


@pytest.mark.parametrize("N,bn", [(512, 256), (200, 128)])
def test_automatic_schedule(N, bn):
    fd = definition(N=N, K=512)
    fd.auto_schedule("sm_100a")
    assert f"n.i{{{bn}}}, k.i(r){{64}}]" in fd.matmul_tensor.domain, fd.matmul_tensor.domain
    src = fd.lower("sm_100a").source
    assert f"MmaSm100Mxf4<{bn}>" in src and "MmaSm100Nvf4" not in src
    # the expect-tx: A and B tiles of 64 bytes a row, one chunk of A, bn/128 of B
    assert f", {128 * 64 + bn * 64 + 512 + 512 * (bn // 128)});" in src


def test_a_computed_output_scale_lowers():
    from support.mx_defs import build_mxf4
    src = build_mxf4(n=256, k=256, auto=True, quant=("e4m3", 128)).lower("sm_100a").source
    assert "MmaSm100Mxf4<256>" in src and "heddle::from_float<heddle::e4m3>(r3 / qs)" in src  # q = y / s as e4m3


def test_a_symbolic_K_is_checked_at_launch():
    """K bound at launch (a, b stored [.., KH] bytes): K = 336 is 168 bytes a row, no TMA stride (core/tma.py), and no
    multiple of MXFP4's block of 32."""
    import torch
    from heddle.interpret import interpret
    fd = heddle.Fusion()
    a, b = fd.input("a", "e2m1x2", ["M", "KH"]), fd.input("b", "e2m1x2", [256, "KH"])
    sa, sb = fd.input("sa", "e8m0", ["MP", "KB"]), fd.input("sb", "e8m0", [256, "KB"])
    fd.output(fd.matmul(a, b, trans_b=True, scale_a=sa, scale_b=sb, scales="mx32").to("bf16"))
    k = fd.auto_schedule("sm_100a").lower("sm_100a")
    assert "MmaSm100Mxf4<256>" in k.source
    ops = [torch.zeros(r, 168, dtype=torch.uint8).view(torch.float4_e2m1fn_x2) for r in (128, 256)]
    scales = [torch.zeros(r, 12, dtype=torch.uint8).view(torch.float8_e8m0fnu) for r in (128, 256)]
    with pytest.raises(heddle.InputError, match=r"input 'a': K = 336 \(e2m1x2, 168 bytes a row\), but .* loads its "
                                                r"MXFP4 operands with TMA, .* K must be a multiple of 32"):
        interpret(k, *ops, *scales, sms=1, reference=False)
