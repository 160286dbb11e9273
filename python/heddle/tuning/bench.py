"""Benchmark harness shared by benchmarks/ and heddle.autotune.

What a kernel-library engineer expects of a number, and where each part lives here:

  * device time, not host time: `measure()` captures a batch of calls in a CUDA graph and times its
    replays between two CUDA events (`CudaEventTimer`), per call = the replay's time / its calls; where a
    call cannot be captured, batches of back-to-back calls. An event pair around one call on an idle stream
    would count the host's dispatch of the call as device time (the stream waits for it): for short kernels
    most of the number. The host's time per call is measured apart and reported beside it (`Stats.host`,
    us; `WallTimer` is the host clock, for compile and dispatch costs);
  * warm-up first (module load, NVRTC, handle creation stay out), then many repetitions sized to a
    time budget: `measure()`;
  * median and spread, never a single run or a mean alone: `Stats`, `summarize()`;
  * inputs rotated through several buffers so a small problem does not run out of L2:
    `rotation_count()`, `Rotation`;
  * fresh random data, never zeros (zeros hide unwritten outputs and run faster): `random_tensor()`,
    `check_not_degenerate()`;
  * every implementation validated against a float64 torch reference before it is timed, with its
    output buffer poisoned first: `relative_error()`, `validate()`, `poison_allocator()`.

Timers are objects with mark() / elapsed_ms(a, b) / sync(), so the statistics, rotation and the
measurement loop are tested on a CPU with a fake clock (tests/tuning/test_bench_harness.py).
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, replace
from typing import Callable, Optional, Sequence

# --- statistics --------------------------------------------------------------------------------


def quantile(sorted_samples: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of already sorted samples (numpy's default 'linear' method)."""
    if not sorted_samples:
        raise ValueError("quantile of no samples")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} is outside [0, 1]")
    pos = q * (len(sorted_samples) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_samples) - 1)
    frac = pos - lo
    return sorted_samples[lo] * (1.0 - frac) + sorted_samples[hi] * frac


@dataclass(frozen=True)
class Stats:
    """Summary of repeated measurements (milliseconds unless `unit` says otherwise). host: for a device-time
    measurement (measure()), the host's time per call of the same calls (microseconds), else None."""
    n: int
    median: float
    mean: float
    std: float
    min: float
    max: float
    p20: float
    p80: float
    unit: str = "ms"
    host: Optional["Stats"] = None
    method: str = ""  # how measure() timed the device: "graph" (CUDA graph replays) or "batch" (back to back)

    @property
    def spread(self) -> float:
        """(p80 - p20) / median: the relative width of the middle 60% of the samples."""
        return (self.p80 - self.p20) / self.median if self.median > 0 else 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["spread"] = self.spread
        if self.host is None:
            del d["host"]  # records of plain measurements stay as they were
        else:
            d["host"] = self.host.to_dict()
        if not self.method:
            del d["method"]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Stats":
        return cls(**{k: d[k] for k in ("n", "median", "mean", "std", "min", "max", "p20", "p80")},
                   unit=d.get("unit", "ms"), host=cls.from_dict(d["host"]) if d.get("host") else None,
                   method=d.get("method", ""))

    def scaled(self, factor: float, unit: str) -> "Stats":
        """The same samples in another unit (the host time, in its own unit, is kept as it is)."""
        return Stats(self.n, self.median * factor, self.mean * factor, self.std * factor, self.min * factor,
                     self.max * factor, self.p20 * factor, self.p80 * factor, unit, self.host, self.method)

    def __str__(self) -> str:
        host = f", host {self.host.median:.4g} {self.host.unit}/call" if self.host is not None else ""
        how = f", {self.method}" if self.method else ""
        return (f"{self.median:.4g} {self.unit} (p20-p80 {self.p20:.4g}-{self.p80:.4g}, "
                f"min {self.min:.4g}, n={self.n}{how}{host})")


def summarize(samples: Sequence[float], unit: str = "ms") -> Stats:
    xs = sorted(float(x) for x in samples)
    if not xs:
        raise ValueError("no samples to summarize")
    if any(math.isnan(x) for x in xs):
        raise ValueError("a timing sample is NaN")
    n = len(xs)
    mean = sum(xs) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
    return Stats(n=n, median=quantile(xs, 0.5), mean=mean, std=std, min=xs[0], max=xs[-1],
                 p20=quantile(xs, 0.2), p80=quantile(xs, 0.8), unit=unit)


