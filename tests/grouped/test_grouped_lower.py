"""The grouped matmul (issue 33, docs/grouped.md) from its definition to NVRTC: the Fusion IR's rules, the
schedule's refusals, the kernel's parameters, grid and printed device walk, explain(), and the compiled
kernel (no spills). The interpreter's numbers are in test_grouped_interp.py."""
import re

import pytest

import heddle
from support.env import requires_nvrtc
from support.grouped_defs import grouped_fusion, per_expert_fusion, scheduled
from support.matmul_defs import schedule


def test_definition_is_a_2d_matmul_with_its_group_ends():
    fd, x, w = grouped_fusion(n=72, k=96)
    mm = fd.matmul_tensor
    assert list(mm.shape) == ["T", 72]
    e = next(e for e in fd.exprs() if e["op"] == "matmul")
    assert e["inputs"] == ["x", "w"] and e["group_offsets"] == "offs" and not e["trans_b"]
    fd2, _, _ = grouped_fusion(n=72, k=96, trans_b=True)
    assert list(fd2.matmul_tensor.shape) == ["T", 72]


@pytest.mark.parametrize("make,needle", [
    (lambda fd: fd.grouped_matmul(fd.input("x", "bf16", ["T", 64, 2]), fd.input("w", "bf16", ["E", 64, 32])),
     "must be rank 2 [T, K]"),
    (lambda fd: fd.grouped_matmul(fd.input("x", "bf16", ["T", 64]), fd.input("w", "bf16", [64, 32])),
     "must be rank 3 [E, K, N]"),
    (lambda fd: fd.grouped_matmul(fd.input("x", "bf16", ["T", 64]), fd.input("w", "f16", ["E", 64, 32])),
     "operands are bf16 and f16"),
    (lambda fd: fd.grouped_matmul(fd.input("x", "e4m3", ["T", 64]), fd.input("w", "e4m3", ["E", 64, 32])),
     "operands are e4m3 and e4m3; the tensor-core grouped matmul takes two f16 or two bf16 inputs (8-bit float"),
    (lambda fd: fd.grouped_matmul(fd.input("x", "bf16", ["T", 64]), fd.input("w", "bf16", ["E", 48, 32])),
     "contraction sizes differ: x gives K=64, w gives K=48"),
    (lambda fd: fd.grouped_matmul(fd.input("x", "bf16", ["T", 64]), fd.input("w", "bf16", ["E", 64, 32]),
                                  offsets="x"),
     "name of its own"),
])
def test_definition_errors_name_the_tensor_and_the_rule(make, needle):
    with pytest.raises(heddle.ScheduleError, match=re.escape(needle)):
        make(heddle.Fusion())


def test_a_grouped_matmul_is_the_fusions_only_matmul():
    fd, x, w = grouped_fusion()
    with pytest.raises(heddle.ScheduleError, match="grouped matmul .* is its only matmul"):
        fd.matmul(x, fd.input("b2", "bf16", [96, 72]))


def test_lowered_kernel_takes_the_group_ends_and_sizes_its_grid_from_t_and_e():
    low = scheduled().lower("sm_80")
    params = {name: kind for name, kind, _, _ in low.params}
    assert params["offs"] == "ptr" and params["tokens"] == "i32" and params["E"] == "i32"
    assert params["batch_stride_b"] == "i64" and "M" not in params
    assert "_grouped" in low.name and low.tile["grouped"]
    # m-tile CTAs: ceil(T / 64) + E bounds sum_e ceil(rows_e / 64); n tiles ceil(72 / 64) = 2
    assert tuple(low.grid({"tokens": 250, "E": 7, "N": 72, "K": 96})[:2]) == (2, 4 + 7)
    assert "const int* __restrict__ offs" in low.source


def test_printed_walk_finds_the_expert_on_the_device_and_bounds_stores_by_its_end():
    src = scheduled().lower("sm_80").source
    for line in ("const int end = offs[e];",
                 "const int tiles = end > start ? (end - start + 64 - 1) / 64 : 0;",
                 "if ((int)blockIdx.y < before + tiles) {",
                 "if (g_e < 0) return;",
                 "const int M = g_end;",
                 "B += (long long)batch_idx * batch_stride_b;",
                 "if (row >= M || col >= N) continue;"):
        assert line in src, line
    assert "blockIdx.z" not in src  # the expert comes from the walk, not the grid


def test_explain_says_the_walks_reads_need_no_sync():
    text = heddle.Kernel.build(scheduled(), "sm_80", rtc=False).explain()
    assert "grouped tile walk: every thread reads the group ends offs[0..E) with plain global loads" in text
    assert "no sync orders these reads" in text


