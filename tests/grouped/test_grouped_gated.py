"""The gated grouped form (issue 33, docs/grouped.md "The gated form"): act(x @ W1_e) * (x @ W3_e) per expert in
one kernel -- two grouped matmuls sharing x and the group ends, lowered as a matmul group (two accumulators,
the product in the epilogue) walked over the experts. Its definition and errors, the lowered kernel (both
experts' weights), NVRTC (no spills), the interpreter on ragged groups against float64, heddle.grouped_mm_gated
and its InputErrors, and the walk's mutants on the pair."""
import re

import pytest
import torch

import heddle
from heddle.interpret import interpret, mutation_kill_rate
from support.env import requires_nvrtc
from support.grouped_defs import RAGGED, grouped_inputs, reference
from support.interp_defs import needs_cxx
from support.matmul_defs import schedule


def gated(n=72, k=96, dtype="bf16", trans_b=False, activation="silu", out="bf16"):
    fd = heddle.Fusion()
    x = fd.input("x", dtype, ["T", k])
    shape = ["E", n, k] if trans_b else ["E", k, n]
    w1, w3 = fd.input("w1", dtype, shape), fd.input("w3", dtype, shape)
    g = fd.grouped_matmul(x, w1, trans_b)
    fd.output(((heddle.ops.silu(g) if activation == "silu" else g) * fd.grouped_matmul(x, w3, trans_b)).to(out))
    return fd, x, w1


def gated_scheduled(**kw):
    fd, x, w1 = gated(**kw)
    schedule(fd, x, w1, bm=64, bn=64, bk=32, wm=2, wn=2, stages=3)
    return fd


def gated_reference(x, w1, w3, offs, trans_b=False):
    return torch.nn.functional.silu(reference(x, w1, offs, trans_b)) * reference(x, w3, offs, trans_b)


@pytest.mark.parametrize("make,needle", [
    (lambda fd, x, w1, w3: fd.grouped_matmul(fd.input("x2", "bf16", ["T", 64]), w3),
     "only as a gated pair reading the same tokens x"),
    (lambda fd, x, w1, w3: fd.grouped_matmul(x, w3, offsets="ends"),
     "a gated pair shares its group ends: the first grouped matmul's are 'offs', this one names 'ends'"),
    (lambda fd, x, w1, w3: fd.grouped_matmul(x, w1), "w1 is already the first member's weights"),
    (lambda fd, x, w1, w3: fd.grouped_matmul(x, fd.input("w4", "bf16", ["E", 64, 48])),
     "the gated pair's weights differ"),
    (lambda fd, x, w1, w3: fd.grouped_matmul(x, w3, trans_b=True), "the gated pair's weights differ"),
    (lambda fd, x, w1, w3: (fd.grouped_matmul(x, w3), fd.grouped_matmul(x, fd.input("w5", "bf16", ["E", 64, 32]))),
     "a third does not join it"),
])
def test_definition_errors_name_the_rule(make, needle):
    fd = heddle.Fusion()
    x = fd.input("x", "bf16", ["T", 64])
    w1, w3 = fd.input("w1", "bf16", ["E", 64, 32]), fd.input("w3", "bf16", ["E", 64, 32])
    fd.grouped_matmul(x, w1)
    with pytest.raises(heddle.ScheduleError, match=re.escape(needle)):
        make(fd, x, w1, w3)


def test_a_masked_matmul_takes_no_partner():
    fd = heddle.Fusion()
    x = fd.input("x", "bf16", ["E", "Mt", 64])
    fd.masked_grouped_matmul(x, fd.input("w1", "bf16", ["E", 64, 32]))
    with pytest.raises(heddle.ScheduleError, match="the fusion already has a matmul"):
        fd.grouped_matmul(fd.input("t", "bf16", ["T", 64]), fd.input("w3", "bf16", ["E", 64, 32]))


def test_lowered_kernel_walks_both_experts_weights():
    low = gated_scheduled().lower("sm_80")
    params = [name for name, _, _, _ in low.params]
    for p in ("B", "B1", "offs", "ldb1", "batch_stride_b", "batch_stride_b1"):
        assert p in params, p
    assert "_g2" in low.name and "_grouped" in low.name and low.tile["grouped"]
    assert "  B += (long long)batch_idx * batch_stride_b;\n  B1 += (long long)batch_idx * batch_stride_b1;" in low.source
    # bn 64 holds 32 columns of each member: ceil(72 / 32) n tiles
    assert tuple(low.grid({"tokens": 250, "E": 7, "N": 72, "K": 96})[:2]) == (3, 4 + 7)


@requires_nvrtc
def test_compiles_without_spills():
    fd, _, _ = gated(n=14336, k=4096)
    fd.auto_schedule("sm_80", -1, 14336, 4096)
    k = heddle.Kernel.build(fd, "sm_80")
    assert "_g2" in k.name and "_grouped" in k.name
    assert k.stats.spill_stores == 0 and k.stats.spill_loads == 0, k.stats


def _inputs(fd, ends, seed):
    x, w1, w3, offs = grouped_inputs(fd, ends, seed=seed)
    return x, w1, w3, offs


