"""Runs kernel families (tools/window/families.py) in this process and writes one JSON line per case.

    python3 tools/window/family_run.py --families sm90_coop,cp_async --mode gpu --results r.jsonl
    python3 tools/window/family_run.py --families all --mode dry --interpret cp_async,sm90_coop

gpu: each case is compiled for the device's target, run on fresh random inputs with its outputs poisoned
  (NaN) first, compared with the float64 reference (heddle.reference.evaluate), then run a second time on
  new inputs through the launch plan of the first call (stale state such as a grid flag left set shows up
  there). A sticky CUDA error (an illegal address, a trap) ends the process: the remaining cases are
  recorded as not run, and the window runs every family in a process of its own so that one fault stays in
  its family.
dry: no GPU. Every case is lowered and its launch prepared on CPU tensors (the same host checks, tensor maps
  encoded by the interpreter's encoder), the first case of each family compiled with NVRTC (no spills), and
  the families named by --interpret run as printed by heddle.interpret (numbers against float64).
--first-only: only the first case of each family (the sanitizer stage runs that under compute-sanitizer).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import heddle  # noqa: E402
from families import FAMILIES, families_for  # noqa: E402
from support.wgmma_defs import inputs  # noqa: E402  (tests/ is on the path through families)
from heddle.reference import evaluate  # noqa: E402

# ||out - ref|| / ||ref|| and the elementwise bound |out - ref| <= atol * max|ref| + rtol * |ref|, per dtype
TOL = {torch.bfloat16: (1e-2, 1e-2, 2e-2), torch.float16: (5e-3, 5e-3, 1e-2), torch.float32: (1e-4, 1e-4, 1e-3),
       # 8-bit outputs (sm90_fp8): the f32 result may round to the neighbour of the float64 one, one step of
       # 2^-3 (e4m3) / 2^-2 (e5m2) relative
       torch.float8_e4m3fn: (5e-2, 1e-2, 0.13), torch.float8_e5m2: (1e-1, 1e-2, 0.26),
       # an MX-format output's e8m0 scale (sm100_mx_out): its codes exactly (docs/fp8.md "MX formats")
       torch.float8_e8m0fnu: (0.0, 0.0, 0.0)}
# f32 outputs of a kernel with 8-bit operands: Hopper's FP8 wgmma accumulates with fewer mantissa bits than
# f32 (DeepGEMM's README: "imprecise FP8 tensor core accumulation"; FlashAttention-3's GmmaPromotionHelper:
# "FP8 tensor cores do not use full FP32 accumulators"), which the interpreter does not model. Seen on the
# H200, 2026-11-28: sm90_fp8_amax's computed scales (amax / 448, f32) 1.5e-3 relative from float64 at K = 1040
# with no promotion. The bf16 / 8-bit outputs' own tolerances are wider than this already.
TOL_F32_FP8_ACCUM = (2e-3, 2e-3, 5e-3)
FP8_OPERANDS = ("e4m3", "e5m2")


def on_device(t, device):
    """A copy of t on `device` with t's own strides. `.to()` / `.cuda()` keep the strides of a dense tensor only:
    a padded one (heddle.tma.m_major_scales: scale_a M-major with M rounded up to 4) comes back dense with
    other strides, which its TMA map refuses (the third window's sm90_fp8_block cases at M = 77 and 130)."""
    out = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=device)
    out.copy_(t)
    return out


