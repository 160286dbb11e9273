"""benchmarks/report.py on synthetic results: Markdown tables, the targets verdicts (met / missed by
how much), plots, the generated sections of docs/perf.md (hand-written text kept), and that the
committed docs/perf.md is what the committed JSON regenerates."""
import copy
import importlib.util
import json
import os
import shutil

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("heddle_bench_report", os.path.join(ROOT, "benchmarks", "report.py"))
report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report)

try:
    import matplotlib  # noqa: F401
    HAVE_MPL = True
except ImportError:
    HAVE_MPL = False

META = {"date": "2026-11-21 10:00 UTC", "commit": "abc1234", "dirty": False, "command": "pytest benchmarks/",
        "cpu": "Test CPU", "cpu_cores": 16, "torch": "2.11", "gpu": "NVIDIA H200", "cuda": "13.0", "triton": "3.6.0",
        "nvrtc": "13.0"}


def stats(ms, spread=0.02):
    return {"n": 50, "median": ms, "mean": ms, "std": ms * spread, "min": ms * 0.98, "max": ms * 1.05,
            "p20": ms * (1 - spread), "p80": ms * (1 + spread), "unit": "ms", "spread": 2 * spread}


def rec(suite, case, dtype, impl, m, n, k, ms, status="ok", **kw):
    flops = 2.0 * m * n * k
    r = {"suite": suite, "case": case, "dtype": dtype, "impl": impl, "B": 1, "M": m, "N": n, "K": k,
         "layout": "NN", "status": status, "floor_ms": flops / 790e12 * 1e3}
    if status == "ok":
        r.update(ms=stats(ms), tflops=flops / (ms * 1e-3) / 1e12, ceiling_tflops=790.0,
                 roofline_fraction=r["floor_ms"] / ms, rel_err=3e-3)
    r.update(kw)
    return r


def gpu_doc():
    recs = []
    for s, (h, c, t) in {512: (0.01, 0.008, 0.012), 4096: (0.25, 0.2, 0.26), 8192: (1.5, 1.4, 1.8)}.items():
        case = f"square-{s}x{s}x{s}"
        recs += [rec("square", case, "bf16", "heddle", s, s, s, h, config="heddle_mm_nn_bf16_128x128x32"),
                 rec("square", case, "bf16", "cublas", s, s, s, c), rec("square", case, "bf16", "triton", s, s, s, t)]
    for m, (h, c) in {16: (0.05, 0.04), 1024: (0.2, 0.18), 4096: (0.6, 0.62)}.items():
        case = f"llm-{m}x14336x4096-nt"
        recs += [rec("llm", case, "bf16", "heddle", m, 14336, 4096, h), rec("llm", case, "bf16", "cublas", m, 14336, 4096, c),
                 rec("llm", case, "bf16", "triton", m, 14336, 4096, h * 1.1)]
    recs.append(rec("ragged", "ragged-1000x1000x1000", "fp16", "heddle", 1000, 1000, 1000, 0, status="wrong",
                    reason="heddle ragged: relative error 0.5 exceeds 0.002"))
    recs.append(rec("ragged", "ragged-1000x1000x1000", "fp16", "cublas", 1000, 1000, 1000, 0.01))
    for m, (h, e, c) in {1024: (0.20, 0.25, 0.205), 4096: (0.6, 0.72, 0.66)}.items():
        case = f"fused-{m}x4096x4096-nt-bias_gelu"
        recs += [rec("fused", case, "bf16", "heddle", m, 4096, 4096, h, epilogue="bias_gelu"),
                 rec("fused", case, "bf16", "torch_eager", m, 4096, 4096, e, epilogue="bias_gelu"),
                 rec("fused", case, "bf16", "torch_compile", m, 4096, 4096, c, epilogue="bias_gelu")]
    recs.append({"suite": "dispatch", "step": "heddle_matmul", "what": "heddle.matmul (custom op + kernel launch)",
                 "stats": {**stats(21.0), "unit": "us"}, "device_inclusive": {**stats(22.0), "unit": "us"},
                 "status": "ok"})
    return {"schema": 1, "kind": "gpu", "meta": META,
            "ceilings": {"bf16": {"tflops": 790.0, "shape": "8192^3"}, "fp16": {"tflops": 780.0, "shape": "8192^3"},
                         "copy_gbps": 4300.0}, "records": recs}


