"""Regenerate the performance report from benchmark JSON.

    python benchmarks/report.py                      # benchmarks/out/*.json, else docs/data/*.json
    python benchmarks/report.py --gpu run/gpu.json --compile run/compile.json
    python benchmarks/report.py --window OUT/bench.jsonl      # a GPU window's benchmark stage (docs/gpu-window.md)

Writes the generated parts of docs/perf.md (between `<!-- BEGIN GENERATED: x -->` and
`<!-- END GENERATED: x -->`; the hand-written text around them is kept), the plots in docs/img/
(matplotlib; skipped with a note when it is missing), and copies the JSON it used to docs/data/ so
the report can be regenerated from the repository alone. Needs no GPU, no torch and no heddle.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

IMPL_LABEL = {"heddle": "heddle", "heddle_tuned": "heddle (autotuned)", "cublas": "cuBLAS (torch.matmul)",
              "triton": "Triton", "torch_eager": "torch eager", "torch_compile": "torch.compile",
              "cublaslt_fused": "cuBLASLt fused (torch._addmm_activation)"}

STEP_LABEL = {
    "lower": "lowering alone (all passes + CUDA printing), thread CPU",
    "lower_stages": "lowering alone, by stage count (sync planner included), thread CPU",
    "lower_families": "lowering alone, every printed kernel: the spread of the per-kernel medians, thread CPU",
    "nvrtc_cold": "NVRTC + ptxas, cold (cache off)",
    "lower_nvrtc_cold": "cold compile: lowering + NVRTC",
    "nvrtc_front_end": "NVRTC front end alone (-fdevice-syntax-only), process CPU",
    "nvrtc_headers_alone": "NVRTC front end of an empty kernel with the same #includes, process CPU",
    "nvrtc_ptx": "NVRTC to PTX (front end + NVVM, compute_XX), process CPU",
    "nvrtc_cubin": "NVRTC to a cubin (front end + NVVM + ptxas), process CPU",
    "disk_hit": "warm disk-cache load (verified read)",
    "memory_hit": "in-memory hit of runtime.compile (cheap digest + lookup)",
    "sm80_matmul_call": "repeated heddle.matmul call, sm_80 kernel, inputs rotating, output kept (to cuLaunchKernel)",
    "sm80_matmul_call_python_reads": "the same, tensors read and output allocated through torch's Python API "
                                     "(no heddle._C_aten: the path before it)",
    "sm80_kernel_call": "repeated sm_80 Kernel call, inputs rotating, output kept (down to cuLaunchKernel)",
    "sm80_kernel_call_python_reads": "the same, tensors read through torch's Python API (no heddle._C_aten)",
    "sm80_signature": "of the Python-reads call: the call signature of its 3 tensors and the lookup (`tensors in "
                      "PlanTable`)",
    "sm80_output": "of the Python-reads call: the output's allocation (`new_empty(16, 256)`)",
    "sm90a_matmul_call": "repeated heddle.matmul call, sm_90a kernel (TMA maps, TMA store), inputs rotating, output kept "
                         "(to cuLaunchKernel)",
    "sm90a_matmul_call_python_reads": "the same, tensors read and output allocated through torch's Python API "
                                      "(no heddle._C_aten)",
    "sm90a_tma_store_call": "repeated sm_90a Kernel call (TMA maps, TMA store), inputs rotating, output kept",
    "sm90a_tma_store_call_python_reads": "the same, tensors read through torch's Python API (no heddle._C_aten)",
    "sm90a_tma_store_full_path": "the same kernel's full path (checks, prepare, map encodes, new plan)",
    "sm90a_split_k_call": "repeated sm_90a split-K Kernel call, inputs rotating, output kept",
    "sm90a_split_k_call_python_reads": "the same, tensors read through torch's Python API (no heddle._C_aten)",
    "sm90a_split_k_full_path": "the same kernel's full path (a CPU workspace is refilled per call)",
    **{f"smm_{kind}_{what}": label.format(kind=kind, scales=scales)
       for kind, scales in (("tensor", "per-tensor"), ("row", "per-row"), ("block", "128-block"))
       for what, label in (
           ("call", "repeated heddle.scaled_mm call, {scales} scales, inputs rotating, output kept (its front, "
                    "down to cuLaunchKernel)"),
           ("call_python_reads", "the same, tensors read through torch's Python API (no heddle._C_aten)"),
           ("checks", "of a heddle.scaled_mm call its front has not seen: the checks and spec ({scales}; "
                      "scaled_spec)"),
           ("unkeyed", "a heddle.scaled_mm call its front does not key ({scales}): checks + the op's plan table, "
                       "no op layer"))},
    "torch_scaled_mm_tensor": "torch._scaled_mm on CPU tensors, per tensor, for scale (computes the product)",
    "torch_scaled_mm_tensor_tiny": "the same, 16x16x16",
    "torch_scaled_mm_row": "torch._scaled_mm on CPU tensors, per row, for scale (computes the product)",
    "torch_scaled_mm_row_tiny": "the same, 16x16x16",
    **{f"grp_{kind}_{what}": label.format(call=call)
       for kind, call in (("mm", "heddle.grouped_mm"), ("gated", "heddle.grouped_mm_gated"),
                          ("masked", "heddle.grouped_mm_masked"))
       for what, label in (
           ("call", "repeated {call} call, inputs (offs / counts included) rotating, output kept (its front, down "
                    "to cuLaunchKernel)"),
           ("call_python_reads", "the same, tensors read through torch's Python API (no heddle._C_aten)"),
           ("missed", "a {call} call its front does not key: the checks, then the kernel's plan, no op layer"),
           ("before", "the same call as {call} made it before its front (checks, then the op or the kernel)"))},
    "torch_grouped_mm": "torch._grouped_mm on CPU tensors, 64 x 256 x 256, 8 experts, for scale (computes the "
                        "product)",
    "torch_grouped_mm_tiny": "the same, 16 x 16 x 16, 2 experts",
    "build_memory_hit": "Kernel.build on an in-memory hit",
    "matmul_lookup": "heddle.matmul per-call kernel lookup",
    "bind": "Kernel.bind (input checks)",
    "geometry": "launch geometry (sizes, trip check, grid)",
    "prepare": "Kernel.prepare: layout checks, output, kernel arguments, grid",
    "eager_plan": "eager call through its launch plan: signature, lookup, output, bind + pack (no driver call)",
    "eager_plan_python": "the same with the signature and lookup in Python (the path before PlanTable)",
    "matmul_front": "heddle.matmul's checks on a call its front has not seen: argument checks, op name, no mode",
    "eager_matmul_call": "the whole eager heddle.matmul call, repeated: Python front + CallTable.run (launch a dry run)",
    "eager_matmul_call_before": "the same call as heddle.matmul made it before CallTable: Python checks + PlanTable.run",
    "eager_front": "CallTable.run alone: modes, grad rule, signature, lookup, output, bind + pack (no driver call)",
    "full_path": "first-call path a plan skips: input checks + Kernel.prepare",
    "custom_op_empty": "empty torch custom op (dispatch layer alone)",
    "aten_op": "a C++ aten op through torch.ops (aten.alias.default), for scale",
    "torch_empty": "torch.empty(16, 256) on the CPU, for scale",
    "import_torch": "`import torch` in a new process (wall)",
    "import_torch_heddle": "`import torch; import heddle` in a new process (wall)",
    "import_heddle_over_torch": "`import heddle` after torch, in-process clock (target <= 100 ms)",
    "first_kernel_warm": "heddle.matmul's first kernel in a new process, warm disk cache, sm_80 (target <= 5 ms)",
    "first_kernel_warm_sm_90a": "the same, sm_90a kernel (issue 31 target <= 2 ms)",
    "restart_warm": "torch.compile first call in a new process, warm caches (2-block Llama; target <= 1.0x inductor)",
    "restart_cold": "torch.compile first call, empty caches (2-block Llama; training target <= 0.6x inductor)",
    "fleet_compiles": "processes asking for one kernel at once, empty cache: compiles (target 1); time to the kernel",
}
STEP_ORDER = list(STEP_LABEL)

# --- loading -----------------------------------------------------------------------------------


def load(path: Optional[str]) -> Optional[dict]:
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or "records" not in doc:
        raise ValueError(f"{path}: not a heddle benchmark result (no 'records')")
    return doc


def load_window(path: Optional[str]) -> Optional[dict]:
    """A GPU window's bench.jsonl (tools/window/bench_quick.py: a "meta" line, a "ceilings" line, then one
    record per line, written as measured) as the document load() returns. Each record gets its roofline
    fraction from the ceilings measured in the same run (2-byte operands and output, each moved once)."""
    if not path or not os.path.exists(path):
        return None
    doc = {"schema": 1, "kind": "gpu", "meta": {}, "records": [], "notes": []}
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            obj = json.loads(line)
            if "meta" in obj:
                doc["meta"] = obj["meta"]
            elif "ceilings" in obj:
                doc["ceilings"] = obj["ceilings"]
            elif "impl" in obj and "case" in obj:
                doc["records"].append(obj)
            else:  # skipped cases and stage-level errors
                doc["notes"].append(obj)
    doc["meta"].setdefault("command", "tools/gpu_window.sh run")
    if isinstance(doc["meta"].get("dirty"), str):  # the first window's STAMP said "no" / "yes"
        doc["meta"]["dirty"] = doc["meta"]["dirty"] == "yes"
    c = doc.get("ceilings") or {}
    peak, gbps = (c.get("bf16") or {}).get("tflops"), c.get("copy_gbps")
    for r in doc["records"]:
        r.setdefault("dtype", "bf16")
        if r.get("status") == "ok" and peak and gbps and r.get("M"):
            m, n, k, b = r["M"], r["N"], r["K"], r.get("B", 1)
            nbytes = 2 * b * (m * k + k * n + m * n) + (2 * n if r.get("epilogue") else 0)
            floor = max(2.0 * b * m * n * k / (peak * 1e12), nbytes / (gbps * 1e9)) * 1e3
            r.setdefault("roofline_fraction", floor / r["ms"]["median"])
            r.setdefault("ceiling_tflops", peak)
    return doc


def _fmt(x: Optional[float], digits: int = 3) -> str:
    if x is None:
        return "–"
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.{digits}g}"


def _val(x: float, unit: str) -> str:
    """A time with its unit; milliseconds under 1 are shown in microseconds."""
    if unit == "ms" and x < 1:
        return f"{_fmt(x * 1e3)} us"
    return f"{_fmt(x)} {unit}"


def _time(stats: dict, unit: str) -> str:
    return _val(stats["median"], unit)


def _spread(stats: dict, unit: str) -> str:
    if unit == "ms" and stats["median"] < 1:
        return f"{_fmt(stats['p20'] * 1e3)}–{_fmt(stats['p80'] * 1e3)} us"
    return f"{_fmt(stats['p20'])}–{_fmt(stats['p80'])} {unit}"


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _meta_line(meta: dict) -> str:
    commit = meta.get("commit", "?") + (" (with uncommitted changes)" if meta.get("dirty") else "")
    where = meta.get("gpu") or f"{meta.get('cpu', '?')}, {meta.get('cpu_cores', '?')} cores, no GPU"
    if meta.get("gpu"):
        where += f" (CUDA {meta.get('cuda')}, torch {meta.get('torch')}, triton {meta.get('triton') or 'absent'})"
    else:
        where += f" (torch {meta.get('torch')}, NVRTC {meta.get('nvrtc')})"
    if meta.get("loadavg_1m") is not None:
        where += f", load average {meta['loadavg_1m']} at the end"
    return f"Measured {meta.get('date', '?')} at commit {commit} on {where} with:\n\n```\n{meta.get('command', '?')}\n```"


# --- compile costs -----------------------------------------------------------------------------


def compile_table(records: List[dict]) -> str:
    rows = [r for r in records if r.get("suite") == "compile"]
    rows.sort(key=lambda r: (STEP_ORDER.index(r["step"]) if r["step"] in STEP_ORDER else 99, r["variant"]))
    out = ["| step | kernel variant | median | p20–p80 | n |", "|---|---|---|---|---|"]
    for r in rows:
        label = STEP_LABEL.get(r["step"], r["step"])
        if "stats" not in r:
            what = {"not_lowered": "not lowered in this build"}.get(r.get("status"), f"**{r.get('status')}**")
            out.append(f"| {label} | {r['variant']} | {what} | {_cell(r.get('reason', ''))[:120]} | |")
            continue
        st, unit = r["stats"], r.get("unit", "ms")
        extra = ""
        if r["step"] == "nvrtc_cold" and r.get("nvrtc_reported_ms") is not None:
            extra = f" (NVRTC's own clock {_fmt(r['nvrtc_reported_ms'])} ms)"
        if r["step"] == "fleet_compiles":
            extra = f" per process; {r.get('compiled')} compile(s) in {r.get('processes')} processes"
        out.append(f"| {label} | {r['variant']} | {_time(st, unit)}{extra} | {_spread(st, unit)} | {st['n']} |")
    return "\n".join(out)


def _kernel_memory_note(r: dict) -> str:
    """benchmarks/test_kernel_memory_bench.py's row: what a freshly built Kernel keeps, now and as before."""
    def held(m):
        where = "the memory cache's entry, held once" if m["shared_with_cache"] else "its own copy beside the cache's"
        heap = f"; Kernel.build left {m['heap_bytes'] / 1024:.0f} KiB allocated" if m.get("heap_bytes") else ""
        return f"{m['result_bytes'] / 1024:.1f} KiB of compiled result ({where}){heap}"
    return (f"- {r['variant']}: a freshly compiled Kernel holds {held(r['after'])}; as Kernel.build kept it before "
            f"(its compiled result with the PTX, compile_lowered(keep_ptx=True)): {held(r['before'])}; cubin "
            f"{r['cubin_bytes'] / 1024:.1f} KiB.")


