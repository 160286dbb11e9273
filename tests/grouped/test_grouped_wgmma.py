"""The sm_90a warp-specialized TMA + wgmma grouped kernel (issue 33 point 2, docs/grouped.md): the schedule's
refusals and the auto schedule's pick, the lowered kernel (one tile per CTA of the grouped walk's grid, A's
2-D and B's 3-D tensor maps, the predicated direct stores), explain(), its pinned printed source, NVRTC (no
spills at K = N = 4096), and the interpreter running the printed kernel on ragged group ends against float64,
with the walk's source mutants caught."""
import hashlib
import re

import pytest
import torch

import heddle
from heddle.interpret import interpret, mutation_kill_rate
from support.env import requires_nvrtc
from support.grouped_defs import RAGGED, grouped_fusion, grouped_inputs, per_expert_fusion, reference, scheduled_sm90
from support.interp_defs import needs_cxx
from support.wgmma_defs import nvrtc_sm90, schedule_sm90

# sha256 of the printed source of scheduled_sm90() (bf16, bias + gelu, 64 x 64 x 16, 3 stages prefetch 1): a
# printer or lowering change that alters this kernel must show here (tests/data/printed_sources.json is the
# other kernels' pin)
PINNED = "7729e9df1ce243a4a1cb79d8849d9d3786d19f602cadf1609731817893cb0ecc"


def lowered(**kw):
    return scheduled_sm90(**kw).lower("sm_90a")


def test_lowered_kernel_walks_the_groups_one_tile_per_cta():
    low = lowered()
    params = {name: kind for name, kind, _, _ in low.params}
    assert params["offs"] == "ptr" and params["tokens"] == "i32" and params["E"] == "i32"
    assert "num_ctas" not in params and "M" not in params  # not persistent: the walk's grid
    assert low.tile["grouped"] and low.tile["mma"] == "wgmma" and "_grouped" in low.name and "_sm90" in low.name
    # (n tiles, ceil(T / bm) + E): ceil(72 / 64) = 2; ceil(250 / 64) + 7 = 11
    assert tuple(low.grid({"tokens": 250, "E": 7, "N": 72, "K": 96})[:3]) == (2, 11, 1)
    maps = {m["param"]: m for m in low.tensor_maps}
    assert not maps["tmA"]["batched"] and maps["tmB"]["batched"]  # A over [T, K]; B over every expert
    assert "tmD" not in maps  # no TMA store


def test_printed_kernel_exits_surplus_ctas_before_the_barriers_and_predicates_stores():
    src = lowered().source
    assert src.index("if (g_e < 0) return;") < src.index("mbar_init(")  # surplus CTAs never touch a barrier
    for line in ("const int end = offs[e];", "const int M = g_end;", "const int batch_idx = g_e;",
                 "if (row < M && col < N) {"):
        assert line in src, line
    assert "B += (long long)batch_idx" not in src  # w[e] through B's 3-D map, coordinate batch_idx
    assert re.search(r"tma_load\w*<[^;]*&tmB, [^;]*batch_idx", src), "B's TMA load takes the expert coordinate"
    assert re.search(r"tma_load\w*<[^;]*&tmA, [^;]*, 0, ", src), "A's map is 2-D over [T, K]"
    assert "num_ctas" not in src and "blockIdx.z" not in src


def test_launch_maps_a_over_the_tokens_and_b_over_every_expert():
    # Kernel.prepare: the host work of a launch (the same on a GPU), with an encoder that records each map
    from heddle import _C
    fd = scheduled_sm90(trans_b=True)  # w stored [E, N, K]
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    x, w, bias, offs = grouped_inputs(fd, RAGGED["mixed"], tokens=260)
    seen = {}

    def encoder(dt, address, dims, strides, box, elem, **kw):
        seen[address] = (list(dims), list(strides), list(box))
        return _C.interp.encode_tensor_map_tiled(dt, address, dims, strides, box, elem, **kw)

    out, grid, args = k.prepare([x, w, bias, offs], tensor_map_encoder=encoder)
    dims, strides, box = seen[x.data_ptr()]
    assert dims == [96, 260] and strides == [96 * 2] and len(box) == 2  # [T, K]: rows past T zero-fill
    dims, strides, box = seen[w.data_ptr()]
    assert dims == [96, 72, 7] and strides == [96 * 2, 72 * 96 * 2] and box[2] == 1  # expert e at coordinate e
    assert tuple(grid[:3]) == (2, 5 + 7, 1) and tuple(out.shape) == (260, 72)
    names = [p[0] for p in k.lowered.params]
    assert dict(zip(names, args))["E"] == ("i32", 7)


