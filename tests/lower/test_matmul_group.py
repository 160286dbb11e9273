"""Matmul groups (docs/scheduling.md, "Matmul groups"): matmuls that share their A operand in one fusion
are one kernel. SwiGLU's `silu(x @ w1) * (x @ w3)` combines the members in the epilogue; q/k/v stores
each member. Checked here: the IR and its errors, the schedule rules, the kernel IR and printed source,
NVRTC (sm_80, sm_90a, no spills), the kernel-IR simulator, and the CPU interpreter of the printed source
(numbers against float64 on ragged shapes, mutants of the group's code caught)."""
import pytest
import torch

import heddle
from support.group_defs import group_fusion, group_inputs, reference, schedule_group
from support.interp_defs import kernel, needs_cxx
from heddle import verify
from heddle.interpret import _Mutated, interpret, mutation_kill_rate


def swiglu(trans_b=True, epilogue="silu", n=200, k=96, **kw):
    fd, x, ws = group_fusion(2, n=n, k=k, trans_b=trans_b, epilogue=epilogue)
    schedule_group(fd, x, ws[0], **kw)
    return fd


# --- IR --------------------------------------------------------------------------------------------------

def test_group_ir_and_reference_evaluator():
    fd, x, ws = group_fusion(2)
    assert [e["op"] for e in fd.exprs()].count("matmul") == 2
    ins = group_inputs(fd, 9)
    got = heddle.reference.evaluate(fd, ins)
    torch.testing.assert_close(got.double(), reference(ins), atol=2e-2, rtol=2e-2)


def test_group_errors_name_the_tensors():
    fd = heddle.Fusion()
    x = fd.input("x", "bf16", ["M", 64])
    y = fd.input("y", "bf16", ["M", 64])
    w1 = fd.input("w1", "bf16", [128, 64])
    w3 = fd.input("w3", "bf16", [128, 64])
    w_small = fd.input("w_small", "bf16", [96, 64])
    fd.matmul(x, w1, False, True)
    with pytest.raises(heddle.ScheduleError, match=r"matmul\(y, w3\).*same A operand x"):
        fd.matmul(y, w3, False, True)
    with pytest.raises(heddle.ScheduleError, match=r"w3 is not transposed but w1 is.*trans_b=True"):
        fd.matmul(x, w3, False, False)
    with pytest.raises(heddle.ScheduleError, match=r"w_small.*differs from w1"):
        fd.matmul(x, w_small, False, True)
    with pytest.raises(heddle.ScheduleError, match=r"w1 is already multiplied by x.*reuse T"):
        fd.matmul(x, w1, False, True)


def test_group_has_at_most_four_members():
    fd = heddle.Fusion()
    x = fd.input("x", "bf16", ["M", 64])
    ws = [fd.input(f"w{i}", "bf16", [64, 64]) for i in range(5)]
    for w in ws[:4]:
        fd.matmul(x, w)
    with pytest.raises(heddle.ScheduleError, match="at most 4 members"):
        fd.matmul(x, ws[4])


def test_schedule_rules_of_a_group():
    # each warp's n range splits into whole 8-column slices per member: 32 columns do not split in 3
    fd, x, ws = group_fusion(3, epilogue="merge")
    schedule_group(fd, x, ws[0], bn=64, wn=2)
    with pytest.raises(heddle.ScheduleError, match=r"matmul group \(T4, T5, T6\).*3 slices.*multiple of 24"):
        fd.lower("sm_80")
    # a second cache on a further B
    fd, x, ws = group_fusion(2)
    schedule_group(fd, x, ws[0])
    fd.cache_after(ws[1], "cp_async")
    with pytest.raises(heddle.ScheduleError, match=r"w1 has a cache of its own.*drop cache_after\(w1\)"):
        fd.lower("sm_80")
    # split-K
    fd = swiglu()
    fd.matmul_tensor.split_k(2)
    with pytest.raises(heddle.ScheduleError, match=r"split_k does not take a matmul group"):
        fd.lower("sm_80")