def _cubin_note(r: dict) -> str:
    """benchmarks/test_cubin_sections_bench.py's row: what the cubin's bytes are, and compressed at rest."""
    kib = lambda n: f"{n / 1024:.1f} KiB"
    parts = ", ".join(f"{g} {kib(n)}" for g, n in sorted(r["sections"].items(), key=lambda x: -x[1]))
    z = ", ".join(f"{k} {kib(v['bytes'])} (decompress {v['decompress_us']:.0f} us)" for k, v in r["compressed"].items())
    return (f"- {r['variant']}: cubin {kib(r['cubin_bytes'])}: {parts}; {r['data_objects']} data objects "
            f"({r['data_object_bytes']} B, names {r['data_object_names_bytes']} B); compressed at rest: {z}.")


def compile_notes(records: List[dict]) -> str:
    notes = []
    for r in records:
        if r.get("step") == "lower" and r.get("passes"):
            top = ", ".join(f"{n} {ms:.3f} ms" for n, ms in r["passes"][:3])
            notes.append(f"- {r['variant']}: kernel `{r.get('kernel')}`; costliest passes (medians): {top}.")
        if r.get("step") == "lower_families" and r.get("kernels"):
            worst = ", ".join(f"{k['case']} {k['median_ms']:.3f} ms ({k['top_pass'][0]} {k['top_pass'][1]:.3f})"
                              for k in r["kernels"][:5])
            notes.append(f"- {r['variant']}: {r['over_target']} over 0.5 ms; slowest (costliest pass): {worst}.")
        if r.get("step") == "lower_stages" and r.get("insert_syncs_ms") is not None:
            notes.append(f"- {r['variant']}: insert_syncs {r['insert_syncs_ms']:.3f} ms of it (median).")
        if r.get("step") == "memory_hit" and r.get("memory_bytes") is not None:
            report = (f" and its {r['ptxas_bytes']} B ptxas report (text; its parsed stats are kept) stay"
                      if r.get("ptxas_bytes") else " stays")
            notes.append(f"- {r['variant']}: the memory cache holds {r['memory_bytes'] / 1024:.1f} KiB for the kernel "
                         f"(cubin {r['cubin_bytes'] / 1024:.1f} KiB; its {r['ptx_bytes'] / 1024:.1f} KiB of PTX{report} on "
                         "disk unless HEDDLE_KEEP_PTX=1 or HEDDLE_DUMP=ptx" + (" / ptxas" if r.get("ptxas_bytes") else "")
                         + ").")
        if r.get("step") == "kernel_memory" and r.get("status") == "ok":
            notes.append(_kernel_memory_note(r))
        if r.get("step") == "cubin_sections" and r.get("status") == "ok":
            notes.append(_cubin_note(r))
        if r.get("step") == "cubin_enumerators" and r.get("status") == "ok":
            m, e = r["members"], r["enumerators"]
            same = "identical" if r["text_identical"] and r["constant0_identical"] else "**different**"
            notes.append(f"- {r['variant']}, headers inlined: cubin {e['cubin_bytes']} B with {e['data_objects']} data "
                         f"objects as the headers are (enumerators); {m['cubin_bytes']} B with {m['data_objects']} "
                         f"with their members written back as static constexpr data members (.text and "
                         f".nv.constant0 {same}).")
        if r.get("step") == "nvrtc_cubin" and r.get("stats"):
            ph = {x["step"]: x["stats"]["median"] for x in records
                  if x.get("variant") == r["variant"] and x.get("step", "").startswith("nvrtc_") and x.get("stats")}
            if {"nvrtc_front_end", "nvrtc_ptx"} <= ph.keys():
                tot = ph["nvrtc_cubin"]
                notes.append(f"- {r['variant']}: NVRTC's CPU time by phase: front end {ph['nvrtc_front_end'] / tot:.0%} "
                             f"(an empty kernel with its #includes {ph.get('nvrtc_headers_alone', 0) / tot:.0%}), NVVM "
                             f"{(ph['nvrtc_ptx'] - ph['nvrtc_front_end']) / tot:.0%}, ptxas "
                             f"{(tot - ph['nvrtc_ptx']) / tot:.0%}.")
        if r.get("step") == "lower_nvrtc_cold" and r.get("registers") is not None:
            notes.append(f"- {r['variant']}: {r['registers']} registers, {r.get('spill_bytes', 0)} spill bytes "
                         f"(ptxas, {r.get('arch')}).")
    return "\n".join(notes)


