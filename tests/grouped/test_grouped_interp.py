"""The grouped matmul's printed kernel run by the interpreter (issue 33, docs/grouped.md) on ragged group ends
-- empty groups, one-row groups, a group spanning many tiles, groups ending mid-tile, T not a multiple of the
tile -- against a float64 reference computed expert by expert; heddle.grouped_mm's checks and its run under
HEDDLE_INTERPRET=1; a per-expert bias; the grouped walk's source mutants caught."""
import pytest
import torch

import heddle
from heddle.interpret import interpret, mutation_kill_rate
from support.grouped_defs import RAGGED, grouped_inputs, reference, scheduled, small_grouped_mm_case
from support.interp_defs import needs_cxx
from support.matmul_defs import schedule

pytestmark = needs_cxx


@pytest.mark.parametrize("pattern", list(RAGGED))
def test_ragged_groups_match_float64(pattern):
    ends = RAGGED[pattern]
    fd = scheduled(n=72, k=96)
    k = heddle.Kernel.build(fd, "sm_80", rtc=False)
    x, w, bias, offs = grouped_inputs(fd, ends, seed=3)
    ref = reference(x, w, offs, bias=bias, activation="gelu")
    r = interpret(k, x, w, bias, offs, reference=ref.to(torch.bfloat16))
    assert r.ok, r.report()
    # every row belongs to a group here (offs[-1] == T): all of the output was written, by the right expert
    assert not torch.isnan(r.output.float()).any()
    assert torch.allclose(r.output.double(), ref, atol=4e-2, rtol=2e-2)


def test_transposed_weights_f16_and_surplus_ctas():
    # w stored [E, N, K]; T = 250 gives ceil(250 / 64) + 7 = 11 m-tile CTAs for 6 tiles of work: 5 exit
    fd = scheduled(n=72, k=96, trans_b=True, dtype="f16", epilogue="silu", out="f16", stages=2)
    k = heddle.Kernel.build(fd, "sm_80", rtc=False)
    x, w, offs = grouped_inputs(fd, RAGGED["mixed"], seed=4)
    ref = reference(x, w, offs, trans_b=True, activation="silu")
    r = interpret(k, x, w, offs, reference=ref.to(torch.float16))
    assert r.ok, r.report()
    assert r.ctas == 2 * 11


def test_wrong_expert_weights_would_show():
    # the check above can fail: the same inputs with the experts' weights rolled by one mismatch
    fd = scheduled(n=72, k=96)
    k = heddle.Kernel.build(fd, "sm_80", rtc=False)
    x, w, bias, offs = grouped_inputs(fd, RAGGED["tile_edges"], seed=5)
    wrong = reference(x, w.roll(1, 0), offs, bias=bias, activation="gelu")
    r = interpret(k, x, w, bias, offs, reference=wrong.to(torch.bfloat16))
    assert not r.ok and r.mismatches


@pytest.mark.parametrize("kinds", [("group_walk_bound",), ("group_walk_offset",)])
def test_group_walk_mutants_are_caught(kinds):
    fd = scheduled(n=72, k=64, stages=2)
    k = heddle.Kernel.build(fd, "sm_80", rtc=False)
    ins = grouped_inputs(fd, RAGGED["mixed"], seed=6)
    res = mutation_kill_rate(k, *ins, kinds=kinds, schedules=(("adversarial", 0),))
    assert res["total"] == 3 and not res["survivors"], res["survivors"]


def test_grouped_mm_runs_the_printed_kernel_under_interpret(monkeypatch):
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    monkeypatch.setenv("HEDDLE_INTERPRET_TARGET", "sm_80")
    x, w_nk, bias, offs, ref = small_grouped_mm_case()  # w_nk [E, N, K], passed as [E, K, N] view
    y = heddle.grouped_mm(x, w_nk.transpose(-1, -2), offs, bias=bias, activation="silu", out_dtype=torch.float32)
    assert y.dtype == torch.float32 and y.shape == (100, 48)
    assert torch.allclose(y.double(), ref, atol=2e-2, rtol=2e-2)
    monkeypatch.delenv("HEDDLE_INTERPRET")  # the torch path gives the same numbers
    y2 = heddle.grouped_mm(x, w_nk.transpose(-1, -2), offs, bias=bias, activation="silu", out_dtype=torch.float32)
    assert torch.allclose(y2.double(), ref, atol=2e-2, rtol=2e-2)


