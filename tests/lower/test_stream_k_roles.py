"""Stream-K on the sm_90a warp-specialized persistent kernel (passes/stream_k_roles.cpp, stream_k_walk.h): the
TMA producer role and the cooperative MMA warpgroups walk the same (tile, k-range) segments of the CTA, the
ring's item count running on across them; a split tile's running sum goes from the MMA warpgroups of CTA c-1
to those of CTA c through the workspace behind one gpu-scope flag per CTA, the epilogue (direct, or staged by
stmatrix + TMA store) applied once by the CTA that finishes the tile. Checked on the kernel IR and its sync
plan, by the kernel-IR simulator (clean, every mutant killed), by the interpreter of the printed source
(numbers on ragged shapes, the same bits across runs, reduction mutants killed), by NVRTC (no spills,
setmaxnreg honoured, the gpu-scope flags in the PTX) and through the automatic schedule's cost model."""
import pytest

import heddle
from support.env import requires_nvrtc, rt
from support.grid_defs import no_spills_and_gpu_scope_flags, simulator_clean_and_every_mutant_killed
from support.wgmma_defs import build, inputs
from support.interp_defs import needs_cxx
from support.stream_k_defs import ranges
from support.stream_k_defs import sm90 as sk  # stream_k(G) on the warp-specialized kernel: 128 x bn x 16 tiles

N, BK, NK = 200, 16, 13  # 4 n-tiles of 64 (2 of 128), 13 k-tiles of 16


def lowered(fd):
    return heddle.Kernel.build(fd, "sm_90a", rtc=False)


def role_blocks(ir):
    """(the load role's text, the MMA role's text) of the kernel IR dump."""
    load = ir[ir.index("if (warp < 4) {"):ir.index("  } else {")]
    return load, ir[ir.index("  } else {"):]


# --- the kernel IR and its sync plan -------------------------------------------------------------

def test_both_roles_walk_the_same_segments_and_ring_items():
    k = lowered(sk(11))
    low = k.lowered
    assert "_stk11_ws2coop_40_232" in k.name and low.stream_k == 11 and low.needs_workspace
    assert [p[0] for p in low.params][-2:] == ["ws", "flags"] and "num_ctas" not in [p[0] for p in low.params]
    assert low.grid({"M": 70, "N": N, "K": BK * NK}) == (11, 1, 1)  # 4 tiles of 128x64 share 11 CTAs
    assert low.grid({"M": 700, "N": N, "K": BK * NK}) == (24, 1, 1)  # 24 tiles: one each, nothing split
    assert low.workspace({"M": 70, "N": N, "K": BK * NK}) == (11, 128 * 64)
    load, mma = role_blocks(low.kernel_ir)
    seg = ["for sk_s in [0, sk_t1 - sk_t0 + 1) serial", "let sk_k0 = heddle_max(sk_b, sk_t * sk_nk)",
           "let sk_o = sk_e - sk_k1", "for kt in [0, sk_k1 - sk_k0) serial"]
    for role in (load, mma):  # the producer walks exactly the units and k ranges the consumers walk
        assert all(s in role for s in seg), role
        assert "tl" not in role.replace("tile", "")  # no whole-tile walk left
    # the k-tile offset only the loads read (drop_unused_lets removes the MMA role's unread copy)
    assert "let skkt = sk_k0 - sk_t * sk_nk" in load and "skkt" not in mma
    assert "mbarrier.try_wait.parity empty[(kt + sk_o) % 4] parity (kt + sk_o) / 4 % 2" in load
    assert "mbarrier.try_wait.parity full[(kt + sk_o) % 4] parity (kt + sk_o) / 4 % 2" in mma
    assert "mbarrier.arrive empty[(kt + sk_o + 3 + 1) % 4]" in mma
    # the reduction in the MMA warpgroups: wait CTA c-1, add, then the epilogue once or publish to CTA c+1
    assert mma.index("if (sk_t * sk_nk < sk_k0)") < mma.index("grid.wait flags[blockIdx.x - 1 + 0..0]") \
        < mma.index("bar.sync 2, 256") < mma.index("partial add ws[blockIdx.x - 1 + 0..0] -> acc") \
        < mma.index("if (sk_k1 == (sk_t + 1) * sk_nk)") < mma.index("epilogue store -> D") \
        < mma.index("partial store -> ws[blockIdx.x]") < mma.index("grid.release flags[blockIdx.x]")
    assert "grid." not in load and "partial" not in load
    src = k.source
    # the loads' k coordinate is the segment's k-tile (kt + skkt), the ring item kt + sk_o
    assert "(full + ((kt + sk_o) % 4)));" in src and "(kt + skkt) * 16" in src
    # the MMA warpgroups' fragments, numbered from their first thread, fill one bm x bn slot
    assert "add_partials<sizeof(acc.acc) / sizeof(float), 256>(&acc.acc[0][0][0], ws + (long long)(blockIdx.x - 1) * " \
           "8192, 1, flags + (blockIdx.x - 1), tid - 128);" in src
    assert "heddle::grid::store_partial<sizeof(acc.acc) / sizeof(float), 256>" in src
    assert "if (warp == 4 && heddle::elect_one_sync()) {\n          heddle::grid::wait_and_reset(flags + " \
           "(blockIdx.x - 1), 1);" in src