def test_per_expert_bias_reads_the_tiles_expert_row():
    fd, x, w = per_expert_fusion()
    schedule_sm90(fd, x, w, bm=64, bn=64, bk=16, wgs=1, stages=3, prefetch=1, roles=ONE)
    src = fd.lower("sm_90a").source
    assert "E_bias[(long long)batch_idx * E_bias_s0 + (long long)col_0 * E_bias_s1]" in src
    assert "row * E_bias" not in src


def test_printed_source_is_pinned():
    src = lowered().source
    assert hashlib.sha256(src.encode()).hexdigest() == PINNED


def test_explain_names_the_walk_and_the_rings():
    text = heddle.Kernel.build(scheduled_sm90(), "sm_90a", rtc=False).explain()
    assert "no sync orders these reads" in text
    assert "grouped roles: each CTA computes the one tile its walk found" in text
    assert "ring sA, sB: 3 stages, prefetch 1" in text


def test_auto_schedule_picks_the_wgmma_kernel_and_keeps_mma_sync_reachable():
    fd, _, _ = grouped_fusion(n=4096, k=4096)
    fd.auto_schedule("sm_90a", -1, 4096, 4096)
    low = fd.lower("sm_90a")
    t = low.tile
    assert t["mma"] == "wgmma" and t["grouped"] and (t["bm"], t["bn"], t["bk"]) == (128, 128, 64)
    assert "_ws2coop" in low.name and low.tensor_maps
    fd, _, _ = grouped_fusion(n=4096, k=4096)
    fd.auto_schedule("sm_90a", -1, 4096, 4096, tma=False)  # operands TMA cannot take: cp.async + mma.sync
    low = fd.lower("sm_90a")
    assert low.tile["mma"] == "mma.sync" and low.tile["grouped"] and not low.tensor_maps


def _tma(roles=None, wgs=1, store=None, stream_k=0, masked=False):
    """A grouped fusion on TMA loads with `roles` (None: the TMA pipeline without roles), tile warpgroups wgs
    (masked: the masked layout's definition)."""
    fd, x, w = grouped_fusion(masked=masked)
    mm = schedule_sm90(fd, x, w, bm=64 * wgs, bn=64, bk=16, wgs=wgs, stages=3, prefetch=1, roles=roles)
    if store:
        mm.epilogue_store(store)
    if stream_k:
        mm.stream_k(stream_k)
    return fd


ONE = {"load": 1, "mma": {"warpgroups": 1}}
REFUSED = {
    "tma-without-roles": (lambda: _tma(), "sm_90a", "its TMA kernel is the warp-specialized one"),
    "tma-store": (lambda: _tma(ONE, store="tma"), "sm_90a", "a grouped matmul stores with predicated direct stores"),
    "epilogue-role": (lambda: _tma({"load": 1, "mma": {"warpgroups": 1}, "epilogue": {"warpgroups": 1}}), "sm_90a",
                      "an epilogue role stores the tile with TMA"),
    "pingpong": (lambda: _tma({"load": 1, "mma": {"warpgroups": 2}}), "sm_90a",
                 "ping-pong MMA warpgroups alternate tiles"),
    "stream-k": (lambda: _tma(ONE, stream_k=4), "sm_90a", "stream_k shares a tile's k loop"),
    "masked": (lambda: _tma(ONE, masked=True), "sm_90a", "the masked layout runs on the cp.async + mma.sync kernel"),
    "masked-tcgen05": (lambda: _tma(ONE, masked=True), "sm_100a",
                       "the masked layout runs on the cp.async + mma.sync kernel"),
    "bias-tma": (lambda: _bias_tma(), "sm_90a", "cache_after(bias, 'tma_load'): the grouped kernel reads"),
}


def _bias_tma():
    fd = _tma(ONE)
    fd.cache_after(next(t for t in fd.inputs if t.name == "bias"), "tma_load").circular_buffer(2)
    return fd


@pytest.mark.parametrize("case", list(REFUSED))
def test_schedule_refuses_what_the_grouped_wgmma_kernel_does_not_do(case):
    make, target, needle = REFUSED[case]
    with pytest.raises(heddle.ScheduleError, match=re.escape(needle)):
        make().lower(target)


@needs_cxx
@pytest.mark.parametrize("pattern", list(RAGGED))
def test_interpreter_ragged_groups_match_float64(pattern):
    ends = RAGGED[pattern]
    fd = scheduled_sm90()
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    x, w, bias, offs = grouped_inputs(fd, ends, seed=3)
    ref = reference(x, w, offs, bias=bias, activation="gelu")
    r = interpret(k, x, w, bias, offs, reference=ref.to(torch.bfloat16))
    assert r.ok, r.report()
    assert not torch.isnan(r.output.float()).any()  # offs[-1] == T: every row written, by its expert
    assert torch.allclose(r.output.double(), ref, atol=4e-2, rtol=2e-2)