def render_compile(doc: Optional[dict]) -> str:
    if doc is None:
        return ("No compile-time results yet: run `pytest benchmarks/test_compile_bench.py` (a CPU is enough), "
                "then `python benchmarks/report.py`.")
    parts = [_meta_line(doc["meta"]), "", compile_table(doc["records"])]
    notes = compile_notes(doc["records"])
    if notes:
        parts += ["", notes]
    parts += ["", "Reported, not asserted: timing assertions do not belong in tests. The launch itself, and "
              "dispatch through the custom op on CUDA tensors, need a GPU (`benchmarks/test_dispatch_bench.py`)."]
    return "\n".join(parts)


# --- GPU results -------------------------------------------------------------------------------


def _ok(records, **match):
    return [r for r in records if r.get("status") == "ok" and all(r.get(k) == v for k, v in match.items())]


def _by_case(records) -> Dict[tuple, Dict[str, dict]]:
    out: Dict[tuple, Dict[str, dict]] = {}
    for r in records:
        if r.get("suite") in ("dispatch",):
            continue
        out.setdefault((r["suite"], r["case"], r["dtype"]), {})[r["impl"]] = r
    return out


def _ratio(a: Optional[dict], b: Optional[dict]) -> Optional[float]:
    """Speed of a relative to b (time_b / time_a); None unless both ran."""
    if not a or not b or a.get("status") != "ok" or b.get("status") != "ok":
        return None
    return b["ms"]["median"] / a["ms"]["median"]


