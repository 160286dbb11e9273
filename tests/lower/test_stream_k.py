"""Stream-K (passes/stream_k.cpp, passes/stream_k_fixup.cpp, heddle_grid.cuh): a persistent grid shares the
tiles x k-tiles of the matmul evenly; a tile split across CTAs is summed CTA to CTA through a global
workspace behind one grid flag per CTA, the epilogue applied once by the CTA that finishes the tile.
Checked on the kernel IR (structure, sync reasons), by the kernel-IR simulator (clean, every mutant
killed), by the interpreter of the printed source (numbers on ragged shapes, bitwise determinism, source
mutants killed) and by NVRTC (no spills, the gpu-scope release/acquire in the PTX)."""
import pytest
import torch

import heddle
from support.env import requires_nvrtc, rt
from support.grid_defs import (no_spills_and_gpu_scope_flags, reduction_mutants_killed,
                               same_bits_under_two_random_schedules, simulator_clean_and_every_mutant_killed)
from support.wgmma_defs import inputs, schedule_sm90
from support.interp_defs import needs_cxx
from support.matmul_defs import matmul_fusion, schedule
from support.stream_k_defs import K, N, ranges, sm80, sm90


def lowered(fd, target="sm_80"):
    return heddle.Kernel.build(fd, target, rtc=False)


# the two kernel families with stream-K: the cp.async kernel (every thread computes) and the sm_90a
# warp-specialized TMA kernel (a producer role, the MMA warpgroups reduce)
FAMILIES = {"sm_80": lambda G, **kw: lowered(sm80(G, **kw)), "sm_90a": lambda G, **kw: lowered(sm90(G, **kw), "sm_90a")}


# --- the kernel IR and its sync plan -------------------------------------------------------------

def test_structure_grid_and_reasons():
    k = lowered(sm80(11))
    low = k.lowered
    assert k.name.endswith("_stk11") and low.stream_k == 11 and low.split_k == 1 and low.needs_workspace
    assert low.grid({"M": 70, "N": N, "K": K}) == (11, 1, 1)  # 8 tiles do not fill 11 CTAs: 11 share them
    assert low.grid({"M": 700, "N": N, "K": K}) == (44, 1, 1)  # 44 tiles fill them: one tile per CTA
    assert low.grid({"M": 1, "N": 64, "K": 32}) == (1, 1, 1)  # one k-iteration in all: one CTA
    assert low.workspace({"M": 70, "N": N, "K": K}) == (11, 64 * 64)  # one slot and one flag per CTA
    ir = low.kernel_ir
    assert "for sk_s in [0, sk_t1 - sk_t0 + 1) serial" in ir and "let KS = (sk_k1 - sk_k0) * 32" in ir
    assert "grid.wait flags[blockIdx.x - 1 + 0..0]" in ir and "grid.release flags[blockIdx.x]" in ir
    assert "partial add ws[blockIdx.x - 1 + 0..0]" in ir and "partial store -> ws[blockIdx.x]" in ir
    # the epilogue once per tile: only by the CTA whose segment ends the tile, after the running sum
    assert ir.count("epilogue store") == 1 and ir.index("partial add") < ir.index("epilogue store")
    assert ir.index("if (sk_k1 == (sk_t + 1) * sk_nk)") < ir.index("epilogue store")
    ex = k.explain()
    assert "grid-level edge: ld.acquire.gpu spins on flags[blockIdx.x - 1]" in ex
    assert "Only the previous CTA is waited on, which never waits on a later one" in ex
    assert "grid-level edge: fence.acq_rel.gpu + store flags[blockIdx.x] = 1" in ex
    assert "stream-K over at most 11 CTAs" in ex
    src = k.source
    assert '#include "heddle/heddle_grid.cuh"' in src
    assert "heddle::grid::wait_and_reset(flags + (blockIdx.x - 1), 1)" in src
    assert "heddle::grid::release(flags + (blockIdx.x));" in src