@needs_cxx
def test_interpreter_cooperative_pair_transposed_f16_rows_past_the_last_group():
    # two MMA warpgroups on 128-row tiles, w stored [E, N, K]; T = 260 > offs[-1] = 250: the last 10 rows
    # belong to no group and stay unwritten (the output's NaN fill shows a stray store)
    fd = scheduled_sm90(bm=128, trans_b=True, dtype="f16", epilogue="silu", out="f16")
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    x, w, offs = grouped_inputs(fd, RAGGED["mixed"], seed=4, tokens=260)
    ref = reference(x, w, offs, trans_b=True, activation="silu")
    r = interpret(k, x, w, offs, schedule="random", seed=2, reference=False)  # the rows' check is below
    assert r.ok, r.report()  # no race, deadlock or asynchronous misuse
    assert r.ctas == 2 * (3 + 7)  # (n tiles, ceil(260 / 128) + E)
    assert torch.allclose(r.output[:250].double(), ref[:250], atol=4e-2, rtol=2e-2)
    assert torch.isnan(r.output[250:].float()).all()  # the interpreter's NaN fill: never written


@needs_cxx
def test_interpreter_wrong_expert_weights_would_show():
    fd = scheduled_sm90()
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    x, w, bias, offs = grouped_inputs(fd, RAGGED["tile_edges"], seed=5)
    wrong = reference(x, w.roll(1, 0), offs, bias=bias, activation="gelu")
    r = interpret(k, x, w, bias, offs, reference=wrong.to(torch.bfloat16))
    assert not r.ok and r.mismatches


@needs_cxx
@pytest.mark.parametrize("kinds", [("group_walk_bound",), ("group_walk_offset",)])
def test_group_walk_mutants_are_caught(kinds):
    fd = scheduled_sm90(k=64)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    ins = grouped_inputs(fd, RAGGED["mixed"], seed=6)
    res = mutation_kill_rate(k, *ins, kinds=kinds, schedules=(("adversarial", 0),))
    assert res["total"] >= 3 and not res["survivors"], res["survivors"]


@needs_cxx
def test_grouped_mm_under_interpret_runs_the_wgmma_kernel(monkeypatch):
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    monkeypatch.setenv("HEDDLE_INTERPRET_TARGET", "sm_90a")
    from heddle.pytorch.grouped import grouped_kernel
    g = torch.Generator().manual_seed(7)
    ends = [0, 70, 71, 200]
    x = torch.randn(200, 64, generator=g).to(torch.bfloat16)
    w = (torch.randn(4, 72, 64, generator=g) / 8).to(torch.bfloat16)  # [E, N, K], passed as a [E, K, N] view
    bias = torch.randn(4, 72, generator=g).to(torch.bfloat16)
    offs = torch.tensor(ends, dtype=torch.int32)
    grouped_kernel.cache_clear()
    y = heddle.grouped_mm(x, w.transpose(-1, -2), offs, bias=bias, activation="relu")
    # the kernel grouped_mm ran: the one cached for its signature (a hit, not a second build)
    from heddle.core.kernel import _vec_for
    k = grouped_kernel("sm_90a", "bf16", 64, 72, True, "bf16", True, "relu", "bf16", _vec_for(x), _vec_for(w),
                       False, True)
    assert grouped_kernel.cache_info().hits == 1 and grouped_kernel.cache_info().currsize == 1
    assert "_sm90" in k.name and "_grouped" in k.name and k.lowered.tile["mma"] == "wgmma"
    rows = bias[torch.repeat_interleave(torch.arange(4), torch.tensor([0, 70, 1, 129]))]
    ref = reference(x, w, offs, trans_b=True, bias=rows).relu()
    assert torch.allclose(y.double(), ref, atol=4e-2, rtol=2e-2)


@requires_nvrtc
@pytest.mark.parametrize("kw", [dict(), dict(trans_b=True, dtype="f16", epilogue="silu")],
                         ids=["nn-bf16-bias-gelu", "nt-f16-silu"])
def test_auto_kernel_compiles_without_spills(kw):
    fd, _, _ = grouped_fusion(n=4096, k=4096, **kw)
    fd.auto_schedule("sm_90a", -1, 4096, 4096)
    low = fd.lower("sm_90a")
    assert "_sm90" in low.name and "_grouped" in low.name
    nvrtc_sm90(low)
