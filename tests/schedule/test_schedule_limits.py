"""Schedule limits found by fuzzing (issue 16, items 4, 5 and 7): every schedule that lowering accepts
must compile, and every refusal is a ScheduleError naming the option and a valid alternative.

CPU only; the compile checks use NVRTC (skipped without it). The full width sweep is `-m slow`."""
import math
import re
import time

import pytest

import heddle
from support.env import requires_nvrtc
from support.matmul_defs import matmul_fusion, schedule

ScheduleError = heddle.ScheduleError

WIDTHS = list(range(16, 257, 16))


def validate(fd, target):
    return fd._f.validate(target, 8, 8)


def swizzle_row_ok(width, elem_bytes=2):
    """The rule of heddle_copy.cuh's SmemTile, restated: rows of 16/32/64 bytes or whole 128-byte lines."""
    b = width * elem_bytes
    return b in (16, 32, 64) or b % 128 == 0


def tiled(bm, bn, layout="NN", wm=1, wn=1, stages=2, kind="cp_async", epilogue=None):
    fd, a, b = matmul_fusion(m="M", n="N", k=256, layout=layout, epilogue=epilogue)
    schedule(fd, a, b, bm=bm, bn=bn, bk=32, wm=wm, wn=wn, stages=stages, kind=kind)
    return fd


def sweep_cases():
    # NN: b's rows run along n; TN: a's rows run along m (the k-major operand rows are always fine)
    return [("NN", 64, w) for w in WIDTHS] + [("TN", w, 64) for w in WIDTHS]


def accepted(layout, bm, bn):
    return swizzle_row_ok(bn if layout[1] == "N" else 32) and swizzle_row_ok(bm if layout[0] == "T" else 32)


# --- item 4: tile widths whose shared-memory rows the device headers reject -----------------------

@pytest.mark.parametrize("layout,bm,bn", sweep_cases(), ids=lambda v: str(v))
def test_row_rule_is_decided_by_the_schedule(layout, bm, bn):
    # accepted widths on warps whose tiles keep the accumulator rule; refused ones on one warp (the row rule
    # comes first, and its nearest widths are those one warp's tile rules allow)
    fd = tiled(bm, bn, layout, *(fitting_warps(layout, bm, bn) if accepted(layout, bm, bn) else (1, 1)))
    if accepted(layout, bm, bn):
        validate(fd, "sm_80")
        return
    with pytest.raises(ScheduleError) as e:
        validate(fd, "sm_80")
    msg = str(e.value)
    axis, width = ("n", bn) if layout == "NN" else ("m", bm)
    assert f"tile {bm}x{bn}x32" in msg and f"rows of {width} elements" in msg, msg
    near = [int(x) for x in re.search(rf"use an {axis} tile of (\d+)(?: or (\d+))?", msg).groups() if x]
    assert near and all(swizzle_row_ok(w) for w in near), msg
    assert min(abs(w - width) for w in near) <= 64, msg


@pytest.mark.parametrize("bm,bn,layout", [(128, 112, "NN"), (128, 48, "NN"), (128, 80, "NN"), (128, 96, "NN"),
                                          (128, 160, "NN"), (128, 224, "NN"), (96, 128, "TN")])
def test_issue_tiles_are_refused_with_nearest_widths(bm, bn, layout):
    fd = tiled(bm, bn, layout)
    with pytest.raises(ScheduleError, match=r"swizzled shared-memory tiles take rows of 16, 32 or 64 bytes"):
        validate(fd, "sm_80")


def test_amd_lds_tiles_take_any_16_byte_row():
    """LdsTile rows are unswizzled: 112 columns (224 bytes) are fine on gfx90a."""
    fd = tiled(128, 112, "NN", kind="plain")
    assert "tile 128x112x32" in validate(fd, "gfx90a")


