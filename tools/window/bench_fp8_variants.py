"""Where the block-scaled FP8 kernel's time goes (the bench stage's suite `fp8_block_variants`); and the quantizing
epilogue's two stores (quant_store_impls, timed inside the suite `fp8_fused`).

The third window (2026-11-28, H200) timed heddle.scaled_mm with DeepGEMM's 1x128 x 128x128 scales at about a
quarter of torch's blockwise _scaled_mm's rate (4096x7168x2048: 449 us against 113 us), while the per-tensor FP8
kernel matched cuBLASLt. The kernel differs from the per-tensor one in two ways: a 128 x 64 tile (each MMA
thread holds two accumulator sets, schedule/block_scales.cpp) and a promotion after every 128 of K (a
wgmma wait, then scale and add). These variants, on one problem and one set of inputs, separate the two:
the block kernel at a few ring depths and k tiles, and the same product without scales at the block
kernel's 128 x 64 tile, at 128 x 128, and at the automatic schedule. If the unscaled 128 x 64 kernel is as
slow as the block one, the tile is the cost; if it is fast, the promotion is.

The fourth window's question (issue 32): the block kernel on the 128 x 128 tile (block_bn128_*; compiles
without spills since promote() loads scale_b once per block, docs/fp8.md "Block scales and promotion"). The
third window timed the unscaled product at 200 us on 128 x 64 and 145 us on 128 x 128; if the block kernel
gains as much, the automatic schedule should take bn = 128. (It did: 213-219 us against 245-254 us.) The fifth
window's question: promote() now issues the next interval's scale_b loads before the wgmma they overlap
(heddle_sm90.cuh `sb_next`); the remaining 70 us over the unscaled 128 x 128 product was about one L2 latency per
k tile. The same block_bn128_* rows say whether that closed it.

The FP8 decode question (issue 32, suite `fp8_decode_variants`): at M = 16, N = K = 4096 per tensor the third window
timed heddle.scaled_mm at 13.4 us against cuBLASLt's 7.24 us (0.54x), while reading the 16 MiB weight once takes
~4 us at the measured copy bandwidth. The automatic schedule is a 64 x 128 x 128 tile with split_k(4) (128 CTAs of 8
k tiles each) on the non-specialized TMA + wgmma kernel. decode_variants times the neighbours one knob at a time --
the split count, a narrower n tile (more CTAs, fewer bytes each), the ring depth, stream-K, no k sharing -- beside
cuBLASLt in the same run, so one window says which knob the cost model (schedule/k_share.cpp) should move.

Every block variant is validated on a check set whose scales are all 1 (so that the unscaled kernels compute the
same product; the block kernel's scale handling is validated by the fp8_block suite and the sm90_fp8_block
family), then timed on the rotated sets with real scales (the unscaled kernels ignore them).
"""
from __future__ import annotations

import os
import sys

import torch

import heddle
from heddle import bench

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from support.block_scale_defs import block_scaled  # noqa: E402
from support.quant_defs import scheduled as quant_scheduled  # noqa: E402
from support.wgmma_defs import roles_for, schedule_sm90  # noqa: E402


def _unscaled(n, k, bn=None, auto_m=None, target="sm_90a", sms=132):
    fd = heddle.Fusion()
    a, b = fd.input("a", "e4m3", ["M", k]), fd.input("b", "e4m3", [n, k])
    fd.output(fd.matmul(a, b, trans_b=True).to("bf16"))
    if auto_m:
        fd.auto_schedule(target, auto_m, n, k, sms=sms)
    else:
        schedule_sm90(fd, a, b, bm=128, bn=bn, bk=128, wgs=2, stages=4, prefetch=1, roles=roles_for("coop"))
    return fd


def variants(m, n, k, target, sms):
    """(label, fusion maker, takes scales) in the order they are timed."""
    blk = dict(N=n, K=k, dtype="e4m3", bias=False, out="bf16")
    return [
        ("block_bk128_s4", lambda: block_scaled(**blk, bk=128, bn=64, stages=4, prefetch=1), True),
        ("block_bk128_s6", lambda: block_scaled(**blk, bk=128, bn=64, stages=6, prefetch=2), True),
        ("block_bk64_s8", lambda: block_scaled(**blk, bk=64, bn=64, stages=8, prefetch=3), True),
        # the 128 x 128 tile (64 + 64 accumulators per MMA thread, no spills with NVRTC 13): the candidate for the
        # automatic schedule (wgmma_auto_schedule.cpp keeps bn = 64 until this row beats block_bk128_s4)
        ("block_bn128_bk128_s4", lambda: block_scaled(**blk, bk=128, bn=128, stages=4, prefetch=1), True),
        ("block_bn128_bk128_s6", lambda: block_scaled(**blk, bk=128, bn=128, stages=6, prefetch=2), True),
        ("unscaled_128x64", lambda: _unscaled(n, k, bn=64), False),
        ("unscaled_128x128", lambda: _unscaled(n, k, bn=128), False),
        ("unscaled_auto", lambda: _unscaled(n, k, auto_m=m, target=target, sms=sms), False),
    ]


