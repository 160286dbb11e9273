"""Schedule rules and lowering of the sm_100a FP8 GEMM (tcgen05.mma kind::f8f6f4, docs/fp8.md "sm_100a"): 8-bit
operands K-major only (a ScheduleError naming the operand otherwise), k tiles of 32, 64 or 128 elements (128: one
128-byte swizzle row), never the mma.sync fallback; the lowered kernel's TMA boxes, expect-tx bytes and k loop in
1-byte elements; the automatic schedule's 128-element k tile. CPU only."""
import pytest

import heddle
from support.tcgen05_defs import build_fp8, roles
from support.wgmma_defs import schedule_sm90

ScheduleError = heddle.ScheduleError


def fp8_fusion(ta=False, tb=True, fa="e4m3", fb="e4m3", n=256, k=512):
    fd = heddle.Fusion()
    a = fd.input("a", fa, [k, "M"] if ta else ["M", k])
    b = fd.input("b", fb, [n, k] if tb else [k, n])
    fd.output(fd.matmul(a, b, ta, tb).to("bf16"))
    return fd, a, b


@pytest.mark.parametrize("ta,tb,operand,stored", [(True, True, "a", r"\[K, M\]"), (False, False, "b", r"\[K, N\]"),
                                                  (True, False, "a", r"\[K, M\]")])
def test_fp8_operands_must_be_k_major(ta, tb, operand, stored):
    fd, a, b = fp8_fusion(ta, tb)
    schedule_sm90(fd, a, b, bm=128, bn=128, bk=128, wgs=1, stages=3, roles=roles())
    with pytest.raises(ScheduleError, match=rf"operand {operand} is e4m3 stored {stored}.*K-major"):
        fd.lower("sm_100a")


@pytest.mark.parametrize("bk,match", [(16, r"k-tile 16 of e4m3 operands is not supported: the 8-bit MMAs \(wgmma, "
                                           r"tcgen05 kind::f8f6f4\) step k by 32 .*use 32, 64 or 128"),
                                      (256, r"k-tile 256 of e4m3 operands is not supported.*use 32, 64 or 128")])
def test_fp8_k_tile(bk, match):
    fd, a, b = fp8_fusion()
    schedule_sm90(fd, a, b, bm=128, bn=128, bk=bk, wgs=1, stages=3, roles=roles())
    with pytest.raises(ScheduleError, match=match):
        fd.lower("sm_100a")


def test_k_tile_128_stays_refused_for_16_bit_operands():
    fd = heddle.Fusion()
    a, b = fd.input("a", "bf16", ["M", 512]), fd.input("b", "bf16", [256, 512])
    fd.output(fd.matmul(a, b, False, True).to("bf16"))
    schedule_sm90(fd, a, b, bm=128, bn=128, bk=128, wgs=1, stages=3, roles=roles())
    with pytest.raises(ScheduleError, match=r"k-tile 128 is not supported.*use 16, 32 or 64$"):
        fd.lower("sm_100a")


def test_fp8_never_takes_the_mma_sync_fallback():
    from support.matmul_defs import schedule
    fd, a, b = fp8_fusion()
    schedule(fd, a, b, bk=32)
    with pytest.raises(ScheduleError, match="operand a is e4m3 and cached with cp_async.*tcgen05 kernel only"):
        fd.lower("sm_100a")
    fd, a, b = fp8_fusion()
    fd.auto_schedule("sm_100a", -1, 256, 512)  # TMA can take them: the tcgen05 kernel
    assert fd.lower("sm_100a").tile["mma"] == "tcgen05"


def test_lowered_fp8_kernel_counts_bytes():
    fd = build_fp8("e4m3", "e5m2", "row", stages=3, bn=128, bk=128, n=256, k=512)
    low = fd.lower("sm_100a")
    assert low.tile["bk"] == 128 and low.tile["mma"] == "tcgen05"
    assert "_e4m3_128x128x128_" in low.name and "_be5m2_ws3tc_a2" in low.name, low.name  # B's format in the name
    maps = {m["operand"]: m for m in low.tensor_maps}
    # one 128-byte swizzled box of 128 one-byte elements per row: A 128 rows, B (stored [N, K]) 128 rows
    assert (maps["A"]["box_cols"], maps["A"]["box_rows"], maps["A"]["swizzle"]) == (128, 128, 128)
    assert (maps["B"]["box_cols"], maps["B"]["box_rows"], maps["B"]["swizzle"]) == (128, 128, 128)
    # the full barrier expects one stage of each operand, 128x128 + 128x128 bytes; stages of 16384 elements; the
    # k loop steps 128 elements and the MMA gets the tile's k index (its first k tile overwrites the accumulator)
    src = low.source
    assert src.count("% 3)), 32768);") == 1 and "sA + ((tl * heddle_ceil_div(K, 128) + kt) % 3) * 16384" in src
    assert "&tmA, m0, kt * 128, 0," in src and "&tmB, n0, kt * 128, 0," in src
    assert "MmaSm100<128, 128, 128, true, true, T, heddle::e5m2>" in low.source


def test_auto_schedule_takes_128_byte_k_rows():
    fd, a, b = fp8_fusion(n=1024, k=4096)
    fd.auto_schedule("sm_100a", -1, 1024, 4096)
    low = fd.lower("sm_100a")
    assert (low.tile["bm"], low.tile["bn"], low.tile["bk"]) == (128, 256, 128)
    bf = heddle.Fusion()
    x, w = bf.input("a", "bf16", ["M", 4096]), bf.input("b", "bf16", [1024, 4096])
    bf.output(bf.matmul(x, w, False, True).to("bf16"))
    bf.auto_schedule("sm_100a", -1, 1024, 4096)
    assert bf.lower("sm_100a").tile["bk"] == 64  # 16-bit operands: unchanged
