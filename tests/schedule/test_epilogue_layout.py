"""The epilogue layout of the automatic sm_90a schedule (schedule/epilogue_layout.h): a fused epilogue (bias,
residual, activation) defaults to ping-pong MMA warpgroups, whose epilogues overlap the other warpgroup's
mainloop; a plain store keeps the cooperative pair; "epilogue_role" gives an epilogue warpgroup behind an
accumulator ring. Each is selectable (auto_schedule(epilogue_layout=), FusedMatmul.epilogue_layout) and
printed by the schedule line (describe(), explain)."""
import pytest

import heddle
from support.env import requires_nvrtc
from support.wgmma_defs import assert_interprets_clean, inputs, nvrtc_sm90
from support.interp_defs import needs_cxx
from heddle.api import MatmulSpec, fused_matmul_op
from support.matmul_defs import matmul_fusion

PHRASE = {"pingpong": "ping-pong MMA warpgroups: one's epilogue overlaps the other's mainloop",
          "cooperative": "cooperative MMA warpgroups: the epilogue follows the tile's mainloop",
          "epilogue_role": "an epilogue warpgroup: tile t's epilogue overlaps tile t+1's mainloop"}


def auto(epilogue="bias_gelu", layout="auto", n=4096, m=4096):
    fd, _, _ = matmul_fusion(n=n, k=4096, dtype="bf16", layout="NT", epilogue=epilogue)
    return fd.auto_schedule("sm_90a", m=m, n=n, k=4096, epilogue_layout=layout).lower("sm_90a")


@pytest.mark.parametrize("epilogue,name,layout", [("bias_gelu", "_ws2pp_40_232_tmas2", "pingpong"),
                                                  ("silu_scale", "_ws2pp_40_232_tmas2", "pingpong"),
                                                  ("bias_tanh", "_ws2pp_40_232_tmas2", "pingpong"),
                                                  ("plain", "_ws2coop_40_232_tmas2", "cooperative")])
def test_auto_overlaps_fused_epilogues_and_keeps_plain_stores_cooperative(epilogue, name, layout):
    low = auto(epilogue)
    assert low.name.endswith(name), low.name
    assert ("tile 128x128x64" if layout == "pingpong" else "tile 128x256x64") in low.schedule
    assert "epilogue: " + PHRASE[layout] + ", TMA store" in low.schedule
    # explain's first line (the sync plan's summary) names the layout too (the role graph shows an epilogue role)
    assert "; epilogue: " + PHRASE[layout] in low.explain().splitlines()[0]
    assert low.explain().splitlines()[0].count("epilogue: ") == 1


@pytest.mark.parametrize("layout,name", [("cooperative", "_ws2coop_40_232_tmas2"), ("pingpong", "_ws2pp_40_232_tmas2"),
                                         ("epilogue_role", "_ws3coop_40_232_232")])
def test_every_layout_is_selectable(layout, name):
    low = auto(layout=layout)
    assert low.name.endswith(name) and PHRASE[layout] in low.schedule, (low.name, low.schedule)
    if layout == "epilogue_role":
        assert "accumulator ring sC" in low.explain().splitlines()[0]


def test_ping_pong_direct_store_where_the_output_is_not_tma_able():
    low = auto(n=4100)  # 8200-byte rows: not a 16-byte multiple
    assert "_ws2pp_40_232" in low.name and "_tmas" not in low.name
    assert "ping-pong" in low.schedule and low.schedule.endswith("direct store")


def test_split_k_decode_buckets_keep_their_tiles():
    # too few tiles for the SMs: split-K without roles, whatever the layout asks
    fd, _, _ = matmul_fusion(n=4096, k=4096, dtype="bf16", layout="NT")
    low = fd.auto_schedule("sm_90a", m=128, n=4096, k=4096, sms=132).lower("sm_90a")
    assert "split_k(4)" in low.schedule and "epilogue:" not in low.schedule