def test_sm90_tma_and_amd_are_refused_with_what_to_do():
    from support.wgmma_defs import schedule_sm90
    fd, x, ws = group_fusion(2, k=128)
    schedule_sm90(fd, x, ws[0], bm=64, bn=128, bk=64, wgs=1, stages=3, prefetch=1)
    with pytest.raises(heddle.ScheduleError, match=r"matmul group.*tma_load.*cache_after\(x, 'cp_async'\)"):
        fd.lower("sm_90a")
    fd, x, ws = group_fusion(2)
    fd.auto_schedule("gfx942")
    with pytest.raises(heddle.ScheduleError, match=r"gfx942 has no lowering for a matmul group"):
        fd.lower("gfx942")


# --- kernel IR and printed source -------------------------------------------------------------------------

@pytest.mark.parametrize("trans_b", [True, False])
def test_b_stage_is_filled_in_parts_and_the_epilogue_reads_both_slices(trans_b):
    low = swiglu(trans_b=trans_b).lower("sm_80")
    params = [p[0] for p in low.params]
    assert params[:3] == ["A", "B", "B1"] and "ldb1" in params
    assert "_g2_e_silu_mul_bf16" in low.name
    src = low.source
    assert "n0 = blockIdx.x * 32;" in src  # 64-wide accumulator tile = 32 output columns of each member
    loads = [ln.strip() for ln in src.split("\n") if "copy_part_async" in ln and "(kt + 1)" in ln]
    # warp column w (of 2), member p: source columns n0 + 16 w, stage slice 32 w + 16 p
    offs = [(ln.split(">(")[1].split(", ")[1:4]) for ln in loads]
    rows = trans_b
    want = [(16 * (2 * w + p), w * 16, ("B", "B1")[p]) for w in range(2) for p in range(2)]
    for (d_r, d_c, src_name), (off, n_off, name) in zip(offs, want):
        assert int(d_r if rows else d_c) == off and src_name == name
    assert len(loads) == 4
    # the epilogue in column pairs (docs/backends.md): member 1's slice read at the same pair
    assert "Mma::part_col_of<2>(warp, lane, fn, 0)" in src
    assert "for (int fn = 0; fn < Mma::FN / 2; ++fn)" in src
    assert "const heddle::pairf r1 = {acc.acc[fm][(fn) + 1 * (Mma::FN / 2)][2 * (h)], " \
           "acc.acc[fm][(fn) + 1 * (Mma::FN / 2)][2 * (h) + 1]};" in src
    assert "heddle::ool::silu(r0)" in src and "{r2.x * r1.x, r2.y * r1.y}" in src


def test_grid_counts_output_columns():
    fd = swiglu()
    assert fd.validate("sm_80").endswith("layout NT, matmul group of 2 (32 output columns of each per tile)")
    low = fd.lower("sm_80")
    assert low.grid({"M": 72, "N": 200, "K": 96, "batch": 1})[:2] == (7, 2)  # ceil(200/32), ceil(72/64)


def test_auto_schedule_picks_mma_sync_on_sm90a():
    for target in ("sm_80", "sm_90a"):
        fd, x, ws = group_fusion(2, n=512, k=256)
        fd.auto_schedule(target)
        low = fd.lower(target)
        assert "heddle::MmaSm80<" in low.source and "_g2_" in low.name
    fd, x, ws = group_fusion(3, n=512, k=256, epilogue="merge")
    fd.auto_schedule("sm_80")
    assert "part_col_of<3>" in fd.lower("sm_80").source


@pytest.mark.nvrtc
@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_nvrtc_compiles_without_spills(target):
    fd, x, ws = group_fusion(2, n=512, k=256, saved=True)
    fd.auto_schedule(target)
    kern = fd.compile(target)
    s = kern.stats
    assert s.spill_stores == 0 and s.spill_loads == 0, kern.ptxas
    assert "mma.sync.aligned.m16n8k16" in kern.ptx and "cp.async" in kern.ptx


# --- simulator and interpreter ----------------------------------------------------------------------------

@pytest.mark.parametrize("trans_b", [True, False])
def test_simulator_runs_clean_with_right_numbers(trans_b):
    fd = swiglu(trans_b=trans_b)
    k = kernel(fd, "sm_80")
    ins = group_inputs(fd, 72, seed=1)
    for sched, seed in (("adversarial", 0), ("random", 1)):
        r = verify.simulate(k, ins, schedule=sched, seed=seed)
        assert r.ok, r