# --- timers ------------------------------------------------------------------------------------


class WallTimer:
    """Host clock. sync() waits for the GPU first when `cuda` is set (host-side costs of GPU work)."""

    def __init__(self, cuda: bool = False):
        self.cuda = cuda

    def mark(self):
        if self.cuda:
            import torch
            torch.cuda.synchronize()
        return time.perf_counter_ns()

    def elapsed_ms(self, a, b) -> float:
        return (b - a) / 1e6

    def sync(self) -> None:
        if self.cuda:
            import torch
            torch.cuda.synchronize()


class ThreadCpuTimer:
    """The calling thread's CPU time: host work alone, without the time other processes took the core
    from it (CPU-only host-cost benchmarks on a shared machine)."""

    def mark(self):
        return time.thread_time_ns()

    def elapsed_ms(self, a, b) -> float:
        return (b - a) / 1e6

    def sync(self) -> None:
        pass


class CudaEventTimer:
    """CUDA events recorded on the current stream: device time between two marks. Around one call on an idle
    stream that includes the host's dispatch of the call (the stream waits for it), so measure() times CUDA
    graph replays of a batch of calls (capture), or batches of back-to-back calls."""

    def __init__(self):
        import torch
        self._torch = torch

    def mark(self):
        e = self._torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def elapsed_ms(self, a, b) -> float:
        return a.elapsed_time(b)

    def sync(self) -> None:
        self._torch.cuda.synchronize()

    def capture(self, run_batch: Callable[[], None]) -> Callable[[], None]:
        """run_batch() recorded once in a CUDA graph (after one run on a side stream, as torch's graph capture
        asks: the caching allocator's pools and lazy initialisation stay out of the graph); returns its replay.
        Raises when the calls cannot be captured (a synchronisation or a host read inside them)."""
        torch = self._torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            run_batch()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run_batch()
        return graph.replay


# --- input rotation ----------------------------------------------------------------------------


def rotation_count(set_bytes: int, l2_bytes: int, *, min_sets: int = 2, max_sets: int = 64,
                   max_total_bytes: int = 8 << 30, l2_factor: float = 3.0) -> int:
    """How many distinct input sets to cycle through so that by the time a set comes round again,
    l2_factor x L2 worth of other data has been read and its lines are gone.

    At least min_sets (2: no call sees the inputs its predecessor just left in L2), at most max_sets,
    and never more than max_total_bytes in all (unless that is below min_sets)."""
    if set_bytes <= 0:
        raise ValueError("an input set must have a positive size")
    need = math.ceil(l2_factor * l2_bytes / set_bytes) + 1
    n = max(min_sets, min(max_sets, need))
    by_memory = max(min_sets, max_total_bytes // set_bytes)
    return int(min(n, by_memory))


class Rotation:
    """Cycles through input sets: next() returns set 0, 1, ..., n-1, 0, ..."""

    def __init__(self, sets: Sequence[Sequence]):
        if not sets:
            raise ValueError("a rotation needs at least one input set")
        self.sets = [tuple(s) for s in sets]
        self.calls = 0

    def __len__(self) -> int:
        return len(self.sets)

    def next(self) -> tuple:
        s = self.sets[self.calls % len(self.sets)]
        self.calls += 1
        return s


def set_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def l2_bytes(device=None) -> int:
    """The device's L2 size (torch reports it); 50 MiB when it cannot be read."""
    import torch
    try:
        return int(torch.cuda.get_device_properties(device).L2_cache_size)
    except Exception:
        return 50 << 20


# --- data --------------------------------------------------------------------------------------


def random_tensor(shape, dtype, device="cpu", generator=None, scale: float = 1.0):
    """Standard-normal values (times `scale`) rounded to `dtype`: never zeros, fresh per call."""
    import torch
    x = torch.randn(*shape, dtype=torch.float32, device=device, generator=generator)
    if scale != 1.0:
        x.mul_(scale)
    return x.to(dtype)


def check_not_degenerate(t, name: str = "tensor", max_zero_fraction: float = 1e-3) -> None:
    """Refuse inputs that would flatter a kernel or hide a bug: all-zero, mostly-zero or non-finite."""
    import torch
    if t.numel() == 0:
        return
    zeros = int((t == 0).sum().item())
    if zeros == t.numel():
        raise ValueError(f"{name} is all zeros: benchmark and validate on random data")
    if zeros > max_zero_fraction * t.numel():
        raise ValueError(f"{name} has {zeros} zeros of {t.numel()}: benchmark and validate on random data")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} has non-finite values")


