"""An MX-format output on sm_100a (heddle.ops.quantize(y, fmt, group="mx32"); docs/fp8.md "MX formats", "An
MX-format output"): the tcgen05 epilogue quantizes each row's 32-column block -- one tcgen05.ld.32x32b.x32, a
per-thread amax, the OCP MX FLOOR e8m0 code from the amax's exponent field -- and stores q and the code byte at its
offset in torch's blocked layout, the padding rows and blocks code 0. The printed kernels of each operand kind
(kind::f16, kind::f8f6f4, the MXFP8 and NVFP4 block-scaled kernels) interpreted on ragged shapes against float64
(the interpreter's check: the codes exactly, padding included; q within one step of the format), with a TMA-loaded
bias / residual read from its ring slot and through the TMA-store epilogue (q staged, the codes direct) too, the
schedule rules by name, and the protocol's source mutants caught."""
import pytest
import torch

import heddle
from heddle.core.reference import unblock_mx_scales
from support import mx_out_defs
from support.interp_defs import needs_cxx
from support.quant_defs import assert_quant_mutants_caught

MX_KINDS = ("mx_amax", "mx_code", "mx_offset", "mx_padding", "mx_inverse")


def _check_padding(s, M, N):
    """The blocked scale's padding (rows past M, blocks past N/32) holds code 0, and the live codes are not."""
    full = unblock_mx_scales(s.view(torch.uint8), s.shape[0], s.shape[1]).to(torch.int64)
    assert not full[M:].any() and not full[:, N // 32:].any()
    assert int(full[:M, :N // 32].min()) > 0


@needs_cxx
@pytest.mark.parametrize("kind,fmt,bn,stages,acc,M,N,K", [
    # 16-bit operands: M = 130 (two m tiles, the second 2 rows of M and 126 padding rows), N = 160 (the second n
    # tile holds block 4, blocks 5..7 padding of round_up(5, 4) = 8), K = 192: 3 k tiles of 64
    ("bf16", "e4m3", 128, 2, 1, 130, 160, 192),
    # the MXFP8 kernel: K = 320, 2.5 k tiles of 128 (the last one's chunks zero fill)
    ("mx32", "e4m3", 128, 2, 1, 130, 160, 320),
    pytest.param("f8f6f4", "e5m2", 128, 2, 1, 130, 160, 384, marks=pytest.mark.slow),
    # NVFP4, a 256-wide n tile: N = 288, 9 blocks padded to 12; the second tile's blocks 12..15 store nothing
    pytest.param("nv16", "e5m2", 256, 2, 1, 100, 288, 320, marks=pytest.mark.slow),
    # 16-bit with a 256-wide tile, 3 operand and 2 accumulator stages, e5m2
    pytest.param("bf16", "e5m2", 256, 3, 2, 200, 416, 320, marks=pytest.mark.slow),
    pytest.param("mx32", "e5m2", 256, 3, 1, 260, 544, 416, marks=pytest.mark.slow),
    # MXFP4 (one scale chunk a k tile): K = 352, the last k tile three 32-blocks
    pytest.param("mxf4", "e4m3", 128, 2, 1, 130, 160, 352, marks=pytest.mark.slow),
])
def test_mx_output_with_right_numbers(kind, fmt, bn, stages, acc, M, N, K):
    fd = mx_out_defs.build(kind, n=N, k=K, fmt=fmt, bn=bn, stages=stages, acc_stages=acc)
    ins = mx_out_defs.tensors(fd, kind, M, seed=1)
    k, r = mx_out_defs.interpreted(fd, ins)
    src = k.lowered.source
    q, s = r.output
    assert q.dtype == {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[fmt] and q.shape == (M, N)
    assert s.dtype == torch.float8_e8m0fnu and s.shape == (-(-M // 128) * 128, -(-N // 128) * 4)
    assert "_qmx32" in k.name and "__shfl" not in src
    assert src.count("heddle::sm100::tmem_load_32(taddr + c0, v);") == 1  # one read: y stays in registers
    _check_padding(s, M, N)


@needs_cxx
@pytest.mark.slow  # 47 s here: the five mutants compiled and interpreted (the family sm100_mx_out runs them too)
def test_mx_output_mutants_are_caught():
    # no GELU: half the blocks have their largest magnitude negative, which an amax without fabsf misses
    fd = mx_out_defs.build("bf16", n=160, k=192, act=False)
    ins = mx_out_defs.tensors(fd, "bf16", 130, seed=1)
    k, _ = mx_out_defs.interpreted(fd, ins)
    assert_quant_mutants_caught(k, ins, MX_KINDS + ("quant_mask", "quant_group", "quant_divisor"), MX_KINDS)


@needs_cxx
@pytest.mark.parametrize("kind,tma,bn,M,N,K", [
    # the TMA-store epilogue (epilogue_store("tma")): q staged into the 128-byte swizzled slot, one chunk of 128 columns
    # (4 MX blocks) per n tile here, the codes stored directly; M = 130: the TMA store clips the second m tile's 126
    # padding rows, N = 160: the second n tile's blocks 5..7 (codes 0, q clipped)
    ("bf16", None, 128, 130, 160, 192),
    # MXFP8 at 128 x 256 (two chunks a tile) with a TMA-loaded bias: N = 288, 9 blocks padded to 12; the second
    # tile's blocks 12..15 store no code; one CTA walks 2 x 2 tiles, so both rings (sD, sE) wrap
    pytest.param("mx32", "bias", 256, 150, 288, 320, marks=pytest.mark.slow),
    # the 16-bit kernel with a TMA-loaded residual tile (rows lr of the slot)
    pytest.param("bf16", "res", 128, 150, 160, 192, marks=pytest.mark.slow),
    # the other block-scaled kinds and kind::f8f6f4 through the TMA store (NVFP4 at 128 x 256; MXFP4 with its bias ring)
    pytest.param("nv16", None, 256, 130, 288, 320, marks=pytest.mark.slow),
    pytest.param("mxf4", "bias", 128, 150, 160, 352, marks=pytest.mark.slow),
    pytest.param("f8f6f4", None, 128, 130, 160, 384, marks=pytest.mark.slow),
])
def test_mx_output_through_the_tma_store(kind, tma, bn, M, N, K):
    from heddle.interpret import interpret
    fd = mx_out_defs.build(kind, n=N, k=K, bn=bn, tma=tma)
    fd.matmul_tensor.epilogue_store("tma")
    k = heddle.Kernel.build(fd, "sm_100a", rtc=False)
    ins = mx_out_defs.tensors(fd, kind, M, seed=1)
    r = interpret(k, *ins, sms=1)  # against float64: the e8m0 codes exactly, padding included
    assert r.ok, f"{k.name}:\n{r.report()}"
    src = k.lowered.source
    assert "_qmx32" in k.name and "_tmas" in k.name and ("_tmae2" in k.name) == bool(tma), k.name
    chunks = bn // 128
    assert src.count("heddle::sm100::tmem_load_32(taddr + c0, v);") == chunks  # one read a block: y in registers
    assert src.count("heddle::sm100::stage_16<heddle::sm90::TmaTile<128, 128, heddle::") == chunks
    assert src.count("heddle::sm90::tma_store_tile<") == chunks and "D[(long long)" not in src  # q only by TMA
    assert src.count("(unsigned char)code;") == chunks  # the codes stored directly
    q, s = r.output
    assert q.shape == (M, N) and s.shape == (-(-M // 128) * 128, -(-N // 128) * 4)
    _check_padding(s, M, N)


@needs_cxx
@pytest.mark.slow  # 21 s here
def test_mx_output_through_the_tma_store_mutants_are_caught():
    """The staged MX store: the protocol's source mutants (the same printed block steps as the direct store) and every
    sync mutant of the staging slots (bulk_wait_read, the named barriers, the proxy fence, the TMA store's commit
    group, their stages) caught on one CTA walking 2 x 2 tiles."""
    from heddle.interpret import mutation_kill_rate
    fd = mx_out_defs.build("bf16", n=160, k=192, act=False)
    fd.matmul_tensor.epilogue_store("tma")
    k = heddle.Kernel.build(fd, "sm_100a", rtc=False)
    ins = mx_out_defs.tensors(fd, "bf16", 130, seed=1)
    assert_quant_mutants_caught(k, ins, MX_KINDS, MX_KINDS)
    res = mutation_kill_rate(k, *ins, sms=1, schedules=(("adversarial", 0),))
    assert {"delete_sync", "flip_parity", "swap_stage", "loosen_wait"} <= set(res["by_kind"])  # loosen: bulk_wait_read
    assert res["total"] >= 30 and not res["survivors"], (res["total"], res["survivors"])  # 37 here


@needs_cxx
@pytest.mark.parametrize("kind,tma,M,N,K", [
    # the MXFP8 kernel with its bias row TMA-loaded: M = 150, N = 160 -- 2 x 2 tiles walked by one CTA, so the bias
    # ring's 2 slots wrap; the second n tile's blocks 5..7 read the slot's zero fill and store code 0
    ("mx32", "bias", 150, 160, 320),
    # 16-bit operands with a residual tile's ring (rows lr): its rows past M are the TMA load's zero fill
    pytest.param("bf16", "res", 150, 160, 192, marks=pytest.mark.slow),
])
def test_mx_output_with_a_tma_loaded_epilogue_operand(kind, tma, M, N, K):
    # the bias / residual producer warp (warp 2) loads the tile's box into its ring; the MX store reads the slot in its
    # one pass over the row's blocks, all between the slot's fullE wait and its emptyE arrive
    from heddle.interpret import interpret
    fd = mx_out_defs.build(kind, n=N, k=K, tma=tma)
    k = heddle.Kernel.build(fd, "sm_100a", rtc=False)
    ins = mx_out_defs.tensors(fd, kind, M, seed=1)
    r = interpret(k, *ins, sms=1)  # against float64: the e8m0 codes exactly, padding included
    assert r.ok, f"{k.name}:\n{r.report()}"
    src = k.lowered.source
    assert "_qmx32" in k.name and "_tmae2" in k.name, k.name
    assert src.count("heddle::sm100::tmem_load_32(taddr + c0, v);") == 1
    assert src.count("heddle::to_float(sE[") == 1 and ("lr * 128 + lc]" in src) == (tma == "res")
    assert "E_" + tma not in src.split("__global__")[1].split("{", 1)[1]  # no global read of the cached operand
    i_st = src.index("an MX-format output:")
    assert src.rindex("mbar_wait((fullE", 0, i_st) < i_st
    assert src.index("mbar_arrive((emptyE", i_st) > src.rindex("(v[j] * inv);")
    q, s = r.output
    assert q.shape == (M, N) and s.shape == (256, 8)
    _check_padding(s, M, N)


@needs_cxx
@pytest.mark.slow
def test_mx_output_with_a_tma_loaded_bias_sync_mutants_are_caught():
    """The bias ring's syncs around the MX store (the fullE wait before it, the emptyE arrive after its last slot
    read, their parities and stages, the producer's expect-tx): every sync mutant caught on one SM walking 2 x 2
    tiles (the 2-slot ring wraps). The family sm100_mx_out's kernel has no ring; this one is checked here."""
    from support.mx_defs import assert_sync_mutants_caught
    fd = mx_out_defs.build("mx32", n=160, k=320, tma="bias")
    k = heddle.Kernel.build(fd, "sm_100a", rtc=False)
    assert_sync_mutants_caught(k, mx_out_defs.tensors(fd, "mx32", 150, seed=1))


def test_an_n_tile_of_64_is_refused_by_name():
    fd = mx_out_defs.build("bf16", n=160, k=192, bn=64)
    with pytest.raises(heddle.ScheduleError, match=r"group=mx32\): the n tile 64 is not a multiple of 128"):
        heddle.Kernel.build(fd, "sm_100a", rtc=False)


def test_the_automatic_schedule_takes_it():
    for kind in mx_out_defs.KINDS:
        k = heddle.Kernel.build(mx_out_defs.build(kind, n=288, k=320, auto=True), "sm_100a", rtc=False)
        assert "_qmx32" in k.name and "D1[((qrow / 128) * 3 + blk / 4) * 512" in k.lowered.source