def test_auto_schedule_picks_the_mma_sync_kernel_on_hopper_without_tma():
    # (with operands TMA takes, sm_90a gets the warp-specialized kernel: test_grouped_wgmma.py)
    fd, _, _ = grouped_fusion()
    fd.auto_schedule("sm_90a", -1, 72, 96, tma=False)
    low = fd.lower("sm_90a")
    assert low.tile["mma"] == "mma.sync" and low.tile["grouped"] and not low.tensor_maps


def test_schedule_refuses_what_the_grouped_walk_does_not_do():
    fd, x, w = grouped_fusion()
    schedule(fd, x, w, bm=64, bn=64, bk=32, stages=3).split_k(2)
    with pytest.raises(heddle.ScheduleError, match="grouped matmul .*split_k shares a tile's k loop"):
        fd.lower("sm_80")
    fd, x, w = grouped_fusion()
    fd.cache_after(x, "tma_load")
    fd.cache_after(w, "tma_load")
    mm = fd.schedule()
    mm.split("m", 64).split("n", 64).split("k", 32).split("m.i", 64).split("n.i", 64)
    mm.parallelize("m.o", "BIDy").parallelize("n.o", "BIDx").parallelize("m.i.o", "warp").parallelize("n.i.o", "warp")
    mm.reorder(["m.o", "n.o", "k.o", "m.i.o", "n.i.o", "m.i.i", "n.i.i", "k.i"])
    with pytest.raises(heddle.ScheduleError, match="its TMA kernel is the warp-specialized one"):
        fd.lower("sm_90a")  # (the roles' refusals: test_grouped_wgmma.py)


@requires_nvrtc
@pytest.mark.parametrize("kw", [dict(), dict(trans_b=True, dtype="f16", epilogue="silu")],
                         ids=["nn-bf16-bias-gelu", "nt-f16-silu"])
def test_compiles_without_spills(kw):
    fd, _, _ = grouped_fusion(n=4096, k=4096, **kw)
    fd.auto_schedule("sm_80", -1, 4096, 4096)
    k = heddle.Kernel.build(fd, "sm_80")
    assert "_grouped" in k.name
    assert k.stats.spill_stores == 0 and k.stats.spill_loads == 0, k.stats


def test_per_expert_bias_reads_the_tiles_expert_row():
    fd, x, w = per_expert_fusion()
    schedule(fd, x, w, bm=64, bn=64, bk=32, stages=3)
    low = fd.lower("sm_80")
    assert "E_bias[(long long)batch_idx * E_bias_s0 + (long long)col_0 * E_bias_s1]" in low.source
    assert "row * E_bias" not in low.source


@pytest.mark.parametrize("make,needle", [
    (lambda fd: fd.per_expert(fd.input("b", "bf16", ["E", 72])), "has no grouped matmul"),
    (lambda fd: (fd.grouped_matmul(fd.input("x", "bf16", ["T", 64]), fd.input("w", "bf16", ["E", 64, 72])),
                 fd.per_expert(fd.input("b", "bf16", [72])))[1], "a per-expert operand is [E, N]"),
    (lambda fd: (fd.grouped_matmul(fd.input("x", "bf16", ["T", 64]), fd.input("w", "bf16", ["E", 64, 72])),
                 fd.per_expert(fd.input("b", "bf16", ["G", 72])))[1], "with the experts' E = E first"),
])
def test_per_expert_errors(make, needle):
    with pytest.raises(heddle.ScheduleError, match=re.escape(needle)):
        make(heddle.Fusion())


def test_launch_arguments_carry_the_group_ends_tokens_and_experts():
    # Kernel.prepare: the host work of a launch (the same on a GPU), on CPU tensors
    from support.grouped_defs import grouped_inputs
    fd = scheduled()
    k = heddle.Kernel.build(fd, "sm_80", rtc=False)
    x, w, bias, offs = grouped_inputs(fd, [0, 1, 131, 131, 190, 191, 250])
    out, grid, args = k.prepare([x, w, bias, offs])
    by_name = dict(zip([p[0] for p in k.lowered.params], args))
    assert by_name["offs"] == ("ptr", offs.data_ptr())
    assert by_name["tokens"] == ("i32", 250) and by_name["E"] == ("i32", 7)
    assert by_name["batch_stride_b"] == ("i64", w.stride(0))
    assert tuple(grid[:2]) == (2, 4 + 7) and tuple(out.shape) == (250, 72)
    with pytest.raises(heddle.InputError, match="input 'offs' axis 0: size 6 but symbol E is already bound to 7"):
        k.bind([x, w, bias, offs[:-1]])  # the launch's checks: E bound by w, offs of another length
