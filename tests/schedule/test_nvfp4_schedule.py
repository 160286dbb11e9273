"""The schedule of an NVFP4 matmul (scales="nv16", docs/fp8.md "MX formats", schedule/mx_scales.cpp): the rules it
shares with MXFP8 (targets without the block-scaled MMA, n tiles of 128 or 256, the tensor-memory budget) with its
own k tile (128 e2m1 = 64 stored bytes, mxKTile), K a multiple of 32 (the TMA row stride of K / 2 bytes), two scale
chunks a k tile (8 + bn/16 scale columns per operand stage); the automatic schedule; what the fused kernel does not
build refused by name. CPU only."""
import pytest

import heddle
from support.mx_defs import assert_scale_columns_lowered
from support.mx_defs import nv_definition as definition


def schedule_error(fd, target):
    """The ScheduleError of fd's automatic schedule for target (None: of lowering fd as scheduled for sm_100a)."""
    with pytest.raises(heddle.ScheduleError) as e:
        fd.auto_schedule(target).validate(target) if target else fd.lower("sm_100a")
    return str(e.value)


def test_schedule_rules():
    assert "target sm_90a has no block-scaled MMA: run it on sm_100a" in schedule_error(definition(), "sm_90a")
    # K = 336: a multiple of 16 (the format), but 168 bytes a row is no TMA stride
    msg = schedule_error(definition(K=336), "sm_100a")
    assert "nv16-scaled matmul T4: K = 336 (a stored [M, 168] bytes); the kernel loads the e2m1x2 operands by TMA" \
        in msg and "K must be a multiple of 32: pad K with zeros to 352" in msg, msg
    fd = definition()
    fd.matmul_tensor.promotion(64)
    assert "promotion(64) on nv16-scaled matmul T4: the tensor core applies NVFP4 scales per 16 of K" in \
        schedule_error(fd, "sm_100a")
    definition(K=352).auto_schedule("sm_100a").validate("sm_100a")  # K not a multiple of 128: lowered


def lower_error(fd):
    return schedule_error(fd, None)


def nv_tiling(bn=128, bk=64, stages=4, acc_stages=0, N=512):
    """An nv16 matmul [M, 512 e2m1] x [N, 512] on the tcgen05 roles at 128 x bn x bk (stored bytes)."""
    from support.tcgen05_defs import roles
    from support.wgmma_defs import schedule_sm90
    fd = definition(N=N, K=512)
    schedule_sm90(fd, *fd.inputs[:2], bm=128, bn=bn, bk=bk, wgs=1, stages=stages, roles=roles(acc_stages))
    return fd


@pytest.mark.parametrize("kw,want", [
    (dict(bk=128), "k tile 128 (stored e2m1x2 bytes); the NVFP4 step (MmaSm100Nvf4) takes k tiles of 128 e2m1 = 64 "
                   "bytes a row"),
    (dict(bk=32), "k tile 32 (stored e2m1x2 bytes)"),
    (dict(bn=192), "n tile 192; B's scales come in chunks of 128 rows of B"),
    # 2 x 256 accumulator columns and 4 x (8 + 16) scale columns: more than tensor memory's 512
    (dict(bn=256, acc_stages=2), "2 accumulator stages of 256 columns and 96 MX scale columns (4 operand stages) "
                                 "exceed the 512 tensor-memory columns of sm_100a"),
])
def test_tcgen05_tiling_rules(kw, want):
    msg = lower_error(nv_tiling(**kw))
    assert want in msg, msg