def compare(out, ref, fp8_accum=False) -> dict:
    """Relative error, non-finite and out-of-bound element counts of out against ref (tuples: each output).
    fp8_accum: the kernel's operands are 8-bit (TOL_F32_FP8_ACCUM for its f32 outputs)."""
    outs = out if isinstance(out, tuple) else (out,)
    refs = ref if isinstance(ref, tuple) else (ref,)
    if len(outs) != len(refs):
        return {"ok": False, "why": f"{len(outs)} outputs, the reference has {len(refs)}"}
    res = {"ok": True, "rel_err": [], "bad": [], "nonfinite": []}
    for o, r in zip(outs, refs):
        if tuple(o.shape) != tuple(r.shape):
            return {"ok": False, "why": f"output shape {tuple(o.shape)}, reference {tuple(r.shape)}"}
        norm_tol, atol, rtol = (TOL_F32_FP8_ACCUM if fp8_accum and o.dtype == torch.float32 else
                                TOL.get(o.dtype, TOL[torch.float32]))
        od, rd = o.detach().double().cpu(), r.detach().double().cpu()
        nonfinite = int((~torch.isfinite(od)).sum())
        diff = (od - rd).abs()
        rel = float(diff.nan_to_num(float("inf")).norm() / rd.norm().clamp_min(1e-30))
        bound = atol * float(rd.abs().max()) + rtol * rd.abs()
        bad = int((diff.nan_to_num(float("inf")) > bound).sum())
        res["rel_err"].append(rel)
        res["bad"].append(bad)
        res["nonfinite"].append(nonfinite)
        if nonfinite or bad or not rel <= norm_tol:
            res["ok"] = False
            if bad:
                idx = (diff.nan_to_num(float("inf")) > bound).nonzero()[0].tolist()
                res.setdefault("first_bad", []).append({"index": idx, "got": float(od[tuple(idx)]),
                                                        "want": float(rd[tuple(idx)])})
    return res


