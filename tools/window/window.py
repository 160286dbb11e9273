"""The GPU window: one command that proves or refutes every kernel family on a GPU (docs/gpu-window.md).

    python3 tools/window/window.py run OUT [--budget S] [--only STAGES] [--families F,G]   # on the GPU machine
    python3 tools/window/window.py dry OUT                                                  # anywhere, no GPU

Stages, in order, each under its own timeout, each appending its verdict to OUT/summary.txt the moment it
ends (a later hang never loses an earlier result):
  env        nvidia-smi, clocks, versions, compute-sanitizer, heddle's view of the device      -> OUT/env.txt
  install    the wheel `prepare` built (tools/gpu_window.sh), else a source build; import check
  smoke      one small kernel of each mechanism (cp.async, TMA + wgmma roles)
  families   every family heddle generates for the device, each in a process of its own (a sticky CUDA
             error stays in its family), numbers against float64 with outputs poisoned, waits bounded
             (HEDDLE_DEBUG=bounded_waits), in parallel with the backend tests (pytest: torch.compile
             backend on CUDA, opcheck, the dynamo tests under the machine's torch)
  sanitize   compute-sanitizer memcheck on every family, racecheck + synccheck on the role-based ones
             (first case each, lineinfo, torch's caching allocator off)
  dispatch   benchmarks/test_dispatch_bench.py's GPU tests (host time per repeated heddle.matmul, Kernel,
             scaled_mm and grouped call beside torch's; issue 31's <= 2 us), at most 75 s   -> OUT/dispatch.json
  bench      tools/window/bench_quick.py, sized to the time left                                 -> OUT/bench.jsonl
Per-case results of smoke/families/sanitize: OUT/results.jsonl. Logs of every process: OUT/logs.tar.gz
(re-packed after each stage). This orchestrator's own log: OUT/window.log. Seven files in all.

dry: the same stages on a machine without a GPU: no install, families lowered + prepared + the first case of
each compiled with NVRTC, two families run as printed by the interpreter, the sanitizer commands built and
their family run bare, the benchmark plumbing on CPU tensors, and benchmarks/report.py over its output.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
STAGES = ("env", "install", "smoke", "families", "sanitize", "dispatch", "bench")
# the families stage's debug build: every spin bounded (10 s: a sanitizer's slowdown never trips it) and line
# info for the sanitizer, one setting for both stages so the sanitizer reuses the families' compiled kernels
DEBUG = "bounded_waits=10000,lineinfo"


class Window:
    def __init__(self, out, mode, budget, families):
        self.out, self.mode, self.families = out, mode, families
        self.t0 = time.time()
        self.deadline = self.t0 + budget
        self.work = os.path.join(out, "_work") if mode == "dry" else "/tmp/heddle-window"
        self.logs = os.path.join(self.work, "logs")
        os.makedirs(self.logs, exist_ok=True)
        os.makedirs(out, exist_ok=True)
        self.env = dict(os.environ, PYTHONUNBUFFERED="1", HEDDLE_CACHE_DIR=os.path.join(self.work, "cache"))
        self.env.pop("HEDDLE_DEBUG", None)
        self.py = sys.executable

    # --- bookkeeping ------------------------------------------------------------------------------
    def left(self) -> float:
        return self.deadline - time.time()

    def log(self, msg: str) -> None:
        line = f"[{time.time() - self.t0:6.1f}s] {msg}"
        print(line, flush=True)
        with open(os.path.join(self.out, "window.log"), "a") as f:
            f.write(line + "\n")

    def verdict(self, stage: str, text: str) -> None:
        with open(os.path.join(self.out, "summary.txt"), "a") as f:
            f.write(f"{stage:9s} {text}\n")
        self.log(f"VERDICT {stage}: {text}")

    def pack(self) -> None:
        """OUT/logs.tar.gz: every process log so far (re-packed after each stage)."""
        tmp = os.path.join(self.work, "logs.tar.gz")
        with tarfile.open(tmp, "w:gz") as t:
            t.add(self.logs, arcname="logs")
        shutil.copy(tmp, os.path.join(self.out, "logs.tar.gz"))

    def sh(self, name, cmd, timeout, env=None, cwd=ROOT, deadline=None):
        """Runs cmd (a list) with its output in logs/<name>.log; returns (rc or 'timeout' or 'skipped', seconds,
        log tail). deadline: the stage's end (epoch seconds): a job that would start after it is skipped."""
        path = os.path.join(self.logs, name + ".log")
        t = time.time()
        end = min(self.deadline, deadline or self.deadline)
        if end - t < 5:
            return "skipped", 0.0, "not started: the stage's time was up"
        timeout = max(1.0, min(timeout, end - t))
        with open(path, "w") as f:
            f.write("$ " + " ".join(cmd) + "\n")
            f.flush()
            try:
                p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env or self.env, cwd=cwd,
                                     start_new_session=True)
            except OSError as e:
                f.write(f"cannot start: {e}\n")
                return f"cannot start: {e}", 0.0, str(e)
            try:
                rc = p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, 9)
                except OSError:
                    pass
                p.wait()
                rc = "timeout"
                f.write(f"\n*** killed after {timeout:.0f} s\n")
        with open(path, errors="replace") as f:
            tail = f.read()[-3000:]
        return rc, time.time() - t, tail

    def results(self, name) -> list:
        path = os.path.join(self.work, name + ".jsonl")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]

    def keep_results(self, recs) -> None:
        with open(os.path.join(self.out, "results.jsonl"), "a") as f:
            for r in recs:
                f.write(json.dumps(r, default=str) + "\n")

    # --- stages ------------------------------------------------------------------------------------
    def stage_env(self):
        path = os.path.join(self.out, "env.txt")
        cmds = [["date", "-u"], ["uname", "-a"], ["nproc"],
                ["nvidia-smi"], ["nvidia-smi", "--query-gpu=name,compute_cap,driver_version,memory.total,clocks.sm,"
                                 "clocks.max.sm,clocks.mem,power.limit,temperature.gpu,persistence_mode,"
                                 "compute_mode", "--format=csv"],
                ["nvcc", "--version"], ["compute-sanitizer", "--version"],
                [self.py, "-c", "import sys, torch; print(sys.version); print('torch', torch.__version__, "
                 "'cuda', torch.version.cuda, 'available', torch.cuda.is_available()); "
                 "print(torch.cuda.get_device_properties(0) if torch.cuda.is_available() else 'no device')"],
                [self.py, "-c", "import triton; print('triton', triton.__version__)"],
                [self.py, "-m", "pip", "list", "--format=freeze"]]
        with open(path, "w") as f:
            for c in cmds:
                f.write(f"\n$ {' '.join(c)}\n")
                f.flush()
                try:
                    r = subprocess.run(c, capture_output=True, text=True, timeout=30)
                    out = r.stdout + r.stderr
                    if c[-1] == "--format=freeze":
                        out = "\n".join(ln for ln in out.splitlines()
                                        if ln.split("==")[0].lower() in ("torch", "triton", "numpy", "pytest",
                                                                         "pytest-xdist", "pytest-timeout", "pybind11",
                                                                         "scikit-build-core", "nvidia-cuda-nvrtc",
                                                                         "nvidia-cuda-runtime", "matplotlib", "heddle"))
                    f.write(out)
                except (OSError, subprocess.TimeoutExpired) as e:
                    f.write(f"(not available: {e})\n")
        with open(path) as f:
            text = f.read()
        gpu = next((ln for ln in text.splitlines() if "compute_cap" not in ln and ln.count(",") >= 8), "no GPU line")
        self.verdict("env", f"done: {gpu.strip()[:160]}")

    def stage_install(self):
        """The prepared wheel into /tmp/heddle-site (PYTHONPATH), Python files newer than it laid over; else a
        source build with its log kept. Then `import heddle` in a fresh process."""
        stamp = os.path.join(ROOT, ".whl", "STAMP")
        info = {}
        if os.path.exists(stamp):
            with open(stamp) as f:
                info = dict(ln.strip().split("=", 1) for ln in f if "=" in ln)
        sys.path.insert(0, HERE)
        import prepare_stamp
        now = prepare_stamp.digests(ROOT)
        wheels = sorted(w for w in os.listdir(os.path.join(ROOT, ".whl")) if w.startswith("heddle-") and
                        w.endswith(".whl")) if os.path.isdir(os.path.join(ROOT, ".whl")) else []
        notes = []
        native_stale = bool(info) and info.get("native") != now["native"]
        if self.mode == "dry":
            how = "dry run: the installed heddle"
            if not wheels:
                notes.append("no prepared wheel in .whl/ (tools/gpu_window.sh prepare builds it)")
            elif native_stale:
                notes.append("the wheel is older than src/ (a real run would build from source)")
            self.start_aten(None)
        elif wheels and not native_stale:
            site = "/tmp/heddle-site"
            rc, s, tail = self.sh("install-wheel", [self.py, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                                                   "--no-compile", "--target", site, "--upgrade",
                                                   os.path.join(ROOT, ".whl", wheels[-1])], 120)
            if rc == 0:
                if info.get("python") != now["python"]:  # Python edited after prepare: the tree's files win
                    shutil.copytree(os.path.join(ROOT, "python", "heddle"), os.path.join(site, "heddle"),
                                    dirs_exist_ok=True)
                    notes.append("python/heddle newer than the wheel: laid over it")
                self.env["PYTHONPATH"] = site + os.pathsep + self.env.get("PYTHONPATH", "")
                sys.path.insert(0, site)  # this process reads the family catalogue, which imports heddle
                self.start_aten(site)
                how = f"wheel {wheels[-1]} (commit {info.get('commit', '?')}) in {s:.0f} s"
            else:
                how = None
                notes.append(f"wheel install failed (rc {rc}): {tail[-300:]}")
        else:
            how = None
            notes.append("no wheel" if not wheels else "wheel older than src/")
        if how is None:  # fall back to a build from source (no network: the machine's own build tools)
            rc, s, tail = self.sh("install-source", [self.py, "-m", "pip", "install", "--no-build-isolation",
                                                    "--no-deps", "--no-index", "."], 240)
            how = f"source build rc={rc} in {s:.0f} s"
        rc, _, tail = self.sh("import", [self.py, "-c", "import heddle, torch; print(heddle.__file__, "
                                                        "heddle.__version__, heddle.nvrtc_available(), "
                                                        "heddle.gpu_available())"], 60)
        ok = rc == 0
        self.verdict("install", f"{'ok' if ok else 'FAILED'}: {how}; import: {tail.strip().splitlines()[-1][:200]}"
                     + ("; " + "; ".join(notes) if notes else ""))
        return ok

    def start_aten(self, site):
        """heddle._C_aten against this machine's torch (tools/window/build_aten.py), built in the background
        while the smoke and families stages run; the bench stage waits for it (join_aten). The dry run builds
        it into a scratch copy only when HEDDLE_WINDOW_ATEN=1 (it costs a minute of a 2-core machine)."""
        if self.mode == "dry":
            if os.environ.get("HEDDLE_WINDOW_ATEN") != "1":
                return
            import heddle
            site = os.path.join(self.work, "aten-site")
            shutil.copytree(os.path.dirname(heddle.__file__), os.path.join(site, "heddle"), dirs_exist_ok=True)
        log = open(os.path.join(self.logs, "build-aten.log"), "w")
        self._aten = (subprocess.Popen([self.py, os.path.join(HERE, "build_aten.py"), "--site", site],
                                       stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=ROOT), log, time.time(), site)

    def join_aten(self, seconds):
        """Wait up to `seconds` for the background _C_aten build; one verdict either way."""
        if not getattr(self, "_aten", None):
            return
        p, log, t, site = self._aten
        self._aten = None
        try:
            p.wait(timeout=max(1, seconds))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()
        with open(log.name, errors="replace") as f:
            last = [ln for ln in f.read().splitlines() if ln.strip()][-1:] or ["no output"]
        env = dict(self.env, PYTHONPATH=site + os.pathsep + self.env.get("PYTHONPATH", ""))
        rc, _, tail = self.sh("aten-status", [self.py, "-c", "import heddle.core.aten as a; print(a.status())"], 60,
                              env=env)
        state = tail.strip().splitlines()[-1][:160] if tail.strip() else f"rc={rc}"
        self.verdict("aten", f"rc={p.returncode} in {time.time() - t:.0f} s: {last[0][:200]}; heddle.core.aten: {state}")

    def family_cmd(self, families, stage, first_only=False, interpret=""):
        cmd = [self.py, os.path.join(HERE, "family_run.py"), "--families", families, "--stage", stage,
               "--mode", "dry" if self.mode == "dry" else "gpu",
               "--results", os.path.join(self.work, f"{stage}-{families.replace(',', '+')}.jsonl")]
        if first_only:
            cmd.append("--first-only")
        if interpret:
            cmd += ["--interpret", interpret]
        return cmd

    def stage_smoke(self):
        env = dict(self.env, HEDDLE_DEBUG=DEBUG)
        fams = "cp_async,sm90_coop"
        rc, s, tail = self.sh("smoke", self.family_cmd(fams, "smoke", first_only=True), 90, env=env)
        recs = self.results(f"smoke-{fams.replace(',', '+')}")
        self.keep_results(recs)
        got = ", ".join(f"{r['family']}: {r['status']}" for r in recs) or "no result"
        self.verdict("smoke", f"{'ok' if rc == 0 else 'FAILED (rc ' + str(rc) + ')'} in {s:.0f} s: {got}")
        return rc == 0

    def targets_families(self):
        sys.path.insert(0, HERE)
        from families import FAMILIES
        if self.mode == "dry":
            target = "sm_90a"
        else:
            rc = subprocess.run([self.py, "-c", "import heddle; print(heddle.runtime.target_for_device())"],
                                capture_output=True, text=True, env=self.env, timeout=60)
            target = rc.stdout.strip().splitlines()[-1] if rc.returncode == 0 and rc.stdout.strip() else "sm_90a"
        want = [f for f in FAMILIES.values() if (not self.families or f.name in self.families)
                and (self.mode == "dry" or f.needs in ("any", target))]
        return target, want

    def pool(self, jobs, workers, seconds=None):
        """jobs: (name, cmd, timeout, env) run `workers` at a time, in order, within `seconds` from now (jobs
        that would start later are skipped); returns {name: (rc, seconds, tail)}."""
        out = {}
        deadline = time.time() + seconds if seconds else None
        with cf.ThreadPoolExecutor(workers) as ex:
            futs = {ex.submit(self.sh, n, c, t, e, ROOT, deadline): n for n, c, t, e in jobs}
            for fut in cf.as_completed(futs):
                out[futs[fut]] = fut.result()
        return out

    def stage_families(self):
        target, fams = self.targets_families()
        dry = self.mode == "dry"
        env = dict(self.env, HEDDLE_DEBUG=DEBUG)
        per = 150 if not dry else 600
        jobs = [(f"family-{f.name}", self.family_cmd(f.name, "families", interpret="cp_async,sm90_coop" if dry else ""),
                 per, env) for f in fams]
        # the backend's tests on this machine's torch (the GPU machine's differs from CI's), beside the families
        ptests = ["tests/gpu/test_dynamo_gpu.py", "tests/torch/test_dynamo_ops.py", "tests/torch/test_dynamo.py",
                  "tests/gpu/test_gpu_matmul.py"]
        pcmd = [self.py, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", *ptests]
        if dry:
            pcmd.append("--collect-only")
        else:
            pcmd += ["-n", "4", "--timeout", "120"]
        jobs.append(("pytest-backend", pcmd, 240 if not dry else 300, self.env))
        done = self.pool(jobs, 2 if dry else 7, None if dry else min(170, self.left() - 150))
        recs = []
        for f in fams:
            rs = self.results(f"families-{f.name}")
            recs += rs
            rc, s, tail = done[f"family-{f.name}"]
            passed = sum(r["status"] == "pass" for r in rs)
            bad = [r for r in rs if r["status"] != "pass"]
            text = f"{f.name}: {passed}/{len(f.cases)} pass in {s:.0f} s"
            if rc == "timeout":
                started = [ln.split("start ", 1)[1] for ln in tail.splitlines() if ln.startswith("family_run: start")]
                hung = [ln for ln in tail.splitlines() if "bounded wait expired" in ln][:2]
                text += (f"; TIMEOUT in {started[-1] if started else '?'} after {len(rs)} cases"
                         + (f" ({' | '.join(hung)})" if hung else ""))
            for r in bad[:3]:
                text += f"; {r['case']}: {r['status']} " + (r.get("error") or json.dumps(r.get("first") or
                                                                                       r.get("second") or r.get("why")))[:300]
            self.verdict("families", text)
        self.keep_results(recs)
        rc, s, tail = done["pytest-backend"]
        last = [ln for ln in tail.splitlines() if ln.strip()][-3:]
        self.verdict("pytest", f"rc={rc} in {s:.0f} s: {' | '.join(last)[:400]}")
        return target, fams

    def stage_sanitize(self, fams):
        have = shutil.which("compute-sanitizer") or next(
            (p for p in ("/usr/local/cuda/bin/compute-sanitizer", "/usr/local/cuda/compute-sanitizer/compute-sanitizer",
                         "/opt/nvidia/compute-sanitizer/compute-sanitizer") if os.path.exists(p)), None)
        env = dict(self.env, HEDDLE_DEBUG=DEBUG, PYTORCH_NO_CUDA_MEMORY_CACHING="1")
        jobs = []  # memcheck on every family first, then synccheck and racecheck on the role-based ones
        for tool, f in [("memcheck", f) for f in fams] + [(t, f) for t in ("synccheck", "racecheck") for f in fams
                                                          if f.roles]:
            cmd = self.family_cmd(f.name, f"sanitize-{tool}", first_only=True)
            if have and self.mode != "dry":
                cmd = [have, "--tool", tool, "--error-exitcode", "7", "--print-limit", "30", "--launch-timeout", "60",
                       *(["--racecheck-report", "all"] if tool == "racecheck" else []), *cmd]
            jobs.append((f"{tool}-{f.name}", cmd, 120, env))
        if self.mode == "dry":
            jobs = jobs[:2]  # the commands are built for every family; two run bare to prove the path
        elif not have:
            self.verdict("sanitize", "compute-sanitizer not found: skipped")
            return
        done = self.pool(jobs, 2 if self.mode == "dry" else 8, None if self.mode == "dry" else
                         min(150, self.left() - 100))
        skipped = sorted(n for n, (rc, _, _) in done.items() if rc == "skipped")
        if skipped:
            self.verdict("sanitize", f"{len(skipped)} jobs not started (time): {', '.join(skipped)}")
        for name, (rc, s, tail) in sorted(done.items()):
            if rc == "skipped":
                continue
            errs = [ln for ln in tail.splitlines() if "ERROR SUMMARY" in ln or "RACECHECK SUMMARY" in ln]
            state = "clean" if rc == 0 else ("TIMEOUT" if rc == "timeout" else
                                             "FINDINGS" if rc == 7 else f"rc={rc}")
            self.verdict("sanitize", f"{name}: {state} in {s:.0f} s {' '.join(errs)[:200]}")
            self.keep_results([{"stage": "sanitize", "job": name, "rc": rc, "seconds": round(s, 1),
                                "tail": tail[-1500:] if rc != 0 else " ".join(errs)}])

    def stage_dispatch(self):
        """The dispatch benchmark's GPU tests (its recorder writes gpu.json: kept as OUT/dispatch.json, which
        `benchmarks/report.py --gpu OUT/dispatch.json` reads); in dry mode collected only (they skip without a GPU)."""
        self.join_aten(min(90, self.left() - 60))
        tmp = os.path.join(self.work, "dispatch")
        cmd = [self.py, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", "-m", "gpu",
               os.path.join(ROOT, "benchmarks", "test_dispatch_bench.py"), "--bench-out", tmp]
        if self.mode == "dry":
            cmd.append("--collect-only")
        rc, s, tail = self.sh("dispatch", cmd, min(75, max(20, self.left() - 120)))
        got = os.path.join(tmp, "gpu.json")
        if os.path.exists(got):
            shutil.copy(got, os.path.join(self.out, "dispatch.json"))
        last = [ln for ln in tail.splitlines() if ln.strip()][-2:]
        self.verdict("dispatch", f"rc={rc} in {s:.0f} s{'' if os.path.exists(got) else ' (no records)'}: "
                                 f"{' | '.join(last)[:300]}")

    def stage_bench(self):
        self.join_aten(min(90, self.left() - 60))
        out = os.path.join(self.out, "bench.jsonl")
        deadline = self.deadline - 15
        cmd = [self.py, os.path.join(HERE, "bench_quick.py"), "--out", out, "--deadline", str(deadline)]
        if self.mode == "dry":
            cmd.append("--dry")
        if self.bench_cases:
            cmd += ["--cases", self.bench_cases]
        rc, s, tail = self.sh("bench", cmd, max(30, deadline - time.time() + 10))
        n = 0
        if os.path.exists(out):
            with open(out) as f:
                n = sum(1 for ln in f if '"impl"' in ln)
        self.verdict("bench", f"rc={rc} in {s:.0f} s: {n} timings in bench.jsonl")
        if self.mode == "dry":  # the report path a real window's JSON takes
            md = os.path.join(self.work, "perf.md")
            with open(os.path.join(ROOT, "docs", "perf.md")) as f, open(md, "w") as g:
                g.write(f.read())
            rc, s, tail = self.sh("report", [self.py, os.path.join(ROOT, "benchmarks", "report.py"), "--window", out,
                                             "--md", md, "--img-dir", os.path.join(self.work, "img"), "--no-data"], 120)
            self.verdict("report", f"rc={rc}: {tail.strip().splitlines()[-1][:200] if tail.strip() else ''}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=("run", "dry"))
    ap.add_argument("out")
    ap.add_argument("--budget", type=float, default=420, help="seconds for the whole window (default 420)")
    ap.add_argument("--only", default="", help="comma-separated stages (second-command mode); env always runs")
    ap.add_argument("--families", default="", help="comma-separated families (default: every family)")
    ap.add_argument("--bench-cases", default="", help="comma-separated bench case label prefixes (default: all, "
                    "in priority order: tools/window/bench_quick.py plan())")
    args = ap.parse_args(argv)
    only = set(s for s in args.only.split(",") if s)
    unknown = only - set(STAGES)
    if unknown:
        ap.error(f"unknown stages {sorted(unknown)}; stages: {', '.join(STAGES)}")
    fams = [f for f in args.families.split(",") if f]
    w = Window(os.path.abspath(args.out), "dry" if args.mode == "dry" else "run", args.budget, fams)
    w.bench_cases = args.bench_cases
    w.log(f"window {args.mode}: budget {args.budget:.0f} s, stages {sorted(only) or 'all'}, families {fams or 'all'}")
    want = lambda s: not only or s in only or s == "env"  # noqa: E731
    status = 0
    for stage in STAGES:
        if not want(stage):
            continue
        if w.left() < 10 and stage != "env":
            w.verdict(stage, f"skipped: {w.left():.0f} s left of the budget")
            continue
        t = time.time()
        try:
            if stage == "env":
                w.stage_env()
            elif stage == "install":
                if not w.stage_install():
                    status = 1
                    w.verdict("window", "stopped: heddle does not import")
                    break
            elif stage == "smoke":
                status |= 0 if w.stage_smoke() else 1
            elif stage == "families":
                w._fams = w.stage_families()[1]
            elif stage == "sanitize":
                fams = getattr(w, "_fams", None) or w.targets_families()[1]
                w.stage_sanitize(fams)
            elif stage == "dispatch":
                w.stage_dispatch()
            elif stage == "bench":
                w.stage_bench()
        except Exception as e:  # noqa: BLE001 - a broken stage is a verdict, never the end of the window
            import traceback
            w.verdict(stage, f"STAGE ERROR {type(e).__name__}: {e}")
            w.log(traceback.format_exc())
            status = 1
        w.log(f"stage {stage} took {time.time() - t:.1f} s")
        w.pack()
    w.join_aten(min(30, max(1, w.left())))  # a window without its bench stage still says what the build did
    w.log(f"window done in {time.time() - w.t0:.0f} s")
    with open(os.path.join(w.out, "summary.txt")) as f:
        print(f.read())
    return status


if __name__ == "__main__":
    sys.exit(main())