class ValidationError(AssertionError):
    pass


# Relative Frobenius error allowed for a result stored in this dtype with float32 accumulation
# (bf16 operands land between 1e-3 and 1e-2; float16 rounds 8x finer).
TOLERANCE = {"bfloat16": 1e-2, "float16": 2e-3, "float32": 1e-4}


def tolerance_for(dtype) -> float:
    return TOLERANCE[str(dtype).replace("torch.", "")]


def relative_error(out, ref) -> float:
    """||out - ref|| / ||ref|| in float64; inf when out has NaN/inf or the shapes differ."""
    import torch
    if tuple(out.shape) != tuple(ref.shape):
        return math.inf
    o = out.detach().to(torch.float64)
    r = ref.detach().to(torch.float64)
    if not bool(torch.isfinite(o).all()):
        return math.inf
    denom = float(torch.linalg.vector_norm(r))
    if denom == 0.0:
        raise ValueError("the reference is all zeros; validate on random data")
    return float(torch.linalg.vector_norm(o - r)) / denom


def validate(out, ref, tol: Optional[float] = None, what: str = "result") -> float:
    """Raise ValidationError unless out matches ref to `tol` (default: by out's dtype)."""
    if tuple(out.shape) != tuple(ref.shape):
        raise ValidationError(f"{what}: shape {tuple(out.shape)} but the reference is {tuple(ref.shape)}")
    tol = tolerance_for(out.dtype) if tol is None else tol
    err = relative_error(out, ref)
    if not err <= tol:  # NaN-safe
        raise ValidationError(f"{what}: relative error {err:.3g} exceeds {tol:.3g} (dtype {out.dtype})")
    return err