def poison(refs) -> None:
    """NaN-filled blocks of each output's size, freed at once: the caching allocator hands them to the
    outputs the kernel allocates next, so an element it never writes stays NaN."""
    refs = refs if isinstance(refs, tuple) else (refs,)
    blocks = [torch.full((max(1, r.numel() * r.element_size() // 4),), float("nan"), device="cuda") for r in refs]
    del blocks


def sticky() -> bool:
    try:
        torch.cuda.synchronize()
        torch.empty(1, device="cuda").fill_(1)
        torch.cuda.synchronize()
        return False
    except Exception:  # noqa: BLE001 - any failure here means the context is gone
        return True


def kernel_info(k) -> dict:
    low = k.lowered
    return {"kernel": k.name, "registers": k.stats.registers if k.binary else None,
            "spill_bytes": (k.stats.spill_stores + k.stats.spill_loads) if k.binary else None,
            "smem": low.smem_bytes, "threads": low.threads, "cluster": low.cluster}


def run_fusion_case(fam, case, target, mode, interpret_it, first) -> dict:
    rec = {}
    t0 = time.time()
    fd = case.make(target)
    rtc = mode == "gpu" or first
    # the window's debug builds (bounded waits, lineinfo) check correctness, not speed: a few bytes of spills
    # there are accepted and recorded (the ping-pong amax kernel spills 4 bytes with the report call, none
    # without); release builds still refuse spills (tests/codegen, the bench stage)
    debug = "bounded_waits" in os.environ.get("HEDDLE_DEBUG", "")
    k = heddle.Kernel.build(fd, target, rtc=rtc, allow_spills=debug)
    rec["compile_s"] = round(time.time() - t0, 3)
    rec.update(kernel_info(k))
    shape = {t.name: [case.M if s == "M" else case.batch if s == "B" else s for s in t.shape] for t in fd.inputs}
    rec["shapes"] = shape
    ts = inputs(fd, case.M, seed=1, batch=case.batch)
    ref = evaluate(fd, ts)
    fp8 = any(t.dtype in FP8_OPERANDS for t in fd.inputs)
    if mode == "dry":
        from heddle import _C
        ts = [on_device(t, "cpu") for t in ts]  # the copy a GPU run makes, so its layouts are checked here
        k.prepare(ts, tensor_map_encoder=_C.interp.encode_tensor_map_tiled, sms=case.sms or 4)
        rec["prepared"] = True
        if interpret_it:
            t1 = time.time()
            r = heddle.interpret(k, *ts, sms=case.sms or 4)
            rec["interpret_s"] = round(time.time() - t1, 2)
            rec["ok"] = bool(r.ok)
            if not r.ok:
                rec["why"] = r.report()[-2000:]
            rec.update(compare(r.output, ref, fp8) if r.output is not None else {})
            rec["ok"] = rec["ok"] and bool(r.ok)
        else:
            rec["ok"] = True
        return rec
    def launch(seed):
        ts_, ref_ = (ts, ref) if seed == 1 else (lambda t: (t, evaluate(fd, t)))(
            inputs(fd, case.M, seed=seed, batch=case.batch))
        dev = [on_device(t, "cuda") for t in ts_]
        poison(ref_)
        out = k(*dev)
        torch.cuda.synchronize()
        return out, ref_
    return two_runs(rec, launch, fp8)


def two_runs(rec, launch, fp8=False) -> dict:
    """launch(seed) -> (output(s), reference(s)), timed and compared for seeds 1 and 2 (the second call goes
    through the first one's launch plan); stops at the first wrong run."""
    for run, seed in (("first", 1), ("second", 2)):
        t1 = time.time()
        out, ref = launch(seed)
        rec[f"{run}_call_ms"] = round((time.time() - t1) * 1e3, 3)
        rec[run] = compare(out, ref, fp8)
        if not rec[run]["ok"]:
            rec["ok"] = False
            return rec
    rec["ok"] = True
    return rec


def run_call_case(case, mode) -> dict:
    device = "cuda" if mode == "gpu" else "cpu"
    if mode == "gpu":
        junk = [torch.full((1 << 24,), float("nan"), device="cuda"), torch.full((1 << 18,), float("nan"), device="cuda")]
        del junk

    def launch(seed):
        out, ref = case.call(device, seed)
        if mode == "gpu":
            torch.cuda.synchronize()
        return out, ref
    return two_runs({}, launch)


def emit(rec, path) -> None:
    """One case's record: printed (the process log) and appended to `path` as it ends."""
    line = json.dumps(rec, default=str)
    print(line, flush=True)
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--families", default="all", help="comma-separated family names, or 'all'")
    ap.add_argument("--mode", choices=("gpu", "dry"), default="gpu")
    ap.add_argument("--stage", default="families", help="the stage name written into each record")
    ap.add_argument("--first-only", action="store_true", help="only the first case of each family")
    ap.add_argument("--interpret", default="", help="dry: families to run through heddle.interpret ('all': every one)")
    ap.add_argument("--results", default="", help="append one JSON line per case to this file")
    ap.add_argument("--target", default="", help="override the target (default: the device's; dry: sm_90a)")
    args = ap.parse_args(argv)
    only = None if args.families == "all" else [f for f in args.families.split(",") if f]
    if args.mode == "gpu":
        if not torch.cuda.is_available():
            print("family_run: no CUDA device visible to torch", file=sys.stderr)
            return 2
        target = args.target or heddle.runtime.target_for_device()
    else:
        target = args.target or "sm_90a"
    fams = families_for(target, only) if args.mode == "gpu" else [FAMILIES[n] for n in (only or FAMILIES)]
    interp = set(FAMILIES) if args.interpret == "all" else set(f for f in args.interpret.split(",") if f)
    failures = 0
    for fam in fams:
        cases = fam.cases[:1] if args.first_only else fam.cases
        for i, case in enumerate(cases):
            ctarget = target if args.mode == "gpu" else (fam.needs if fam.needs != "any" else "sm_80")
            rec = {"stage": args.stage, "family": fam.name, "case": case.label, "target": ctarget, "M": case.M}
            print(f"family_run: start {fam.name}/{case.label}", flush=True)
            t0 = time.time()
            try:
                if case.call is not None:
                    rec.update(run_call_case(case, args.mode))
                else:
                    rec.update(run_fusion_case(fam, case, ctarget, args.mode, fam.name in interp and i == 0, i == 0))
                rec["status"] = "pass" if rec.get("ok") else "wrong"
            except Exception as e:  # noqa: BLE001 - recorded with its traceback
                rec.update(status="error", error=f"{type(e).__name__}: {e}"[:3000],
                           traceback=traceback.format_exc()[-3000:])
            rec["wall_s"] = round(time.time() - t0, 3)
            failures += rec["status"] != "pass"
            emit(rec, args.results)
            if rec["status"] == "error" and args.mode == "gpu" and sticky():
                for later in cases[i + 1:]:
                    emit({"stage": args.stage, "family": fam.name, "case": later.label, "target": ctarget,
                          "status": "not_run", "why": f"sticky CUDA error after {case.label}"}, args.results)
                print(f"family_run: sticky CUDA error in {fam.name}/{case.label}; stopping", file=sys.stderr)
                return 3
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
