"""8-bit outputs through the TMA-store epilogue on sm_90a (docs/fp8.md "FP8 output" and "Computed output scales";
lower/passes/tma_store_epilogue.cpp, codegen/wgmma_printer.cpp stagedPair8): the MMA warpgroups convert each
pair to e4m3 / e5m2 (cvt.rn.satfinite), write it into the 128-byte-swizzled staging chunk of 128 one-byte
columns, fence.proxy.async, and one thread TMA-stores the chunk; a computed output scale stages q the same way
and stores s directly. The CPU interpreter runs the printed kernels on ragged shapes (M, N not multiples of the
tile, a partial last group and k tile; three tiles a CTA, so the two staging slots and the operand ring wrap)
against float64, the schedule rules that stay are named, and source mutants of the new spots (the proxy fence
before the store, the bulk wait before a slot is rewritten, the swizzled staging layout) are caught."""
import pytest
import torch

import heddle
from heddle.core.interpret import _Mutated
from heddle.core.source_mutant_fp8 import fp8_staging_mutants
from heddle.core.source_mutants import source_mutants
from heddle.interpret import interpret
from support.fp8_defs import fp8_fusion, fp8_schedule, inputs
from support.interp_defs import needs_cxx
from support.quant_defs import dequantized_against_float64, quant_fusion, tensors

TORCH8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def plain(variant="coop", out="e4m3", n=304, k=272, bn=128):
    """(a @ b.T) * scale_a [M, 1] * scale_b [1, N] + bias -> relu -> * scale_out -> .to(out), TMA-stored (ping-pong:
    64 x 128 warpgroup tiles, the largest the schedule takes for 8-bit staging there)."""
    fd, a, b = fp8_fusion(n=n, k=k, scale="row", bias=True, act="relu", out=out, out_scale=True)
    bm = 64 if variant == "pingpong" else 128
    fp8_schedule(fd, a, b, variant=variant, bm=bm, bn=bn).epilogue_store("tma")
    return fd


def quantized(variant="coop", fmt="e4m3", group=128, n=304, bn=128):
    """quant_fusion (bias + GELU, quantize(fmt, group)) with q through the TMA store."""
    fd, a, b = quant_fusion(n=n, k=144, fmt=fmt, group=group)
    fp8_schedule(fd, a, b, variant=variant, bm=64 if variant == "pingpong" else 128, bn=bn).epilogue_store("tma")
    return fd


def assert_staged_8bit(src, out, pingpong=False):
    tile = f"heddle::sm90::TmaTile<{64 if pingpong else 128}, 128, heddle::{out}>"
    assert f"tma_store_tile<{tile}, 2>(&tmD" in src  # one 128-byte box of 128 one-byte columns a chunk
    assert f"{tile}::offset(lr, lc0" in src and f"heddle::pack_pair<heddle::{out}>" in src  # satfinite pairs, swizzled
    assert "stmatrix" not in src and "heddle::sm90::fence_proxy_async();  // sync" in src
    assert "RAW sD (st.shared -> tma_store)" in src
    assert ("bulk_wait_read<1>()" in src) and ("named_barrier(2 + (warp - 4) / 4, 128)" in src) == pingpong


@needs_cxx
@pytest.mark.parametrize("variant,out", [
    ("coop", "e4m3"),
    pytest.param("pingpong", "e5m2", marks=pytest.mark.slow),
])
def test_plain_8bit_output_through_the_tma_store(variant, out):
    # M = 200, N = 304: two m tiles (the second 72 rows) x three n tiles (the last 48 columns); K = 272: a
    # partial third k tile; 2 CTAs walk 3 tiles each, so the two staging slots wrap
    fd = plain(variant, out)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    assert k.name.endswith("_tmas2"), k.name
    assert_staged_8bit(k.lowered.source, out, pingpong=variant == "pingpong")
    r = interpret(k, *inputs(fd, 200, seed=1), sms=2)
    assert r.ok, f"{k.name}:\n{r.report()}"
    assert r.output.dtype == TORCH8[out]


@needs_cxx
def test_epilogue_role_stages_8bit_pairs():
    # the three-role kernel's epilogue warpgroups stage the whole tile from sC the same way (before: an f32
    # pointer into the 8-bit slot, which no compiler took); bn = 64 is a 64-byte swizzle row there
    for bn in (128, 64):
        fd, a, b = fp8_fusion(n=304, k=272, scale="row", bias=True, act="relu", out="e4m3", out_scale=True)
        fp8_schedule(fd, a, b, variant="coop", bn=bn).warp_specialize(
            {"load": {"warps": 1, "registers": 40}, "mma": {"warpgroups": 2, "registers": 168},
             "epilogue": {"warpgroups": 2, "registers": 40}})
        k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
        assert f"TmaTile<128, {bn}, heddle::e4m3>::offset(lr, lc0)" in k.lowered.source
        r = interpret(k, *inputs(fd, 200, seed=2), sms=2)
        assert r.ok, f"{k.name}:\n{r.report()}"


