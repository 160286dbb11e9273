"""The masked layout (issue 33 point 1, DeepGEMM's decode layout; docs/grouped.md "The masked layout"): x
[E, max_tokens, K] with int32 row counts [E], out [E, max_tokens, N] whose padding rows are never stored. Its
definition and errors, the lowered kernel (parameters, grid, printed row bound, explain), NVRTC (no spills),
the interpreter on ragged counts (0 / 1 / max_tokens / mid-tile / past the slab) against float64 with the
padding rows checked unwritten, heddle.grouped_mm_masked and its InputErrors, and the masked_rows mutants."""
import re

import pytest
import torch

import heddle
from heddle.interpret import interpret, mutation_kill_rate
from support.env import requires_nvrtc
from support.grouped_defs import MASKED, MASKED_TOKENS, masked_fusion, masked_inputs, masked_reference, \
    masked_scheduled
from support.interp_defs import needs_cxx
from support.matmul_defs import schedule


def test_definition_is_a_batched_matmul_over_the_experts_with_its_counts():
    fd, _, _ = masked_fusion(n=72, k=96)
    assert list(fd.matmul_tensor.shape) == ["E", "Mt", 72]
    e = next(e for e in fd.exprs() if e["op"] == "matmul")
    assert e["group_offsets"] == "counts" and e["group_masked"]


@pytest.mark.parametrize("make,needle", [
    (lambda fd: fd.masked_grouped_matmul(fd.input("x", "bf16", ["T", 64]), fd.input("w", "bf16", ["E", 64, 32])),
     "must be rank 3 [E, max_tokens, K] in the masked layout"),
    (lambda fd: fd.masked_grouped_matmul(fd.input("x", "bf16", ["E", "Mt", 64]), fd.input("w", "bf16", [64, 32])),
     "must be rank 3 [E, K, N]"),
    (lambda fd: fd.masked_grouped_matmul(fd.input("x", "bf16", [4, "Mt", 64]), fd.input("w", "bf16", [8, 64, 32])),
     "expert counts differ: x gives E=4, w gives E=8"),
    (lambda fd: fd.masked_grouped_matmul(fd.input("x", "bf16", ["E", "Mt", 64]),
                                         fd.input("w", "bf16", ["E", 48, 32])),
     "contraction sizes differ: x gives K=64, w gives K=48"),
    (lambda fd: fd.masked_grouped_matmul(fd.input("x", "f16", ["E", "Mt", 64]), fd.input("w", "bf16", ["E", 64, 32])),
     "operands are f16 and bf16"),
    (lambda fd: fd.masked_grouped_matmul(fd.input("x", "bf16", ["E", "Mt", 64]),
                                         fd.input("w", "bf16", ["E", 64, 32]), counts="w"),
     "per-expert row counts argument (counts) with a name of its own"),
    (lambda fd: (fd.masked_grouped_matmul(fd.input("x", "bf16", ["E", "Mt", 64]),
                                          fd.input("w", "bf16", ["E", 64, 32])),
                 fd.per_expert(fd.input("b", "bf16", ["E", 32])))[1],
     "an ordinary input [E, 1, N] that broadcasts over the rows"),
])
def test_definition_errors_name_the_tensor_and_the_rule(make, needle):
    with pytest.raises(heddle.ScheduleError, match=re.escape(needle)):
        make(heddle.Fusion())


def test_lowered_kernel_takes_the_counts_and_keeps_the_batched_grid():
    low = masked_scheduled().lower("sm_80")
    params = {name: kind for name, kind, _, _ in low.params}
    assert params["counts"] == "ptr" and params["max_tokens"] == "i32" and "M" not in params
    assert params["batch_stride_a"] == "i64" and params["batch_stride_b"] == "i64"
    assert "_masked" in low.name and low.tile["masked"] and not low.tile["grouped"]
    # (ceil(N / bn), ceil(max_tokens / bm), E): sized from host-known sizes only
    assert tuple(low.grid({"M": 130, "N": 72, "K": 96, "batch": 6})) == (2, 3, 6)
    src = low.source
    assert "const int* __restrict__ counts" in src
    bound = src.index("const int M = counts[batch_idx] < max_tokens ? counts[batch_idx] : max_tokens;")
    exit_ = src.index("if (m0 >= M) return;")
    # the CTA exits after reading its count and before any load or barrier
    assert src.index("const int batch_idx = blockIdx.z;") < bound < exit_ < src.index("copy_tile_async<")
    assert exit_ < src.index("block_sync()")
    assert "if (row >= M || col >= N) continue;" in src  # the stores stop at the expert's count