@pytest.mark.parametrize("kw,cols,alloc", [
    (dict(bn=256, acc_stages=1), 256 + 4 * 24, 512),           # one accumulator stage of 256 + 4 x (8 + 16)
    (dict(bn=128, acc_stages=2, stages=6), 256 + 6 * 16, 512),  # 2 x 128 + 6 x (8 + 8)
    (dict(bn=128, acc_stages=1, stages=2), 128 + 2 * 16, 256),
])
def test_tilings_that_fit_are_lowered(kw, cols, alloc):
    assert_scale_columns_lowered(nv_tiling(**kw).lower("sm_100a"), "MmaSm100Nvf4", kw["bn"], kw.get("stages", 4),
                                 8 + kw["bn"] // 16, cols, alloc)


@pytest.mark.parametrize("N,bn", [(512, 256), (200, 128)])
def test_automatic_schedule(N, bn):
    fd = definition(N=N, K=512)
    fd.auto_schedule("sm_100a")
    assert f"n.i{{{bn}}}, k.i(r){{64}}]" in fd.matmul_tensor.domain, fd.matmul_tensor.domain
    src = fd.lower("sm_100a").source
    assert f"MmaSm100Nvf4<{bn}>" in src
    # the expect-tx: A and B tiles of 64 bytes a row, two chunks of A, 2 x bn/128 of B
    assert f", {128 * 64 + bn * 64 + 1024 + 1024 * (bn // 128)});" in src


def test_what_the_kernel_does_not_build_is_refused_by_name():
    fd = nv_tiling()
    fd.matmul_tensor.cluster(2, "m")
    assert "the sm_100a tcgen05 kernel does not take clusters" in lower_error(fd)


def test_a_tma_loaded_bias_gets_its_producer_role_and_ring():
    # the bias / residual producer role (warp 2) and its ring sit beside the operand ring that carries the two chunks
    from support.mx_defs import build_nv
    low = build_nv(n=256, k=256, bn=128, stages=2, acc_stages=1, epilogue="bias", tma="bias").lower("sm_100a")
    assert "tmE" in low.source and "tmSFA" in low.source and "MmaSm100Nvf4<128>" in low.source
    assert "ring sA, sB, sSFA, sSFB: 2 stages" in low.sync_summary
    assert "bias ring sE: 2 stage(s), TMA by role 'bias_load' (warp 2) -> epilogue" in low.sync_summary


def test_a_computed_output_scale_lowers_and_a_plain_8_bit_output_is_refused():
    def fusion(quant):
        fd = heddle.Fusion()
        a, b = fd.input("a", "e2m1x2", ["M", 128]), fd.input("b", "e2m1x2", [256, 128])
        sa, sb = fd.input("sa", "e4m3", ["MP", 16]), fd.input("sb", "e4m3", [256, 16])
        y = fd.matmul(a, b, trans_b=True, scale_a=sa, scale_b=sb, scales="nv16")
        for t in heddle.ops.quantize(y, "e4m3") if quant else [y.to("e4m3")]:
            fd.output(t)
        return fd
    src = fusion(True).auto_schedule("sm_100a").lower("sm_100a").source
    assert "MmaSm100Nvf4<" in src and "heddle::from_float<heddle::e4m3>(r0 / qs)" in src  # q = y / s as e4m3
    msg = schedule_error(fusion(False), "sm_100a")
    assert "output T5 is e4m3: an 8-bit float output is lowered on the sm_90a FP8 wgmma kernels only" in msg, msg


def test_a_symbolic_K_is_checked_at_launch():
    """K bound at launch (a, b stored [.., KH] bytes): K = 336 is 168 bytes a row, no TMA stride (core/tma.py)."""
    import torch
    from heddle.interpret import interpret
    def fusion(rows_b):
        fd = heddle.Fusion()
        a, b = fd.input("a", "e2m1x2", ["M", "KH"]), fd.input("b", "e2m1x2", [256, "KH"])
        sa, sb = fd.input("sa", "e4m3", ["MP", "KB"]), fd.input("sb", "e4m3", [rows_b, "KB"])
        return fd, a, b, sa, sb

    with pytest.raises(heddle.ScheduleError, match=r"scale_b \[256, round_up\(2\*KH/16, 4\)\]"):
        fd, a, b, sa, sb = fusion("NP")  # the message counts K as two elements a stored byte
        fd.matmul(a, b, trans_b=True, scale_a=sa, scale_b=sb, scales="nv16")
    fd, a, b, sa, sb = fusion(256)
    fd.output(fd.matmul(a, b, trans_b=True, scale_a=sa, scale_b=sb, scales="nv16").to("bf16"))
    k = fd.auto_schedule("sm_100a").lower("sm_100a")
    ops = [torch.zeros(r, 168, dtype=torch.uint8).view(torch.float4_e2m1fn_x2) for r in (128, 256)]
    scales = [torch.zeros(r, 24, dtype=torch.uint8).view(torch.float8_e4m3fn) for r in (128, 256)]
    with pytest.raises(heddle.InputError, match=r"input 'a': K = 336 \(e2m1x2, 168 bytes a row\), but .* loads its "
                                                r"NVFP4 operands with TMA, .* K must be a multiple of 32"):
        interpret(k, *ops, *scales, sms=1, reference=False)
