"""CPU simulator of the kernel IR (heddle.verify.simulate): every real plan of the cp.async
lowering simulates clean -- no race, no deadlock, no early async read, numbers equal to a float64
torch reference -- under the adversarial schedule and two random seeds, on ragged shapes.

Small tiles (32x32x16, warps 2x1 = 64 threads) keep one simulation around 10 ms. The kernels and
inputs are in tests/support/simulator_defs.py (shared with test_simulator_mutation.py and test_simulator_consan.py).
"""
import pytest

import torch

import heddle
from heddle import verify
from support.simulator_defs import (BK, EXTRA, LAYOUTS, M, N, PLANS, lowered_plan, make_fusion, make_inputs, ragged_k,
                                    trip_counts)

SCHEDULES = (("adversarial", 0), ("random", 1), ("random", 2))

def assert_clean(lowered, stages, layout, dtype="f16", schedules=SCHEDULES):
    for trips in trip_counts(stages):
        K = ragged_k(trips)
        ins = make_inputs(layout, K, dtype, seed=trips)
        for sched, seed in schedules:
            r = verify.simulate(lowered, ins, sched, seed)
            assert r.ok, f"{lowered.name} K={K} {sched} seed={seed}:\n{r.report()}\n{lowered.kernel_ir}"
            assert r.ctas == 4 and r.steps > 0


# --- every real plan -------------------------------------------------------------------------

@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("stages,prefetch", PLANS)
def test_circular_buffer_plan_simulates_clean(stages, prefetch, layout):
    assert_clean(lowered_plan(stages, prefetch, layout), stages, layout)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("stages,prefetch,kind", EXTRA)
def test_unbuffered_and_plain_load_plans_simulate_clean(stages, prefetch, kind, layout):
    assert_clean(lowered_plan(stages, prefetch, layout, kind), stages, layout)


@pytest.mark.parametrize("stages,prefetch", [(2, 1), (4, 3)])
def test_bf16_plans_simulate_clean(stages, prefetch):
    assert_clean(lowered_plan(stages, prefetch, "NT", dtype="bf16"), stages, "NT", dtype="bf16")


def test_warps_side_by_side_and_wider_tile():
    # warps 1x2 (the other warp -> tile mapping) and a 32x64x32 tile: 64 threads, 2 chunks each
    for warps, tile in (((1, 2), (32, 32, 16)), ((1, 2), (32, 64, 32)), ((2, 2), (64, 64, 16))):
        fd = make_fusion(3, 2, "TN", warps=warps, tile=tile)
        l = fd.lower("sm_80")
        for K in (3 * tile[2] - 5, 7 * tile[2] + 1):
            r = verify.simulate(l, make_inputs("TN", K, seed=K, m=70, n=77), "random", 5)
            assert r.ok, r.report()


def test_auto_scheduled_kernel_with_residual_epilogue():
    # the schedule heddle.matmul picks (128x128x32, warps 2x2, 4 stages), one ragged CTA of it
    fd = heddle.Fusion()
    a = fd.input("a", "f16", ["M", "K"])
    b = fd.input("b", "f16", ["K", "N"])
    res = fd.input("res", "f16", ["M", "N"])
    fd.output((heddle.ops.relu(fd.matmul(a, b) * 0.5 + res) - 1.0).to("f16"))
    fd.auto_schedule("sm_80", 100, 130, 200)
    l = fd.lower("sm_80")
    g = torch.Generator().manual_seed(0)
    ins = [torch.randn(100, 200, generator=g).half(), torch.randn(200, 130, generator=g).half(),
           torch.randn(100, 130, generator=g).half()]
    r = verify.simulate(l, ins, ctas=[(1, 0, 0)])
    assert r.ok, r.report()
    assert r.ctas == 1
    out = r.output
    assert torch.isnan(out[:, :128]).all() and not torch.isnan(out[:, 128:]).any()  # only CTA (1, 0) ran