def compile_doc():
    def r(step, variant, med, unit="ms", **kw):
        s = stats(med)
        s["unit"] = unit
        return {"suite": "compile", "variant": variant, "step": step, "stats": s, "unit": unit, **kw}
    meta = {**META, "gpu": None}
    return {"schema": 1, "kind": "compile", "meta": meta, "restart_warm_infer_ratio": 0.95,
            "restart_warm_train_ratio": 1.2, "restart_cold_train_ratio": 0.7, "records": [
        r("lower", "sm_80 auto (cp.async)", 0.2, kernel="heddle_mm_nt", passes=[["insert_syncs", 0.15], ["x", 0.01]]),
        r("lower_nvrtc_cold", "sm_80 auto (cp.async)", 600.0, registers=226, spill_bytes=0, arch="sm_80"),
        r("nvrtc_cold", "sm_80 auto (cp.async)", 599.0, nvrtc_reported_ms=598.0),
        r("lower_nvrtc_cold", "sm_90a Hopper GEMM (TMA + warp-specialized wgmma)", 300.0),
        r("lower", "sm_90a Hopper GEMM (TMA + warp-specialized wgmma)", 0.05),
        {"suite": "compile", "variant": "sm_90a Hopper GEMM (TMA + warp-specialized wgmma)", "step": "build_memory_hit",
         "status": "error", "reason": "UnicodeDecodeError: bad | byte"},
        r("disk_hit", "sm_80 auto (cp.async)", 1.5),
        r("memory_hit", "sm_80 auto (cp.async)", 4.0, unit="us"),
        r("memory_hit", "sm_90a auto", 95.0, unit="us"),
        r("matmul_lookup", "sm_80 auto (cp.async)", 1.6, unit="us"),
        r("bind", "sm_80 auto (cp.async)", 2.2, unit="us"),
        r("geometry", "sm_80 auto (cp.async)", 4.9, unit="us"),
        r("custom_op_empty", "sm_80 auto (cp.async)", 6.3, unit="us"),
        r("nvrtc_front_end", "sm_80 auto (cp.async)", 30.0),
        r("nvrtc_headers_alone", "sm_80 auto (cp.async)", 20.0),
        r("nvrtc_ptx", "sm_80 auto (cp.async)", 330.0),
        r("nvrtc_cubin", "sm_80 auto (cp.async)", 600.0),
    ]}