def _args():
    return dict(x=torch.zeros(10, 64, dtype=torch.bfloat16), w=torch.zeros(3, 64, 32, dtype=torch.bfloat16),
                offs=torch.tensor([3, 3, 10], dtype=torch.int32))


@pytest.mark.parametrize("change,needle", [
    (dict(x=torch.zeros(10, 64)), "x has dtype torch.float32"),
    (dict(w=torch.zeros(3, 64, 32, dtype=torch.float16)), "w has dtype torch.float16 but x has torch.bfloat16"),
    (dict(x=torch.zeros(2, 10, 64, dtype=torch.bfloat16)), "x must be [T, K]"),
    (dict(w=torch.zeros(64, 32, dtype=torch.bfloat16)), "w must be [E, K, N]"),
    (dict(offs=torch.tensor([3, 3, 10])), "offs has dtype torch.int64; the group ends are int32"),
    (dict(offs=torch.tensor([3, 10], dtype=torch.int32)), "offs must be [E] = [3]"),
    (dict(w=torch.zeros(3, 48, 32, dtype=torch.bfloat16)), "x is [T, K=64] but w is [E, K=48, N]"),
    (dict(bias=torch.zeros(2, 32)), "bias must be [N] = [32] (shared by the experts) or [E, N] = [3, 32]"),
    (dict(activation="swish"), "activation 'swish' is not one of"),
])
def test_grouped_mm_names_each_wrong_input(change, needle):
    kw = _args()
    kw.update(change)
    x, w, offs = kw.pop("x"), kw.pop("w"), kw.pop("offs")
    with pytest.raises(heddle.InputError, match=__import__("re").escape(needle)):
        heddle.grouped_mm(x, w, offs, **kw)


def test_per_expert_bias_matches_float64():
    fd = heddle.Fusion()
    x = fd.input("x", "bf16", ["T", 96])
    w = fd.input("w", "bf16", ["E", 96, 72])
    y = heddle.ops.relu(fd.grouped_matmul(x, w) + fd.per_expert(fd.input("bias", "f32", ["E", 72])))
    fd.output(y.to("f32"))
    schedule(fd, x, w, bm=64, bn=64, bk=32, stages=3)
    k = heddle.Kernel.build(fd, "sm_80", rtc=False)
    ends = RAGGED["mixed"]
    xs, ws, bias, offs = grouped_inputs(fd, ends, seed=8)
    ref = reference(xs, ws, offs)
    start = 0
    for e, end in enumerate(ends):  # row r + its expert's bias row
        ref[start:end] += bias[e].double()
        start = end
    ref = ref.relu()
    r = interpret(k, xs, ws, bias, offs, reference=ref)
    assert r.ok, r.report()
    wrong = ref.clone()
    wrong[1:131] = (reference(xs, ws, offs)[1:131] + bias[1].double()).relu()  # expert 2's rows, expert 1's bias
    assert not interpret(k, xs, ws, bias, offs, reference=wrong).ok


def test_grouped_mm_takes_a_bias_per_expert(monkeypatch):
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    monkeypatch.setenv("HEDDLE_INTERPRET_TARGET", "sm_80")
    g = torch.Generator().manual_seed(9)
    x = (torch.randn(70, 32, generator=g) * 0.5).to(torch.float16)
    w = (torch.randn(3, 32, 40, generator=g) * 0.5).to(torch.float16)
    bias = torch.randn(3, 40, generator=g).to(torch.float16)
    offs = torch.tensor([5, 5, 70], dtype=torch.int32)
    y = heddle.grouped_mm(x, w, offs, bias=bias)
    ref = reference(x, w, offs)
    ref[:5] += bias[0].double()
    ref[5:] += bias[2].double()
    assert torch.allclose(y.double(), ref, atol=1e-2, rtol=1e-2)