def test_explain_names_the_grid_edge_and_the_mma_barrier():
    ex = lowered(sk(11)).explain()
    assert "grid-level edge: ld.acquire.gpu spins on flags[blockIdx.x - 1]" in ex
    assert "Only the previous CTA is waited on, which never waits on a later one, so the wait ends" in ex
    assert "grid-level edge: fence.acq_rel.gpu + store flags[blockIdx.x] = 1" in ex
    assert "named barrier (256 MMA threads): thread 128's acquire is ordered before every thread reads the running " \
           "sum" in ex
    assert "named barrier (256 MMA threads): every thread's running sum of the 128x64 tile is stored before thread " \
           "128 releases the flag" in ex
    assert "stream-K over at most 11 CTAs" in ex.splitlines()[0] and "roles: load -(sA, sB)-> mma" in ex.splitlines()[0]


def test_tma_store_epilogue_runs_once_in_the_finishing_branch():
    ir = lowered(sk(3, store="tma", prefetch=2, bn=256, k=BK * 25)).lowered.kernel_ir
    _, mma = role_blocks(ir)
    fin = mma.index("if (sk_k1 == (sk_t + 1) * sk_nk)")
    assert "wgmma.wait_group(0)" in mma[:mma.index("if (sk_t * sk_nk < sk_k0)")]  # accumulators final first
    epi = mma[fin:mma.index("} else {", fin)]
    # at most one epilogue per CTA: chunk counter 0..3 through sD[2]; only chunks 2 and 3 reuse a slot, so only
    # they wait for the store that read it (wait_group.read, then the barrier before the rewrite)
    chunks = epi.split("epilogue store -> ")[1:]
    assert [c.split(" ")[0] for c in chunks] == ["sD[0]", "sD[1]", "sD[0]", "sD[1]"]
    assert epi.count("cp.async.bulk.wait_group.read(1)") == 2
    assert epi.index("tma_store sD[1] -> tmD at (m0, n0 + 64)") < epi.index("cp.async.bulk.wait_group.read(1)")
    assert "partial store -> ws[blockIdx.x]" in mma[mma.index("} else {", fin):]
    assert mma.rindex("cp.async.bulk.wait_group.read(0)") > mma.index("grid.release")  # after the segment loop


def test_schedule_errors():
    for variant, match in (("pingpong", "built for cooperative MMA warpgroups"),
                           ("3role", "an epilogue role is not built with it")):
        with pytest.raises(heddle.ScheduleError, match=r"stream_k\(.*\): .*" + match):
            sk(8, variant=variant).lower("sm_90a")
    with pytest.raises(heddle.ScheduleError, match="the TMA-loaded epilogue operand 'bias' is walked per tile"):
        sk(8, bias_tma=2).lower("sm_90a")
    with pytest.raises(heddle.ScheduleError, match="stream-K runs on the warp-specialized persistent kernel"):
        sk(8, variant="pipeline").lower("sm_90a")
    with pytest.raises(heddle.ScheduleError, match="stream-K walks the tiles of one matmul"):
        sk(8, batched=True).lower("sm_90a")


# --- the kernel-IR simulator ---------------------------------------------------------------------

@pytest.mark.parametrize("G,M,kw", [(11, 70, {}), (3, 1, dict(store="tma", prefetch=2, bn=256, k=BK * 25))])
def test_simulator_clean_and_every_mutant_killed(G, M, kw):
    # 3 CTAs share one 128x256 tile (a chain: head, middle, tail), 8 ring items each: the ring wraps, and
    # 4 chunks of the TMA-store epilogue go through sD[2]
    k = lowered(sk(G, **kw))
    simulator_clean_and_every_mutant_killed(k, inputs(k.fusion, M))


# --- the interpreter of the printed source -------------------------------------------------------

CASES = [(11, 1, {}), (11, 70, {}), (11, 129, {}), (11, 136, dict(layout="TN")),
         (13, 200, dict(store="tma", prefetch=2, bn=128)),
         (9, 57, dict(layout="NT", dtype="f16", epilogue="silu_scale"))]


@needs_cxx
@pytest.mark.parametrize("G,M,kw", CASES)
def test_interpret_numbers_ragged(G, M, kw):
    k = lowered(sk(G, **kw))
    grid, walk = ranges(M, G, n=N, k=BK * NK, bm=128, bn=kw.get("bn", 64), bk=BK)
    assert k.lowered.grid({"M": M, "N": N, "K": BK * NK})[0] == grid
    assert any(len(s) == 2 for s in walk) or M == 1  # some CTA runs two segments (one publishes, one finishes)
    r = heddle.interpret(k, *inputs(k.fusion, M, seed=M))
    assert r.ok, r.report()


