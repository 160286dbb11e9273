"""Split-K (passes/split_k.cpp, passes/reduce_splits.cpp, heddle_grid.cuh): the k loop shared by the CTAs
of one tile, partial tiles reduced in a fixed order through a global workspace behind one grid flag each,
the epilogue applied once. Checked on the kernel IR (structure, sync reasons), by the kernel-IR simulator
(clean, every mutant killed), by the interpreter of the printed source (numbers on ragged shapes, bitwise
determinism, source mutants killed) and by NVRTC (no spills, the gpu-scope release/acquire in the PTX)."""
import pytest
import torch

import heddle
from support.env import requires_nvrtc, rt
from support.grid_defs import (no_spills_and_gpu_scope_flags, reduction_mutants_killed,
                               same_bits_under_two_random_schedules, simulator_clean_and_every_mutant_killed)
from support.wgmma_defs import inputs, schedule_sm90
from support.interp_defs import needs_cxx
from support.matmul_defs import matmul_fusion, schedule
from support.split_k_defs import sm80, sm90


def lowered(fd, target):
    return heddle.Kernel.build(fd, target, rtc=False)


# --- the kernel IR and its sync plan -------------------------------------------------------------

@pytest.mark.parametrize("target,make", [("sm_80", sm80), ("sm_90a", sm90)])
def test_structure_grid_and_reasons(target, make):
    k = lowered(make(3), target)
    low = k.lowered
    assert k.name.endswith("_sk3") and low.split_k == 3
    env = {"M": 130, "N": 200 if target == "sm_80" else 72, "K": 480 if target == "sm_80" else 256}
    gx, gy, gz = low.grid(env)
    assert gz == 3 and gy == 3  # ceil(130 / 64) m-tiles, the splits on z
    assert low.workspace(env) == (gx * gy * 2, 64 * 64)
    ir = low.kernel_ir
    assert "let KS = " in ir and "if (blockIdx.z < 2)" in ir
    assert "grid.release flags[" in ir and "grid.wait flags[" in ir and "0..1]" in ir
    assert "partial store -> ws[" in ir and "partial add ws[" in ir
    # the epilogue runs once per tile: after the reduction, in the last split's branch only
    assert ir.index("partial add") < ir.index("epilogue store") and ir.count("epilogue store") == 1
    ex = k.explain()
    assert "grid-level edge: fence.acq_rel.gpu" in ex and "ld.acquire.gpu spins on flags" in ex
    assert "only earlier CTAs (smaller blockIdx.z) are waited on" in ex
    assert "split-K 3: partial tiles through the workspace" in ex
    src = k.source
    assert '#include "heddle/heddle_grid.cuh"' in src
    assert "heddle::grid::wait_and_reset(flags + " in src and "heddle::grid::release(flags + " in src


def test_k_range_per_split_is_balanced_and_covers_k():
    # split z runs k-tiles [z*nk/S, (z+1)*nk/S): the KS each split prints covers every k-tile once
    k = lowered(sm80(3), "sm_80")
    ks = [l for l in k.source.split("\n") if "const int KS" in l][0]
    expr = ks.split("=", 1)[1].strip().rstrip(";").replace("heddle_ceil_div", "cdiv")
    cdiv = lambda a, b: (a + b - 1) // b  # noqa: E731
    for K in (96, 100, 480, 1000):
        tiles = [eval(expr.replace("blockIdx.z", str(z)).replace("/", "//"), {"cdiv": cdiv, "K": K}) // 32
                 for z in range(3)]
        assert sum(tiles) == cdiv(K, 32) and max(tiles) - min(tiles) <= 1


def test_schedule_errors():
    fd, a, b = matmul_fusion(n=64, k=256)
    mm = schedule(fd, a, b, bm=64, bn=64, bk=32, wm=2, wn=2)
    for bad in (0, 17):
        with pytest.raises(heddle.ScheduleError, match=r"split_k\(.*splits = %d must lie in \[1, 16\]" % bad):
            mm.split_k(bad)
    with pytest.raises(heddle.ScheduleError, match="split_k: splits must be an int"):
        mm.split_k(2.0)
    fd, a, b = matmul_fusion(n=64, k=256, batched=True)
    schedule(fd, a, b, bm=64, bn=64, bk=32, wm=2, wn=2).split_k(2)
    with pytest.raises(heddle.ScheduleError, match="batched matmul puts the batch on blockIdx.z"):
        fd.lower("sm_80")
    fd, a, b = matmul_fusion(n=64, k=256)
    schedule_sm90(fd, a, b, roles={"load": {"warps": 1, "registers": 40},
                                   "mma": {"warpgroups": 1, "registers": 232}}).split_k(2)
    with pytest.raises(heddle.ScheduleError, match="split-K runs on the kernels without roles"):
        fd.lower("sm_90a")
    fd, a, b = matmul_fusion(n=64, k=256)
    schedule(fd, a, b, bm=64, bn=64, bk=32, wm=2, wn=2, kind="plain").split_k(2)
    with pytest.raises(heddle.ScheduleError, match="target gfx942 has no grid-level flags in this build"):
        fd.lower("gfx942")