def test_simulator_catches_a_wrong_slice():
    # the reference of gelu * u against a silu * u kernel: the simulator's numbers check is live
    fd = swiglu()
    k = kernel(fd, "sm_80")
    ins = group_inputs(fd, 40, seed=2)
    want = reference(ins, epilogue="gelu").float()
    assert not verify.simulate(k, ins, reference=want).ok


@needs_cxx
@pytest.mark.parametrize("trans_b,epilogue,dtype", [(True, "silu", "bf16"), (False, "gelu", "f16"),
                                                    (True, "gelu_tanh", "bf16")])
def test_interpreter_numbers_on_ragged_shapes(trans_b, epilogue, dtype):
    fd, x, ws = group_fusion(2, n=200, k=32 * 3 + 8, trans_b=trans_b, epilogue=epilogue, dtype=dtype)
    schedule_group(fd, x, ws[0])
    k = kernel(fd, "sm_80")
    ins = group_inputs(fd, 72, seed=3)
    r = interpret(k, *ins)
    assert r.ok, r.report()
    torch.testing.assert_close(r.output.double(), reference(ins, trans_b, epilogue), atol=3e-2, rtol=3e-2)


@needs_cxx
def test_interpreter_stores_saved_pre_activations():
    fd, x, ws = group_fusion(2, n=72, k=64, saved=True)
    schedule_group(fd, x, ws[0], stages=2, prefetch=1)
    k = kernel(fd, "sm_80")
    ins = group_inputs(fd, 40, seed=4)
    r = interpret(k, *ins)
    assert r.ok, r.report()
    out, g, u = (t.double() for t in r.output)
    xd, w0, w1 = (t.double() for t in ins)
    torch.testing.assert_close(g, xd @ w0.T, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(u, xd @ w1.T, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(out, torch.nn.functional.silu(xd @ w0.T) * (xd @ w1.T), atol=2e-2, rtol=2e-2)


@needs_cxx
def test_interpreter_qkv_horizontal_merge():
    # each member its own output; q and v with a bias of their own (Qwen2, BERT), k without
    fd, x, ws = group_fusion(3, n=100, k=64, epilogue="merge", bias=(0, 2))
    schedule_group(fd, x, ws[0], bm=32, bn=96, wm=1, wn=2, stages=2, prefetch=1)
    k = kernel(fd, "sm_80")
    ins = group_inputs(fd, 40, seed=5)
    r = interpret(k, *ins)
    assert r.ok, r.report()
    for got, want in zip(r.output, reference(ins, epilogue="merge", bias=(0, 2))):
        torch.testing.assert_close(got.double(), want, atol=2e-2, rtol=2e-2)


@needs_cxx
def test_group_mutants_are_caught():
    fd = swiglu(k=32 * 3)
    k = kernel(fd, "sm_80")
    ins = group_inputs(fd, 40, seed=6)
    src = k.source
    part = next(ln for ln in src.split("\n") if "copy_part_async" in ln and ", B1, ldb1," in ln and "(kt + 1)" in ln)
    bad = [
        src.replace(part, part.replace(", B1, ldb1,", ", B, ldb,")),                     # a member's source
        src.replace(part, part.replace("n0 + 16,", "n0,") if "n0 + 16," in part else part.replace("n0,", "n0 + 16,")),
        src.replace("acc.acc[fm][(fn) + 1 * (Mma::FN / 2)]", "acc.acc[fm][fn]"),         # the up slice
        src.replace("part_col_of<2>", "col_of"),                                            # output columns
        src.replace("fn < Mma::FN / 2;", "fn < Mma::FN / 2 - 1;"),                        # a slice unstored
    ]
    for b in bad:
        assert b != src
        assert not interpret(_Mutated(k, b), *ins).ok
    # the generic mutants (syncs deleted, waits loosened, copies' stages moved) are all caught
    res = mutation_kill_rate(k, *ins, schedules=(("adversarial", 0),))
    assert res["total"] and not res["survivors"], res["survivors"]
    assert "swap_stage" in res["by_kind"]