def test_unknown_layout_and_epilogue_role_without_tma_output_are_named_errors():
    with pytest.raises(heddle.ScheduleError, match="epilogue_layout = 'overlap' is not one of 'auto', 'cooperative'"):
        auto(layout="overlap")
    with pytest.raises(heddle.ScheduleError, match="'epilogue_role' stores the tile by TMA"):
        auto(layout="epilogue_role", n=4100)


def test_fused_matmul_describe_prints_and_overrides_the_layout():
    fm = fused_matmul_op(MatmulSpec(dtype="bf16", batched=False, batched_b=False, k=4096, n=4096, trans_a=False,
                                    trans_b=True, bias=("bf16", 1), residual=None, activation="gelu", alpha=None,
                                    out_dtype="bf16"))
    assert fm.epilogue_layout == "auto"
    last = fm.describe("sm_90a", sms=132).split("\n")[-1]
    assert "_ws2pp_40_232_tmas2" in last and PHRASE["pingpong"] in last
    fm.epilogue_layout = "cooperative"
    try:
        last = fm.describe("sm_90a", sms=132).split("\n")[-1]
        assert "_ws2coop_40_232_tmas2" in last and PHRASE["cooperative"] in last
    finally:
        fm.epilogue_layout = "auto"  # the op is shared by the process


@requires_nvrtc
@pytest.mark.parametrize("layout", ["pingpong", "epilogue_role"])
def test_nvrtc_compiles_the_overlapping_layouts_without_spills(layout):
    nvrtc_sm90(auto(layout=layout))


def test_auto_keeps_decode_sized_m_on_one_warpgroup():
    # M <= 64: one 64-row tile per n column, nothing to alternate (its epilogue staged and TMA-stored all the
    # same); "pingpong" by hand still applies
    low = auto(m=48)
    assert low.name.endswith("_ws2coop_0_0_tmas2") and "TMA store" in low.schedule, low.name
    low = auto(m=48, layout="pingpong")
    assert "64x128x64" in low.name and "_ws2pp_40_232" in low.name, low.name


@requires_nvrtc
def test_nvrtc_compiles_the_one_warpgroup_tma_store():
    r = nvrtc_sm90(auto(m=48))
    assert "stmatrix" in r.ptx and "cp.async.bulk.tensor.2d.global.shared" in r.ptx and "st.global" not in r.ptx


@needs_cxx
def test_one_warpgroup_tma_store_interprets_clean():
    # the M <= 64 kernel (one MMA warpgroup, 256 threads) with its staged epilogue and the bias read in pairs:
    # float64-right numbers on ragged M and N (two CTAs walk the tiles)
    fd, _, _ = matmul_fusion(n=200, k=96, dtype="bf16", layout="NT", epilogue="bias_gelu")
    fd.auto_schedule("sm_90a", m=64, n=200, k=96)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False, vec_e=2)
    assert k.name.endswith("_ws2coop_0_0_tmas2_ev2"), k.name
    assert_interprets_clean(k, inputs(fd, 50, seed=5), sms=2)


def _cached_bias(m=4096, n=4096, layout="auto", sms=0):
    fd = heddle.Fusion()
    a = fd.input("a", "bf16", ["M", 4096]); b = fd.input("b", "bf16", [4096, n]); bias = fd.input("bias", "bf16", [n])
    fd.output(heddle.ops.gelu(fd.matmul(a, b) + bias).to("bf16"))
    fd.cache_after(bias, "tma_load")
    return fd.auto_schedule("sm_90a", m=m, n=n, k=4096, sms=sms, epilogue_layout=layout).lower("sm_90a")


