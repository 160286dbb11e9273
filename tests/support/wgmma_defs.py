"""Helpers shared by the Hopper (sm_90a) tests: the schedules of docs/sync-cases.md cases 8-12 through the public
scheduling API, inputs, and walks over the kernel IR structure (which nests role branches in ifs)."""
import torch

import heddle
from heddle.tma import m_major_scales
from support.matmul_defs import matmul_fusion

# register pairs of the issue: (producer, consumers)
REG_PAIRS = [(40, 232), (64, 168), (24, 240)]

# variant -> (tile warpgroups, MMA warpgroups in the roles, epilogue role?)
VARIANTS = {
    "pipeline": (1, 0, False),    # TMA + mbarrier ring, every thread computes (case 8)
    "block_sync": (1, 0, False),  # the same ring, WAR by a block barrier (case 9)
    "coop": (2, 2, False),        # load warp -> 2 cooperative MMA warpgroups (case 10)
    "pingpong": (1, 2, False),    # load warp -> 2 MMA warpgroups taking turns over tiles
    "3role": (1, 1, True),        # load warp -> MMA warpgroup -> epilogue warpgroup + TMA store (cases 11, 12)
}


def roles_for(variant, regs=(40, 232)):
    _, mma_wg, epi = VARIANTS[variant]
    if not mma_wg:
        return None
    prod, cons = regs
    r = {"load": {"warps": 1, "registers": prod}, "mma": {"warpgroups": mma_wg, "registers": cons}}
    if epi:
        r["epilogue"] = {"warpgroups": mma_wg, "registers": cons}
    return r


