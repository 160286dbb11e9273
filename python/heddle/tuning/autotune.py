"""heddle.autotune: choose a matmul schedule by measuring candidates.

    import heddle
    res = heddle.autotune.tune(build, "sm_90a", m=4096, n=4096, k=4096)  # build() -> unscheduled Fusion
    print(res)              # every candidate (pruned and why, spilled, timed) and the chosen config
    y = res.kernel(a, b)    # the chosen config, compiled

    HEDDLE_AUTOTUNE=1 python app.py   # heddle.matmul tunes each problem (per power-of-two M bucket)
                                      # the first time it runs on a GPU, prints the choice, uses it

Candidates come from the target (`config_space`): tile shape and warp grid, k-tile, stages,
prefetch, load kind, and on targets with warp specialisation, roles with register budgets. Targets
and new schedule features add candidates with `register_space(name, fn)`.

Pruning, cheapest first:
  1. the problem: a tile more than twice the problem, accumulators that cannot fit in 255 registers
     per thread (a k loop shorter than the stage count is kept: it runs, predicated);
  2. lowering (a fraction of a millisecond per candidate): whatever the target cannot hold
     (shared memory, threads, features it lacks) raises ScheduleError, whose message is kept;
  3. NVRTC (runs on a CPU too, candidates compiled in parallel): spills in the ptxas report, an
     ignored setmaxnreg or a compile error drop the candidate;
  4. the timer: survivors are validated against torch (fresh random data, poisoned output) and
     timed over rotated inputs (heddle.bench.measure: CUDA graph replays of a batch of calls between CUDA
     events, so host dispatch does not rank the candidates); a wrong result drops the candidate.

Results persist per (problem key, config key) in a JSON store, <heddle cache dir>/autotune.json
(HEDDLE_AUTOTUNE_STORE overrides), each with the hash of the candidate's generated source: a new
candidate is tuned alone, one whose code changed is re-tuned, the rest are read back. The timer is
injectable (`timer(kernel, config, problem) -> ms or Stats`), so pruning, compiling, persistence and
selection run and are tested on machines without a GPU.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import datetime
import hashlib
import json
import os
import sys
import threading
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .. import _C
from ..core.errors import CompileError, HeddleError, RuntimeUnavailable
from ..core.kernel import real_advisories as _real_advisories

STORE_VERSION = 1
ENV_SWITCH = "HEDDLE_AUTOTUNE"
ENV_STORE = "HEDDLE_AUTOTUNE_STORE"

from .space import (  # noqa: E402, F401  (re-exported: heddle.autotune is the public face)
    Config, Problem, SpaceFn, _async_copy_space, _plain_space, _round_up, _wgmma_space, _spaces, _tiles, config_space, register_pool_problem, register_space,
    space_names, static_prune)

# --- the store ---------------------------------------------------------------------------------


def default_store_path() -> str:
    path = os.environ.get(ENV_STORE)
    if path:
        return path
    d = _C.runtime.cache_dir()
    if not d:
        raise RuntimeError("heddle.autotune: no cache directory for the tuning store; set HEDDLE_CACHE_DIR or "
                           f"{ENV_STORE}")
    return os.path.join(d, "autotune.json")


class Store:
    """JSON file: {"version": 1, "problems": {problem_key: {"describe": str, "configs": {config_key:
    entry}}}}. Writes merge under a file lock and replace the file atomically, so concurrent tuners
    keep each other's entries."""

    def __init__(self, path: Optional[str] = None):
        self.path = path or default_store_path()

    def _read(self) -> dict:
        try:
            with open(self.path) as f:
                doc = json.load(f)
        except FileNotFoundError:
            return {"version": STORE_VERSION, "problems": {}}
        except (OSError, ValueError) as e:
            bad = self.path + ".corrupt"
            with contextlib.suppress(OSError):
                os.replace(self.path, bad)
            print(f"heddle.autotune: unreadable tuning store {self.path} ({e}); moved to {bad}, starting afresh",
                  file=sys.stderr)
            return {"version": STORE_VERSION, "problems": {}}
        if not isinstance(doc, dict) or doc.get("version") != STORE_VERSION or not isinstance(doc.get("problems"), dict):
            return {"version": STORE_VERSION, "problems": {}}
        return doc

    @contextlib.contextmanager
    def _locked(self):
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            yield
            return
        with open(self.path + ".lock", "a") as lk:
            fcntl.flock(lk, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lk, fcntl.LOCK_UN)

    def problems(self) -> dict:
        return self._read()["problems"]

    def entries(self, key: str) -> Dict[str, dict]:
        """The stored configs of a problem; when this machine has none, the fleet's (HEDDLE_REMOTE_CACHE),
        kept here too."""
        local = dict(self._read()["problems"].get(key, {}).get("configs", {}))
        if local:
            return local
        shared = _remote_entries(key)
        if shared is None:
            return {}
        self.put(key, shared[0], shared[1], share=False)
        return dict(shared[1])

    def put(self, key: str, describe: str, entries: Dict[str, dict], share: bool = True) -> None:
        if not entries:
            return
        with self._locked():
            doc = self._read()
            prob = doc["problems"].setdefault(key, {"describe": describe, "configs": {}})
            prob["describe"] = describe
            prob["configs"].update(entries)
            tmp = f"{self.path}.tmp.{os.getpid()}.{threading.get_ident()}"
            with open(tmp, "w") as f:
                json.dump(doc, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        if share and _C.runtime.remote_enabled():
            _C.runtime.remote_put(REMOTE_PREFIX + key, _remote_value(prob["describe"], prob["configs"]))


# The fleet's tuning results in the remote cache (docs/runtime.md, "Remote cache"): one value per problem,
# {"sha256": hex of body, "body": json of {"describe", "configs"}}, verified before use.
REMOTE_PREFIX = "heddle:tune:"
_remote_rejected = threading.Event()


def _remote_value(describe: str, configs: dict) -> bytes:
    body = json.dumps({"describe": describe, "configs": configs}, sort_keys=True)
    return json.dumps({"sha256": hashlib.sha256(body.encode()).hexdigest(), "body": body}).encode()


def _remote_entries(key: str) -> Optional[Tuple[str, Dict[str, dict]]]:
    if not _C.runtime.remote_enabled():
        return None
    raw = _C.runtime.remote_get(REMOTE_PREFIX + key)
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
        body = doc["body"]
        if hashlib.sha256(body.encode()).hexdigest() != doc["sha256"]:
            raise ValueError("checksum mismatch")
        val = json.loads(body)
        if not isinstance(val["describe"], str) or not isinstance(val["configs"], dict):
            raise ValueError("not a tuning entry")
        return val["describe"], val["configs"]
    except (ValueError, KeyError, TypeError) as e:
        if not _remote_rejected.is_set():
            _remote_rejected.set()
            print(f"heddle: warning: remote tuning entry {REMOTE_PREFIX + key} rejected ({e}); tuning here "
                  "(reported once per process)", file=sys.stderr)
        return None


# --- progress ----------------------------------------------------------------------------------


class _Progress:
    """tqdm when importable, else a one-line bar on stderr; nothing when disabled."""

    def __init__(self, total: int, desc: str, enabled: bool, stream=None):
        self.total, self.desc, self.enabled, self.n = total, desc, enabled and total > 0, 0
        self.stream = stream or sys.stderr
        self._bar = None
        if self.enabled:
            try:
                from tqdm import tqdm
                self._bar = tqdm(total=total, desc=desc, file=self.stream, leave=False)
            except ImportError:
                self._draw("")

    def _draw(self, note: str) -> None:
        width = 30
        done = int(width * self.n / self.total)
        self.stream.write(f"\r{self.desc} [{'#' * done}{'.' * (width - done)}] {self.n}/{self.total} {note[:40]:<40}")
        self.stream.flush()

    def update(self, note: str = "") -> None:
        if not self.enabled:
            return
        self.n += 1
        if self._bar is not None:
            self._bar.set_postfix_str(note[:40], refresh=False)
            self._bar.update(1)
        else:
            self._draw(note)

    def close(self) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
        else:
            self.stream.write("\n")
            self.stream.flush()


def _progress_default() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


# --- tuning ------------------------------------------------------------------------------------


@dataclass
class Candidate:
    config: Config
    status: str            # pruned | compile_error | spills | compiled | wrong | launch_error | ok
    reason: str = ""
    ms: Optional[float] = None
    spread: Optional[float] = None
    registers: Optional[int] = None
    smem: Optional[int] = None
    source: Optional[str] = None   # sha256 of the generated source (None when pruned before lowering)
    reused: bool = False           # read back from the store, not run now

    def entry(self) -> dict:
        return {"config": self.config.to_dict(), "status": self.status, "reason": self.reason, "ms": self.ms,
                "spread": self.spread, "registers": self.registers, "smem": self.smem, "source": self.source,
                "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}

    @classmethod
    def from_entry(cls, config: Config, e: dict) -> "Candidate":
        return cls(config, e["status"], e.get("reason", ""), e.get("ms"), e.get("spread"), e.get("registers"),
                   e.get("smem"), e.get("source"), reused=True)


@dataclass
class TuneResult:
    key: str
    describe: str
    target: str
    problem: Problem
    vec: Tuple[int, ...]  # (vec_a, vec_b) or (vec_a, vec_b, vec_e)
    candidates: List[Candidate]
    timed: bool                       # a timer was available
    compiled_now: List[str] = field(default_factory=list)  # config keys compiled by this call
    timed_now: List[str] = field(default_factory=list)     # config keys timed by this call
    _build: Optional[Callable] = None
    _kernels: Dict[str, object] = field(default_factory=dict)

    @property
    def best(self) -> Optional[Config]:
        c = self.best_candidate
        return c.config if c else None

    @property
    def best_candidate(self) -> Optional[Candidate]:
        ok = [c for c in self.candidates if c.status == "ok" and c.ms is not None]
        return min(ok, key=lambda c: c.ms) if ok else None

    def counts(self) -> Dict[str, int]:
        out: Dict[str, int] = {}
        for c in self.candidates:
            out[c.status] = out.get(c.status, 0) + 1
        return out

    @property
    def kernel(self):
        """The chosen config compiled (from the kernel cache when it was compiled before)."""
        best = self.best
        if best is None:
            raise RuntimeError(f"heddle.autotune: no timed candidate for {self.describe} "
                               f"({self._count_text()}); nothing to choose")
        return self.kernel_for(best)

    def kernel_for(self, config: Config):
        k = self._kernels.get(config.key)
        if k is None:
            k = _build_kernel(self._build, config, self.target, self.vec)
            self._kernels[config.key] = k
        return k

    def _count_text(self) -> str:
        return ", ".join(f"{n} {s}" for s, n in sorted(self.counts().items()))

    def table(self, limit: int = 10) -> str:
        timed = sorted((c for c in self.candidates if c.ms is not None and c.status == "ok"), key=lambda c: c.ms)
        lines = [f"{'config':<44} {'ms':>9} {'spread':>7} {'regs':>5}"]
        for c in timed[:limit]:
            lines.append(f"{c.config.key:<44} {c.ms:>9.4f} {100 * (c.spread or 0):>6.1f}% {c.registers or '':>5}")
        if len(timed) > limit:
            lines.append(f"... {len(timed) - limit} more timed")
        return "\n".join(lines)

    def __str__(self) -> str:
        head = f"heddle.autotune {self.describe}\n  candidates: {len(self.candidates)} ({self._count_text()})"
        reasons: Dict[str, int] = {}
        for c in self.candidates:
            if c.status in ("pruned", "spills", "compile_error", "wrong", "launch_error"):
                r = _reason_class(c)
                reasons[r] = reasons.get(r, 0) + 1
        if reasons:
            head += "\n  dropped: " + "; ".join(f"{n} x {r}" for r, n in sorted(reasons.items(), key=lambda x: -x[1]))
        if not self.timed:
            return head + "\n  not timed (no GPU and no timer given): nothing chosen"
        bc = self.best_candidate
        if bc is None:
            return head + "\n  no candidate ran correctly: nothing chosen"
        return (head + "\n" + "\n".join("  " + line for line in self.table().splitlines()) +
                f"\n  chosen: {bc.config} -> {bc.ms:.4f} ms [{bc.config.key}]")


def _reason_class(c: Candidate) -> str:
    r = c.reason.splitlines()[0] if c.reason else c.status
    if c.status == "pruned" and "shared memory" in r:
        return "shared memory over the target's limit"
    if c.status == "spills":
        return "register spills"
    if c.status == "compile_error":
        return "compile error"
    if "accumulators need" in r:
        return "accumulators exceed 255 registers"
    if "more than twice" in r:
        return "tile larger than the problem"
    return r[:60]


def _fresh_fusion(build):
    if hasattr(build, "build_fusion"):   # a MatmulSpec
        return build.build_fusion()
    if hasattr(build, "spec"):           # a FusedMatmul
        return build.spec.build_fusion()
    return build()


def _build_kernel(build, config: Config, target: str, vec):
    from ..core.kernel import Kernel
    fd = _fresh_fusion(build)
    config.apply(fd)
    return Kernel.build(fd, target, vec_a=vec[0], vec_b=vec[1], allow_spills=True,  # spills: a status here
                        vec_e=vec[2] if len(vec) > 2 else 1)


def _device_name(timer) -> str:
    if timer is None:
        return "none"
    return str(getattr(timer, "device_name", None) or type(timer).__name__)


def problem_key(fd, target: str, vec, problem: Problem, device: str) -> Tuple[str, str]:
    """(key, description) of a tuning problem: the fusion's definition, target, operand alignment,
    sizes, device and heddle version."""
    from ..core.version import __version__
    blob = json.dumps({"fusion": str(fd), "target": target, "vec": list(vec), "m": problem.m, "n": problem.n,
                       "k": problem.k, "batch": problem.batch, "device": device, "heddle": __version__},
                      sort_keys=True)
    h = hashlib.sha256(blob.encode()).hexdigest()[:16]
    ops = [e["op"] for e in fd.exprs() if e["op"] not in ("matmul", "cast")]
    dt = fd.inputs[0].dtype
    desc = f"{target} on {device}: {dt} {problem}" + (f" +{'+'.join(ops)}" if ops else "") + f" vec {'x'.join(map(str, vec))}"
    return h, desc


def _reusable(prev: Optional[dict], src: str, timing: bool) -> bool:
    """A stored entry stands when it was made from the same generated source and answers what this
    run asks: a verdict that ends the candidate, a timing when timing, a compile when not timing."""
    if not prev or prev.get("source") != src:
        return False
    st = prev.get("status")
    return st in ("wrong", "spills", "compile_error", "launch_error") or st == ("ok" if timing else "compiled")


def tune(build, target: str, m: int, n: int, k: int, batch: int = 1, *, vec: Tuple[int, ...] = (8, 8),
         space: Optional[Sequence[Config]] = None, timer=None, store: Optional[Store] = None,
         progress: Optional[bool] = None, workers: Optional[int] = None, retune: bool = False) -> TuneResult:
    """Tune the matmul fusion that `build()` returns (a fresh, unscheduled Fusion per call; a
    MatmulSpec or FusedMatmul also works) for `target` and problem size m x n x k (x batch).

    space: the candidates (default: config_space(target, problem)). timer(kernel, config, problem)
    returns milliseconds or a heddle.bench.Stats; None times nothing (compile-only: prune and compile
    every candidate, choose nothing). store: where results persist (default: Store()). retune: ignore
    stored results. Returns a TuneResult; print it to see the candidates and the choice."""
    problem = Problem(int(m), int(n), int(k), int(batch))
    store = store if isinstance(store, Store) else Store(store)
    device = _device_name(timer)
    fd0 = _fresh_fusion(build)
    key, describe = problem_key(fd0, target, vec, problem, device)
    configs = list(space) if space is not None else config_space(target, problem)
    stored = {} if retune else store.entries(key)
    show = _progress_default() if progress is None else progress

    results: Dict[str, Candidate] = {}
    to_compile: List[Tuple[Config, str]] = []
    new_entries: Dict[str, dict] = {}

    # 1. static pruning and lowering: cheap, always redone
    for c in configs:
        why = static_prune(c, problem)
        if why:
            results[c.key] = Candidate(c, "pruned", why)
            continue
        fd = _fresh_fusion(build)
        try:
            c.apply(fd)
            lowered = fd.lower(target, vec[0], vec[1], vec_e=vec[2] if len(vec) > 2 else 1)
        except HeddleError as e:  # ScheduleError, InputError: what the target or layout cannot take
            results[c.key] = Candidate(c, "pruned", str(e))
            continue
        src = hashlib.sha256((lowered.source + "\0" + lowered.rtc_arch).encode()).hexdigest()[:16]
        prev = stored.get(c.key)
        if _reusable(prev, src, timer is not None):
            results[c.key] = Candidate.from_entry(c, prev)
            continue
        results[c.key] = Candidate(c, "compiled", source=src, smem=lowered.smem_bytes)
        to_compile.append((c, src))
    for c in configs:  # record lowering prunes too, so the store shows the whole space
        cand = results[c.key]
        if cand.status == "pruned":
            new_entries[c.key] = cand.entry()

    # 2. NVRTC, in parallel (compile releases the GIL); spills and errors drop the candidate
    res = TuneResult(key, describe, target, problem, tuple(vec), [], timer is not None, _build=build)
    bar = _Progress(len(to_compile), "heddle.autotune compile", show)
    lock = threading.Lock()

    def compile_one(item):
        c, src = item
        cand = results[c.key]
        try:
            kern = _build_kernel(build, c, target, vec)
        except RuntimeUnavailable:
            raise  # no NVRTC: nothing can be tuned
        except CompileError as e:
            cand.status, cand.reason = "compile_error", str(e).splitlines()[0] if str(e) else "compile error"
            kern = None
        except Exception as e:  # noqa: BLE001 - a broken candidate must not end the whole tuning run
            cand.status = "compile_error"
            cand.reason = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            kern = None
        else:
            st = kern.stats
            cand.registers = st.registers
            if st.spill_stores or st.spill_loads:
                cand.status = "spills"
                cand.reason = f"ptxas: {st.registers} registers, {st.spill_stores} bytes spill stores, " \
                              f"{st.spill_loads} bytes spill loads"
            elif _real_advisories(st):  # a serialised wgmma pipeline or an ignored setmaxnreg: slow, never the best
                from ..core.kernel import advisory_code
                adv = _real_advisories(st)
                cand.status = "spills"
                cand.reason = "ptxas advisory " + ", ".join(dict.fromkeys(advisory_code(a) for a in adv)) + \
                    ": " + adv[0].split(":", 1)[-1].strip()
            elif st.setmaxnreg_ignored:
                cand.status, cand.reason = "spills", "ptxas ignored setmaxnreg (C7508)"
        with lock:
            if kern is not None and cand.status == "compiled":
                res._kernels[c.key] = kern
            res.compiled_now.append(c.key)
            bar.update(c.key)

    try:
        nw = workers or min(8, os.cpu_count() or 1)
        if nw > 1 and len(to_compile) > 1:
            with concurrent.futures.ThreadPoolExecutor(nw) as ex:
                list(ex.map(compile_one, to_compile))
        else:
            for item in to_compile:
                compile_one(item)
    finally:
        bar.close()
    for c, _ in to_compile:
        cand = results[c.key]
        if cand.status != "compiled" or timer is None:
            new_entries[c.key] = cand.entry()
    store.put(key, describe, new_entries)

    # 3. validate and time the survivors
    if timer is not None:
        survivors = [c for c, _ in to_compile if results[c.key].status == "compiled"]
        bar = _Progress(len(survivors), "heddle.autotune time", show)
        try:
            for c in survivors:
                cand = results[c.key]
                try:
                    t = timer(res._kernels[c.key], c, problem)
                except AssertionError as e:   # heddle.bench.ValidationError
                    cand.status, cand.reason = "wrong", str(e).splitlines()[0]
                except Exception as e:  # noqa: BLE001 - a launch failure drops this candidate only
                    cand.status, cand.reason = "launch_error", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                else:
                    cand.status = "ok"
                    if hasattr(t, "median"):
                        cand.ms, cand.spread = float(t.median), float(t.spread)
                    else:
                        cand.ms = float(t)
                res.timed_now.append(c.key)
                store.put(key, describe, {c.key: cand.entry()})  # persist as we go: an interrupt keeps results
                bar.update(f"{c.key} {cand.ms:.4f} ms" if cand.ms is not None else c.key)
        finally:
            bar.close()

    res.candidates = [results[c.key] for c in configs]
    return res


# --- heddle.matmul integration (HEDDLE_AUTOTUNE) ------------------------------------------------


def enabled() -> bool:
    """HEDDLE_AUTOTUNE=1 (or true/yes/on) switches tuning on for heddle.matmul; 0, empty or unset off."""
    v = os.environ.get(ENV_SWITCH, "").strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v not in ("", "0", "false", "no", "off") and v not in _warned:
        _warned.add(v)
        print(f"heddle: {ENV_SWITCH}={v!r} is not 0 or 1; autotuning stays off", file=sys.stderr)
    return False


_warned: set = set()
_chosen: Dict[tuple, TuneResult] = {}
_chosen_lock = threading.Lock()


def m_bucket(m: int) -> int:
    """The M a problem is tuned at: the next power of two, between 16 and 16384."""
    b = 16
    while b < m and b < 16384:
        b *= 2
    return b


def default_timer(build, problem: Problem):
    """The timer heddle.matmul tunes with: CUDA events on the current GPU (None without one)."""
    from ..core.runtime import gpu_available
    return GpuTimer(build, problem) if gpu_available() else None


def matmul_kernel(fm, target: str, vec_a: int, vec_b: int, m: int, batch: int = 1, *, timer=None,
                  store: Optional[Store] = None, progress: Optional[bool] = None,
                  space: Optional[Sequence[Config]] = None, vec_e: int = 1):
    """The kernel heddle.matmul runs under HEDDLE_AUTOTUNE=1: the tuned config for this problem's
    signature, target, alignment and M bucket (tuned on first use, persisted), or the automatic
    schedule when nothing could be timed or the layout needs synchronous copies."""
    if vec_a < 2 or vec_b < 2:
        return fm.kernel(target, vec_a, vec_b, int(m), vec_e=vec_e)
    bucket = m_bucket(int(m))
    ck = (fm.spec, target, vec_a, vec_b, bucket, vec_e)
    res = _chosen.get(ck)
    if res is None:
        with _chosen_lock:
            res = _chosen.get(ck)
            if res is None:
                problem = Problem(bucket, fm.spec.n, fm.spec.k, int(batch))
                t = timer if timer is not None else default_timer(fm.spec, problem)
                vec = (vec_a, vec_b) if vec_e == 1 else (vec_a, vec_b, vec_e)
                res = tune(fm.spec, target, bucket, fm.spec.n, fm.spec.k, batch, vec=vec, timer=t,
                           store=store, progress=progress, space=space)
                best = res.best_candidate
                if best is not None:
                    print(f"heddle.autotune: {res.describe} -> {best.config} ({best.ms:.4f} ms, "
                          f"{len(res.candidates)} candidates)", file=sys.stderr)
                else:
                    print(f"heddle.autotune: {res.describe}: nothing timed; using the automatic schedule",
                          file=sys.stderr)
                _chosen[ck] = res
    if res.best is None:
        return fm.kernel(target, vec_a, vec_b, int(m), vec_e=vec_e)
    return res.kernel


def chosen() -> List[Tuple[str, str, Optional[float]]]:
    """(problem, chosen config, ms) for every problem tuned in this process."""
    out = []
    for res in _chosen.values():
        b = res.best_candidate
        out.append((res.describe, str(b.config) if b else "automatic schedule (nothing timed)", b.ms if b else None))
    return out


def print_chosen(file=None) -> None:
    for problem, config, ms in chosen():
        print(f"{problem}: {config}" + (f" ({ms:.4f} ms)" if ms is not None else ""), file=file or sys.stdout)


# --- the GPU timer -----------------------------------------------------------------------------


class GpuTimer:
    """Validates a candidate against torch on fresh random inputs (output poisoned first), then times
    it over input sets rotated past L2 (heddle.bench.measure: CUDA graph replays between CUDA events)."""

    def __init__(self, build, problem: Problem, device=None, budget=None):
        import torch

        from . import bench
        from ..core import reference
        self.device = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
        self.device_name = torch.cuda.get_device_name(self.device)
        self.budget = budget or bench.Budget(warmup_ms=10, target_ms=50, min_reps=10, max_reps=500)
        fd = _fresh_fusion(build)
        sizes = {"M": problem.m, "B": problem.batch, "N": problem.n, "K": problem.k}
        dt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
        specs = []
        for t in fd.inputs:
            shape = [sizes[s] if isinstance(s, str) else s for s in t.shape]
            specs.append((shape, dt[t.dtype]))
        gen = torch.Generator(device=self.device)
        gen.manual_seed(0x5EED)

        def one_set():
            return [bench.random_tensor(s, d, self.device, gen) for s, d in specs]

        first = one_set()
        nsets = bench.rotation_count(bench.set_bytes(first), bench.l2_bytes(self.device))
        self.rotation = bench.Rotation([first] + [one_set() for _ in range(nsets - 1)])
        self.check = one_set()
        for i, x in enumerate(self.check):
            bench.check_not_degenerate(x, f"input {i}")
        self.ref = reference.evaluate(fd, self.check, compute_dtype=torch.float64)
        self._bench = bench

    def __call__(self, kernel, config, problem):
        import torch
        b = self._bench
        b.poison_allocator(self.ref.numel() * self.ref.element_size(), self.device)
        out = kernel(*self.check)
        torch.cuda.synchronize(self.device)
        b.validate(out, self.ref, what=f"{config.key}")
        return b.measure(kernel, self.rotation, b.CudaEventTimer(), self.budget)


# --- command line ------------------------------------------------------------------------------


def main(argv=None) -> int:
    """python -m heddle.autotune [--store PATH] [--all]: the stored problems and their best configs."""
    import argparse
    ap = argparse.ArgumentParser(prog="python -m heddle.autotune", description=main.__doc__)
    ap.add_argument("--store", default=None, help="tuning store (default: <heddle cache dir>/autotune.json)")
    ap.add_argument("--all", action="store_true", help="list every stored candidate, not only the best")
    args = ap.parse_args(argv)
    store = Store(args.store)
    probs = store.problems()
    print(f"tuning store {store.path}: {len(probs)} problem(s)")
    for key, p in sorted(probs.items(), key=lambda kv: kv[1].get("describe", "")):
        entries = p.get("configs", {})
        ok = sorted(((ck, e) for ck, e in entries.items() if e.get("status") == "ok" and e.get("ms") is not None),
                    key=lambda kv: kv[1]["ms"])
        print(f"\n[{key}] {p.get('describe', '')}: {len(entries)} candidates, {len(ok)} timed")
        if ok:
            ck, e = ok[0]
            print(f"  best: {Config.from_dict(e['config'])} -> {e['ms']:.4f} ms [{ck}]")
        if args.all:
            for ck, e in sorted(entries.items()):
                ms = f"{e['ms']:.4f} ms" if e.get("ms") is not None else ""
                print(f"  {ck:<44} {e.get('status', ''):<13} {ms:>12} {(e.get('reason') or '').splitlines()[0][:70] if e.get('reason') else ''}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