def test_a_cached_bias_keeps_the_cooperative_kernel_its_ring_is_built_for():
    # ping-pong would consume the bias ring out of order (the validator refuses it): "auto" takes cooperative,
    # and neither split-K nor stream-K (the producer role needs the warp-specialized kernel) at decode M
    low = _cached_bias()
    assert "_ws2coop_40_232" in low.name and PHRASE["cooperative"] in low.schedule, (low.name, low.schedule)
    low = _cached_bias(m=128, sms=132)
    assert "split_k" not in low.schedule and "stream_k" not in low.schedule and "_ws2coop" in low.name
    with pytest.raises(heddle.ScheduleError, match="built for cooperative MMA warpgroups"):
        _cached_bias(layout="pingpong")


def test_stream_k_takes_precedence_over_the_overlapped_layout_only_under_auto():
    # N 6400, K 8192 at M <= 256: 50 tiles leave SMs idle, the cost model takes stream-K on the cooperative kernel
    fd, _, _ = matmul_fusion(n=6400, k=8192, dtype="bf16", layout="NT", epilogue="bias_gelu")
    low = fd.auto_schedule("sm_90a", m=256, n=6400, k=8192, sms=132).lower("sm_90a")
    assert "_stk" in low.name and "_ws2coop" in low.name, low.name
    fd, _, _ = matmul_fusion(n=6400, k=8192, dtype="bf16", layout="NT", epilogue="bias_gelu")
    low = fd.auto_schedule("sm_90a", m=256, n=6400, k=8192, sms=132, epilogue_layout="pingpong").lower("sm_90a")
    assert "_stk" not in low.name, low.name  # an explicit layout keeps stream-K off (split-K may still come)


def test_batched_auto_schedule_is_cooperative_and_refuses_an_explicit_overlapped_layout():
    fd, _, _ = matmul_fusion(n=512, k=4096, dtype="bf16", layout="NT", epilogue="bias_gelu", batched=True)
    low = fd.auto_schedule("sm_90a", m=512, n=512, k=4096).lower("sm_90a")
    assert "_ws2coop" in low.name and PHRASE["cooperative"] in low.schedule, (low.name, low.schedule)
    fd, _, _ = matmul_fusion(n=512, k=4096, dtype="bf16", layout="NT", epilogue="bias_gelu", batched=True)
    with pytest.raises(heddle.ScheduleError, match="not built into the automatic schedule of a batched matmul"):
        fd.auto_schedule("sm_90a", m=512, n=512, k=4096, epilogue_layout="pingpong")


def _residual(pairs, layout="auto"):
    s = MatmulSpec("bf16", False, False, 4096, 4096, False, False, ("bf16", 1), ("bf16", 2), "gelu_tanh", None, "bf16")
    fd = s.build_fusion()
    return fd.auto_schedule("sm_90a", -1, s.n, s.k, sms=132, epilogue_layout=layout, epilogue_pairs=pairs)


def test_auto_keeps_a_residual_read_by_scalars_cooperative():
    # operands unfit for pair reads (vec_e=1): a residual's scalar loads spill the ping-pong kernel, so "auto"
    # takes the cooperative pair; a bias alone, or pair reads, keep ping-pong; an explicit layout is kept
    assert "_ws2pp_" in _residual(True).lower("sm_90a", vec_e=2).name
    low = _residual(False).lower("sm_90a")
    assert "_ws2coop_40_232_tmas2" in low.name and "epilogue: " + PHRASE["cooperative"] in low.schedule
    assert "_ws2pp_" in _residual(False, "pingpong").lower("sm_90a").name
    fd, _, _ = matmul_fusion(n=4096, k=4096, dtype="bf16", layout="NT", epilogue="bias_gelu")
    assert "_ws2pp_" in fd.auto_schedule("sm_90a", m=4096, n=4096, k=4096, epilogue_pairs=False).lower("sm_90a").name


@requires_nvrtc
def test_nvrtc_residual_read_by_scalars_compiles_without_spills():
    nvrtc_sm90(_residual(False).lower("sm_90a"))
    with pytest.raises(AssertionError, match="spill"):  # what the ping-pong layout would have done
        nvrtc_sm90(_residual(False, "pingpong").lower("sm_90a"))