def poison_allocator(nbytes: int, device) -> None:
    """Fill a freed block of `nbytes` with NaN so that an output the caching allocator hands out next
    (same size class) starts as NaN: an element the kernel never writes then fails validation
    instead of passing on a stale correct value. Best effort: it only matters on the GPU."""
    import torch
    if torch.device(device).type != "cuda":
        return
    x = torch.full((max(1, nbytes // 4),), float("nan"), dtype=torch.float32, device=device)
    del x


# --- the measurement loop ----------------------------------------------------------------------


@dataclass
class Budget:
    warmup_ms: float = 25.0     # warm-up time after the first (estimating) call
    target_ms: float = 200.0    # measured time to aim for
    min_reps: int = 10          # samples (batches) at least
    max_reps: int = 2000
    max_warmup: int = 200
    batch_ms: float = 1.0       # device time a batch of back-to-back calls lasts at least (one sample)
    max_batch: int = 1000       # calls per batch at most


def measure(fn: Callable, rotation: Rotation, timer, budget: Optional[Budget] = None,
            reps: Optional[int] = None, warmup: Optional[int] = None, batch: Optional[int] = None,
            host_timer=None, graph: bool = True) -> Stats:
    """Device time per call of fn(*inputs), and the host's time per call apart (Stats.host, us).

    One estimating call, warm-up calls (the last half of them back to back: the cost per call), then `reps`
    samples of `batch` calls each, inputs taken from `rotation` in turn; per call = a sample's time / batch:
      * graph (the timer has capture(), graph=True, and the calls can be captured): one batch recorded in a
        CUDA graph, each sample one replay between two timer marks. The host dispatches a replay once, so the
        number is the device's even for kernels shorter than their dispatch (method "graph");
      * otherwise a batch of back-to-back calls between two marks (method "batch"): the host enqueues call i+1
        while the device runs call i, so dispatch counts only where it is slower than the kernel; then the
        number is the host's pace, which Stats.host shows.
    An event pair around each single call on an idle stream (what this did before) counts every call's
    dispatch as device time. Host time: host_timer (default the wall clock) around batches of calls (at most 5
    batches), per call.

    warmup: calls after the estimating one (default: the budget's warm-up time at the estimated cost). batch:
    calls per sample (default: enough for the budget's batch_ms at the estimated cost, at most max_batch).
    reps: samples (default: the budget's target time at the estimated cost, within min_reps..max_reps)."""
    b = budget or Budget()
    host = host_timer or WallTimer()
    s = rotation.next()
    t0 = timer.mark()
    fn(*s)
    t1 = timer.mark()
    timer.sync()
    est = max(timer.elapsed_ms(t0, t1), 1e-4)
    n_warm = warmup if warmup is not None else min(b.max_warmup, max(1, math.ceil(b.warmup_ms / est)))
    cold = n_warm // 2
    for _ in range(cold):
        fn(*rotation.next())
    if n_warm > cold:  # the rest of the warm-up back to back: the cost per call a batch sees
        a = timer.mark()
        for _ in range(n_warm - cold):
            fn(*rotation.next())
        z = timer.mark()
        timer.sync()
        est = max(timer.elapsed_ms(a, z) / (n_warm - cold), 1e-4)
    n_batch = batch if batch is not None else min(b.max_batch, max(1, math.ceil(b.batch_ms / est)))
    if n_batch < 1:
        raise ValueError(f"measure: batch={n_batch}; a batch holds at least one call")
    n_reps = reps if reps is not None else min(b.max_reps, max(b.min_reps, math.ceil(b.target_ms / (est * n_batch))))

    def run_batch():
        for _ in range(n_batch):
            fn(*rotation.next())

    replay = None
    if graph and hasattr(timer, "capture"):
        try:
            replay = timer.capture(run_batch)
        except Exception:  # noqa: BLE001 - a call that cannot be captured is timed back to back instead
            replay = None
            timer.sync()
    marks, host_marks = [], []
    for i in range(n_reps):
        a = timer.mark()
        if replay is not None:
            replay()
        else:
            h0 = host.mark()
            run_batch()
            host_marks.append((h0, host.mark()))
        marks.append((a, timer.mark()))
    timer.sync()
    for _ in range(min(5, n_reps) if replay is not None else 0):  # the host's cost of eager calls
        h0 = host.mark()
        run_batch()
        host_marks.append((h0, host.mark()))
        timer.sync()
    device = summarize([timer.elapsed_ms(a, z) / n_batch for a, z in marks])
    host_us = summarize([host.elapsed_ms(a, z) * 1e3 / n_batch for a, z in host_marks], unit="us")
    return replace(device, host=host_us, method="graph" if replay is not None else "batch")


def measure_host(fn: Callable, calls: int = 1000, repeats: int = 7, timer=None) -> Stats:
    """Host time per call (microseconds) of a loop of `calls` calls, `repeats` times: for dispatch
    costs, where what matters is how long the caller is busy, not the device."""
    timer = timer or WallTimer()
    fn()  # warm-up
    per_call = []
    for _ in range(repeats):
        a = timer.mark()
        for _ in range(calls):
            fn()
        z = timer.mark()
        per_call.append(timer.elapsed_ms(a, z) * 1e3 / calls)
    timer.sync()
    return summarize(per_call, unit="us")


# --- arithmetic --------------------------------------------------------------------------------


def matmul_flops(m: int, n: int, k: int, batch: int = 1) -> float:
    return 2.0 * batch * m * n * k


def tflops(flops: float, ms: float) -> float:
    return flops / (ms * 1e-3) / 1e12


def min_bytes(m: int, n: int, k: int, batch: int = 1, elem: int = 2, extra_out_reads: int = 0,
              batched_b: bool = True) -> int:
    """Fewest bytes a matmul must move: each operand read once, the output written once, plus
    `extra_out_reads` output-sized reads (a residual)."""
    a = batch * m * k
    b = (batch if batched_b else 1) * k * n
    d = batch * m * n
    return elem * (a + b + d * (1 + extra_out_reads))


def roofline_ms(flops: float, nbytes: float, peak_tflops: float, peak_gbps: float) -> float:
    """The floor: the larger of compute time at the peak rate and memory time at peak bandwidth."""
    return max(flops / (peak_tflops * 1e12), nbytes / (peak_gbps * 1e9)) * 1e3


__all__ = [
    "Stats", "summarize", "quantile", "WallTimer", "CudaEventTimer", "rotation_count", "Rotation",
    "set_bytes", "l2_bytes", "random_tensor", "check_not_degenerate", "ValidationError", "TOLERANCE",
    "tolerance_for", "relative_error", "validate", "poison_allocator", "Budget", "measure", "measure_host",
    "matmul_flops", "tflops", "min_bytes", "roofline_ms",
]