def _x(r: Optional[float]) -> str:
    return "–" if r is None else f"{r:.2f}x"


def _tf(r: Optional[dict]) -> str:
    if not r:
        return "–"
    if r.get("status") != "ok":
        return f"**{r.get('status')}**"
    return _fmt(r["tflops"])


def gemm_table(doc: dict, suites=("square", "llm", "batched", "ragged"), compact: bool = False) -> str:
    cases = _by_case(doc["records"])
    has_triton = any(r.get("impl") == "triton" for r in doc["records"])
    has_tuned = any(r.get("impl") == "heddle_tuned" for r in doc["records"])
    out = []
    for dtype in ("bf16", "fp16"):
        for suite in suites:
            keys = [k for k in cases if k[0] == suite and k[2] == dtype]
            if not keys:
                continue
            head = ["case", "heddle TFLOP/s"] + (["tuned"] if has_tuned else []) + ["cuBLAS"] + \
                   (["Triton"] if has_triton else []) + ["heddle / cuBLAS"] + (["heddle / Triton"] if has_triton else [])
            if not compact:
                head += ["heddle / ceiling", "roofline", "spread", "heddle config"]
            out.append(f"\n**{suite}, {dtype}**\n" if not compact else f"{suite} {dtype}")
            out.append("| " + " | ".join(head) + " |")
            out.append("|" + "---|" * len(head))
            for k in keys:
                im = cases[k]
                h, c, t = im.get("heddle"), im.get("cublas"), im.get("triton")
                row = [k[1].split("-", 1)[1], _tf(h)] + ([_tf(im.get("heddle_tuned"))] if has_tuned else []) + [_tf(c)]
                if has_triton:
                    row.append(_tf(t))
                row.append(_x(_ratio(h, c)))
                if has_triton:
                    row.append(_x(_ratio(h, t)))
                if not compact:
                    ok = h and h.get("status") == "ok"
                    row += [f"{100 * h['tflops'] / h['ceiling_tflops']:.0f}%" if ok else "–",
                            f"{100 * h['roofline_fraction']:.0f}%" if ok else "–",
                            f"{100 * (h['ms'].get('spread') or 0):.1f}%" if ok else "–",
                            f"`{h.get('config', '')}`" if h and h.get("config") else ""]
                out.append("| " + " | ".join(row) + " |")
    return "\n".join(out)


def fused_table(doc: dict) -> str:
    cases = _by_case(doc["records"])
    keys = [k for k in cases if k[0] == "fused"]
    if not keys:
        return ""
    lt = any(r.get("impl") == "cublaslt_fused" for r in doc["records"])
    out = ["| case | dtype | heddle | torch eager | torch.compile | " + ("cuBLASLt fused | " if lt else "") +
           "vs eager | vs torch.compile |" + (" vs cuBLASLt |" if lt else ""),
           "|---|---|---|---|---|---|---|" + ("---|---|" if lt else "")]
    for k in keys:
        im = cases[k]
        h, e, c, f = im.get("heddle"), im.get("torch_eager"), im.get("torch_compile"), im.get("cublaslt_fused")
        t = lambda r: _time(r["ms"], "ms") if r and r.get("status") == "ok" else (r or {}).get("status", "–")  # noqa: E731
        out.append(f"| {k[1].split('-', 1)[1]} | {k[2]} | {t(h)} | {t(e)} | {t(c)} | " + (f"{t(f)} | " if lt else "") +
                   f"{_x(_ratio(h, e))} | {_x(_ratio(h, c))} |" + (f" {_x(_ratio(h, f))} |" if lt else ""))
    return "\n".join(out)


def fp8_table(doc: dict) -> str:
    """FP8 GEMMs (issue 32): heddle.scaled_mm against torch._scaled_mm (cuBLASLt), and the fused dequantize +
    bias + GELU + quantize epilogue against torch._scaled_mm plus the separate ops, and the block-scaled
    heddle.scaled_mm against torch's blockwise _scaled_mm (a skipped peer where torch has none) on its own shapes
    (fp8_block) and on DeepGEMM's test shapes (fp8_deepgemm), the decode shape's schedule neighbours against
    cuBLASLt (fp8_decode_variants), the sm_100a block-scaled kernels (MXFP8, NVFP4, MXFP4: tools/window/bench_mx.py)
    against torch's own block-scaled _scaled_mm, from the same run; a DeepGEMM column where the run
    has deep_gemm records (measured, or skipped with the reason)."""
    cases = _by_case(doc["records"])
    peers = {"fp8": "cublaslt", "fp8_fused": "scaled_mm_then_ops", "fp8_block": "torch_blockwise",
             "fp8_deepgemm": "torch_blockwise", "fp8_decode_variants": "cublaslt",
             **{f: "torch_scaled_mm" for f in ("mxfp8", "nvfp4", "mxfp4")},
             **{f + "_fused": "scaled_mm_then_ops" for f in ("mxfp8", "nvfp4", "mxfp4")}}
    keys = [k for k in cases if k[0] in peers]
    if not keys:
        return ""
    dg = any(r.get("impl") == "deep_gemm" for r in doc["records"])
    out = ["| case | scales | heddle | peer | peer time | heddle TFLOP/s | heddle / peer | " +
           ("DeepGEMM | heddle / DeepGEMM | " if dg else "") + "heddle config |",
           "|---|---|---|---|---|---|---|---|" + ("---|---|" if dg else "")]
    t = lambda r: _time(r["ms"], "ms") if r and r.get("status") == "ok" else (r or {}).get("status", "–")  # noqa: E731
    for k in keys:
        im = cases[k]
        peer_name = peers[k[0]]
        p, d = im.get(peer_name), im.get("deep_gemm")
        # heddle's own call, then any hand-scheduled variant timed in the same case (heddle_<variant>: e.g. the
        # quantizing epilogue's direct and TMA store, tools/window/bench_fp8_variants.py quant_store_impls; the
        # decode shape's split / tile / stream-K neighbours, decode_variants)
        for name in ["heddle"] + [n for n in im if n.startswith("heddle_")]:
            h = im.get(name)
            if name != "heddle" and h is None:
                continue
            scaling = (h or p or {}).get("scaling", "")
            label = k[1].split("-", 1)[1] + ("" if name == "heddle" else f" ({name[len('heddle_'):]})")
            out.append(f"| {label} | {scaling} | {t(h)} | {peer_name} | {t(p)} | {_tf(h)} | "
                       f"{_x(_ratio(h, p))} | " + (f"{t(d)} | {_x(_ratio(h, d))} | " if dg else "") +
                       f"{'`' + h['config'] + '`' if h and h.get('config') else (h or {}).get('reason', '')[:80]} |")
    return "\n".join(out)