def fp8_block_variant_case(run, m, n, k, block_sets, sms):
    """block_sets(run, m, n, k) -> (sets, check) in bench_quick's fp8_block layout: a [M, K], b [K, N]
    column-major, scale_a [M, ceil(K/128)] M-major, scale_b [ceil(K/128), ceil(N/128)]."""
    target = "sm_90a" if run.dry else heddle.runtime.target_for_device()
    sets, check = block_sets(run, m, n, k)
    check = [check[0], check[1], torch.ones_like(check[2]).t().contiguous().t(), torch.ones_like(check[3])]
    ref = check[0].float() @ check[1].float()
    rec = {"suite": "fp8_block_variants", "case": f"fp8_block_variants-{m}x{n}x{k}", "dtype": "e4m3", "B": 1,
           "M": m, "N": n, "K": k, "layout": "NT", "epilogue": None, "scaling": "block128"}
    impls = {"scaled_mm": lambda a, b, sa, sb: heddle.scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)}
    info = {}
    for label, make, scaled in variants(m, n, k, target, sms):
        try:
            fd = make()
            kern = heddle.Kernel.build(fd, target, rtc=not run.dry)
            info[label] = {"config": kern.name, "registers": kern.stats.registers if kern.binary else None,
                           "smem": kern.lowered.smem_bytes}
            if run.dry:
                impls[label] = (lambda f, s: (lambda a, b, sa, sb: heddle.reference.evaluate(
                    f, [a, b.t(), sa, sb.t()] if s else [a, b.t()], torch.float32)))(fd, scaled)
            elif scaled:
                impls[label] = (lambda kk: (lambda a, b, sa, sb: kk(a, b.t(), sa, sb.t())))(kern)
            else:
                impls[label] = (lambda kk: (lambda a, b, sa, sb: kk(a, b.t())))(kern)
        except Exception as e:  # noqa: BLE001 - the variant does not build: recorded, the others still run
            run.write({**rec, "impl": label, "status": "error", "reason": f"{type(e).__name__}: {str(e)[:600]}"})
    run.measure(rec, impls, sets, check, ref, bench.matmul_flops(m, n, k), extra=info)


def quant_store_impls(run, n, k):
    """The quantizing epilogue (bias + GELU + the e4m3 1x128 quantize, heddle.scaled_mm's out_scale="1x128") on one
    hand schedule -- cooperative 128 x 128 x 128, 4 stages -- with q stored directly and through the TMA-store
    epilogue (docs/fp8.md "Computed output scales"): the pair says whether the TMA store is worth taking for 8-bit
    outputs (auto_schedule keeps the direct store until it is). impls in fp8_quant_case's argument order
    (a, b [K, N] column-major, scale_a [M, 1], scale_b [1, N], bias), each returning (q, s); info per impl."""
    target = "sm_90a" if run.dry else heddle.runtime.target_for_device()
    impls, info = {}, {}
    for store in ("direct", "tma"):
        label = f"heddle_coop128_{store}"
        try:
            fd = quant_scheduled("coop", n=n, k=k, store=store)
            kern = heddle.Kernel.build(fd, target, rtc=not run.dry)
        except Exception as e:  # noqa: BLE001 - the variant does not build: recorded, the others still run
            info[label] = {"status": "error", "reason": f"{type(e).__name__}: {str(e)[:600]}"}
            continue
        info[label] = {"config": kern.name, "registers": kern.stats.registers if kern.binary else None,
                       "smem": kern.lowered.smem_bytes}
        if run.dry:
            impls[label] = (lambda f: (lambda a, b, sa, sb, bias: tuple(heddle.reference.evaluate(
                f, [a, b.t(), sa, sb, bias], torch.float32))))(fd)
        else:
            impls[label] = (lambda kk: (lambda a, b, sa, sb, bias: kk(a, b.t(), sa, sb, bias)))(kern)
    return impls, info


_ROLES = {"load": {"warps": 1, "registers": 40}, "mma": {"warpgroups": 1, "registers": 232}}