@needs_cxx
@pytest.mark.parametrize("variant,fmt,group,n", [
    ("coop", "e4m3", 128, 304),  # three n tiles, the last group 48 columns of 128
    pytest.param("pingpong", "e5m2", 128, 208, marks=pytest.mark.slow),  # the second n tile 80 columns
    pytest.param("pingpong", "e4m3", "row", 112, marks=pytest.mark.slow),  # per row: one chunk covers N
])
def test_computed_scale_through_the_tma_store(variant, fmt, group, n):
    fd = quantized(variant, fmt, group, n)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    src = k.lowered.source
    assert ("_q128_" if group == 128 else "_qrow_") in k.name and k.name.endswith("_tmas2")
    assert_staged_8bit(src, fmt, pingpong=variant == "pingpong")
    assert "q into the staging slot for the TMA store, s stored directly" in src
    assert src.count("__shfl_xor_sync(0xffffffffu, amax, 2)") and "] = qs;" in src  # s: straight to D1
    assert [m["operand"] for m in k.lowered.tensor_maps if m["operand"].startswith("D")] == ["D"]  # no map for s
    ins = tensors(fd, 100)  # M = 100: rows past M computed, staged and clipped by the store; K = 144
    r = interpret(k, *ins, sms=2, reference=False)
    assert r.ok, f"{k.name}:\n{r.report()}"
    dequantized_against_float64(fd, ins, r.output, fmt, group)


def _caught(k, ins, mutants, check=None):
    """Every mutant caught: the interpreter reports it (races, misuse, numbers against float64), or, with check
    (quantize: numbers checked by dequantized_against_float64, not the interpreter), its output fails check."""
    assert mutants
    for mu in mutants:
        r = interpret(_Mutated(k, mu.source), *ins, sms=2, max_findings=2, **({"reference": False} if check else {}))
        if r.ok and check:
            with pytest.raises(AssertionError):
                check(r.output)
            continue
        assert not r.ok, f"survived: {mu.kind} line {mu.line} {mu.what}"


@needs_cxx
def test_new_spots_mutants_are_caught():
    # the plain kernel, 2 CTAs x 3 tiles: the proxy fence before the store deleted, the slot's bulk wait before
    # it is rewritten deleted or loosened, the staging pair unswizzled -- each caught
    fd = plain()
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    ins = inputs(fd, 200, seed=1)
    muts = source_mutants(k.lowered.source, kinds=("delete_sync", "loosen_wait"))
    fence = [m for m in muts if "fence_proxy_async" in m.what or "proxy" in m.what]
    wait = [m for m in muts if "bulk_wait_read<1>" in m.what or "wait_group.read(1)" in m.what]
    assert fence and wait, [m.what for m in muts]
    _caught(k, ins, fence + wait + fp8_staging_mutants(k.lowered.source))


@needs_cxx
@pytest.mark.slow
def test_quantized_staging_mutants_are_caught():
    fd = quantized()
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    ins = tensors(fd, 100)
    muts = source_mutants(k.lowered.source, kinds=("delete_sync",))
    fence = [m for m in muts if "proxy" in m.what]
    _caught(k, ins, fence + fp8_staging_mutants(k.lowered.source),
            check=lambda out: dequantized_against_float64(fd, ins, out, "e4m3", 128))


@pytest.mark.parametrize("how,msg", [
    ("bn64", r"epilogue_store\(T\d+, 'tma'\): output T\d+ is e4m3; the TMA-store epilogue stages 8-bit outputs in "
             r"chunks of 128 columns .* but the n tile is 64: split n by a multiple of 128"),
    ("row_wide", r"a scale per row through the TMA-store epilogue needs the n tile in one staged chunk of 128 columns"),
    ("pp128", r"the TMA-store epilogue of an 8-bit output on ping-pong warpgroups is built for a warpgroup tile of "
              r"at most 64 x 128 .* but each warpgroup holds 128 x 128 \(128; the staged pairs spill there\)"),
    ("epi_role", r"an epilogue role \(sm_90a\) and TMA-loaded epilogue operands are not lowered with a computed "
                 r"output scale"),
])
def test_remaining_refusals_name_the_rule(how, msg):
    if how == "bn64":
        fd = plain(bn=64)
    elif how == "pp128":
        fd, a, b = fp8_fusion(n=304, k=272, out="e4m3")
        fp8_schedule(fd, a, b, variant="pingpong", bm=128, bn=128).epilogue_store("tma")
    elif how == "row_wide":  # per row on N = 200: a 256-wide n tile covers it, two chunks of 128 would split it
        fd, a, b = quant_fusion(n=200, k=144, group="row")
        fp8_schedule(fd, a, b, variant="coop", bm=128, bn=256).epilogue_store("tma")
    else:
        fd, a, b = quant_fusion(n=304, k=144)
        fp8_schedule(fd, a, b, variant="coop", bn=128).warp_specialize(
            {"load": {"warps": 1, "registers": 40}, "mma": {"warpgroups": 2, "registers": 168},
             "epilogue": {"warpgroups": 2, "registers": 40}})
    with pytest.raises(heddle.ScheduleError, match=msg):
        heddle.Kernel.build(fd, "sm_90a", rtc=False)


def test_auto_schedule_keeps_the_direct_store_for_8bit_outputs():
    # docs/fp8.md "FP8 output": the TMA store is built for 8-bit outputs but not measured faster on a GPU yet
    fd, a, b = fp8_fusion(n=512, k=1024, scale="row", bias=True, out="e4m3")
    fd.auto_schedule("sm_90a", 1024, 512, 1024)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    assert "_tmas" not in k.name and "tma_store_tile" not in k.lowered.source


@needs_cxx
def test_ragged_8bit_rows_are_an_input_error():
    # TMA stores 16-byte rows: an e4m3 D needs N a multiple of 16 (N = 300 gives 300 bytes)
    fd = plain(n=300)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    with pytest.raises(heddle.InputError, match=r"output 0 of .*TMA, which needs rows of a multiple of 16 bytes, "
                                                r"but N=300 gives 300; use N a multiple of 16"):
        interpret(k, *inputs(fd, 64), sms=1)