@pytest.mark.parametrize("M,G", [(1, 13), (70, 11), (130, 30), (200, 132), (5, 64), (700, 11)])
def test_walk_covers_every_k_iteration_once_in_at_most_two_segments(M, G):
    # the Lets the kernel prints, evaluated in Python: every (tile, k-tile) once, each CTA 1 or 2 segments,
    # a second segment only after a first one that does not end its tile (it publishes, then waits nothing)
    grid, walk = ranges(M, G)
    nk, seen = 15, []
    for c, segs in enumerate(walk):
        assert 1 <= len(segs) <= 2, (c, segs)
        if len(segs) == 2:
            assert segs[0][1] == 0 and segs[0][2] < nk and segs[1][2] == nk  # head of the next tile, then a tail
        for t, k0, k1 in segs:
            assert k0 < k1
            seen += [(t, kk) for kk in range(k0, k1)]
    assert sorted(seen) == [(t, kk) for t in range(len(seen) // nk) for kk in range(nk)]
    # the kernel's Lets give the same segments (the printed source, read back)
    k = lowered(sm80(G))
    lets = {l.split("let ")[1].split(" = ")[0]: l.split(" = ", 1)[1] for l in k.lowered.kernel_ir.split("\n")
            if l.strip().startswith("let ")}
    assert lets["sk_k0"] == "heddle_max(sk_b, sk_t * sk_nk)" and lets["sk_t"] == "sk_t1 - sk_s"
    assert lets["sk_b"] == "sk_c * sk_q + heddle_min(sk_c, sk_r)" and lets["sk_e"] == "sk_b + sk_q + (sk_c < sk_r)"


def test_walk_stays_in_32_bits_on_large_grids():
    # 16384 x 16384 of 64x64 tiles, K = 8192: 65536 tiles (the grid) of 256 k-tiles; c * iters would need 42 bits
    M = n = 16384
    grid, walk = ranges(M, 132, n=n, k=8192)
    assert grid == 65536 and walk[0] == [(0, 0, 256)] and walk[-1] == [(65535, 0, 256)]  # one tile each
    low = lowered(sm80(132, n=n, k=8192)).lowered
    assert low.grid({"M": M, "N": n, "K": 8192}) == (65536, 1, 1)
    assert "blockIdx.x * sk_iters" not in low.kernel_ir and "sk_c * sk_iters" not in low.kernel_ir


def test_schedule_errors():
    fd, a, b = matmul_fusion(n=64, k=256)
    mm = schedule(fd, a, b, bm=64, bn=64, bk=32, wm=2, wn=2)
    for bad in (-1, 1025):
        with pytest.raises(heddle.ScheduleError, match=r"stream_k\(.*ctas = %d must lie in \[0, 1024\]" % bad):
            mm.stream_k(bad)
    with pytest.raises(heddle.ScheduleError, match="stream_k: ctas must be an int"):
        mm.stream_k(2.0)
    mm.stream_k(8).split_k(2)
    with pytest.raises(heddle.ScheduleError, match=r"stream-K and split_k\(2\) both share the k loop"):
        fd.lower("sm_80")
    fd, a, b = matmul_fusion(n=64, k=256, batched=True)
    schedule(fd, a, b, bm=64, bn=64, bk=32, wm=2, wn=2).stream_k(8)
    with pytest.raises(heddle.ScheduleError, match="stream-K walks the tiles of one matmul"):
        fd.lower("sm_80")
    fd, a, b = matmul_fusion(n=64, k=256)
    schedule_sm90(fd, a, b).stream_k(8)  # the TMA pipeline without roles (the roles: test_stream_k_roles.py)
    with pytest.raises(heddle.ScheduleError, match=r"stream-K runs on the warp-specialized persistent kernel: add "
                                                   r"warp_specialize\(\{load, mma\}\), or use split_k"):
        fd.lower("sm_90a")
    fd, a, b = matmul_fusion(n=64, k=256)
    schedule(fd, a, b, bm=64, bn=64, bk=32, wm=2, wn=2, kind="plain").stream_k(8)
    with pytest.raises(heddle.ScheduleError, match="target gfx942 has no grid-level flags in this build"):
        fd.lower("gfx942")


def test_workspace_arguments():
    k = lowered(sm80(11))
    out, grid, args = k.prepare(inputs(k.fusion, 70))
    assert tuple(grid)[:1] == (11,)
    names = [p[0] for p in k.lowered.params]
    ws, flags = k.workspace(out.device, {"M": 70, "N": N, "K": K})
    assert args[names.index("ws")] == ("ptr", ws.data_ptr()) and args[names.index("flags")] == ("ptr", flags.data_ptr())
    assert ws.dtype == torch.float32 and ws.numel() == 11 * 64 * 64
    assert flags.dtype == torch.int32 and flags.numel() == 11 and not flags.any()


# --- the kernel-IR simulator ---------------------------------------------------------------------

@pytest.mark.parametrize("G,M", [(11, 70), (13, 1)])
def test_simulator_clean_and_every_mutant_killed(G, M):
    k = lowered(sm80(G))
    simulator_clean_and_every_mutant_killed(k, inputs(k.fusion, M))


# --- the interpreter of the printed source -------------------------------------------------------

@needs_cxx
@pytest.mark.parametrize("G,M,layout", [(13, 1, "NN"), (11, 70, "NN"), (30, 136, "TN"), (64, 5, "NT")])
def test_interpret_numbers_ragged(G, M, layout):
    k = lowered(sm80(G, layout=layout))
    r = heddle.interpret(k, *inputs(k.fusion, M, seed=M))
    assert r.ok, r.report()


@needs_cxx
@pytest.mark.parametrize("family", FAMILIES)
def test_interpret_reduction_order_is_deterministic(family):
    # each split tile's running sum goes CTA to CTA in CTA order, whatever the schedule: the same bits
    k = FAMILIES[family](11, epilogue=None, dtype="f16")
    same_bits_under_two_random_schedules(k, inputs(k.fusion, 40, seed=3))


@needs_cxx
@pytest.mark.parametrize("family", FAMILIES)
def test_interpret_grid_mutants_killed(family):
    # the reduction's mutants: the grid release / wait deleted or moved to the next flag, and each barrier of
    # the reduction (block barrier; sm_90a: the MMA warpgroups' named barrier) deleted (the CTA-level
    # pipeline's and ring's mutants: test_interpret_mutation.py, test_wgmma_*.py)
    k = FAMILIES[family](11)
    reduction_mutants_killed(k, inputs(k.fusion, 70, seed=2), "if (sk_t * sk_nk < sk_k0)")


@needs_cxx
@pytest.mark.slow
@pytest.mark.parametrize("family,G,kw", [("sm_80", 11, {}), ("sm_80", 132, {}), ("sm_90a", 11, {}),
                                         ("sm_90a", 132, dict(store="tma", prefetch=2, bn=128))])
def test_interpret_numbers_every_m_up_to_200(family, G, kw):
    k = FAMILIES[family](G, **kw)
    for M in range(1, 201):
        r = heddle.interpret(k, *inputs(k.fusion, M, seed=M))
        assert r.ok, (M, r.report())


# --- NVRTC -------------------------------------------------------------------------------------

@requires_nvrtc
@pytest.mark.parametrize("fd", [
    lambda: sm80(132, n=4096, k=4096, bm=128, bn=128, bk=32, stages=4),
    lambda: sm80(132, n=4096, k=4096, bm=64, bn=128, bk=32, stages=4, wm=2, wn=2, epilogue=None),
])
def test_nvrtc_compiles_without_spills(fd):
    low = fd().lower("sm_80")
    no_spills_and_gpu_scope_flags(rt.compile(low.source, low.name, "sm_80", isolate=True), low.name)


# --- the automatic choice (schedule/k_share.cpp, heddle.matmul's M buckets) ---------------------------

def test_cost_model_numbers_and_overrides():
    plan = heddle._C.Fusion.k_share_plan
    # 50 tiles of 64x128x32 on 132 SMs, 128 k-tiles: split_k(2) quantizes to 100 CTAs, stream-K uses all 132
    s, g, text = plan(50, 128, 4, 132, 64, 128, 32)
    assert (s, g) == (1, 132)
    assert text == ("k sharing (k-iteration units): data-parallel 128.0, split_k(2) 69.3, stream_k(132) 65.0 "
                    "-> stream_k(132)")
    assert plan(32, 128, 4, 132, 64, 128, 32)[:2] == (4, 0)  # 32 tiles: 4 splits fill 128 SMs, cheaper
    assert plan(100, 128, 4, 132, 64, 128, 32)[:2] == (1, 132)  # more than half the SMs: no split-K, stream-K
    assert plan(132, 128, 4, 132, 64, 128, 32)[:2] == (1, 0)  # the tiles fill the SMs: data-parallel
    assert plan(100, 128, 4, 132, 64, 128, 32, stream_ok=False)[:2] == (1, 0)  # a target without it
    assert plan(50, 128, 4, 132, 64, 128, 32, mode="split_k")[:2] == (2, 0)
    assert plan(32, 128, 4, 132, 64, 128, 32, mode="stream_k")[:2] == (1, 132)
    assert plan(32, 128, 4, 132, 64, 128, 32, mode="none")[:2] == (1, 0)
    with pytest.raises(heddle.ScheduleError, match="k_share = 'fast' is not one of 'auto', 'split_k', 'stream_k'"):
        plan(32, 128, 4, 132, 64, 128, 32, mode="fast")


def test_matmul_buckets_pick_stream_k_by_the_model():
    from support.bucket_defs import spec
    from heddle.api import fused_matmul_op
    fm = fused_matmul_op(spec(n=6400))
    lines = fm.describe("sm_80", sms=132).split("\n")
    # M <= 64: 50 tiles of 64x128 -> stream-K; M <= 128: 50 tiles of 128x128 -> split_k(2) by 1 unit
    assert "stream_k(132)" in lines[0] and lines[0].split(": ")[1].endswith("_stk132_ev2")
    assert lines[0].endswith("split_k(2) 69.3, stream_k(132) 65.0 -> stream_k(132)")
    assert "split_k(2)" in lines[1] and lines[1].endswith("-> split_k(2)")
    assert "stream_k" not in lines[3] and "split_k" not in lines[3]
    assert fm.describe("sm_80", sms=132) == "\n".join(lines)  # deterministic
    # the TMA kernels weigh the same model: stream-K on the warp-specialized kernel, split-K without roles
    tma = fm.describe("sm_90a", sms=132).split("\n")
    assert "_stk132_ws2coop" in tma[0] and tma[0].endswith("split_k(2) 34.7, stream_k(132) 33.0 -> stream_k(132)")
    assert "_sk2" in tma[1] and tma[1].endswith("-> split_k(2)")
    # the cp.async kernels on sm_90a (vec 4): as on sm_80
    assert [x.split("; ", 1)[1] for x in fm.describe("sm_90a", 4, 4, sms=132).split("\n")[:3]] == \
        [x.split("; ", 1)[1] for x in lines[:3]]
    # sm_100a has no grid flags: no k sharing at all, and describe says so
    assert "has no grid flags" in fm.describe("sm_100a", 4, 4, sms=148).split("\n")[0]
    fd = spec(n=6400).build_fusion()
    fd.auto_schedule("sm_80", 64, 6400, 4096, sms=132, k_share="split_k")
    assert fd.matmul_tensor._tv.splits == 2 and fd.matmul_tensor._tv.stream_k_ctas == 0
    with pytest.raises(heddle.ScheduleError, match="k_share = 'x' is not one of"):
        spec().build_fusion().auto_schedule("sm_80", -1, 4096, 4096, k_share="x")


@needs_cxx
@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_matmul_runs_stream_k_interpreted(monkeypatch, target):
    from support.bucket_defs import spec
    from heddle.api import fused_matmul_op
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    monkeypatch.setenv("HEDDLE_INTERPRET_TARGET", target)
    g = torch.Generator().manual_seed(0)
    w = (torch.randn(192, 512, generator=g) * 0.1).bfloat16()
    b = torch.randn(192, generator=g).bfloat16()
    fm = fused_matmul_op(spec(n=192, k=512))
    monkeypatch.setattr(fm, "k_share", "stream_k")  # overrides the model (which takes split-K here)
    for m in (3, 50):
        x = (torch.randn(m, 512, generator=g) * 0.1).bfloat16()
        y = heddle.matmul(x, w, bias=b, activation="gelu", trans_b=True)
        ref = torch.nn.functional.gelu(x.double() @ w.double().T + b.double())
        assert torch.allclose(y.double(), ref, atol=4e-2, rtol=2e-2)
    # the kernels the calls compiled for this target (M 3 and 50 share the M <= 64 bucket; the op is shared)
    used = [k for key, k in fm.kernels.items() if key[0] == target]
    assert len(used) == 1 and used[0].lowered.stream_k > 0 and "_stk" in used[0].name
    assert ("_ws" in used[0].name) == (target == "sm_90a")  # sm_90a: the warp-specialized TMA kernel


@requires_nvrtc
@pytest.mark.parametrize("target,suffix", [("sm_80", "_stk132"), ("sm_90a", "_stk132_ws2coop_0_0_tmas2")])
def test_bucket_stream_k_kernel_compiles_without_spills(target, suffix):
    # the M <= 64 bucket's kernel the model picks (sm_90a: 64x128x64, one MMA warpgroup, no register budgets,
    # the TMA-store epilogue)
    from support.bucket_defs import spec
    from heddle.api import fused_matmul_op
    k = fused_matmul_op(spec(n=6400)).kernel(target, 8, 8, 16, sms=132)
    assert k.name.endswith(suffix)
    no_spills_and_gpu_scope_flags(k, k.name)


def test_k_sharing_follows_the_target_and_k_share():
    """A target without grid flags (sm_100a) never gets split-K or stream-K from the automatic schedule
    (it would refuse them); the Hopper TMA schedule honours k_share = "none" (neither) and "stream_k"
    (stream-K on the warp-specialized kernel)."""
    from support.bucket_defs import spec
    fd = spec(n=4096).build_fusion()
    fd.auto_schedule("sm_100a", 16, 4096, 4096, tma=False, sms=148)  # the cp.async kernel, 64 tiles
    assert fd.matmul_tensor._tv.splits == 1 and fd.matmul_tensor._tv.stream_k_ctas == 0
    fd.lower("sm_100a", 8, 8)  # accepted: no grid flags asked for
    auto = spec(n=4096).build_fusion()
    auto.auto_schedule("sm_90a", 16, 4096, 4096, sms=132)
    assert auto.matmul_tensor._tv.splits > 1  # the model's split-K on the TMA pipeline
    for mode, ctas in (("none", 0), ("stream_k", 132)):
        fd = spec(n=4096).build_fusion()
        fd.auto_schedule("sm_90a", 16, 4096, 4096, sms=132, k_share=mode)
        assert fd.matmul_tensor._tv.splits == 1 and fd.matmul_tensor._tv.stream_k_ctas == ctas
    with pytest.raises(heddle.ScheduleError, match="k_share = 'y' is not one of"):
        spec().build_fusion().auto_schedule("sm_90a", 16, 4096, 4096, k_share="y")