# the peers of each grouped suite (tools/window/bench_grouped.py): the first is the target's reference
_GROUPED_PEERS = {"grouped": ("torch_grouped_mm", "per_expert_loop"), "grouped_gated": ("torch_grouped_mm", None),
                  "grouped_masked": ("torch_bmm_padded", None)}


def grouped_table(doc: dict) -> str:
    """Grouped GEMMs (issue 33): heddle.grouped_mm against torch._grouped_mm and a per-expert loop of
    torch.matmul, the gated form against torch._grouped_mm x2 + silu * mul, the masked layout against a padded
    torch.bmm, from the same run; empty when the run has no grouped records."""
    cases = _by_case(doc["records"])
    keys = [k for k in cases if k[0] in _GROUPED_PEERS]
    if not keys:
        return ""
    out = ["| case | experts (empty) | tokens | heddle | peer | peer time | heddle / peer | per-expert loop | "
           "heddle / loop | heddle TFLOP/s |", "|---|---|---|---|---|---|---|---|---|---|"]
    t = lambda r: _time(r["ms"], "ms") if r and r.get("status") == "ok" else (r or {}).get("status", "–")  # noqa: E731
    for k in keys:
        im = cases[k]
        h = im.get("heddle")
        peer, loop = _GROUPED_PEERS[k[0]]
        p, lp = im.get(peer), im.get(loop) if loop else None
        any_r = h or p or {}
        unfused = " (unfused)" if h and h.get("fused") is False else ""
        out.append(f"| {k[1].split('-', 1)[1]}{unfused} | {any_r.get('experts', '–')} ({any_r.get('empty_groups', 0)}) | "
                   f"{any_r.get('M', '–')} | {t(h)} | {peer} | {t(p)} | {_x(_ratio(h, p))} | "
                   f"{t(lp) if loop else '–'} | {_x(_ratio(h, lp)) if loop else '–'} | {_tf(h)} |")
    return "\n".join(out)


def variants_table(doc: dict) -> str:
    """heddle's own kernel variants on one problem (the window's bench stage): time and speed against the
    first variant listed."""
    cases = _by_case(doc["records"])
    out = []
    for k in [k for k in cases if k[0] == "variants"]:
        im = cases[k]
        base = next(iter(im.values()))
        out += [f"\n**{k[1].split('-', 1)[1]}**\n", "| variant | time | TFLOP/s | vs " + base["impl"] + " | kernel |",
                "|---|---|---|---|---|"]
        for name, r in im.items():
            ok = r.get("status") == "ok"
            out.append(f"| {name} | {_time(r['ms'], 'ms') if ok else '**' + str(r.get('status')) + '**'} | "
                       f"{_fmt(r.get('tflops')) if ok else '–'} | {_x(_ratio(r, base))} | "
                       f"{'`' + r['config'] + '`' if r.get('config') else (r.get('reason') or '')[:120]} |")
    return "\n".join(out)


def dispatch_table(doc: dict) -> str:
    rows = [r for r in doc["records"] if r.get("suite") == "dispatch" and r.get("status", "ok") == "ok"]
    if not rows:
        return ""
    out = ["| call | host time per call | p20–p80 | with the GPU (queue-bound) |", "|---|---|---|---|"]
    for r in rows:
        dev = r.get("device_inclusive")
        out.append(f"| {r['what']} | {_fmt(r['stats']['median'])} us | {_spread(r['stats'], 'us')} | "
                   f"{_fmt(dev['median']) + ' us' if dev else '–'} |")
    return "\n".join(out)


def ceilings_text(doc: dict) -> str:
    c = doc.get("ceilings")
    if not c:
        return ""
    parts = []
    for dt in ("bf16", "fp16"):
        if dt in c:
            parts.append(f"{dt} GEMM {c[dt]['tflops']:.0f} TFLOP/s (cuBLAS, {c[dt]['shape']})")
    if "copy_gbps" in c:
        parts.append(f"device copy {c['copy_gbps'] / 1e3:.2f} TB/s")
    return "Measured ceilings in this run: " + "; ".join(parts) + "."


# --- targets -----------------------------------------------------------------------------------


def _status(value: Optional[float], goal: float, higher_is_better: bool = True) -> str:
    if value is None:
        return "not measured"
    ok = value >= goal if higher_is_better else value <= goal
    if ok:
        return "met"
    miss = (goal / value - 1) if higher_is_better else (value / goal - 1)
    return f"**missed** by {100 * miss:.0f}%"