def schedule_sm90(fd, a, b, bm=64, bn=64, bk=16, wgs=1, stages=3, prefetch=-1, war="mbarrier", roles=None):
    mm = fd.schedule()
    mm.split("m", bm).split("n", bn).split("k", bk).split("m.i", bm // (4 * wgs))
    if len(mm.shape) == 3:
        mm.parallelize("b", "BIDz")
    mm.parallelize("m.o", "BIDy").parallelize("n.o", "BIDx").parallelize("m.i.o", "warp")
    mm.reorder((["b"] if len(mm.shape) == 3 else []) + ["m.o", "n.o", "k.o", "m.i.o", "m.i.i", "n.i", "k.i"])
    for t in (a, b):
        fd.cache_after(t, "tma_load").circular_buffer(stages, prefetch, war)
    if roles:
        mm.warp_specialize(roles)
    return mm


def build(variant="pipeline", stages=3, prefetch=-1, layout="NN", dtype="bf16", regs=(40, 232), bm=None, bn=64,
          bk=16, n=72, k=None, epilogue="bias_gelu", batched=False, bias_tma=0, store=None):
    """A fusion scheduled as `variant`; small tiles by default (the simulator's size). bias_tma=s: the
    bias row is loaded by TMA through a producer role's ring of s stages (cache_after(bias, 'tma_load')).
    store: epilogue_store(store) ("tma" / "direct"; None keeps the default)."""
    tile_wg, _, _ = VARIANTS[variant]
    bm = bm or 64 * tile_wg
    k = k if k is not None else bk * (3 * stages + 1)
    fd, a, b = matmul_fusion(n=n, k=k, dtype=dtype, layout=layout, epilogue=epilogue, batched=batched)
    schedule_sm90(fd, a, b, bm=bm, bn=bn, bk=bk, wgs=tile_wg, stages=stages, prefetch=prefetch,
                  war="block_sync" if variant == "block_sync" else "mbarrier", roles=roles_for(variant, regs))
    if bias_tma:
        fd.cache_after(next(t for t in fd.inputs if t.name == "bias"), "tma_load").circular_buffer(bias_tma)
    if store:
        fd.matmul_tensor.epilogue_store(store)
    return fd


def clustered(variant="coop", along="m", n=72, bn=64, stages=3, prefetch=1, **kw):
    """The warp-specialized kernel in clusters of 2 along m or n (tests/lower/test_cluster_multicast.py)."""
    fd = build(variant, stages=stages, prefetch=prefetch, n=n, bn=bn, **kw)
    fd.matmul_tensor.cluster(2, along)
    return fd


def inputs(fd, M, seed=0, batch=2):
    """Random inputs of fd; a block-scaled matmul's scale_a M-major, the layout its TMA map reads (docs/fp8.md
    "The scales' path")."""
    g = torch.Generator().manual_seed(seed)
    mm = next((e for e in fd.exprs() if e["op"] == "matmul"), None)
    scale_a = mm.get("scale_a") if mm else None
    nv16 = (mm["scale_a"], mm["scale_b"]) if mm and mm.get("scales") == "nv16" else ()
    out = []
    for t in fd.inputs:
        if t.dtype == "e8m0" or t.name in nv16:  # mx32 / nv16 scales, blocked [round_up(rows, 128), Kp]: ue8m0 codes
            # 120..134 (2^-7..2^7), ue4m3 codes 0x28..0x47 (2^-2..3.75; e4m3 bytes with the sign bit clear)
            shape = [-(-M // 128) * 128 if isinstance(s, str) else s for s in t.shape]
            lo, hi, dt = (120, 135, torch.float8_e8m0fnu) if t.dtype == "e8m0" else (0x28, 0x48, torch.float8_e4m3fn)
            out.append(torch.randint(lo, hi, shape, generator=g, dtype=torch.uint8).view(dt))
            continue
        if t.dtype == "e2m1x2":  # NVFP4 operands: any byte is two e2m1 codes
            shape = [M if s == "M" else s for s in t.shape]
            out.append(torch.randint(0, 256, shape, generator=g, dtype=torch.uint8).view(torch.float4_e2m1fn_x2))
            continue
        shape = [M if s == "M" else batch if s == "B" else s for s in t.shape]
        dt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "e4m3": torch.float8_e4m3fn,
              "e5m2": torch.float8_e5m2}[t.dtype]
        x = (torch.randn(shape, generator=g) * 0.5).to(dt)
        out.append(m_major_scales(x) if scale_a and t.name == scale_a else x)
    return out


def walk(nodes):
    """Every node in program order, into loop bodies and both branches of ifs."""
    for n in nodes:
        yield n
        if n["kind"] == "for":
            yield from walk(n["body"])
        if n["kind"] == "if":
            yield from walk(n["then"])
            yield from walk(n["else"])


def ops(nodes):
    """A readable flat form of one block: ('sync', kind, buf, index, parity) / kind / ('for', ...)."""
    out = []
    for n in nodes:
        if n["kind"] == "sync":
            out.append((n["sync"], n.get("buf", ""), n.get("index", ""), n.get("parity", ""), n["arg"]))
        else:
            out.append(n["kind"])
    return out


def loop(nodes, stage):
    return next(n for n in nodes if n["kind"] == "for" and n["stage"] == stage)


def branch(nodes, cond):
    """The if node with condition `cond` (searching nested ifs too)."""
    for n in walk(nodes):
        if n["kind"] == "if" and n["cond"] == cond:
            return n
    raise KeyError(cond)


def nvrtc_sm90(low):
    """Compiles a lowered sm_90a kernel with NVRTC and checks what every Hopper kernel must meet: no spills,
    no stack frame, no ptxas advisory (setmaxnreg honoured, no wgmma serialisation: C7510/C7514/C7515/C7519).
    Returns the result."""
    from support.env import rt
    r = rt.compile(low.source, low.name, "sm_90a", isolate=True)
    st = r.stats
    assert st.spill_stores == 0 and st.spill_loads == 0 and st.stack_frame == 0, r.ptxas
    assert not st.setmaxnreg_ignored and "C7515" not in r.ptxas and "C7519" not in r.ptxas, r.ptxas
    assert not st.advisories and not st.wgmma_serialized, r.ptxas  # every advisory: C7510, C7514, ... too
    return r


def assert_every_source_mutant_killed(fd, M=200):
    """The CPU interpreter of the printed source kills every source mutant of fd's sm_90a kernel (one SM)."""
    from heddle.interpret import mutation_kill_rate
    res = mutation_kill_rate(heddle.Kernel.build(fd, "sm_90a", rtc=False), *inputs(fd, M, seed=1), sms=1)
    assert "delete_sync" in res["by_kind"] and not res["survivors"], res["survivors"]


def assert_store_protocol_mutants_killed(fd, M=200):
    """The CPU interpreter kills the deletion of each sync the TMA-store epilogue rests on (the proxy fence,
    the wait_group.read, the named barriers) in fd's sm_90a kernel (one SM)."""
    from heddle.interpret import mutation_kill_rate
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    keys = ("fence_proxy_async", "bulk_wait_read", "named_barrier")
    res = mutation_kill_rate(k, *inputs(fd, M, seed=1), sms=1, kinds=("delete_sync",),
                             where=lambda mu: any(x in mu.what for x in keys))
    assert res["total"] >= 3 and not res["survivors"], (res["total"], res["survivors"])


def assert_simulates_clean(fd, Ms=(200, 77), label=""):
    """The kernel-IR simulator runs fd's sm_90a kernel clean with float64-right numbers for each M, under the
    adversarial schedule and a random one."""
    from heddle import verify
    low = fd.lower("sm_90a")
    for i, M in enumerate(Ms):
        for sched, seed in (("adversarial", 0), ("random", i + 1)):
            r = verify.simulate(low, inputs(fd, M, seed=M), sched, seed)
            assert r.ok, f"{label} M={M} {sched}:\n{r.report()}"


def killed_sync_mutants(fd, M=200, at_least=40):
    """Every simulator mutant of fd's sm_90a kernel is killed (at least `at_least` of them); returns the killed
    mutants' descriptions joined by ' | ' (for checks that a given sync was among them)."""
    from heddle import verify
    report = verify.kill_rate(fd.lower("sm_90a"), [inputs(fd, M, seed=1)])
    assert report.total >= at_least and not report.survivors, str(report)
    return " | ".join(m.description for m, v in report.verdicts if v != "SURVIVED")


def assert_interprets_clean(kernel, args, sms=1):
    """The CPU interpreter runs the kernel's printed source on `args` clean with float64-right numbers, under
    the adversarial schedule and a random one."""
    from heddle.interpret import interpret
    for sched, seed in (("adversarial", 0), ("random", 3)):
        r = interpret(kernel, *args, schedule=sched, seed=seed, sms=sms)
        assert r.ok, r.report()