def test_k_too_short_for_the_splits_is_an_input_error():
    k = lowered(sm80(4, k="K"), "sm_80")
    ins = [torch.randn(16, 96).bfloat16(), torch.randn(96, 200).bfloat16(), torch.randn(200).bfloat16()]
    with pytest.raises(heddle.InputError, match=r"K must be at least 4 x 32 = 128 \(use fewer splits"):
        k.prepare(ins)


def test_workspace_arguments():
    k = lowered(sm80(3), "sm_80")
    out, grid, args = k.prepare(inputs(k.fusion, 70))
    names = [p[0] for p in k.lowered.params]
    ws, flags = k.workspace(out.device, {"M": 70, "N": 200, "K": 480})
    assert args[names.index("ws")] == ("ptr", ws.data_ptr()) and args[names.index("flags")] == ("ptr", flags.data_ptr())
    assert ws.dtype == torch.float32 and ws.numel() == 2 * 4 * 2 * 64 * 64  # 2 x 4 tiles, 2 partials each
    assert flags.dtype == torch.int32 and flags.numel() == 16 and not flags.any()


# --- the kernel-IR simulator ---------------------------------------------------------------------

@pytest.mark.parametrize("target,make,M", [("sm_80", sm80, 70), ("sm_90a", sm90, 70), ("sm_80", sm80, 1)])
def test_simulator_clean_and_every_mutant_killed(target, make, M):
    k = lowered(make(3 if target == "sm_80" else 2), target)
    simulator_clean_and_every_mutant_killed(k, inputs(k.fusion, M))


def test_simulator_names_the_missing_grid_sync():
    k = lowered(sm80(2), "sm_80")
    ins = inputs(k.fusion, 30)
    found = {}
    for m in heddle.verify.mutants(k):
        if "grid" in m.description:
            r = heddle.simulate(m.kernel(), ins, fusion=k.fusion)
            found[(m.kind, m.description.split(" flags")[0])] = " ".join(r.races + r.deadlocks)
            if m.description.startswith("delete grid.wait"):  # the partials are there (linear order): only order is wrong
                assert not r.mismatches, (m.description, r.mismatches)
    assert "no earlier CTA released" in found[("delete_sync", "delete grid.release")]
    assert "no acquire of flags[" in found[("delete_sync", "delete grid.wait")]
    assert "no earlier CTA released" in found[("shift_flag", "shift the flag of grid.release")]
    assert "no acquire of flags[" in found[("shift_flag", "shift the flag of grid.wait")]


# --- the interpreter of the printed source -------------------------------------------------------

@needs_cxx
@pytest.mark.parametrize("target,make,S,M", [("sm_80", sm80, 3, 1), ("sm_80", sm80, 2, 130), ("sm_90a", sm90, 2, 70),
                                             ("sm_90a", sm90, 3, 1)])
def test_interpret_numbers_ragged(target, make, S, M):
    k = lowered(make(S), target)
    r = heddle.interpret(k, *inputs(k.fusion, M, seed=M))
    assert r.ok, r.report()


@needs_cxx
def test_interpret_reduction_order_is_deterministic():
    # the reducing CTA adds the partials in slot order, whatever the schedule: the same bits every run
    k = lowered(sm80(3, epilogue=None, dtype="f16"), "sm_80")
    same_bits_under_two_random_schedules(k, inputs(k.fusion, 40, seed=3))


@needs_cxx
@pytest.mark.parametrize("target,make,S", [("sm_80", sm80, 3), ("sm_90a", sm90, 2)])
def test_interpret_grid_mutants_killed(target, make, S):
    # the reduction's mutants: each grid release / wait deleted or moved to the next flag, and each block
    # barrier of the reduction deleted (the CTA-level pipeline's mutants: test_interpret_mutation.py)
    k = lowered(make(S), target)
    reduction_mutants_killed(k, inputs(k.fusion, 70, seed=2), "if (blockIdx.z <")


@needs_cxx
@pytest.mark.slow
@pytest.mark.parametrize("target,make,S", [("sm_80", sm80, 3), ("sm_90a", sm90, 2)])
def test_interpret_numbers_every_m_up_to_200(target, make, S):
    k = lowered(make(S), target)
    for M in range(1, 201):
        r = heddle.interpret(k, *inputs(k.fusion, M, seed=M))
        assert r.ok, (M, r.report())


# --- NVRTC -------------------------------------------------------------------------------------

@requires_nvrtc
@pytest.mark.parametrize("target,fd", [
    ("sm_80", lambda: sm80(4, n=4096, k=4096, bm=128, bn=128, bk=32, stages=4)),
    ("sm_90a", lambda: sm90(4, n=4096, k=4096, bm=128, bn=256, bk=64, wgs=2, stages=4, prefetch=2)),
    ("sm_90a", lambda: sm90(8, n=4096, k=4096, bm=64, bn=128, bk=64, stages=4, prefetch=2)),
])
def test_nvrtc_compiles_without_spills(target, fd):
    low = fd().lower(target)
    r = rt.compile(low.source, low.name, target, isolate=True)
    no_spills_and_gpu_scope_flags(r, low.name)
    if target == "sm_90a":
        assert "wgmma.mma_async" in r.ptx and "C7515" not in r.ptxas and "C7519" not in r.ptxas