def targets(gpu: Optional[dict], comp: Optional[dict]) -> str:
    rows = []
    why_no_gpu = "no GPU results in this report"
    if gpu:
        cases = _by_case(gpu["records"])
        sq = cases.get(("square", "square-8192x8192x8192", "bf16"), {})
        r = _ratio(sq.get("heddle"), sq.get("cublas"))
        rows.append(("bf16 GEMM 8192³ vs cuBLAS", ">= 1.0x", _x(r), _status(r, 1.0)))
        llm = [(k, _ratio(v.get("heddle"), v.get("cublas"))) for k, v in cases.items()
               if k[0] == "llm" and k[2] == "bf16" and v.get("heddle") and v["heddle"]["M"] >= 1024]
        llm_r = [x for _, x in llm if x is not None]
        worst = min(llm_r) if llm_r else None
        misses = sum(1 for x in llm_r if x < 0.95)
        rows.append(("bf16 LLM shapes, M >= 1024, vs cuBLAS", ">= 0.95x each",
                     f"worst {_x(worst)}, {misses} of {len(llm_r)} below", _status(worst, 0.95)))
        tri = [_ratio(v.get("heddle"), v.get("triton")) for k, v in cases.items()
               if k[2] == "bf16" and k[0] != "fused" and v.get("triton")]
        tri = [x for x in tri if x is not None]
        tw = min(tri) if tri else None
        rows.append(("bf16 GEMM vs Triton, every shape", "> 1.0x each",
                     f"worst {_x(tw)}, {sum(1 for x in tri if x <= 1.0)} of {len(tri)} behind" if tri
                     else "Triton not run", _status(tw, 1.0) if tri else "not measured"))
        fg = [(v.get("heddle"), v.get("torch_eager"), v.get("torch_compile")) for k, v in cases.items()
              if k[0] == "fused" and k[2] == "bf16" and "bias_gelu" in k[1]]
        ve = [x for x in (_ratio(h, e) for h, e, _ in fg) if x is not None]
        vc = [x for x in (_ratio(h, c) for h, _, c in fg) if x is not None]
        rows.append(("bf16 GEMM + bias + GELU vs torch eager", ">= 1.15x", f"worst {_x(min(ve)) if ve else '–'}",
                     _status(min(ve) if ve else None, 1.15)))
        rows.append(("bf16 GEMM + bias + GELU vs torch.compile", ">= 1.05x", f"worst {_x(min(vc)) if vc else '–'}",
                     _status(min(vc) if vc else None, 1.05)))
        f8 = [(k, _ratio(v.get("heddle"), v.get("cublaslt"))) for k, v in cases.items()
              if k[0] == "fp8" and v.get("heddle") and v["heddle"].get("M", 0) >= 1024
              and v["heddle"].get("scaling") == "tensor"]
        if f8:  # issue 32's targets, once a run measured FP8
            f8r = [x for _, x in f8 if x is not None]
            rows.append(("FP8 per-tensor GEMM, M >= 1024, vs cuBLASLt", ">= 1.0x each",
                         f"worst {_x(min(f8r)) if f8r else '–'}", _status(min(f8r) if f8r else None, 1.0)))
            ff = [_ratio(v.get("heddle"), v.get("scaled_mm_then_ops")) for k, v in cases.items() if k[0] == "fp8_fused"]
            ff = [x for x in ff if x is not None]
            rows.append(("FP8 dequantize + bias + GELU + quantize vs scaled_mm + ops", ">= 1.1x",
                         f"worst {_x(min(ff)) if ff else '–'}", _status(min(ff) if ff else None, 1.1)))
        gg = [v for k, v in cases.items() if k[0] == "grouped_gated"]
        if gg:  # issue 33's target, once a run measured the gated grouped form
            gr = [x for x in (_ratio(v.get("heddle"), v.get("torch_grouped_mm")) for v in gg) if x is not None]
            unfused = any((v.get("heddle") or {}).get("fused") is False for v in gg)
            rows.append(("Grouped MoE FFN, silu(x W1) * (x W3), vs torch._grouped_mm x2 + ops", ">= 1.1x",
                         f"worst {_x(min(gr)) if gr else '–'}" + (" (heddle unfused)" if unfused else ""),
                         _status(min(gr) if gr else None, 1.1)))
        disp = [r for r in gpu["records"] if r.get("suite") == "dispatch" and r.get("step") == "heddle_matmul"]
        d = disp[0]["stats"]["median"] if disp else None
        rows.append(("dispatch per heddle.matmul call", "<= 5 us", f"{_fmt(d)} us" if d else "–",
                     _status(d, 5.0, higher_is_better=False)))
    else:
        for name, goal in [("bf16 GEMM 8192³ vs cuBLAS", ">= 1.0x"), ("bf16 LLM shapes, M >= 1024, vs cuBLAS", ">= 0.95x each"),
                           ("bf16 GEMM vs Triton, every shape", "> 1.0x each"),
                           ("bf16 GEMM + bias + GELU vs torch eager", ">= 1.15x"),
                           ("bf16 GEMM + bias + GELU vs torch.compile", ">= 1.05x"),
                           ("dispatch per heddle.matmul call", "<= 5 us")]:
            rows.append((name, goal, "–", f"not measured ({why_no_gpu})"))
    if comp:
        recs = comp["records"]

        def med(step, pred=lambda r: True):
            xs = [r for r in recs if r.get("step") == step and r.get("stats") and pred(r)]
            return (xs[0]["stats"]["median"], xs[0]) if xs else (None, None)
        hop = lambda r: "Hopper" in r["variant"]  # noqa: E731
        v, _ = med("lower_nvrtc_cold", hop)
        if v is None:
            v2, r2 = med("lower_nvrtc_cold")
            rows.append(("cold compile (lowering + NVRTC) of the Hopper GEMM", "<= 250 ms",
                         f"Hopper GEMM not lowered in this build; {r2['variant'] if r2 else '?'}: {_fmt(v2)} ms",
                         "not measured (Hopper path absent)" if v2 is None else
                         f"not measured; the cp.async kernel takes {_fmt(v2)} ms ({_status(v2, 250, False)})"))
        else:
            rows.append(("cold compile (lowering + NVRTC) of the Hopper GEMM", "<= 250 ms", f"{_fmt(v)} ms",
                         _status(v, 250, False)))
        lows = [r["stats"]["median"] for r in recs if r.get("step") == "lower" and r.get("stats")]
        lw = max(lows) if lows else None
        rows.append(("lowering alone", "<= 2 ms", f"{_fmt(lw)} ms (slowest variant)", _status(lw, 2.0, False)))
        fam = [r for r in recs if r.get("step") == "lower_families" and r.get("kernels")]
        if fam:  # issue 31: every kernel
            slow = fam[0]["kernels"][0]
            rows.append((f"lowering, every printed kernel ({len(fam[0]['kernels'])})", "<= 0.5 ms each",
                         f"slowest {slow['median_ms']:.3f} ms ({slow['case']}); {fam[0]['over_target']} over",
                         _status(slow["median_ms"], 0.5, False)))
        hits = [r for r in recs if r.get("step") == "memory_hit" and r.get("stats")]
        mh = max((r["stats"]["median"] for r in hits), default=None)   # every variant must meet it
        rows.append(("in-memory hit (runtime.compile)", "<= 5 us",
                     f"{_fmt(mh)} us (slowest of {len(hits)} variants)" if hits else "–", _status(mh, 5.0, False)))
        for key, name, goal in (("restart_warm_infer_ratio", "torch.compile warm restart, inference", 1.0),
                                ("restart_warm_train_ratio", "torch.compile warm restart, training", 1.0),
                                ("restart_cold_train_ratio", "torch.compile cold compile, training", 0.6)):
            if comp.get(key) is not None:   # benchmarks/test_restart_bench.py: heddle's median / inductor's
                rows.append((f"{name} vs inductor", f"<= {goal}x", _x(comp[key]), _status(comp[key], goal, False)))
        lk, _ = med("matmul_lookup")
        rows.append(("in-memory hit (heddle.matmul kernel lookup)", "<= 5 us", f"{_fmt(lk)} us",
                     _status(lk, 5.0, False)))
        prep = "prepare" if med("prepare")[0] is not None else "geometry"
        pieces = [med(s)[0] for s in ("matmul_lookup", "bind", prep, "custom_op_empty")]
        if all(p is not None for p in pieces) and not gpu:
            tot = sum(pieces)
            rows.append(("dispatch per heddle.matmul call (CPU pieces, launch excluded)", "<= 5 us",
                         f">= {_fmt(tot)} us (lookup + bind + {prep} + custom-op layer)", _status(tot, 5.0, False)))
    out = ["| target | goal | measured | status |", "|---|---|---|---|"]
    out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return "\n".join(out)