def test_batched_kernel():
    fd = heddle.Fusion()
    a = fd.input("a", "f16", ["B", "M", "K"])
    b = fd.input("b", "f16", ["B", "K", "N"])
    fd.output(fd.matmul(a, b).to("f16"))
    fd.auto_schedule("sm_80", 40, 40, 64)
    l = fd.lower("sm_80")
    g = torch.Generator().manual_seed(1)
    ins = [torch.randn(3, 40, 64, generator=g).half(), torch.randn(3, 64, 40, generator=g).half()]
    r = verify.simulate(l, ins)
    assert r.ok, r.report()
    assert r.ctas == 3 and r.output.shape == (3, 40, 40)
    torch.testing.assert_close(r.output, heddle.reference.evaluate(fd, ins).float(), atol=1e-2, rtol=1e-2)


def test_tanh_epilogue_matches_reference():
    fd = heddle.Fusion()
    a = fd.input("a", "bf16", ["M", "K"])
    b = fd.input("b", "bf16", ["N", "K"])
    bias = fd.input("bias", "bf16", ["N"])
    fd.output(heddle.ops.tanh(fd.matmul(a, b, trans_b=True) * 0.25 + bias).to("bf16"))
    fd.auto_schedule("sm_80", 40, 72, 64)
    l = fd.lower("sm_80")
    g = torch.Generator().manual_seed(2)
    ins = [torch.randn(40, 64, generator=g).bfloat16(), torch.randn(72, 64, generator=g).bfloat16(),
           torch.randn(72, generator=g).bfloat16()]
    r = verify.simulate(l, ins)
    assert r.ok, r.report()
    want = torch.tanh(ins[0].double() @ ins[1].double().T * 0.25 + ins[2].double())
    torch.testing.assert_close(r.output.double(), want, atol=1e-2, rtol=1e-2)
    assert r.output.abs().max() <= 1.0 and (r.output.abs() > 0.9).any()  # saturates: not an identity


# --- API behaviour -----------------------------------------------------------------------------

def test_output_matches_reference_and_dict_inputs():
    fd = make_fusion(3, 1, "NT")
    l = fd.lower("sm_80")
    a, b, bias = make_inputs("NT", 61, seed=3)
    r = verify.simulate(l, {"a": a, "b": b, "bias": bias})
    assert r.ok, r.report()
    ref = heddle.reference.evaluate(fd, [a, b, bias]).float()
    torch.testing.assert_close(r.output, ref, atol=1e-2, rtol=1e-2)
    assert "no findings" in r.report()


def test_wrong_reference_is_reported_with_coordinates():
    l = lowered_plan(2, 1)
    ins = make_inputs("NN", 45)
    r = verify.simulate(l, ins, reference=torch.zeros(M, N))
    assert not r.ok and not r.races and not r.deadlocks and not r.async_misuse
    assert "output elements differ from the reference" in r.mismatches[0]
    assert "D[0][" in r.mismatches[0]
    assert verify.simulate(l, ins, reference=False).ok  # numbers off


def test_random_schedule_is_reproducible_from_its_seed():
    mutant = next(m for m in verify.mutants(lowered_plan(3, 1)) if m.kind == "delete_sync"
                  and m.description.startswith("delete block_sync [main")).kernel()
    ins = make_inputs("NN", 61, seed=4)
    runs = [verify.simulate(mutant, ins, "random", seed) for seed in (11, 11, 12)]
    assert not runs[0].ok
    assert runs[0].report() == runs[1].report() and runs[0].steps == runs[1].steps
    assert torch.equal(torch.nan_to_num(runs[0].output, 7.0), torch.nan_to_num(runs[1].output, 7.0))
    assert runs[0].schedule == "random(seed=11)"


def test_trip_count_below_stages_runs():
    # 3 k-tiles, 4 stages: no launch refusal, right numbers (more in tests/lower/test_short_trips.py)
    r = verify.simulate(lowered_plan(4, 3), make_inputs("NN", 3 * BK))
    assert r.ok, r.report()


def test_unknown_schedule_is_an_error():
    with pytest.raises(heddle.HeddleError, match="adversarial"):
        verify.simulate(lowered_plan(2, 1), make_inputs("NN", 40), schedule="fifo")