def _decode_fusion(n, k, target, m, sms, bn=None, split=0, stream=0, stages=4, prefetch=2):
    """e4m3 x e4m3 with per-tensor f32 scales -> bf16, heddle.scaled_mm's per-tensor fusion: the automatic
    schedule (bn None), or the non-specialized TMA + wgmma kernel on a 64 x bn x 128 tile with `stages` and
    split_k(split) / stream_k(stream) (neither: one CTA per tile); stream-K on the warp-specialized persistent
    kernel (a load warp and one MMA warpgroup), where it runs (split-K runs on the kernel without roles)."""
    from support.wgmma_defs import schedule_sm90
    fd = heddle.Fusion()
    a, b = fd.input("a", "e4m3", ["M", k]), fd.input("b", "e4m3", [n, k])
    sa, sb = fd.input("scale_a", "f32", [1]), fd.input("scale_b", "f32", [1])
    fd.output((fd.matmul(a, b, trans_b=True) * sa * sb).to("bf16"))
    if bn is None:
        fd.auto_schedule(target, m, n, k, sms=sms)
        return fd
    mm = schedule_sm90(fd, a, b, bm=64, bn=bn, bk=128, wgs=1, stages=stages, prefetch=prefetch,
                       roles=_ROLES if stream else None)
    if split:
        mm.split_k(split)
    if stream:
        mm.stream_k(stream)
    return fd


def decode_variants(sms):
    """(label, fusion-maker keywords) in the order they are timed, one knob each (the automatic schedule is
    heddle.scaled_mm's own call, impl `heddle`)."""
    return [("64x128_sk4", dict(bn=128, split=4)), ("64x128_sk8", dict(bn=128, split=8)),
            ("64x128_sk2", dict(bn=128, split=2)), ("64x64_sk4", dict(bn=64, split=4)),
            ("64x64_sk2", dict(bn=64, split=2)), ("64x128_s6_sk4", dict(bn=128, split=4, stages=6, prefetch=4)),
            ("64x128_ws_streamk", dict(bn=128, stream=sms)),
            ("64x64_ws_streamk", dict(bn=64, stream=sms)), ("64x128_none", dict(bn=128)),
            ("64x64_none", dict(bn=64))]


def fp8_decode_variant_case(run, m, n, k, fp8_sets, sms):
    """fp8_sets(run, m, n, k, "tensor") -> (sets, check) in bench_quick's fp8 layout (a [M, K], b [K, N]
    column-major, scale_a [1], scale_b [1]); cuBLASLt's _scaled_mm timed in the same run."""
    target = "sm_90a" if run.dry else heddle.runtime.target_for_device()
    sets, check = fp8_sets(run, m, n, k, "tensor")
    a, b, sa, sb = check
    ref = (a.float() * sa) @ (b.float() * sb)
    rec = {"suite": "fp8_decode_variants", "case": f"fp8_decode_variants-{m}x{n}x{k}-tensor", "dtype": "e4m3",
           "B": 1, "M": m, "N": n, "K": k, "layout": "NT", "epilogue": None, "scaling": "tensor"}
    impls = {"heddle": lambda a, b, sa, sb: heddle.scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16),
             "cublaslt": lambda a, b, sa, sb: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)}
    if run.dry:  # no device: torch's CPU op stands in for the peer
        impls["cublaslt"] = lambda a, b, sa, sb: ((a.float() * sa) @ (b.float() * sb)).to(torch.bfloat16)
    info = {}
    for label, kw in decode_variants(sms):
        try:
            fd = _decode_fusion(n, k, target, m, sms, **kw)
            kern = heddle.Kernel.build(fd, target, rtc=not run.dry)
            info["heddle_" + label] = {"config": kern.name, "smem": kern.lowered.smem_bytes,
                                       "registers": kern.stats.registers if kern.binary else None}
            if run.dry:
                impls["heddle_" + label] = (lambda f: (lambda a, b, sa, sb: heddle.reference.evaluate(
                    f, [a, b.t(), sa, sb], torch.float32)))(fd)
            else:
                impls["heddle_" + label] = (lambda kk: (lambda a, b, sa, sb: kk(a, b.t(), sa, sb)))(kern)
        except Exception as e:  # noqa: BLE001 - the variant does not build: recorded, the others still run
            run.write({**rec, "impl": "heddle_" + label, "status": "error",
                       "reason": f"{type(e).__name__}: {str(e)[:600]}"})
    run.measure(rec, impls, sets, check, ref, bench.matmul_flops(m, n, k), extra=info)