# --- plots -------------------------------------------------------------------------------------


def _mpl():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        return None


def plots(doc: dict, img_dir: str) -> List[str]:
    """TFLOP/s against size beside cuBLAS and Triton with the ceiling drawn; fused-epilogue speedups.
    Returns the files written (relative names); [] without matplotlib."""
    plt = _mpl()
    if plt is None:
        return []
    os.makedirs(img_dir, exist_ok=True)
    written = []
    ceil = doc.get("ceilings", {})
    recs = [r for r in doc["records"] if r.get("status") == "ok"]
    styles = {"heddle": ("C0", "o", "-"), "heddle_tuned": ("C0", "s", "--"), "cublas": ("C1", "^", "-"),
              "triton": ("C2", "v", "-")}
    for dtype in ("bf16", "fp16"):
        sq = [r for r in recs if r["suite"] == "square" and r["dtype"] == dtype]
        if sq:
            fig, ax = plt.subplots(figsize=(7, 4.2))
            for impl, (col, mk, ls) in styles.items():
                pts = sorted((r["M"], r["tflops"]) for r in sq if r["impl"] == impl)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], color=col, marker=mk, ls=ls, label=IMPL_LABEL[impl])
            if dtype in ceil:
                ax.axhline(ceil[dtype]["tflops"], color="k", ls=":", label=f"measured ceiling ({ceil[dtype]['tflops']:.0f})")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("M = N = K")
            ax.set_ylabel("TFLOP/s")
            ax.set_title(f"square GEMM, {dtype}")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
            name = f"gemm_squares_{dtype}.png"
            fig.tight_layout()
            fig.savefig(os.path.join(img_dir, name), dpi=110)
            plt.close(fig)
            written.append(name)
        llm = [r for r in recs if r["suite"] == "llm" and r["dtype"] == dtype]
        if llm:
            nks = sorted({(r["N"], r["K"]) for r in llm})
            fig, axes = plt.subplots(1, len(nks), figsize=(3.2 * len(nks), 3.6), sharey=True, squeeze=False)
            for ax, (n, k) in zip(axes[0], nks):
                for impl, (col, mk, ls) in styles.items():
                    pts = sorted((r["M"], r["tflops"]) for r in llm if r["impl"] == impl and (r["N"], r["K"]) == (n, k))
                    if pts:
                        ax.plot([p[0] for p in pts], [p[1] for p in pts], color=col, marker=mk, ls=ls, label=IMPL_LABEL[impl])
                if dtype in ceil:
                    ax.axhline(ceil[dtype]["tflops"], color="k", ls=":", label="measured ceiling")
                ax.set_xscale("log", base=2)
                ax.set_title(f"N={n} K={k}", fontsize=9)
                ax.set_xlabel("M")
                ax.grid(alpha=0.3)
            axes[0][0].set_ylabel("TFLOP/s")
            axes[0][0].legend(fontsize=7)
            fig.suptitle(f"LLM projections (x @ W^T), {dtype}")
            fig.tight_layout()
            name = f"gemm_llm_{dtype}.png"
            fig.savefig(os.path.join(img_dir, name), dpi=110)
            plt.close(fig)
            written.append(name)
    cases = _by_case(doc["records"])
    fk = sorted(k for k in cases if k[0] == "fused")
    if fk:
        labels, ve, vc = [], [], []
        for k in fk:
            im = cases[k]
            labels.append(f"{k[1].split('-', 1)[1].replace('-nt', '')}\n{k[2]}")
            ve.append(_ratio(im.get("heddle"), im.get("torch_eager")) or 0.0)
            vc.append(_ratio(im.get("heddle"), im.get("torch_compile")) or 0.0)
        fig, ax = plt.subplots(figsize=(max(7, 0.9 * len(fk)), 4.2))
        xs = range(len(fk))
        ax.bar([x - 0.2 for x in xs], ve, width=0.4, label="vs torch eager", color="C0")
        ax.bar([x + 0.2 for x in xs], vc, width=0.4, label="vs torch.compile", color="C3")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.axhline(1.15, color="C0", ls=":", lw=0.8, label="target vs eager (1.15x)")
        ax.axhline(1.05, color="C3", ls=":", lw=0.8, label="target vs torch.compile (1.05x)")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, fontsize=6, rotation=60, ha="right")
        ax.set_ylabel("speedup of heddle (x)")
        ax.set_title("fused GEMM epilogues: heddle speedup")
        ax.legend(fontsize=7)
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(img_dir, "fused_speedup.png"), dpi=110)
        plt.close(fig)
        written.append("fused_speedup.png")
    return written