def test_explain_says_the_count_read_needs_no_sync():
    text = heddle.Kernel.build(masked_scheduled(), "sm_80", rtc=False).explain()
    assert "masked layout: every thread reads its expert's row count counts[batch_idx]" in text
    assert "no sync orders this read" in text


def test_schedule_refuses_what_the_masked_kernel_does_not_do():
    fd, x, w = masked_fusion()
    schedule(fd, x, w, bm=64, bn=64, bk=32, stages=3).split_k(2)
    with pytest.raises(heddle.ScheduleError, match="split_k.*drop split_k"):
        fd.lower("sm_80")


@requires_nvrtc
def test_compiles_without_spills():
    fd, _, _ = masked_fusion(n=4096, k=4096)
    fd.auto_schedule("sm_80", -1, 4096, 4096)
    k = heddle.Kernel.build(fd, "sm_80")
    assert "_masked" in k.name
    assert k.stats.spill_stores == 0 and k.stats.spill_loads == 0, k.stats


@needs_cxx
@pytest.mark.parametrize("pattern", list(MASKED))
def test_ragged_counts_match_float64_and_leave_the_padding_unwritten(pattern):
    counts = MASKED[pattern]
    fd = masked_scheduled(n=72, k=96)
    k = heddle.Kernel.build(fd, "sm_80", rtc=False)
    x, w, bias, cnt = masked_inputs(fd, counts, seed=3)
    ref = masked_reference(x, w, cnt, bias=bias, activation="gelu")
    r = interpret(k, x, w, bias, cnt, reference=ref.to(torch.bfloat16))
    assert r.ok, r.report()
    for e, c in enumerate(counts):  # the interpreter fills the output with NaN: padding rows stay NaN
        c = min(c, MASKED_TOKENS)
        assert not torch.isnan(r.output[e, :c].float()).any(), e
        assert torch.isnan(r.output[e, c:].float()).all(), e
    assert torch.allclose(r.output[~torch.isnan(ref)].double(), ref[~torch.isnan(ref)], atol=4e-2, rtol=2e-2)
    # and the check can fail: a reference that counts every row of the slab mismatches the padding
    full = masked_reference(x, w, torch.full_like(cnt, MASKED_TOKENS), bias=bias, activation="gelu")
    assert not interpret(k, x, w, bias, cnt, reference=full.to(torch.bfloat16)).ok


@needs_cxx
def test_transposed_weights_f16_and_the_exiting_ctas():
    fd = masked_scheduled(n=72, k=96, trans_b=True, dtype="f16", epilogue="silu", out="f16", stages=2)
    k = heddle.Kernel.build(fd, "sm_80", rtc=False)
    x, w, cnt = masked_inputs(fd, MASKED["mixed"], seed=4)
    r = interpret(k, x, w, cnt, reference=masked_reference(x, w, cnt, trans_b=True, activation="silu").half())
    assert r.ok, r.report()
    assert r.ctas == 2 * 3 * 6  # the whole grid launches; the tiles past each count exit at once


@needs_cxx
def test_masked_rows_mutants_are_caught():
    fd = masked_scheduled(n=72, k=64, stages=2, epilogue="none")
    k = heddle.Kernel.build(fd, "sm_80", rtc=False)
    ins = masked_inputs(fd, [200, 65, 0, 128], seed=6)
    res = mutation_kill_rate(k, *ins, kinds=("masked_rows",), schedules=(("adversarial", 0),))
    assert res["total"] == 4 and not res["survivors"], res["survivors"]


