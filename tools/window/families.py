"""Every kernel family heddle generates, as cases the GPU window runs (docs/gpu-window.md).

A family is a named list of cases; each case builds one scheduled fusion (through the same public
scheduling API and the same schedule helpers as the tests: tests/support/wgmma_defs.py, tests/support/matmul_defs.py)
and names the M (and batch) it runs at. N and K are fixed by the fusion; the shapes are small and ragged
(partial tiles on every axis) so a whole family runs in seconds. A "call" case instead runs a Python
callable (heddle.matmul per M bucket) that returns (output, float64 reference).

`needs`: "sm_90a" families run only on a Hopper device, "sm_100a" ones only on a Blackwell device (both in the
dry run, compiled for that target), "any" on every sm_80+ device (compiled for the device's own target). `roles`: the family has warp-specialized roles, so the sanitizer
stage runs racecheck and synccheck on it too (memcheck runs on every family).
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))  # the schedule helpers the tests use

import heddle  # noqa: E402
from support.wgmma_defs import build, roles_for, schedule_sm90  # noqa: E402
from support.matmul_defs import matmul_fusion, schedule  # noqa: E402
from support.block_scale_defs import block_scaled  # noqa: E402
from support.fp8_defs import fp8_fusion, fp8_schedule  # noqa: E402
from support import quant_defs  # noqa: E402


@dataclass
class Case:
    label: str
    make: Optional[Callable[[str], "heddle.Fusion"]] = None  # target -> scheduled fusion
    M: int = 0
    batch: int = 2
    call: Optional[Callable] = None   # call(device, seed) -> (output(s), reference(s)); instead of make
    sms: int = 0                      # dry run: the SM count a persistent grid stands for (0: 4)


@dataclass
class Family:
    name: str
    needs: str                      # "any" | "sm_90a"
    roles: bool
    what: str
    cases: List[Case] = field(default_factory=list)
    pinned: bool = True  # its printed sources are pinned in tests/data/printed_sources.json (test_printed_sources)


FAMILIES: Dict[str, Family] = {}


def family(name, needs, roles, what, pinned=True):
    def add(fn):
        FAMILIES[name] = Family(name, needs, roles, what, fn(), pinned)
        return fn
    return add


# --- the register-MMA path (cp.async, mma.sync): sm_80 and every later device ------------------------

def _cp(layout, dtype, stages, prefetch, n=264, k=1000, epilogue="bias_gelu", batched=False):
    def make(target):
        fd, a, b = matmul_fusion(n=n, k=k, dtype=dtype, layout=layout, epilogue=epilogue, batched=batched)
        schedule(fd, a, b, stages=stages, prefetch=prefetch)
        return fd
    return make


@family("cp_async", "any", False, "cp.async circular buffer + mma.sync, every layout, fp16 and bf16")
def _():
    out = []
    for i, layout in enumerate(("NN", "NT", "TN", "TT")):
        for dtype in ("f16", "bf16"):
            s, p = [(4, 3), (3, 1), (2, 1), (5, 2)][i]
            # A^T is [K, M]: M is its row stride, so a transposed A keeps M a multiple of 8 (16-byte rows)
            out.append(Case(f"{layout}-{dtype}-s{s}p{p}", _cp(layout, dtype, s, p), M=504 if layout[0] == "T" else 500))
    out.append(Case("NN-bf16-s4p0", _cp("NN", "bf16", 4, 0), M=129))
    return out


@family("cp_async_batched", "any", False, "cp.async batched (B axis on the grid), silu(x*0.5) epilogue")
def _():
    return [Case(f"b3-{d}", _cp("NN", d, 4, -1, n=128, k=256, epilogue="silu_scale", batched=True), M=200, batch=3)
            for d in ("f16", "bf16")]


def _cp_grid(kind, g, layout="NN", n=200, k=32 * 15):
    def make(target):
        fd, a, b = matmul_fusion(n=n, k=k, dtype="bf16", layout=layout, epilogue="bias_gelu")
        mm = schedule(fd, a, b, bm=64, bn=64, bk=32, wm=2, wn=2, stages=3)
        getattr(mm, kind)(g)
        return fd
    return make


@family("cp_async_split_k", "any", False, "cp.async split-K: fixed-order reduction through grid flags")
def _():
    return [Case("s3-M300", _cp_grid("split_k", 3), M=300), Case("s2-M77-NT", _cp_grid("split_k", 2, "NT"), M=77),
            Case("s4-M1", _cp_grid("split_k", 4), M=1)]


@family("cp_async_stream_k", "any", False, "cp.async stream-K: persistent grid, CTA-to-CTA fix-up through flags")
def _():
    return [Case("g7-M300", _cp_grid("stream_k", 7), M=300), Case("g5-M77", _cp_grid("stream_k", 5), M=77),
            Case("g16-M504-TN", _cp_grid("stream_k", 16, "TN"), M=504)]


# --- sm_90a: TMA + mbarrier rings + wgmma --------------------------------------------------------------

def _h(variant, **kw):
    kw.setdefault("stages", 4)
    kw.setdefault("prefetch", 2)
    return lambda target: build(variant, **kw)


@family("sm90_pipeline", "sm_90a", False, "TMA + mbarrier ring, every thread computes (WAR by mbarrier / block sync)")
def _():
    return [Case("mbarrier-M333", _h("pipeline", bm=64, bn=128, bk=64, n=200, k=520), M=333),
            Case("block_sync-M77", _h("block_sync", bm=64, bn=128, bk=64, n=136, k=200), M=77),
            Case("mbarrier-f16-NT", _h("pipeline", bm=64, bn=64, bk=64, n=200, k=520, layout="NT", dtype="f16"), M=300)]


@family("sm90_coop", "sm_90a", True, "load warp -> 2 cooperative wgmma warpgroups, persistent tiles")
def _():
    return [Case("128x128x64-M1000", _h("coop", bm=128, bn=128, bk=64, n=1000, k=1000), M=1000),
            Case("ragged-M77", _h("coop", bm=128, bn=128, bk=64, n=200, k=136), M=77),
            Case("TN-M336", _h("coop", bm=128, bn=128, bk=64, n=512, k=520, layout="TN"), M=336),
            Case("TT-f16-M304", _h("coop", bm=128, bn=128, bk=64, n=264, k=520, layout="TT", dtype="f16"), M=304)]


@family("sm90_pingpong", "sm_90a", True, "load warp -> 2 wgmma warpgroups taking turns over tiles")
def _():
    return [Case("128x128x64-M1000", _h("pingpong", bm=128, bn=128, bk=64, n=1000, k=1000), M=1000),
            Case("ragged-M77", _h("pingpong", bm=128, bn=128, bk=64, n=200, k=136), M=77),
            Case("NT-M333", _h("pingpong", bm=128, bn=128, bk=64, n=512, k=520, layout="NT"), M=333)]


@family("sm90_3role", "sm_90a", True, "load warp -> wgmma warpgroup -> epilogue warpgroup (TMA store)")
def _():
    return [Case("64x128x64-M1000", _h("3role", bm=64, bn=128, bk=64, n=1000, k=1000), M=1000),
            Case("ragged-M77", _h("3role", bm=64, bn=128, bk=64, n=200, k=136), M=77),
            Case("TN-M344", _h("3role", bm=64, bn=128, bk=64, n=512, k=520, layout="TN"), M=344)]


@family("sm90_tma_store", "sm_90a", True, "stmatrix-staged TMA-store epilogue (cooperative, ping-pong)")
def _():
    return [Case("coop-M300", _h("coop", stages=3, prefetch=1, n=200, bn=128, store="tma"), M=300),
            Case("coop-M77", _h("coop", stages=3, prefetch=1, n=136, bn=128, store="tma"), M=77),
            Case("pingpong-M300", _h("pingpong", stages=3, prefetch=1, n=200, bn=128, store="tma"), M=300),
            Case("pingpong-M1", _h("pingpong", stages=3, prefetch=1, n=200, bn=128, store="tma"), M=1)]


@family("sm90_two_outputs", "sm_90a", True, "TMA-store epilogue with a second output (saved pre-activation)")
def _():
    return [Case(f"{v}-M{m}", _h(v, stages=3, prefetch=1, n=200, bn=128, store="tma", epilogue="bias_gelu_saved"),
                 M=m) for v, m in (("coop", 300), ("pingpong", 77))]


def _residual(variant="coop", n=72, k=104):
    def make(target):
        wgs = 2 if variant == "coop" else 1
        fd = heddle.Fusion()
        a = fd.input("a", "bf16", ["M", k]); b = fd.input("b", "bf16", [k, n]); res = fd.input("res", "bf16", ["M", n])
        fd.output(heddle.ops.gelu(fd.matmul(a, b) + res).to("bf16"))
        schedule_sm90(fd, a, b, bm=64 * wgs, bn=64, bk=16, wgs=wgs, stages=3, prefetch=1, roles=roles_for(variant))
        fd.cache_after(res, "tma_load").circular_buffer(2)
        return fd
    return make


@family("sm90_operand_ring", "sm_90a", True, "bias / residual loaded by TMA through a producer role's ring")
def _():
    return [Case("bias-coop-M300", _h("coop", stages=3, prefetch=1, n=200, bias_tma=2), M=300),
            Case("bias-3role-M77", _h("3role", stages=3, prefetch=1, n=136, bias_tma=3), M=77),
            Case("residual-coop-M200", _residual("coop"), M=200),
            Case("residual-3role-M77", _residual("3role", n=136), M=77)]


def _shared_weight(n=72, k=16 * 7 - 8):
    def make(target):
        fd = heddle.Fusion()
        a = fd.input("a", "bf16", ["B", "M", k]); b = fd.input("b", "bf16", [k, n])
        fd.output(heddle.ops.gelu(fd.matmul(a, b) + fd.input("bias", "bf16", [n])).to("bf16"))
        schedule_sm90(fd, a, b, bm=128, bn=64, bk=16, wgs=2, stages=3, prefetch=1, roles=roles_for("coop"))
        return fd
    return make


@family("sm90_batched", "sm_90a", True, "warp-specialized batched (batch in the persistent tile walk)")
def _():
    return [Case("coop-b3-M200", _h("coop", stages=3, prefetch=1, batched=True, n=72, k=104), M=200, batch=3),
            Case("pingpong-b2-M77", _h("pingpong", stages=3, prefetch=1, batched=True, n=136, k=104), M=77),
            Case("shared-weight-b4-M100", _shared_weight(), M=100, batch=4)]


def _cluster(along, variant="coop", **kw):
    def make(target):
        kw.setdefault("stages", 3)
        kw.setdefault("prefetch", 1)
        kw.setdefault("n", 72)
        fd = build(variant, **kw)
        fd.matmul_tensor.cluster(2, along)
        return fd
    return make


@family("sm90_cluster", "sm_90a", True, "clusters of 2 with TMA multicast of the shared operand")
def _():
    return [Case("coop-m-M300", _cluster("m"), M=300, sms=2),
            Case("coop-m-bias-ring-M77", _cluster("m", bias_tma=2, n=136), M=77, sms=4),
            Case("coop-n-M130", _cluster("n", n=200), M=130, sms=2),
            Case("coop-m-tma-store-M300", _cluster("m", store="tma", bn=128, n=136), M=300, sms=2),
            Case("3role-n-f16-M70", _cluster("n", "3role", dtype="f16", epilogue="silu_scale", n=136), M=70, sms=2)]


def _block(**kw):
    def make(target):
        return block_scaled(**kw)
    return make


@family("sm90_fp8_block", "sm_90a", True, "block128-scaled matmul with promotion, e4m3 / bf16 (docs/fp8.md)")
def _():
    return [Case("e4m3-coop-K272-M200", _block(N=200, K=272, dtype="e4m3", bk=128), M=200),
            Case("e4m3-coop-K4096-M130", _block(N=136, K=4096, dtype="e4m3", bk=128, out="f32", bias=False), M=130),
            Case("bf16-coop-K264-M200", _block(N=200, K=264), M=200),
            Case("pingpong-p64-K520-M77", _block(variant="pingpong", N=136, K=520, promotion=64), M=77),
            Case("coop-K2048-M130", _block(N=136, K=2048, out="f32", bias=False), M=130)]


@family("sm90_fp8_block_n128", "sm_90a", True, "block128-scaled matmul on the 128 x 128 tile (64 + 64 accumulators "
        "per MMA thread, docs/fp8.md)", pinned=False)
def _():  # N = 300: n tiles of 128, 128 and 44 columns
    return [Case("e4m3-coop-K272-M200", _block(N=300, K=272, dtype="e4m3", bk=128, bn=128), M=200),
            Case("bf16-coop-K2048-M130", _block(N=300, K=2048, bn=128, out="f32", bias=False), M=130)]


def _h_grid(kind, g, **kw):
    def make(target):
        if kind == "split_k":
            fd, a, b = matmul_fusion(n=kw.get("n", 72), k=16 * 16, dtype="bf16")
            schedule_sm90(fd, a, b, bm=64, bn=64, bk=16, wgs=1, stages=3, prefetch=1).split_k(g)
            return fd
        fd = build(kw.pop("variant", "coop"), stages=4, prefetch=-1, bn=64, bk=16, n=200, k=16 * 13, **kw)
        fd.matmul_tensor.stream_k(g)
        return fd
    return make


@family("sm90_split_k", "sm_90a", False, "sm_90a pipeline with split-K through grid flags")
def _():
    return [Case("s3-M300", _h_grid("split_k", 3), M=300), Case("s2-M1", _h_grid("split_k", 2, n=136), M=1)]


@family("sm90_stream_k", "sm_90a", True, "warp-specialized stream-K (persistent CTAs share tiles x k-tiles)")
def _():
    return [Case("g11-M300", _h_grid("stream_k", 11), M=300),
            Case("g7-tma-store-M77", _h_grid("stream_k", 7, store="tma"), M=77)]


def _f8(variant, ab=("e4m3", "e4m3"), scale="row", out="bf16", n=200, k=1040, auto=0, store="direct", **kw):
    def make(target):
        fd, a, b = fp8_fusion(n=n, k=k, a_dtype=ab[0], b_dtype=ab[1], scale=scale, bias=True, act="gelu", out=out,
                              out_scale=out != "bf16")
        if auto:
            fd.auto_schedule(target, auto, n, k)
        else:
            mm = fp8_schedule(fd, a, b, variant=variant, **kw)
            if store == "tma":  # an 8-bit output through the TMA-store epilogue (docs/fp8.md "FP8 output")
                mm.epilogue_store("tma")
        return fd
    return make


@family("sm90_fp8", "sm_90a", True, "8-bit wgmma (e4m3 / e5m2, K-major operands), scales in the epilogue, FP8 out")
def _():
    return [Case("coop-e4m3-row-M333", _f8("coop"), M=333),
            Case("pingpong-e5m2xe4m3-tensor-M77", _f8("pingpong", ab=("e5m2", "e4m3"), scale="tensor"), M=77),
            Case("pipeline-e4m3-out-M200", _f8("pipeline", out="e4m3", bm=64, stages=3, prefetch=1), M=200),
            Case("auto-M1000", _f8("coop", n=1024, k=1024, auto=1000), M=1000),
            Case("coop-e4m3-out-tma-M333", _f8("coop", out="e4m3", n=304, bn=128, store="tma"), M=333)]


def _amax(variant, n, fmt="e4m3", group=128, store="direct"):
    return lambda target: quant_defs.scheduled(variant, n=n, k=1040, fmt=fmt, group=group, store=store)


@family("sm90_fp8_amax", "sm_90a", True, "8-bit wgmma with the output quantized by a computed scale per row and 128 "
        "columns or per row (amax over the quad, docs/fp8.md)", pinned=False)
def _():
    return [Case("coop-e4m3-g128-N300-M333", _amax("coop", 300), M=333),
            Case("pingpong-e5m2-g128-N200-M77", _amax("pingpong", 200, fmt="e5m2"), M=77),
            Case("pingpong-e4m3-row-N120-M200", _amax("pingpong", 120, group="row"), M=200),
            # q through the TMA-store epilogue (s stored directly); N a multiple of 16 (TMA's 16-byte rows)
            Case("coop-e4m3-g128-tma-N304-M333", _amax("coop", 304, store="tma"), M=333),
            Case("pingpong-e5m2-g128-tma-N208-M77", _amax("pingpong", 208, fmt="e5m2", store="tma"), M=77)]


def _auto(m, n, k, layout="auto", epilogue="bias_gelu", k_share="auto", sms=132):
    def make(target):
        fd, _, _ = matmul_fusion(n=n, k=k, dtype="bf16", layout="NT", epilogue=epilogue)
        fd.auto_schedule(target, m, n, k, sms=sms, k_share=k_share, epilogue_layout=layout)
        return fd
    return make


@family("sm90_auto", "sm_90a", True, "the automatic sm_90a schedules at full tile sizes (what heddle.matmul runs)")
def _():
    return [Case("plain-M1000", _auto(1000, 1024, 1024, epilogue="none"), M=1000),
            Case("pingpong-gelu-M1000", _auto(1000, 1024, 1024, "pingpong"), M=1000),
            Case("coop-gelu-M1000", _auto(1000, 1024, 1024, "cooperative"), M=1000),
            Case("epilogue-role-M777", _auto(777, 1024, 1024, "epilogue_role"), M=777),
            Case("one-wg-M64", _auto(64, 1024, 1024), M=50),
            Case("split-k-M128", _auto(128, 1024, 4096, k_share="split_k"), M=128),
            Case("stream-k-M256", _auto(256, 1280, 4096, k_share="stream_k"), M=256)]


# --- sm_100a: TMA + tcgen05.mma into tensor memory ------------------------------------------------------------

def _fp8(fa, fb, scales, **kw):
    from support.tcgen05_defs import build_fp8
    return lambda target: build_fp8(fa, fb, scales, **kw)


@family("sm100_fp8", "sm_100a", True, "tcgen05.mma kind::f8f6f4: e4m3 / e5m2 operands, per-tensor / per-row scales")
def _():
    return [Case("e4m3-row-M333", _fp8("e4m3", "e4m3", "row", stages=4, bn=128, bk=128, n=264, k=1040), M=333),
            Case("e5m2-tensor-M77", _fp8("e5m2", "e5m2", "tensor", stages=3, bn=256, bk=128, n=520, k=528), M=77),
            Case("mixed-k32-M200", _fp8("e4m3", "e5m2", None, stages=6, acc_stages=1, bn=64, bk=32, n=200, k=208),
                 M=200)]


def _mx(fa, fb, **kw):
    from support.mx_defs import build_mx
    return lambda target: build_mx(fa, fb, **kw)


@family("sm100_mxfp8", "sm_100a", True, "tcgen05.mma kind::mxf8f6f4.block_scale: MXFP8 (mx32 e8m0 scales per 32 of K, "
        "tcgen05.cp of the k tile's chunks from the operand ring into tensor memory)")
def _():
    return [Case("e4m3-bn256-N520-M333", _mx("e4m3", "e4m3", n=520, k=1056, bn=256, stages=4, acc_stages=1), M=333),
            Case("e5m2xe4m3-bn128-f32-M77", _mx("e5m2", "e4m3", n=264, k=544, bn=128, stages=3, acc_stages=2,
                                               epilogue="bias", out="f32"), M=77),
            Case("auto-e4m3xe5m2-M200", _mx("e4m3", "e5m2", n=1024, k=1024, auto=True), M=200),
            # the output re-quantized in the epilogue (heddle.ops.quantize: q e4m3, s per row and 128 columns)
            Case("e4m3-q128-bn256-N520-M333", _mx("e4m3", "e4m3", n=520, k=1056, bn=256, stages=4, acc_stages=1,
                                                  quant=("e4m3", 128)), M=333),
            # the bias through its own TMA producer role and ring (cache_after(bias, 'tma_load'))
            Case("e5m2xe4m3-bias-tma-N264-M77", _mx("e5m2", "e4m3", n=264, k=544, bn=128, stages=3, acc_stages=2,
                                                    epilogue="bias", tma="bias"), M=77)]


def _tmas100(make, **kw):
    """A tcgen05_defs schedule (build_tma_store, build_fp8, build_epi) with epilogue_store("tma")."""
    def fd(target):
        from support import tcgen05_defs
        f = getattr(tcgen05_defs, make)(**kw)
        f.matmul_tensor.epilogue_store("tma")
        return f
    return fd


@family("sm100_tma_store", "sm_100a", True, "tcgen05 epilogue warpgroup storing through 128-byte-swizzled shared "
        "memory by TMA (st.shared rows, fence.proxy.async, bar.sync 1, bulk groups; docs/blackwell.md)")
def _():
    return [Case("bf16-bn128-N264-M300", _tmas100("build_tma_store", stages=4, bn=128, bk=64, n=264, k=520), M=300),
            Case("bf16-bn256-acc1-N520-M77", _tmas100("build_tma_store", stages=3, acc_stages=1, bn=256, bk=64, n=520,
                                                      k=264), M=77),
            Case("f32-NT-bn64-N200-M200", _tmas100("build_tma_store", stages=4, bn=64, bk=32, n=200, k=136,
                                                   layout="NT", out="f32"), M=200),
            Case("e4m3-row-N264-M333", _tmas100("build_fp8", fmt_a="e4m3", fmt_b="e4m3", scales="row", stages=4,
                                                bn=128, bk=128, n=264, k=1040), M=333),
            Case("residual-ring-N200-M130", _tmas100("build_epi", operands=("bias", "res"), tma="res", bn=64, n=200,
                                                     k=136), M=130),
            # q of heddle.ops.quantize (e4m3, s per row and 128 columns) staged in chunks of 128 codes, s stored directly
            Case("e4m3-q128-bn256-N304-M333", lambda target: quant_defs.scheduled_sm100(
                n=304, k=1040, bn=256, bk=128, stages=4, store="tma"), M=333)]


def _nv(**kw):
    from support.mx_defs import build_nv
    return lambda target: build_nv(**kw)


@family("sm100_nvfp4", "sm_100a", True, "tcgen05.mma kind::mxf4nvf4.block_scale.scale_vec::4X: NVFP4 (e2m1x2 operands, "
        "nv16 ue4m3 scales per 16 of K, two scale chunks a k tile tcgen05.cp'd from the operand ring)")
def _():
    return [Case("bn256-N520-K1056-M333", _nv(n=520, k=1056, bn=256, stages=4, acc_stages=1), M=333),
            Case("bn128-f32-K544-M77", _nv(n=264, k=544, bn=128, stages=3, acc_stages=2, epilogue="bias", out="f32"),
                 M=77),
            Case("auto-M200", _nv(n=1024, k=1024, auto=True), M=200),
            # the output re-quantized in the epilogue (heddle.ops.quantize: q e4m3, s per row and 128 columns)
            Case("e4m3-q128-bn256-N520-M333", _nv(n=520, k=1056, bn=256, stages=4, acc_stages=1, quant=("e4m3", 128)),
                 M=333),
            # the bias through its own TMA producer role and ring (cache_after(bias, 'tma_load'))
            Case("bias-tma-N264-M77", _nv(n=264, k=544, bn=128, stages=3, acc_stages=2, epilogue="bias", tma="bias"),
                 M=77)]


def _mxf4(**kw):
    from support.mx_defs import build_mxf4
    return lambda target: build_mxf4(**kw)


@family("sm100_mxfp4", "sm_100a", True, "tcgen05.mma kind::mxf4.block_scale.scale_vec::2X: MXFP4 (e2m1x2 operands, "
        "mx32 e8m0 scales per 32 of K, one scale chunk a k tile tcgen05.cp'd from the operand ring, scale factor IDs "
        "0 and 2)")
def _():
    return [Case("bn256-N520-K1056-M333", _mxf4(n=520, k=1056, bn=256, stages=4, acc_stages=1), M=333),
            Case("bn128-f32-K544-M77", _mxf4(n=264, k=544, bn=128, stages=3, acc_stages=2, epilogue="bias",
                                             out="f32"), M=77),
            Case("auto-M200", _mxf4(n=1024, k=1024, auto=True), M=200),
            # the bias through its own TMA producer role and ring (cache_after(bias, 'tma_load'))
            Case("bias-tma-N264-M77", _mxf4(n=264, k=544, bn=128, stages=3, acc_stages=2, epilogue="bias",
                                            tma="bias"), M=77)]


def _amax100(n, fmt="e4m3", group=128, bn=128, **kw):
    return lambda target: quant_defs.scheduled_sm100(n=n, k=1040, bn=bn, bk=128, stages=4, fmt=fmt, group=group, **kw)


@family("sm100_fp8_amax", "sm_100a", True, "tcgen05 kind::f8f6f4 with the output quantized by a computed scale per "
        "row and 128 columns or per row (a per-thread amax over tcgen05.ld columns, docs/fp8.md)", pinned=False)
def _():
    return [Case("e4m3-g128-bn256-N300-M333", _amax100(300, bn=256), M=333),
            Case("e5m2-g128-N200-M77", _amax100(200, fmt="e5m2"), M=77),
            Case("e4m3-row-N120-M200", _amax100(120, group="row"), M=200),
            # the bias through its own TMA producer role and ring, read in both passes of each group
            Case("e4m3-g128-bias-tma-N200-M77", _amax100(200, tma="bias"), M=77)]


def _mxout(kind, store="direct", **kw):
    from support import mx_out_defs

    def make(target):
        fd = mx_out_defs.build(kind, **kw)
        if store == "tma":  # q staged into the swizzled slots and stored by TMA, the e8m0 codes direct
            fd.matmul_tensor.epilogue_store("tma")
        return fd
    return make


@family("sm100_mx_out", "sm_100a", True, "an MX-format output on the tcgen05 kernels (quantize group='mx32': q and "
        "e8m0 codes per 32 columns in torch's blocked layout, a per-thread amax of one tcgen05.ld, docs/fp8.md)")
def _():
    # ragged M (padding rows store code 0), N a multiple of 32 but not of the n tile (padding blocks), K several tiles
    return [Case("bf16-e4m3-N544-M333", _mxout("bf16", n=544, k=1040, bn=128, stages=4, acc_stages=2), M=333),
            Case("f8f6f4-e5m2-bn256-N288-M77", _mxout("f8f6f4", n=288, k=1040, fmt="e5m2", bn=256, stages=4), M=77),
            Case("mx32-e4m3-bn256-N544-M333", _mxout("mx32", n=544, k=1056, bn=256, stages=4), M=333),
            Case("nv16-e4m3-N160-M200", _mxout("nv16", n=160, k=1056, bn=128, stages=4, acc_stages=2), M=200),
            # the bias row / residual tile through its own TMA producer role and ring, read by the MX store
            Case("mx32-e4m3-bias-tma-N544-M333", _mxout("mx32", n=544, k=1056, bn=256, stages=4, tma="bias"), M=333),
            Case("bf16-e5m2-res-tma-N288-M77", _mxout("bf16", n=288, k=1040, fmt="e5m2", bn=128, stages=4, tma="res"),
                 M=77),
            # the TMA-store epilogue: two 128-column chunks a 256-wide tile, with and without a TMA-loaded bias
            Case("mx32-e4m3-tma-store-bn256-N544-M333", _mxout("mx32", "tma", n=544, k=1056, bn=256, stages=4), M=333),
            Case("bf16-e4m3-tma-store-bias-tma-N288-M77",
                 _mxout("bf16", "tma", n=288, k=1040, bn=128, stages=4, tma="bias"), M=77)]


@family("cp_async_auto", "any", False, "the automatic cp.async schedules (heddle.matmul's kernels without TMA)")
def _():
    def make(m, n, k, k_share="auto", epilogue="bias_gelu"):
        def mk(target):
            fd, _, _ = matmul_fusion(n=n, k=k, dtype="bf16", layout="NT", epilogue=epilogue)
            fd.auto_schedule(target, m, n, k, tma=False, sms=132, k_share=k_share)
            return fd
        return mk
    return [Case("gelu-M1000", make(1000, 1024, 1024), M=1000), Case("split-k-M64", make(64, 1024, 4096, "split_k"), M=64),
            Case("stream-k-M256", make(256, 1280, 4096, "stream_k"), M=256)]


# --- heddle.matmul per M bucket (the torch op; its own kernel choice, launch plans, second calls) ---------

def _matmul_case(M, n=1024, k=1024, epilogue="gelu", residual=False):
    def call(device, seed):
        import torch
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(M, k, generator=g).to(torch.bfloat16)
        w = (torch.randn(n, k, generator=g) * k ** -0.5).to(torch.bfloat16)
        bias = torch.randn(n, generator=g).to(torch.bfloat16)
        res = torch.randn(M, n, generator=g).to(torch.bfloat16) if residual else None
        ref = x.double() @ w.double().t() + bias.double()
        ref = torch.nn.functional.gelu(ref) if epilogue == "gelu" else torch.nn.functional.silu(ref)
        if residual:
            ref = ref + res.double()
        dev = lambda t: None if t is None else t.to(device)  # noqa: E731
        y = heddle.matmul(dev(x), dev(w), bias=dev(bias), activation=epilogue, residual=dev(res), trans_b=True)
        return y, ref.to(torch.bfloat16)
    return call


@family("matmul_buckets", "any", False, "heddle.matmul (torch op) per M bucket: <=64, <=128, <=256, larger")
def _():
    return [Case(f"gelu-M{m}", call=_matmul_case(m), M=m) for m in (1, 16, 64, 100, 128, 200, 256, 1000, 4096)] + \
           [Case("silu-residual-M300", call=_matmul_case(300, epilogue="silu", residual=True), M=300)]


# --- the grouped matmul (mixture of experts, docs/grouped.md): heddle.grouped_mm, mma.sync / TMA + wgmma ---

def _grouped_case(ends, n=264, k=200, trans_b=False, activation="gelu", per_expert=False, mma=None):
    """heddle.grouped_mm on the routing `ends` against float64; mma: the MMA the device's auto-scheduled
    kernel must use ("wgmma": the sm_90a warp-specialized kernel), checked on a GPU."""
    def call(device, seed):
        import torch
        from support.grouped_defs import reference
        g = torch.Generator().manual_seed(seed)
        E = len(ends)
        x = (torch.randn(ends[-1], k, generator=g) * 0.5).to(torch.bfloat16)
        w = (torch.randn(E, n, k, generator=g) * k ** -0.5).to(torch.bfloat16)  # [E, N, K]
        bias = torch.randn(*((E, n) if per_expert else (n,)), generator=g).to(torch.bfloat16)
        offs = torch.tensor(ends, dtype=torch.int32)
        rows = bias[torch.repeat_interleave(torch.arange(E), (offs - torch.cat([offs[:1] * 0, offs[:-1]])).long())] \
            if per_expert else bias  # each row's expert's bias row
        ref = reference(x, w, offs, trans_b=True, bias=rows, activation=activation)
        wk = w.transpose(-1, -2) if trans_b else w.transpose(-1, -2).contiguous()  # a view of [E, N, K] or [E, K, N]
        xd, wd = x.to(device), wk.to(device)
        y = heddle.grouped_mm(xd, wd, offs.to(device), bias=bias.to(device), activation=activation)
        if mma and device != "cpu":  # the kernel cached for this signature is the one grouped_mm ran
            from heddle.pytorch.grouped import grouped_kernel
            from heddle.core.kernel import _vec_for
            stored = wd.transpose(-1, -2) if trans_b else wd
            kern = grouped_kernel(heddle.runtime.target_for_device(), "bf16", k, n, trans_b, "bf16", per_expert,
                                  activation, "bf16", _vec_for(xd), _vec_for(stored), True, True)
            if kern.lowered.tile["mma"] != mma:
                raise AssertionError(f"heddle.grouped_mm ran {kern.name} ({kern.lowered.tile['mma']}), not {mma}")
        return y, ref.to(torch.bfloat16)
    return call


def _masked_case(counts, max_tokens=300, n=264, k=200):
    """heddle.grouped_mm_masked (decode layout): x [E, max_tokens, K], w a view of [E, N, K], a bias per expert,
    the counted rows checked against float64 (the padding rows, undefined, zeroed on both sides; that they are
    never written is the interpreter's check, tests/grouped/test_grouped_masked.py)."""
    def call(device, seed):
        import torch
        from support.grouped_defs import masked_reference
        g = torch.Generator().manual_seed(seed)
        E = len(counts)
        x = (torch.randn(E, max_tokens, k, generator=g) * 0.5).to(torch.bfloat16)
        w = (torch.randn(E, n, k, generator=g) * k ** -0.5).to(torch.bfloat16)
        bias = torch.randn(E, n, generator=g).to(torch.bfloat16)
        cnt = torch.tensor(counts, dtype=torch.int32)
        ref = masked_reference(x, w, cnt, trans_b=True, bias=bias.unsqueeze(1), activation="gelu")
        y = heddle.grouped_mm_masked(x.to(device), w.transpose(-1, -2).to(device), cnt.to(device), bias=bias.to(device),
                                     activation="gelu")
        pad = torch.isnan(ref)
        return torch.where(pad.to(y.device), 0.0, y), torch.where(pad, 0.0, ref).to(torch.bfloat16)
    return call


def _gated_case(ends, n=264, k=200):
    """heddle.grouped_mm_gated: silu(x @ W1_e) * (x @ W3_e) in one kernel on ragged groups, against float64."""
    def call(device, seed):
        import torch
        from support.grouped_defs import reference
        g = torch.Generator().manual_seed(seed)
        x = (torch.randn(ends[-1], k, generator=g) * 0.5).to(torch.bfloat16)
        w1, w3 = ((torch.randn(len(ends), n, k, generator=g) * k ** -0.5).to(torch.bfloat16) for _ in range(2))
        offs = torch.tensor(ends, dtype=torch.int32)
        ref = reference(x, w1, offs, trans_b=True, activation="silu") * reference(x, w3, offs, trans_b=True)
        y = heddle.grouped_mm_gated(x.to(device), w1.transpose(-1, -2).to(device), w3.transpose(-1, -2).to(device),
                                    offs.to(device), activation="silu")
        return y, ref.to(torch.bfloat16)
    return call


@family("grouped_cp_async", "any", False, "grouped matmul (MoE): the device walk over ragged expert groups, mma.sync")
def _():
    skewed = [0, 1, 300, 300, 301, 733, 740, 1000]  # empty and one-row groups, groups ending mid-tile
    return [Case("nn-skewed-E8", call=_grouped_case(skewed), M=1000),
            Case("nt-skewed-E8", call=_grouped_case(skewed, trans_b=True, activation="silu"), M=1000),
            Case("nt-E64-T129", call=_grouped_case([2 * e + (e % 3) for e in range(63)] + [129], trans_b=True), M=129),
            Case("nn-E8-bias-per-expert", call=_grouped_case(skewed, per_expert=True), M=1000),
            Case("masked-E8-Mt300", call=_masked_case([0, 1, 300, 77, 128, 129, 5, 400]), M=300),
            Case("gated-silu-skewed-E8", call=_gated_case(skewed), M=1000)]


@family("grouped_wgmma", "sm_90a", True, "grouped matmul (MoE): the device walk over ragged expert groups, "
        "warp-specialized TMA + wgmma", pinned=False)
def _():
    skewed = [0, 1, 300, 300, 301, 733, 740, 1000]  # empty and one-row groups, groups ending mid-tile
    hot = [0, 0, 0, 1, 2, 3, 4, 2048]                # one expert takes almost every token (16 tiles of 128 rows)
    return [Case("nn-skewed-E8", call=_grouped_case(skewed, mma="wgmma"), M=1000),
            Case("nt-skewed-E8", call=_grouped_case(skewed, trans_b=True, activation="silu", mma="wgmma"), M=1000),
            Case("nt-hot-expert-E8", call=_grouped_case(hot, trans_b=True, mma="wgmma"), M=2048),
            Case("nt-E64-T129", call=_grouped_case([2 * e + (e % 3) for e in range(63)] + [129], trans_b=True,
                                                   mma="wgmma"), M=129),
            Case("nn-E8-bias-per-expert", call=_grouped_case(skewed, per_expert=True, mma="wgmma"), M=1000)]


def _grouped_tcgen05_case(ends, n=264, k=200, trans_b=False, activation="gelu"):
    """The sm_100a TMA + tcgen05 grouped kernel (auto schedule), built for sm_100a whatever heddle.grouped_mm
    would pick: on the GPU its numbers against float64; in the dry run (CPU) its launch prepared (host
    checks, tensor maps by the interpreter's encoder) and the reference returned, its numbers being
    tests/grouped/test_grouped_tcgen05.py's (the interpreter)."""
    def call(device, seed):
        import torch
        from heddle import _C
        from heddle.reference import evaluate
        from support.grouped_defs import grouped_fusion, reference
        g = torch.Generator().manual_seed(seed)
        E = len(ends)
        x = (torch.randn(ends[-1], k, generator=g) * 0.5).to(torch.bfloat16)
        w = (torch.randn(E, n, k, generator=g) * k ** -0.5).to(torch.bfloat16)  # [E, N, K]
        bias = torch.randn(n, generator=g).to(torch.bfloat16)
        offs = torch.tensor(ends, dtype=torch.int32)
        ref = reference(x, w, offs, trans_b=True, bias=bias if activation == "gelu" else None, activation=activation)
        wk = w if trans_b else w.transpose(-1, -2).contiguous()  # [E, N, K] or [E, K, N]
        fd, _, _ = grouped_fusion(n=n, k=k, trans_b=trans_b, epilogue="bias_gelu" if activation == "gelu" else "silu")
        fd.auto_schedule("sm_100a", -1, n, k)
        kern = heddle.Kernel.build(fd, "sm_100a", rtc=device != "cpu")
        assert kern.lowered.tile["mma"] == "tcgen05" and kern.lowered.tile["grouped"], kern.name
        ts = [x, wk] + ([bias] if activation == "gelu" else []) + [offs]
        if device == "cpu":
            kern.prepare(ts, tensor_map_encoder=_C.interp.encode_tensor_map_tiled)
            return evaluate(fd, ts), ref.to(torch.bfloat16)
        return kern(*[t.to(device) for t in ts]), ref.to(torch.bfloat16)
    return call


@family("grouped_tcgen05", "sm_100a", True, "grouped matmul (MoE) on sm_100a: TMA + tcgen05, the device walk",
        pinned=False)
def _():
    skewed = [0, 1, 300, 300, 301, 733, 740, 1000]  # empty and one-row groups, groups ending mid-tile
    return [Case("nn-skewed-E8", call=_grouped_tcgen05_case(skewed), M=1000),
            Case("nt-skewed-E8-silu", call=_grouped_tcgen05_case(skewed, trans_b=True, activation="silu"), M=1000),
            Case("nt-E64-T129", call=_grouped_tcgen05_case([2 * e + (e % 3) for e in range(63)] + [129], trans_b=True),
                 M=129)]


# --- the launch path itself (runtime checks that only a real driver exercises) -------------------------

def _ok(device):
    import torch
    one = torch.ones(1)
    return one, one  # a check case passes by not raising; compare() sees equal tensors


def _foreign_target_refused(device, seed):
    """A kernel built for another target than the device's is refused before the driver sees it, with an
    InputError naming both (an sm_80 cubin does not load on sm_90; an sm_90a one only on 9.0)."""
    if device == "cpu":
        return _ok(device)
    import torch
    target = heddle.runtime.target_for_device()
    other = "sm_80" if target != "sm_80" else "sm_90a"
    k = heddle.Kernel.build(_cp("NN", "bf16", 3, 1, n=128, k=128)(other), other)
    x = torch.randn(64, 128, device=device).to(torch.bfloat16)
    w = torch.randn(128, 128, device=device).to(torch.bfloat16)
    try:
        k(x, w, torch.randn(128, device=device).to(torch.bfloat16))
    except heddle.InputError as e:
        if other not in str(e):
            raise AssertionError(f"the refusal does not name the kernel's target {other}: {e}")
        return _ok(device)
    raise AssertionError(f"a {other} kernel launched on a {target} device without an error")


def _param_table_matches(device, seed):
    """The driver's parameter table of a loaded kernel (cuFuncGetParamInfo) has as many entries as the
    arguments heddle packs for it (the per-launch check compares sizes too)."""
    import torch
    target = "sm_90a" if device == "cpu" else heddle.runtime.target_for_device()
    fd = FAMILIES["sm90_coop"].cases[1].make(target) if target == "sm_90a" else _cp("NN", "bf16", 3, 1)(target)
    from support.wgmma_defs import inputs
    ts = [t.to(device) for t in inputs(fd, 77, seed=seed)]
    k = heddle.Kernel.build(fd, target, rtc=device != "cpu")
    if device == "cpu":
        return _ok(device)
    k(*ts)
    torch.cuda.synchronize()
    sizes = k._loaded.param_sizes(torch.device(device).index or 0)
    _, _, args = k.prepare(ts)
    if sizes is not None and len(sizes) != len(args):
        raise AssertionError(f"driver table has {len(sizes)} parameters, heddle packs {len(args)}")
    return _ok(device)


def _sync_launch_runs(device, seed):
    """HEDDLE_SYNC_LAUNCH=1 (every launch waits for its stream, naming a faulting kernel) on a correct kernel:
    a process of its own (the variable is read once per process)."""
    if device == "cpu":
        return _ok(device)
    import subprocess
    env = dict(os.environ, HEDDLE_SYNC_LAUNCH="1")
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, os.path.join(here, "family_run.py"), "--families", "cp_async_split_k",
                        "--first-only", "--stage", "sync_launch"], env=env, capture_output=True, text=True,
                       timeout=120)
    if r.returncode != 0 or '"status": "pass"' not in r.stdout:
        raise AssertionError(f"rc {r.returncode}: {(r.stdout + r.stderr)[-1500:]}")
    return _ok(device)


@family("launch_checks", "any", False, "the launch path's own checks on a real driver")
def _():
    return [Case("foreign-target-refused", call=_foreign_target_refused, M=64),
            Case("param-table", call=_param_table_matches, M=77),
            Case("sync-launch", call=_sync_launch_runs, M=300)]


def families_for(target: str, only=None) -> List[Family]:
    """The families a device with `target` runs (all of them on sm_90a), optionally only the named ones."""
    want = set(only) if only else None
    if want:
        unknown = want - set(FAMILIES)
        if unknown:
            raise SystemExit(f"unknown families {sorted(unknown)}; known: {', '.join(FAMILIES)}")
    return [f for f in FAMILIES.values()
            if (want is None or f.name in want) and (f.needs == "any" or f.needs == target)]