def test_gemm_table_ratios_and_failures():
    t = report.gemm_table(gpu_doc())
    assert "**square, bf16**" in t and "**llm, bf16**" in t and "**ragged, fp16**" in t
    row = next(line for line in t.splitlines() if line.startswith("| 8192x8192x8192"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # heddle 1.5 ms, cuBLAS 1.4 ms, Triton 1.8 ms at 8192^3
    assert cells[4] == "0.93x" and cells[5] == "1.20x"
    assert cells[1] == f"{2 * 8192 ** 3 / 1.5e-3 / 1e12:.0f}"
    assert "`heddle_mm_nn_bf16_128x128x32`" in row
    assert "**wrong**" in t
    compact = report.gemm_table(gpu_doc(), compact=True)
    assert "config" not in compact.splitlines()[1]


def test_fused_and_dispatch_tables():
    f = report.fused_table(gpu_doc())
    assert "| 1024x4096x4096-nt-bias_gelu | bf16 |" in f and "1.25x" in f and "1.10x" in f
    d = report.dispatch_table(gpu_doc())
    assert "heddle.matmul (custom op + kernel launch) | 21 us" in d


def fp8_doc():
    """gpu_doc plus the window's FP8 records (tools/window/bench_quick.py fp8_case / fp8_fused_case)."""
    doc = gpu_doc()
    for m, sc, (h, c) in ((16, "tensor", (0.05, 0.04)), (4096, "tensor", (0.30, 0.33)), (4096, "row", (0.32, 0.31))):
        case = f"fp8-{m}x4096x4096-{sc}"
        doc["records"] += [rec("fp8", case, "e4m3", "heddle", m, 4096, 4096, h, scaling=sc, config="heddle_mm_nt_e4m3"),
                           rec("fp8", case, "e4m3", "cublaslt", m, 4096, 4096, c, scaling=sc)]
    case = "fp8_fused-4096x4096x4096-row-bias_gelu_quant"
    doc["records"] += [rec("fp8_fused", case, "e4m3", "heddle", 4096, 4096, 4096, 0.35, scaling="row"),
                       rec("fp8_fused", case, "e4m3", "scaled_mm_then_ops", 4096, 4096, 4096, 0.42, scaling="row")]
    return doc


def test_fp8_table_and_targets():
    t = report.fp8_table(fp8_doc())
    assert "| 4096x4096x4096-tensor | tensor | 300 us | cublaslt | 330 us |" in t and "1.10x" in t
    assert "| 4096x4096x4096-row-bias_gelu_quant | row |" in t and "scaled_mm_then_ops" in t and "1.20x" in t
    # the computed 1x128 output scale (bench_quick.py fp8_quant_case) is a row of the same suite, its own ratio
    doc = fp8_doc()
    case = "fp8_fused-4096x4096x4096-row-bias_gelu_quant1x128"
    doc["records"] += [rec("fp8_fused", case, "e4m3", "heddle", 4096, 4096, 4096, 0.36, scaling="row"),
                       rec("fp8_fused", case, "e4m3", "scaled_mm_then_ops", 4096, 4096, 4096, 0.54, scaling="row")]
    assert "| 4096x4096x4096-row-bias_gelu_quant1x128 | row | 360 us | scaled_mm_then_ops | 540 us |" in \
        report.fp8_table(doc) and "1.50x" in report.fp8_table(doc)
    # the same case's hand-scheduled variants (heddle_<variant>), each its own row against the same peer; one that
    # did not build shows its status and reason
    doc["records"] += [rec("fp8_fused", case, "e4m3", "heddle_coop128_tma", 4096, 4096, 4096, 0.27, scaling="row",
                           config="heddle_mm_tma"),
                       rec("fp8_fused", case, "e4m3", "heddle_coop128_direct", 4096, 4096, 4096, 0.3, scaling="row",
                           status="error", reason="ScheduleError: no")]
    t = report.fp8_table(doc)
    assert "| 4096x4096x4096-row-bias_gelu_quant1x128 (coop128_tma) | row | 270 us | scaled_mm_then_ops | 540 us |" \
        in t and "2.00x" in t and "`heddle_mm_tma`" in t
    assert "| 4096x4096x4096-row-bias_gelu_quant1x128 (coop128_direct) | row | error |" in t and "ScheduleError: no" in t
    assert report.fp8_table(gpu_doc()) == ""  # no FP8 records: no table, no target rows
    # the block-scaled suite beside torch's blockwise _scaled_mm; a device where torch has none: a skipped peer
    doc = fp8_doc()
    case = "fp8_block-4096x7168x2048-1x128_128x128"
    doc["records"] += [rec("fp8_block", case, "e4m3", "heddle", 4096, 7168, 2048, 0.40, scaling="block128"),
                       rec("fp8_block", case, "e4m3", "torch_blockwise", 4096, 7168, 2048, 0.5, status="skipped")]
    assert "| 4096x7168x2048-1x128_128x128 | block128 | 400 us | torch_blockwise | skipped |" in report.fp8_table(doc)
    assert "DeepGEMM" not in report.fp8_table(doc)  # no deep_gemm record: no DeepGEMM column
    # DeepGEMM's shapes (suite fp8_deepgemm): torch's blockwise peer and DeepGEMM's own kernel in the same row
    case = "fp8_deepgemm-4096x2112x7168-1x128_128x128"
    doc["records"] += [rec("fp8_deepgemm", case, "e4m3", "heddle", 4096, 2112, 7168, 0.20, scaling="block128"),
                       rec("fp8_deepgemm", case, "e4m3", "torch_blockwise", 4096, 2112, 7168, 0.22),
                       rec("fp8_deepgemm", case, "e4m3", "deep_gemm", 4096, 2112, 7168, 0.16)]
    t = report.fp8_table(doc)
    assert "| DeepGEMM | heddle / DeepGEMM |" in t.splitlines()[0]
    row = next(line for line in t.splitlines() if line.startswith("| 4096x2112x7168-1x128_128x128 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:5] == ["block128", "200 us", "torch_blockwise", "220 us"] and cells[6] == "1.10x"
    assert cells[7:9] == ["160 us", "0.80x"]
    old = next(line for line in t.splitlines() if line.startswith("| 4096x7168x2048-1x128_128x128 |"))
    assert old.endswith("| – | – | – |  |")  # no ratio to torch (skipped), no DeepGEMM record in that case
    # the decode shape's schedule neighbours (suite fp8_decode_variants) against cuBLASLt in the same run; the suite
    # is not the per-tensor target's (M = 16)
    case = "fp8_decode_variants-16x4096x4096-tensor"
    doc["records"] += [rec("fp8_decode_variants", case, "e4m3", "heddle", 16, 4096, 4096, 0.0134, scaling="tensor"),
                       rec("fp8_decode_variants", case, "e4m3", "cublaslt", 16, 4096, 4096, 0.00724),
                       rec("fp8_decode_variants", case, "e4m3", "heddle_64x64_sk4", 16, 4096, 4096, 0.00905,
                           scaling="tensor", config="heddle_mm_sk4")]
    t = report.fp8_table(doc)
    assert "| 16x4096x4096-tensor (64x64_sk4) | tensor | 9.05 us | cublaslt | 7.24 us |" in t and "0.80x" in t
    assert "| 16x4096x4096-tensor | tensor | 13.4 us | cublaslt | 7.24 us |" in t and "0.54x" in t
    # the sm_100a block-scaled formats (tools/window/bench_mx.py) against torch's own block-scaled _scaled_mm; a
    # device without them (sm_90a): heddle's record skipped with the reason, no ratio
    doc["records"] += [rec("mxfp8", "mxfp8-4096x4096x4096", "mxfp8", "heddle", 4096, 4096, 4096, 0.16, scaling="mxfp8",
                           config="heddle_mm_nt_e4m3_mx32"),
                       rec("mxfp8", "mxfp8-4096x4096x4096", "mxfp8", "torch_scaled_mm", 4096, 4096, 4096, 0.18),
                       rec("nvfp4", "nvfp4-128x4096x4096", "nvfp4", "heddle", 128, 4096, 4096, 0.01, scaling="nvfp4",
                           status="skipped", reason="the block-scaled kernels are sm_100a's")]
    t = report.fp8_table(doc)
    assert "| 4096x4096x4096 | mxfp8 | 160 us | torch_scaled_mm | 180 us |" in t and "1.12x" in t
    assert "`heddle_mm_nt_e4m3_mx32`" in t
    assert "| 128x4096x4096 | nvfp4 | skipped | torch_scaled_mm | – |" in t
    doc["records"] += [rec("nvfp4_fused", "nvfp4_fused-4096x4096x4096-bias_gelu_quant1x128", "nvfp4", n, 4096, 4096,
                           4096, ms, scaling="nvfp4") for n, ms in (("heddle", 0.1), ("scaled_mm_then_ops", 0.15))]
    assert "| 4096x4096x4096-bias_gelu_quant1x128 | nvfp4 | 100 us | scaled_mm_then_ops | 150 us |" in \
        report.fp8_table(doc) and "1.50x" in report.fp8_table(doc)
    assert "worst 1.10x" in report.targets(doc, None)  # the block-scaled suites are not the per-tensor target's
    lines = {line.split("|")[1].strip(): line for line in report.targets(fp8_doc(), None).splitlines()[2:]}
    assert "worst 1.10x | met |" in lines["FP8 per-tensor GEMM, M >= 1024, vs cuBLASLt"]  # M = 16 not counted
    assert "worst 1.20x | met |" in lines["FP8 dequantize + bias + GELU + quantize vs scaled_mm + ops"]
    assert not any("FP8" in k for k in
                   (line.split("|")[1] for line in report.targets(gpu_doc(), None).splitlines()[2:]))
    assert "### FP8 GEMMs (e4m3)" in report.render_gpu(fp8_doc(), [])


def grouped_doc(fused=False):
    """gpu_doc plus the window's grouped records (tools/window/bench_grouped.py)."""
    doc = gpu_doc()
    g = dict(experts=8, empty_groups=1, routing="skewed")
    case = "grouped-e8-2048x14336x4096"
    doc["records"] += [rec("grouped", case, "bf16", "heddle", 2048, 14336, 4096, 0.40, **g),
                       rec("grouped", case, "bf16", "torch_grouped_mm", 2048, 14336, 4096, 0.44, **g),
                       rec("grouped", case, "bf16", "per_expert_loop", 2048, 14336, 4096, 0.60, **g)]
    for t, (h, p) in ((512, (0.30, 0.36)), (8192, (1.60, 1.68))):
        case = f"grouped_gated-e8-{t}x14336x4096"
        doc["records"] += [rec("grouped_gated", case, "bf16", "heddle", t, 14336, 4096, h, fused=fused, **g),
                           rec("grouped_gated", case, "bf16", "torch_grouped_mm", t, 14336, 4096, p, **g)]
    case = "grouped_masked-e64-128x4096x4096"
    doc["records"] += [rec("grouped_masked", case, "bf16", "heddle", 4000, 4096, 4096, 0.5, status="wrong",
                           reason="relative error", experts=64),
                       rec("grouped_masked", case, "bf16", "torch_bmm_padded", 4000, 4096, 4096, 0.3, experts=64)]
    return doc


def test_grouped_table_and_target():
    t = report.grouped_table(grouped_doc())
    row = next(line for line in t.splitlines() if line.startswith("| e8-2048x14336x4096 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # heddle 0.40 ms, torch._grouped_mm 0.44 ms, the loop 0.60 ms
    assert cells[1:4] == ["8 (1)", "2048", "400 us"] and cells[4] == "torch_grouped_mm"
    assert cells[6] == "1.10x" and cells[8] == "1.50x"
    assert "| e8-512x14336x4096 (unfused) |" in t and "1.20x" in t
    masked = next(line for line in t.splitlines() if line.startswith("| e64-128x4096x4096 |"))
    assert "**wrong**" in masked and "torch_bmm_padded" in masked
    assert report.grouped_table(gpu_doc()) == ""  # no grouped records: no table, no target row
    name = "Grouped MoE FFN, silu(x W1) * (x W3), vs torch._grouped_mm x2 + ops"
    lines = {line.split("|")[1].strip(): line for line in report.targets(grouped_doc(), None).splitlines()[2:]}
    assert "worst 1.05x (heddle unfused) | **missed** by 5%" in lines[name]  # 1.68 / 1.60, the worst of the two
    fused = {line.split("|")[1].strip(): line for line in report.targets(grouped_doc(True), None).splitlines()[2:]}
    assert "worst 1.05x |" in fused[name] and "unfused" not in fused[name]
    assert name not in report.targets(gpu_doc(), None)
    assert "### Grouped GEMMs (mixture of experts)" in report.render_gpu(grouped_doc(), [])
    assert "### Grouped GEMMs" not in report.render_gpu(gpu_doc(), [])


def test_targets_say_met_or_missed_by_how_much():
    t = report.targets(gpu_doc(), compile_doc())
    lines = {line.split("|")[1].strip(): line for line in t.splitlines()[2:]}
    assert "missed** by 7%" in lines["bf16 GEMM 8192³ vs cuBLAS"]               # 1.4 / 1.5 = 0.93x
    llm = lines["bf16 LLM shapes, M >= 1024, vs cuBLAS"]
    assert "worst 0.90x" in llm and "1 of 2 below" in llm and "missed" in llm
    assert "behind" in lines["bf16 GEMM vs Triton, every shape"]
    assert "| met |" in lines["bf16 GEMM + bias + GELU vs torch eager"]        # 1.20x and 1.25x
    assert "missed** by 2%" in lines["bf16 GEMM + bias + GELU vs torch.compile"]  # worst 1.025x
    assert "missed** by 320%" in lines["dispatch per heddle.matmul call"]       # 21 us vs 5 us
    assert "300 ms" in lines["cold compile (lowering + NVRTC) of the Hopper GEMM"]
    assert "| met |" in lines["lowering alone"]
    assert "missed" in lines["in-memory hit (runtime.compile)"]                  # the slowest variant counts
    assert "95 us (slowest of 2 variants)" in lines["in-memory hit (runtime.compile)"]
    assert "0.95x | met |" in lines["torch.compile warm restart, inference vs inductor"]
    assert "1.20x | **missed** by 20%" in lines["torch.compile warm restart, training vs inductor"]
    assert "0.70x | **missed** by 17%" in lines["torch.compile cold compile, training vs inductor"]
    assert "| met |" in lines["in-memory hit (heddle.matmul kernel lookup)"]


def test_targets_without_gpu_results():
    t = report.targets(None, compile_doc())
    assert "not measured (no GPU results in this report)" in t
    assert "CPU pieces" in t and ">= 15 us" in t                               # 1.6 + 2.2 + 4.9 + 6.3
    none = report.targets(None, None)
    assert "lowering alone" not in none


def test_compile_section():
    md = report.render_compile(compile_doc())
    assert "Measured 2026-11-21 10:00 UTC at commit abc1234 on Test CPU, 16 cores, no GPU" in md
    assert "```\npytest benchmarks/\n```" in md
    assert "| lowering alone (all passes + CUDA printing), thread CPU | sm_80 auto (cp.async) | 200 us |" in md
    # NVRTC's phases: front end 30 of 600 ms, NVVM 330 - 30, ptxas 600 - 330
    assert "| NVRTC to PTX (front end + NVVM, compute_XX), process CPU | sm_80 auto (cp.async) | 330 ms |" in md
    assert ("sm_80 auto (cp.async): NVRTC's CPU time by phase: front end 5% (an empty kernel with its #includes 3%), "
            "NVVM 50%, ptxas 45%.") in md
    assert "| cold compile: lowering + NVRTC | sm_80 auto (cp.async) | 600 ms |" in md
    assert "NVRTC's own clock 598 ms" in md and "95 us" in md
    assert "**error** | UnicodeDecodeError: bad \\| byte" in md                 # escaped for the table
    assert "insert_syncs 0.150 ms" in md and "226 registers" in md
    assert "No compile-time results yet" in report.render_compile(None)


def test_sections_replace_generated_text_and_keep_the_rest(tmp_path):
    md = tmp_path / "perf.md"
    md.write_text("# Performance\n\nHand-written intro.\n\n<!-- BEGIN GENERATED: gpu (benchmarks/report.py) -->\n"
                  "stale\n<!-- END GENERATED: gpu -->\n\n## Old notes\n\nkept\n")
    report.write_report(None, compile_doc(), str(md), str(tmp_path / "img"))
    text = md.read_text()
    assert "Hand-written intro." in text and "## Old notes\n\nkept" in text and "stale" not in text
    assert report.NO_GPU in text
    assert text.count("<!-- BEGIN GENERATED: compile (benchmarks/report.py) -->") == 1
    assert text.count("<!-- BEGIN GENERATED: targets (benchmarks/report.py) -->") == 1
    report.write_report(None, compile_doc(), str(md), str(tmp_path / "img"))
    assert md.read_text() == text                                             # idempotent


@pytest.mark.skipif(not HAVE_MPL, reason="matplotlib not installed (pip install '.[test]')")
def test_plots_and_full_gpu_report(tmp_path):
    md = tmp_path / "docs" / "perf.md"
    md.parent.mkdir()
    md.write_text("# Performance\n")
    images = report.write_report(gpu_doc(), compile_doc(), str(md), str(tmp_path / "docs" / "img"))
    assert set(images) == {"gemm_squares_bf16.png", "gemm_llm_bf16.png", "fused_speedup.png"}
    for name in images:
        data = (tmp_path / "docs" / "img" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    text = md.read_text()
    assert "![gemm_squares_bf16.png](img/gemm_squares_bf16.png)" in text
    assert "![fused speedups](img/fused_speedup.png)" in text
    assert "Measured ceilings in this run: bf16 GEMM 790 TFLOP/s" in text and "4.30 TB/s" in text
    assert "### Failures" in text and "relative error 0.5" in text
    assert "NVIDIA H200 (CUDA 13.0" in text


def test_plots_skip_without_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "_mpl", lambda: None)
    md = tmp_path / "perf.md"
    assert report.write_report(gpu_doc(), None, str(md), str(tmp_path / "img")) == []
    assert "plots not drawn: matplotlib is not installed" in md.read_text()


def test_command_line_copies_the_data(tmp_path):
    g, c = tmp_path / "g.json", tmp_path / "c.json"
    g.write_text(json.dumps(gpu_doc()))
    c.write_text(json.dumps(compile_doc()))
    md, img, data = tmp_path / "perf.md", tmp_path / "img", tmp_path / "data"
    assert report.main(["--gpu", str(g), "--compile", str(c), "--md", str(md), "--img", str(img),
                        "--data", str(data)]) == 0
    assert json.loads((data / "gpu.json").read_text()) == gpu_doc()
    assert json.loads((data / "compile.json").read_text()) == compile_doc()
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ValueError, match="no 'records'"):
        report.load(str(bad))
    assert report.load(str(tmp_path / "missing.json")) is None


def test_committed_perf_md_matches_the_committed_data(tmp_path):
    """docs/perf.md's generated sections are what docs/data/*.json regenerate."""
    docs = os.path.join(ROOT, "docs")
    data = os.path.join(docs, "data")
    if not os.path.exists(os.path.join(data, "compile.json")):
        pytest.skip("no committed benchmark data")
    md = tmp_path / "perf.md"
    shutil.copyfile(os.path.join(docs, "perf.md"), md)
    gpu = report.load(os.path.join(data, "gpu.json"))
    comp = report.load(os.path.join(data, "compile.json"))
    if gpu is not None and not HAVE_MPL:
        pytest.skip("regenerating GPU plots needs matplotlib")
    report.write_report(gpu, comp, str(md), str(tmp_path / "img"))
    assert md.read_text() == open(os.path.join(docs, "perf.md")).read(), \
        "docs/perf.md is stale: run python benchmarks/report.py"


def test_synthetic_docs_are_not_mutated():
    d = gpu_doc()
    before = copy.deepcopy(d)
    report.gemm_table(d)
    report.targets(d, compile_doc())
    assert d == before