@needs_cxx
@pytest.mark.parametrize("pattern", ["mixed", "one_rows", "many_tiles"])
def test_ragged_groups_match_float64(pattern):
    fd = gated_scheduled()
    k = heddle.Kernel.build(fd, "sm_80", rtc=False)
    x, w1, w3, offs = _inputs(fd, RAGGED[pattern], seed=11)
    ref = gated_reference(x, w1, w3, offs)
    r = interpret(k, x, w1, w3, offs, reference=ref.to(torch.bfloat16))
    assert r.ok, r.report()
    assert torch.allclose(r.output.double(), ref, atol=4e-2, rtol=2e-2)
    # the check can fail: the up projection of the neighbouring expert mismatches
    wrong = torch.nn.functional.silu(reference(x, w1, offs)) * reference(x, w3.roll(1, 0), offs)
    assert not interpret(k, x, w1, w3, offs, reference=wrong.to(torch.bfloat16)).ok


@needs_cxx
def test_walk_mutants_on_the_pair_are_caught():
    fd = gated_scheduled()
    k = heddle.Kernel.build(fd, "sm_80", rtc=False)
    ins = _inputs(fd, RAGGED["mixed"], seed=12)
    res = mutation_kill_rate(k, *ins, kinds=("group_walk_bound", "group_walk_offset"),
                             schedules=(("adversarial", 0),))
    assert res["total"] == 6 and not res["survivors"], res["survivors"]


@needs_cxx
def test_grouped_mm_gated_runs_the_printed_kernel_under_interpret(monkeypatch):
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    monkeypatch.setenv("HEDDLE_INTERPRET_TARGET", "sm_80")
    g = torch.Generator().manual_seed(13)
    x = (torch.randn(100, 64, generator=g) * 0.5).to(torch.bfloat16)
    w1, w3 = ((torch.randn(4, 48, 64, generator=g) * 0.5).to(torch.bfloat16) for _ in range(2))  # [E, N, K]
    offs = torch.tensor([0, 37, 37, 100], dtype=torch.int32)
    y = heddle.grouped_mm_gated(x, w1.transpose(-1, -2), w3.transpose(-1, -2), offs, out_dtype=torch.float32)
    ref = gated_reference(x, w1, w3, offs, trans_b=True)
    assert y.dtype == torch.float32 and y.shape == (100, 48)
    assert torch.allclose(y.double(), ref, atol=3e-2, rtol=2e-2)
    monkeypatch.delenv("HEDDLE_INTERPRET")  # the torch path gives the same numbers
    y2 = heddle.grouped_mm_gated(x, w1.transpose(-1, -2), w3.transpose(-1, -2), offs, out_dtype=torch.float32)
    assert torch.allclose(y2.double(), ref, atol=3e-2, rtol=2e-2)


def _args():
    return dict(x=torch.zeros(10, 64, dtype=torch.bfloat16), w1=torch.zeros(3, 64, 32, dtype=torch.bfloat16),
                w3=torch.zeros(3, 64, 32, dtype=torch.bfloat16), offs=torch.tensor([3, 3, 10], dtype=torch.int32))


@pytest.mark.parametrize("change,needle", [
    (dict(x=torch.zeros(10, 64)), "x has dtype torch.float32"),
    (dict(w3=torch.zeros(3, 64, 32, dtype=torch.float16)), "w3 has dtype torch.float16 but x has torch.bfloat16"),
    (dict(w1=torch.zeros(3, 48, 32, dtype=torch.bfloat16)), "x is [T, K=64] but w1 is [E, K=48, N]"),
    (dict(w3=torch.zeros(3, 64, 16, dtype=torch.bfloat16)), "w3 has shape [3, 64, 16] but w1 has [3, 64, 32]"),
    (dict(w3=torch.zeros(3, 32, 64, dtype=torch.bfloat16).transpose(-1, -2)), "give both one layout"),
    (dict(offs=torch.tensor([3, 10], dtype=torch.int32)), "offs must be [E] = [3]"),
    (dict(activation="swish"), "activation 'swish' is not one of"),
])
def test_grouped_mm_gated_names_each_wrong_input(change, needle):
    kw = _args()
    kw.update(change)
    x, w1, w3, offs = kw.pop("x"), kw.pop("w1"), kw.pop("w3"), kw.pop("offs")
    with pytest.raises(heddle.InputError, match=re.escape("heddle.grouped_mm_gated: ") + ".*" + re.escape(needle)):
        heddle.grouped_mm_gated(x, w1, w3, offs, **kw)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_auto_schedule_keeps_the_pair_on_mma_sync_where_tma_kernels_exist(target):
    # the TMA grouped kernels (wgmma, tcgen05) take one grouped matmul; the automatic schedule keeps the
    # gated pair on the matmul-group kernel there (docs/grouped.md, "The gated form")
    fd, _, _ = gated(n=4096, k=4096)
    fd.auto_schedule(target, -1, 4096, 4096)
    low = fd.lower(target)
    assert low.tile["mma"] == "mma.sync" and "_g2" in low.name and "_grouped" in low.name and not low.tensor_maps