def _x_w(E=4, Mt=40, K=64, N=48, dtype=torch.bfloat16, seed=7):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(E, Mt, K, generator=g) * 0.5).to(dtype)
    w_nk = (torch.randn(E, N, K, generator=g) * 0.5).to(dtype)
    return x, w_nk


@needs_cxx
def test_grouped_mm_masked_runs_the_printed_kernel_under_interpret(monkeypatch):
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    monkeypatch.setenv("HEDDLE_INTERPRET_TARGET", "sm_80")
    x, w_nk = _x_w()
    bias = torch.randn(4, 48, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    counts = torch.tensor([0, 40, 17, 1], dtype=torch.int32)
    y = heddle.grouped_mm_masked(x, w_nk.transpose(-1, -2), counts, bias=bias, activation="silu",
                                 out_dtype=torch.float32)
    ref = masked_reference(x, w_nk, counts, trans_b=True, bias=bias.unsqueeze(1), activation="silu")
    assert y.dtype == torch.float32 and y.shape == (4, 40, 48)
    valid = ~torch.isnan(ref)
    assert torch.allclose(y[valid].double(), ref[valid], atol=2e-2, rtol=2e-2)
    monkeypatch.delenv("HEDDLE_INTERPRET")  # the torch path gives the same numbers on the tokens
    y2 = heddle.grouped_mm_masked(x, w_nk.transpose(-1, -2), counts, bias=bias, activation="silu",
                                  out_dtype=torch.float32)
    assert torch.allclose(y2[valid].double(), ref[valid], atol=2e-2, rtol=2e-2)


def _args():
    return dict(x=torch.zeros(3, 10, 64, dtype=torch.bfloat16), w=torch.zeros(3, 64, 32, dtype=torch.bfloat16),
                counts=torch.tensor([3, 0, 10], dtype=torch.int32))


@pytest.mark.parametrize("change,needle", [
    (dict(x=torch.zeros(3, 10, 64)), "x has dtype torch.float32"),
    (dict(w=torch.zeros(3, 64, 32, dtype=torch.float16)), "w has dtype torch.float16 but x has torch.bfloat16"),
    (dict(x=torch.zeros(30, 64, dtype=torch.bfloat16)), "x must be [E, max_tokens, K]"),
    (dict(w=torch.zeros(2, 64, 32, dtype=torch.bfloat16)), "w must be [E, K, N] with x's E = 3"),
    (dict(counts=torch.tensor([3, 0, 10])), "counts has dtype torch.int64; the row counts are int32"),
    (dict(counts=torch.tensor([3, 10], dtype=torch.int32)), "counts must be [E] = [3]"),
    (dict(w=torch.zeros(3, 48, 32, dtype=torch.bfloat16)), "x is [E, max_tokens, K=64] but w is [E, K=48, N]"),
    (dict(bias=torch.zeros(2, 32)), "bias must be [N] = [32] (shared by the experts) or [E, N] = [3, 32]"),
    (dict(activation="swish"), "activation 'swish' is not one of"),
    (dict(out_dtype=torch.int8), "out_dtype torch.int8 is not float16, bfloat16 or float32"),
])
def test_grouped_mm_masked_names_each_wrong_input(change, needle):
    kw = _args()
    kw.update(change)
    x, w, counts = kw.pop("x"), kw.pop("w"), kw.pop("counts")
    with pytest.raises(heddle.InputError, match=re.escape(needle)):
        heddle.grouped_mm_masked(x, w, counts, **kw)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_auto_schedule_keeps_the_masked_layout_on_mma_sync_where_tma_kernels_exist(target):
    # the masked layout runs on the cp.async kernel only (a TMA schedule of it is refused by name,
    # tests/grouped/test_grouped_wgmma.py): the automatic schedule must not send it to the TMA kernels
    fd, _, _ = masked_fusion(n=4096, k=4096)
    fd.auto_schedule(target, -1, 4096, 4096)
    low = fd.lower(target)
    assert low.tile["mma"] == "mma.sync" and "_masked" in low.name and not low.tensor_maps
