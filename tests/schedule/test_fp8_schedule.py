"""Scheduling 8-bit float (e4m3 / e5m2) GEMMs on sm_90a (docs/fp8.md, "sm_90a"): the layouts 8-bit wgmma
takes (both operands K-major), the k tiles (32, 64, 128), TMA operand loads, K a multiple of 16, 8-bit
outputs (direct stores only), and the automatic FP8 tiling (a 128-element k tile, 4 stages)."""
import re

import pytest

import heddle
from support.fp8_defs import fp8_fusion, fp8_schedule


def _fusion(trans_a=False, trans_b=True, k=256, out="bf16"):
    fd = heddle.Fusion()
    a = fd.input("a", "e4m3", [k, "M"] if trans_a else ["M", k])
    b = fd.input("b", "e5m2", [128, k] if trans_b else [k, 128])
    fd.output(fd.matmul(a, b, trans_a, trans_b).to(out))
    return fd, a, b


@pytest.mark.parametrize("trans_a,trans_b,operand,fix", [
    (False, False, "b", "trans_b=True"),
    (True, True, "a", "a.t().contiguous()"),
])
def test_fp8_operands_must_be_k_major(trans_a, trans_b, operand, fix):
    fd, a, b = _fusion(trans_a, trans_b)
    with pytest.raises(heddle.ScheduleError, match=rf"matmul operand {operand} is e\dm\d .*K-major only") as e:
        fd.auto_schedule("sm_90a", 256, 128, 256)
    assert fix in str(e.value)


def _one_warpgroup(bk, kind):
    fd, a, b = _fusion()
    mm = fd.schedule()
    mm.split("m", 64).split("n", 64).split("k", bk).split("m.i", 16)
    mm.parallelize("m.o", "BIDy").parallelize("n.o", "BIDx").parallelize("m.i.o", "warp")
    mm.reorder(["m.o", "n.o", "k.o", "m.i.o", "m.i.i", "n.i", "k.i"])
    for t in (a, b):
        fd.cache_after(t, kind).circular_buffer(2)
    return fd


def test_fp8_k_tile_and_load_kind():
    fd = _one_warpgroup(16, "tma_load")
    with pytest.raises(heddle.ScheduleError, match="k-tile 16 of e4m3 operands .* use 32, 64 or 128"):
        fd.lower("sm_90a")
    fd = _one_warpgroup(64, "cp_async")
    with pytest.raises(heddle.ScheduleError, match=r"e4m3 operands are loaded by TMA .*cache_after\(a, 'tma_load'\)"):
        fd.lower("sm_90a")


def test_fp8_k_must_be_a_multiple_of_16():
    fd, a, b = _fusion(k=1000)
    with pytest.raises(heddle.InputError, match="K = 1000.*multiple of 16.*pad K with zeros to 1008"):
        fd.auto_schedule("sm_90a", 256, 128, 1000)


def test_fp8_refused_where_no_fp8_tensor_core_and_for_16_bit_outputs_only_elsewhere():
    fd, a, b = _fusion()
    with pytest.raises(heddle.ScheduleError, match="target sm_80 has no 8-bit float tensor-core instruction"):
        fd.auto_schedule("sm_80", 256, 128, 256)
    fd = heddle.Fusion()
    a = fd.input("a", "bf16", ["M", 64])
    b = fd.input("b", "bf16", [64, 128])
    fd.output(fd.matmul(a, b).to("e4m3"))
    with pytest.raises(heddle.ScheduleError, match="output .* is e4m3: an 8-bit float output is lowered on the sm_90a"):
        fd.auto_schedule("sm_90a", 256, 128, 64)


def test_fp8_output_through_the_tma_store_needs_whole_chunks():
    # an 8-bit chunk is 128 one-byte columns (one 128-byte swizzle row): bn = 64 is refused, 128 lowers
    # (tests/interp/test_fp8_tma_store_sm90.py runs it)
    fd, a, b = fp8_fusion(n=128, k=256, out="e4m3")
    fp8_schedule(fd, a, b, variant="coop")
    fd.matmul_tensor.epilogue_store("tma")
    with pytest.raises(heddle.ScheduleError, match=r"stages 8-bit outputs in chunks of 128 columns \(one 128-byte "
                                                   r"swizzle row\), but the n tile is 64: split n by a multiple of 128"):
        fd.lower("sm_90a")
    fd, a, b = fp8_fusion(n=128, k=256, out="e4m3")
    fp8_schedule(fd, a, b, variant="coop", bn=128).epilogue_store("tma")
    low = fd.lower("sm_90a")
    assert "tma_store_tile<heddle::sm90::TmaTile<128, 128, heddle::e4m3>, 2>" in low.source


@pytest.mark.parametrize("M,N", [(4096, 4096), (1000, 1024), (64, 4096)])
def test_fp8_auto_tiling(M, N):
    fd, a, b = fp8_fusion(n=N, k=4096, scale="row", bias=True, out="e4m3", out_scale=True)
    fd.auto_schedule("sm_90a", M, N, 4096)
    low = fd.lower("sm_90a")
    m = re.search(r"MmaSm90<(\d+), (\d+), (\d+), \d+, \w+, true, true, T, \d+>", low.source)
    assert m, low.source[:1500]
    bm, bn, bk = map(int, m.groups())
    assert bk == 128 and bn in (128, 256) and bm == (64 if M <= 64 else 128)
    assert "_s4p2_" in low.name  # 4 stages, 2 loads ahead
    assert "tma_store_tile" not in low.source  # auto_schedule keeps the direct store for 8-bit outputs
