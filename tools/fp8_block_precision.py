"""The precision table of docs/fp8.md "Block scales and promotion": the block-scaled kernel's printed source run
by the CPU interpreter (heddle.interpret) on long K, its f32 output against float64, beside two f32 computations
of the same sum done by torch on the CPU: the blocks promoted one by one (what the kernel does) and one f32
matmul of the operands with their scales applied first (no promotion at all).

    PYTHONPATH=python:tests python3 tools/fp8_block_precision.py [--k 2048,4096] [--m 130] [--n 136] [--dtype e4m3]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))


import heddle  # noqa: E402
from heddle.core.reference import block_scaled_matmul  # noqa: E402
from heddle.interpret import interpret  # noqa: E402
from support.block_scale_defs import block_scaled, block_scaled_inputs  # noqa: E402


def errors(got, want):
    """(max |got - want| / max |want|, mean |got - want| / mean |want|)."""
    d = (got.double() - want).abs()
    return float(d.max() / want.abs().max()), float(d.mean() / want.abs().mean())


def row(M, N, K, promotion, dtype="bf16", seed=0):
    bk = 128 if dtype in ("e4m3", "e5m2") else 64
    fd = block_scaled(N=N, K=K, bias=False, out="f32", promotion=promotion, dtype=dtype, bk=bk)
    a, b, sa, sb = block_scaled_inputs(fd, M, seed=seed)
    want = block_scaled_matmul(a.double(), b.double().t(), sa.double(), sb.double())
    t0 = time.time()
    r = interpret(heddle.Kernel.build(fd, "sm_90a", rtc=False), a, b, sa, sb, sms=4)
    secs = time.time() - t0
    if not r.ok:
        raise SystemExit(r.report())
    promoted = block_scaled_matmul(a.float(), b.float().t(), sa, sb, promotion=promotion or 128)
    # no promotion: one f32 accumulation over all of K, the scales applied to the operands beforehand
    sa_full = sa.repeat_interleave(128, dim=1)[:, :K]
    sb_full = sb.repeat_interleave(128, dim=0)[:N].repeat_interleave(128, dim=1)[:, :K]
    flat = (a.float() * sa_full) @ (b.float() * sb_full).t()
    return (K, promotion or 128, errors(r.output, want), errors(promoted, want), errors(flat, want), secs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", default="2048,4096")
    ap.add_argument("--m", type=int, default=130)
    ap.add_argument("--n", type=int, default=136)
    ap.add_argument("--promotion", default="128,64")
    ap.add_argument("--dtype", default="bf16", help="operands: bf16, e4m3 or e5m2")
    args = ap.parse_args()
    print(f"{args.dtype} operands, M = {args.m}, N = {args.n}; relative error vs float64: max |err| / max |ref| (mean |err| / mean |ref|)")
    print("| K | promotion | heddle kernel (interpreter) | torch f32, promoted per block | torch f32, one matmul | "
          "interpreter s |")
    print("|---|---|---|---|---|---|")
    for k in (int(x) for x in args.k.split(",")):
        for p in (int(x) for x in args.promotion.split(",")):
            K, P, h, pr, fl, secs = row(args.m, args.n, k, p, args.dtype)
            f = lambda e: f"{e[0]:.2e} ({e[1]:.2e})"  # noqa: E731
            print(f"| {K} | {P} | {f(h)} | {f(pr)} | {f(fl)} | {secs:.0f} |", flush=True)


if __name__ == "__main__":
    main()