# --- the document ------------------------------------------------------------------------------

NO_GPU = ("None yet. No GPU was lent to the sessions that built the foundation or the benchmarks "
          "(issue 8): the device tool reported no machine for those tasks, so no GPU figure in this "
          "file has been measured. `pytest benchmarks/` on a CUDA machine measures them (heddle beside "
          "cuBLAS, Triton, torch eager and torch.compile, with the machine's ceilings), then "
          "`python benchmarks/report.py` fills in this section, the targets table and the plots.")


def render_gpu(doc: Optional[dict], images: List[str], img_rel: str = "img") -> str:
    if doc is None:
        return NO_GPU
    parts = [_meta_line(doc["meta"]), "", ceilings_text(doc), ""]
    for name in images:
        if name.startswith("gemm_"):
            parts.append(f"![{name}]({img_rel}/{name})")
    if any(n.startswith("gemm_") for n in images):
        parts.append("")
    parts += ["Ratios are speed ratios from the same run (time of the other / time of heddle); *ceiling* is "
              "heddle's TFLOP/s over the measured cuBLAS ceiling; *roofline* is the floor (the larger of "
              "compute time at the ceiling and memory time at the measured copy bandwidth) over heddle's time; "
              "*spread* is heddle's p20–p80 over its median.", "", gemm_table(doc)]
    ft = fused_table(doc)
    if ft:
        parts += ["", "### Fused epilogues", ""]
        if "fused_speedup.png" in images:
            parts += [f"![fused speedups]({img_rel}/fused_speedup.png)", ""]
        parts.append(ft)
    f8 = fp8_table(doc)
    if f8:
        parts += ["", "### FP8 GEMMs (e4m3)", "", f8]
    gt = grouped_table(doc)
    if gt:
        parts += ["", "### Grouped GEMMs (mixture of experts)", "", gt]
    vt = variants_table(doc)
    if vt:
        parts += ["", "### heddle's variants against each other", "", vt]
    dt = dispatch_table(doc)
    if dt:
        parts += ["", "### Dispatch", "", dt]
    bad = [r for r in doc["records"] if r.get("status") in ("wrong", "error")]
    if bad:
        parts += ["", "### Failures", ""] + [f"- {r['impl']} {r['case']} {r['dtype']}: {r.get('reason', '')}" for r in bad]
    if not images:
        parts += ["", "(plots not drawn: matplotlib is not installed)"]
    return "\n".join(parts)


def replace_section(text: str, name: str, body: str, tool: str = "benchmarks/report.py") -> str:
    """`text` with the section `name` (between its BEGIN / END GENERATED markers, naming the `tool` that
    writes it) replaced by `body`, or appended when it has none."""
    begin = f"<!-- BEGIN GENERATED: {name} ({tool}) -->"
    end = f"<!-- END GENERATED: {name} -->"
    block = f"{begin}\n{body.rstrip()}\n{end}"
    pat = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if pat.search(text):
        return pat.sub(lambda _: block, text)
    return text.rstrip() + "\n\n" + block + "\n"


def write_report(gpu: Optional[dict], comp: Optional[dict], md_path: str, img_dir: str) -> List[str]:
    images = plots(gpu, img_dir) if gpu else []
    text = open(md_path).read() if os.path.exists(md_path) else "# Performance\n"
    img_rel = os.path.relpath(img_dir, os.path.dirname(os.path.abspath(md_path)))
    text = replace_section(text, "gpu", render_gpu(gpu, images, img_rel))
    text = replace_section(text, "targets", targets(gpu, comp))
    text = replace_section(text, "compile", render_compile(comp))
    with open(md_path, "w") as f:
        f.write(text)
    return images


def _pick(explicit: Optional[str], name: str, data_dir: str) -> Optional[str]:
    if explicit:
        return explicit
    for d in (os.path.join(HERE, "out"), data_dir):
        p = os.path.join(d, name)
        if os.path.exists(p):
            return p
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", help="gpu.json (default: benchmarks/out/gpu.json, else docs/data/gpu.json)")
    ap.add_argument("--compile", help="compile.json (default: benchmarks/out/compile.json, else docs/data/)")
    ap.add_argument("--md", default=os.path.join(ROOT, "docs", "perf.md"))
    ap.add_argument("--img", default=os.path.join(ROOT, "docs", "img"))
    ap.add_argument("--img-dir", dest="img", help="alias of --img")
    ap.add_argument("--data", default=os.path.join(ROOT, "docs", "data"), help="where the JSON used is copied")
    ap.add_argument("--window", help="a GPU window's bench.jsonl (instead of --gpu); saved as <data>/gpu.json")
    ap.add_argument("--no-data", action="store_true", help="do not copy the JSON used into --data")
    args = ap.parse_args(argv)
    gpu_path = _pick(args.gpu, "gpu.json", args.data) if not args.window else None
    comp_path = _pick(args.compile, "compile.json", args.data)
    gpu = load_window(args.window) if args.window else load(gpu_path)
    comp = load(comp_path)
    images = write_report(gpu, comp, args.md, args.img)
    if args.no_data:
        print(f"wrote {args.md} (gpu: {args.window or gpu_path or 'none'}); images: {', '.join(images) or 'none'}",
              file=sys.stderr)
        return 0
    os.makedirs(args.data, exist_ok=True)
    if args.window and gpu is not None:
        with open(os.path.join(args.data, "gpu.json"), "w") as f:
            json.dump(gpu, f, indent=1)
        gpu_path = args.window
    for path, name in ((None if args.window else gpu_path, "gpu.json"), (comp_path, "compile.json")):
        if path and os.path.exists(path):
            dst = os.path.join(args.data, name)
            if os.path.abspath(path) != os.path.abspath(dst):
                shutil.copyfile(path, dst)
    print(f"wrote {args.md} (gpu: {gpu_path or 'none'}, compile: {comp_path or 'none'}); images: "
          f"{', '.join(images) or 'none'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