def fitting_warps(layout, bm, bn):
    """(wm, wn): the fewest warps along the wide side whose warp tile keeps its f32 accumulators within the
    register rule (a 64x192 tile on one warp holds 384 and is refused at schedule time)."""
    wide, warps = (bn, "n") if layout == "NN" else (bm, "m")
    other = bm if warps == "n" else bn
    w = next(w for w in range(1, wide // 16 + 1) if wide % (16 * w) == 0 and other * (wide // w) // 32 <= 207)
    return (1, w) if warps == "n" else (w, 1)


def _compile_clean(fd):
    # the row rule is what is under test: one warp holding a wide tile spills, which Kernel.build
    # refuses on its own (tests/schedule/test_schedule_fuzz.py); here the kernel only has to compile
    kern = fd.compile("sm_80", allow_spills=True)
    assert kern.binary.cubin[:4] == b"\x7fELF"


@requires_nvrtc
@pytest.mark.parametrize("layout,bm,bn", [("NN", 64, 192), ("NN", 64, 32), ("TN", 32, 64)])
def test_accepted_widths_compile(layout, bm, bn):
    _compile_clean(tiled(bm, bn, layout, *fitting_warps(layout, bm, bn)))


@requires_nvrtc
@pytest.mark.slow
@pytest.mark.parametrize("layout,bm,bn", [c for c in sweep_cases() if accepted(*c)], ids=lambda v: str(v))
def test_every_accepted_width_compiles(layout, bm, bn):
    _compile_clean(tiled(bm, bn, layout, *fitting_warps(layout, bm, bn)))


# --- item 5: options that used to wrap, truncate or reach NVRTC ----------------------------------

@pytest.mark.parametrize("opt", ["vec_a", "vec_b"])
@pytest.mark.parametrize("v", [16, 3, 0, -1])
def test_bad_copy_widths_are_refused(opt, v):
    fd = tiled(128, 128, wm=2, wn=2)
    kw = {"vec_a": 8, "vec_b": 8, opt: v}
    with pytest.raises(ScheduleError, match=rf"{opt}={v}\): a copy moves 1, 2, 4 or 8 elements"):
        fd.lower("sm_80", **kw)


@pytest.mark.parametrize("factor", [2**31, 2**32, 2**32 + 128, 2**40])
def test_split_factors_beyond_32_bits_are_refused(factor):
    fd, a, b = matmul_fusion(m="M", n="N", k=256)
    mm = fd.schedule()
    # refused where Python hands the value over (fusion.py), before the C++ check behind it
    with pytest.raises(ScheduleError, match=rf"split\('m'\): factor = {factor} is out of range.*2147483647"):
        mm.split("m", factor)


def test_nested_split_product_beyond_32_bits_is_refused():
    fd, a, b = matmul_fusion(m="M", n="N", k=256)
    mm = fd.schedule().split("m", 2**20)
    with pytest.raises(ScheduleError, match=r"1048576 x 4096"):
        mm.split("m.o", 2**12)


@pytest.mark.parametrize("opt,count", [("warpgroups", 2**30 + 1), ("warpgroups", 9), ("warps", 33), ("warps", -4)])
def test_role_counts_do_not_wrap(opt, count):
    fd, a, b = matmul_fusion(m="M", n="N", k=256)
    mm = fd.schedule()
    with pytest.raises(ScheduleError, match=rf"role 'mma' asks for {opt}={count}; a block holds at most 32 warps"):
        mm.warp_specialize({"load": {"warps": 1}, "mma": {opt: count}})


@pytest.mark.parametrize("value,spelled", [(math.inf, "heddle::f32_bits(0x7f800000u)"),
                                           (-math.inf, "heddle::f32_bits(0xff800000u)"),
                                           (math.nan, "heddle::f32_bits(0x7fc00000u)"),
                                           (0.1, "0.100000001f"), (3.0, "3.0f")])
def test_epilogue_scalars_are_printed_as_valid_float_source(value, spelled):
    fd2 = heddle.Fusion()
    x = fd2.input("a", "f16", ["M", 128])
    w = fd2.input("b", "f16", [128, 256])
    fd2.output((fd2.matmul(x, w) * value).to("f16"))
    schedule(fd2, x, w)
    src = fd2.lower("sm_80").source
    assert spelled in src
    for bad in ("inff", "nanf", "inf.0f"):
        assert bad not in src


@requires_nvrtc
def test_inf_and_nan_scalars_compile():
    fd = heddle.Fusion()
    x = fd.input("a", "f16", ["M", 128])
    w = fd.input("b", "f16", [128, 256])
    y = heddle.ops.relu(fd.matmul(x, w) * math.inf) + math.nan
    fd.output((y - -math.inf).to("f16"))
    schedule(fd, x, w)
    _compile_clean(fd)


@pytest.mark.parametrize("value", [1e39, -1e39, 1e300])
def test_finite_scalars_beyond_float_range_are_refused(value):
    fd = heddle.Fusion()
    x = fd.input("a", "f16", ["M", 128])
    w = fd.input("b", "f16", [128, 256])
    y = fd.matmul(x, w)
    with pytest.raises(ScheduleError, match=r"beyond float range"):
        y * value


def hopper(bm, bn, warps_m):
    fd, a, b = matmul_fusion(m="M", n="N", k=1024, epilogue=None)
    mm = fd.schedule()
    mm.split("m", bm).split("n", bn).split("k", 64).split("m.i", bm // warps_m)
    mm.parallelize("m.o", "BIDy").parallelize("n.o", "BIDx").parallelize("m.i.o", "warp")
    mm.reorder(["m.o", "n.o", "k.o", "m.i.o", "m.i.i", "n.i", "k.i"])
    for t in (a, b):
        fd.cache_after(t, "tma_load").circular_buffer(4, 2)
    return fd


def test_hopper_tile_too_large_for_one_warpgroup_is_refused():
    with pytest.raises(ScheduleError) as e:
        validate(hopper(192, 256, 4), "sm_90a")
    msg = str(e.value)
    assert "tile 192x256 on 1 warpgroup(s) holds 384 accumulators per thread" in msg, msg
    assert "use an n tile of 128 (192x128x64)" in msg, msg
    assert "tile 192x128x64" in validate(hopper(192, 128, 4), "sm_90a")  # the advice is valid


# --- issue 28 item 8: an sm_80 warp tile past the accumulator registers, refused before compiling ------------

@pytest.mark.parametrize("bm,bn,wm,wn,acc", [(128, 128, 2, 1, 256), (64, 256, 1, 1, 512), (128, 256, 2, 2, 256)])
def test_sm80_warp_tile_past_the_registers_is_refused_at_schedule_time(bm, bn, wm, wn, acc):
    """The sm_90a rule (register_pool.h accumulatorsFit) on the mma.sync warp tile: (bm/wm) x (bn/wn) / 32 f32
    accumulators per thread within the 255-register cap less ~48; refused by lower() with no NVRTC compile
    (before: lowered, then a 3-4 s compile that spilled)."""
    fd = tiled(bm, bn, wm=wm, wn=wn)
    t0 = time.perf_counter()
    with pytest.raises(ScheduleError) as e:
        fd.lower("sm_80")
    assert time.perf_counter() - t0 < 0.5
    msg = str(e.value)
    assert (f"warp tile {bm // wm}x{bn // wn} (m tile {bm} over {wm} warp(s), n tile {bn} over {wn}) holds {acc} "
            f"f32 accumulators per thread") in msg, msg
    assert "has 255 registers and needs ~48 besides them (ptxas would spill)" in msg, msg
    m = re.search(r"bind (\d+) x (\d+) warps over m x n", msg)
    assert m, msg
    assert "tile" in validate(tiled(bm, bn, wm=int(m[1]), wn=int(m[2])), "sm_80")  # the advice is valid
    s = re.search(r"use a smaller tile \((\d+)x(\d+)x32 on the same warps\)", msg)
    assert s, msg
    assert "tile" in validate(tiled(int(s[1]), int(s[2]), wm=wm, wn=wn), "sm_80")


def test_sm80_warp_tile_within_the_registers_is_accepted():
    assert "tile 128x128x32" in validate(tiled(128, 128, wm=2, wn=2), "sm_80")   # 64x64: 128 accumulators
    assert "tile 64x192x32" in validate(tiled(64, 192, wm=1, wn=3), "sm_80")     # 64x64 again
    assert "tile 96x128x32" in validate(tiled(96, 128, wm=1, wn=2), "sm_80")     # 96x64: 192 <= 207


def test_hopper_advice_prefers_more_warpgroups_when_they_fit():
    with pytest.raises(ScheduleError, match=r"split the m tile over 2 warpgroups \(8 warps over m\)"):
        validate(hopper(128, 256, 4), "sm_90a")
    assert "tile 128x256x64" in validate(hopper(128, 256, 8), "sm_90a")


# --- item 7: the advice must be true -------------------------------------------------------------

def test_smem_overflow_suggests_a_stage_count_that_fits():
    fd = tiled(256, 128, wm=4, wn=2, stages=12)
    with pytest.raises(ScheduleError) as e:
        fd.lower("sm_80")
    msg = str(e.value)
    best = int(re.search(r"use circular_buffer\(stages=(\d+)\)", msg).group(1))
    assert 2 <= best < 11, msg
    tiled(256, 128, wm=4, wn=2, stages=best).lower("sm_80")  # fits
    with pytest.raises(ScheduleError, match="shared memory"):
        tiled(256, 128, wm=4, wn=2, stages=best + 1).lower("sm_80")


def test_smem_overflow_suggests_a_different_valid_tile_that_fits():
    fd2, a, b = matmul_fusion(m="M", n="N", k=256, epilogue=None)
    schedule(fd2, a, b, bm=128, bn=256, bk=64, wm=2, wn=4, stages=4)  # 64x64 warp tiles: 128 accumulators
    with pytest.raises(ScheduleError) as e:
        fd2.lower("sm_80")
    msg = str(e.value)
    m = re.search(r"use (?:circular_buffer\(stages=(\d+)\)|a smaller tile: (\d+)x(\d+)x64)", msg)
    assert m, msg
    if m.group(2):
        bm, bn = int(m.group(2)), int(m.group(3))
        assert (bm, bn) != (128, 256), msg
        fd3, a3, b3 = matmul_fusion(m="M", n="N", k=256, epilogue=None)
        st = re.search(r"with circular_buffer\(stages=(\d+)\)", msg)
        schedule(fd3, a3, b3, bm=bm, bn=bn, bk=64, wm=2, wn=4, stages=int(st.group(1)) if st else 4)
        fd3.lower("sm_80")  # the suggested tile is valid and fits


@pytest.mark.parametrize("target", ["gfx942", "gfx1200"])
def test_tma_load_advice_names_what_the_target_has(target):
    fd = tiled(128, 128, wm=2, wn=2, kind="tma_load")
    with pytest.raises(ScheduleError) as e:
        validate(fd, target)
    msg = str(e.value)
    assert "cp_async" not in msg.split("has none")[-1], msg
    assert "'plain'" in msg
    assert ("'async_lds'" in msg) == (target == "gfx942"), msg
