"""pytest plumbing for the benchmarks.

    pytest benchmarks/                          # everything; GPU parts skip without a GPU
    pytest benchmarks/test_compile_bench.py     # compile and CPU dispatch costs (runs on a CPU)
    pytest benchmarks/ --bench-quick            # the quick subset of GPU cases (a few minutes)
    pytest benchmarks/ -k "llm and bf16"        # any pytest selection
    pytest benchmarks/ --bench-autotune         # also time heddle with its autotuned config
    python benchmarks/report.py                 # regenerate docs/perf.md and docs/img/ from the JSON

Results go to --bench-out (default benchmarks/out/): gpu.json and compile.json, each with the
date, commit, command and machine, plus a table printed at the end of the run. Numbers are
reported, never asserted: the only failures are wrong results and broken harness code.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def pytest_addoption(parser):
    g = parser.getgroup("heddle benchmarks")
    g.addoption("--bench-out", default=os.path.join(HERE, "out"), help="directory for gpu.json / compile.json")
    g.addoption("--bench-quick", action="store_true", help="only the quick subset of GPU cases")
    g.addoption("--bench-autotune", action="store_true", help="also time heddle.autotune's chosen config")
    g.addoption("--bench-target-ms", type=float, default=200.0, help="measured time per implementation and case")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (skipped without one)")
    config.addinivalue_line("markers", "quick: in the --bench-quick subset")
    config._heddle_recorder = Recorder(config)


def gpu_unavailable_reason():
    try:
        import torch
    except Exception as e:  # pragma: no cover
        return f"torch not importable: {e}"
    if not torch.cuda.is_available():
        return "no CUDA device visible to torch"
    import heddle
    if not heddle._C.runtime.driver_available():
        return heddle._C.runtime.driver_unavailable_reason()
    return None


def pytest_collection_modifyitems(config, items):
    reason = None
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            if reason is None:
                reason = gpu_unavailable_reason() or ""
            if reason:
                item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU: " + reason))
        if config.getoption("--bench-quick") and item.get_closest_marker("gpu") is not None \
                and item.get_closest_marker("quick") is None and "ceiling" not in item.name:
            item.add_marker(pytest.mark.skip(reason="not in --bench-quick"))


# --- what a run records ------------------------------------------------------------------------


def _git(*args):
    try:
        return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:
        return ""


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_meta(config) -> dict:
    import torch

    import heddle
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": _git("rev-parse", "--short", "HEAD") or "unknown",
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "command": "pytest " + " ".join(str(a) for a in config.invocation_params.args),
        "cpu": _cpu_model(),
        "cpu_cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "heddle": heddle.__version__,
    }
    try:
        meta["loadavg_1m"] = round(os.getloadavg()[0], 2)  # other work on the machine while it ran
    except OSError:
        pass
    try:
        meta["nvrtc"] = heddle._C.runtime.nvrtc_info()["version"]
    except Exception:
        meta["nvrtc"] = None
    try:
        import triton
        meta["triton"] = triton.__version__
    except Exception:
        meta["triton"] = None
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        meta["gpu"] = p.name
        meta["gpu_sms"] = p.multi_processor_count
        meta["gpu_l2_bytes"] = getattr(p, "L2_cache_size", None)
        meta["cuda"] = torch.version.cuda
    else:
        meta["gpu"] = None
    return meta


class Recorder:
    """Collects result records; writes <out>/<kind>.json at the end of the session."""

    def __init__(self, config):
        self.config = config
        self.records = {"gpu": [], "compile": []}
        self.extra = {"gpu": {}, "compile": {}}

    def add(self, kind: str, record: dict) -> None:
        self.records[kind].append(record)

    def set(self, kind: str, key: str, value) -> None:
        self.extra[kind][key] = value

    def write(self):
        out = self.config.getoption("--bench-out")
        written = []
        for kind, recs in self.records.items():
            if not recs:
                continue
            os.makedirs(out, exist_ok=True)
            doc = {"schema": 1, "kind": kind, "meta": run_meta(self.config), **self.extra[kind], "records": recs}
            path = os.path.join(out, f"{kind}.json")
            with open(path, "w") as f:
                json.dump(doc, f, indent=1)
            written.append(path)
        return written


@pytest.fixture(scope="session")
def recorder(request):
    return request.config._heddle_recorder


def pytest_sessionfinish(session, exitstatus):
    rec = getattr(session.config, "_heddle_recorder", None)
    if rec is not None:
        session.config._heddle_written = rec.write()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    rec = getattr(config, "_heddle_recorder", None)
    if rec is None:
        return
    sys.path.insert(0, HERE)
    import report
    tr = terminalreporter
    if rec.records["compile"]:
        tr.write_sep("-", "heddle compile and dispatch costs (reported, not asserted)")
        tr.write_line(report.compile_table(rec.records["compile"]))
    if rec.records["gpu"]:
        tr.write_sep("-", "heddle GPU benchmarks")
        tr.write_line(report.gemm_table({"records": rec.records["gpu"], **rec.extra["gpu"]}, compact=True))
    for path in getattr(config, "_heddle_written", []):
        tr.write_line(f"benchmark results: {path}  (python benchmarks/report.py regenerates docs/perf.md)")


# --- GPU fixtures ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def bench_budget(request):
    from heddle.bench import Budget
    return Budget(warmup_ms=25.0, target_ms=request.config.getoption("--bench-target-ms"), min_reps=10, max_reps=2000)