# the same bits across runs, the reduction's source mutants killed and the M = 1..200 sweep (-m slow):
# test_stream_k.py, for both kernel families


# --- NVRTC -------------------------------------------------------------------------------------

@requires_nvrtc
@pytest.mark.parametrize("kw", [dict(bm=128, bn=256, store="tma"), dict(bm=128, bn=128, store=None)])
def test_nvrtc_compiles_without_spills(kw):
    fd = build("coop", stages=4, prefetch=2, bk=64, n=4096, k=4096, **kw)
    fd.matmul_tensor.stream_k(132)
    low = fd.lower("sm_90a")
    r = rt.compile(low.source, low.name, "sm_90a", isolate=True)
    no_spills_and_gpu_scope_flags(r, low.name)
    assert not r.stats.setmaxnreg_ignored and "C7515" not in r.ptxas and "C7519" not in r.ptxas, r.ptxas
    assert "setmaxnreg.inc.sync.aligned.u32" in r.ptx and "wgmma.mma_async.sync.aligned" in r.ptx


# --- a GPU (sm_90; skipped without one) ----------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("store", [None, "tma"])
@pytest.mark.parametrize("M", [1, 16, 64, 128, 200])
def test_gpu_numbers_and_the_same_bits(M, store):
    import torch
    from heddle.reference import evaluate
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs an sm_90 GPU (Hopper)")
    fd = build("coop", stages=4, prefetch=2, bm=128, bn=256, bk=64, n=4096, k=4096, store=store)
    fd.matmul_tensor.stream_k(torch.cuda.get_device_properties(0).multi_processor_count)
    k = heddle.Kernel.build(fd, "sm_90a")
    ts = inputs(fd, M, seed=M)
    ref = evaluate(fd, ts).float()
    one, two = (k(*[t.cuda() for t in ts]).cpu() for _ in range(2))
    assert torch.equal(one, two)  # the fixed-order reduction: the same bits on every launch
    assert torch.allclose(one.float(), ref, atol=4e-2, rtol=4e-2), (M, (one.float() - ref).abs().max().item())


# --- the automatic choice (wgmma_auto_schedule.cpp with k_share.cpp's model) -------------------------------

def test_auto_schedule_takes_stream_k_where_the_model_says():
    from support.bucket_defs import spec
    plan = heddle._C.Fusion.k_share_plan
    # M <= 256 bucket, N 6400, K 8192 on 132 SMs: 50 tiles of 128x256x64 (128 k-tiles)
    s, g, text = plan(50, 128, 4, 132, 128, 256, 64, target="sm_90a")
    assert (s, g) == (1, 132) and text.endswith("split_k(2) 69.3, stream_k(132) 65.0 -> stream_k(132)")
    fd = spec(n=6400, k=8192).build_fusion()
    fd.auto_schedule("sm_90a", 256, 6400, 8192, sms=132)
    tv = fd.matmul_tensor._tv
    assert tv.stream_k_ctas == 132 and tv.splits == 1
    low = fd.lower("sm_90a")
    assert "_stk132_ws2coop_40_232" in low.name and "_tmas" in low.name  # roles + the TMA-store epilogue
    # K 4096: split_k(2) on the pipeline without roles is cheaper, as before
    fd = spec(n=6400, k=4096).build_fusion()
    fd.auto_schedule("sm_90a", 256, 6400, 4096, sms=132)
    assert fd.matmul_tensor._tv.splits == 2 and fd.matmul_tensor._tv.stream_k_ctas == 0
    # k_share overrides the model both ways
    fd = spec(n=6400, k=4096).build_fusion()
    fd.auto_schedule("sm_90a", 256, 6400, 4096, sms=132, k_share="stream_k")
    assert fd.matmul_tensor._tv.stream_k_ctas == 132 and "_stk132_ws2coop" in fd.lower("sm_90a").name
    fd = spec(n=6400, k=8192).build_fusion()
    fd.auto_schedule("sm_90a", 256, 6400, 8192, sms=132, k_share="none")
    assert fd.matmul_tensor._tv.stream_k_ctas == 0 and fd.matmul_tensor._tv.splits == 1


def test_describe_prints_the_model_for_the_tma_kernels():
    from support.bucket_defs import spec
    from heddle.api import fused_matmul_op
    fm = fused_matmul_op(spec(n=6400, k=8192))
    lines = fm.describe("sm_90a", sms=132).split("\n")
    line = [x for x in lines if x.startswith("M <= 256")][0]
    assert "_stk132_ws2coop" in line and line.endswith("-> stream_k(132)")
    assert fm.describe("sm_90a", sms=132) == "\n".join(lines)  # deterministic
    fm.k_share = "none"
    assert all("_stk" not in x and "_sk" not in x.split(":")[1] for x in fm.describe("sm_90a", sms=132).split("\n"))

# heddle.matmul under HEDDLE_INTERPRET=1 with k_share = 'stream_k': test_stream_k.py
