"""heddle.bench, the benchmark harness, on a CPU: statistics, the measurement loop under a fake
clock (warm-up excluded, repetitions sized to the budget, inputs rotated), the rotation count
against L2, random inputs and the validation that runs before anything is timed."""
import math

import numpy as np
import pytest
import torch

from heddle import bench


# --- statistics --------------------------------------------------------------------------------

@pytest.mark.parametrize("q", [0.0, 0.1, 0.2, 0.5, 0.8, 0.95, 1.0])
def test_quantile_matches_numpy(q):
    xs = sorted([3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.3, 5.8, 9.7])
    assert bench.quantile(xs, q) == pytest.approx(float(np.quantile(xs, q)))


def test_quantile_rejects_bad_input():
    with pytest.raises(ValueError):
        bench.quantile([], 0.5)
    with pytest.raises(ValueError):
        bench.quantile([1.0], 1.5)


def test_summarize_known_samples():
    s = bench.summarize([10, 1, 9, 2, 8, 3, 7, 4, 6, 5])
    assert s.n == 10 and s.median == 5.5 and s.min == 1 and s.max == 10 and s.mean == 5.5
    assert s.p20 == pytest.approx(np.quantile(range(1, 11), 0.2))
    assert s.p80 == pytest.approx(np.quantile(range(1, 11), 0.8))
    assert s.std == pytest.approx(np.std(range(1, 11), ddof=1))
    assert s.spread == pytest.approx((s.p80 - s.p20) / 5.5)
    assert "5.5 ms" in str(s)
    assert bench.Stats.from_dict(s.to_dict()) == s
    assert s.to_dict()["spread"] == pytest.approx(s.spread)
    us = s.scaled(1e3, "us")
    assert us.median == 5500 and us.unit == "us"


def test_summarize_one_sample_and_errors():
    s = bench.summarize([2.0])
    assert s.median == s.p20 == s.p80 == 2.0 and s.std == 0.0 and s.spread == 0.0
    with pytest.raises(ValueError, match="no samples"):
        bench.summarize([])
    with pytest.raises(ValueError, match="NaN"):
        bench.summarize([1.0, float("nan")])


# --- the measurement loop under a fake clock ---------------------------------------------------

class FakeClock:
    """A timer whose clock only moves when the benchmarked function says so."""

    def __init__(self):
        self.now = 0.0
        self.syncs = 0

    def mark(self):
        return self.now

    def elapsed_ms(self, a, b):
        return b - a

    def sync(self):
        self.syncs += 1


def make_fn(clock, cost):
    """fn(set_id) advances the clock by cost(call_index, set_id) and logs which set it got."""
    log = []

    def fn(set_id):
        clock.now += cost(len(log), set_id)
        log.append(set_id)
    return fn, log


def test_measure_excludes_warmup_and_rotates_inputs():
    clock = FakeClock()
    # the first 5 calls are slow (module load, JIT, cold caches), then 1 ms, set 2 a bit slower
    fn, log = make_fn(clock, lambda i, s: 50.0 if i < 5 else (1.2 if s == 2 else 1.0))
    rot = bench.Rotation([(0,), (1,), (2,)])
    st = bench.measure(fn, rot, clock, reps=30, warmup=10)
    assert len(log) == 1 + 10 + 30
    assert log == [i % 3 for i in range(41)]          # cyclic rotation, no set repeated back to back
    assert st.n == 30 and st.min == 1.0 and st.max == pytest.approx(1.2)
    assert st.median == 1.0                             # 20 of the 30 timed calls cost 1.0
    assert clock.syncs >= 2


def test_measure_sizes_reps_and_warmup_from_the_budget():
    clock = FakeClock()
    fn, log = make_fn(clock, lambda i, s: 2.0)
    b = bench.Budget(warmup_ms=20, target_ms=200, min_reps=10, max_reps=1000, max_warmup=200)
    st = bench.measure(fn, bench.Rotation([(0,)]), clock, b)
    assert st.n == 100 and len(log) == 1 + 10 + 100     # 200 ms / 2 ms, 20 ms / 2 ms of warm-up
    clock2 = FakeClock()
    fn2, _ = make_fn(clock2, lambda i, s: 500.0)
    assert bench.measure(fn2, bench.Rotation([(0,)]), clock2, b).n == 10       # min_reps
    clock3 = FakeClock()
    fn3, log3 = make_fn(clock3, lambda i, s: 0.001)
    st3 = bench.measure(fn3, bench.Rotation([(0,)]), clock3, b)
    # 1 us calls: batches of 1000 (1 ms, the budget's batch_ms), 200 of them for 200 ms
    assert st3.n == 200 and st3.median == pytest.approx(0.001)
    assert len(log3) == 1 + 200 + 200 * 1000                                     # max_warmup, then the batches
    b.max_batch, b.max_reps = 100, 50
    clock4 = FakeClock()
    fn4, log4 = make_fn(clock4, lambda i, s: 0.001)
    assert bench.measure(fn4, bench.Rotation([(0,)]), clock4, b).n == 50         # max_reps
    assert len(log4) == 1 + 200 + 50 * 100                                       # max_batch


class FakeStream:
    """One CUDA stream as the host sees it: each call costs `host` ms of the host's time to dispatch, then
    `device` ms on the stream once the stream reaches it; an event's time is when the stream reaches it (at
    once on an idle stream). mark / elapsed_ms / sync: the CUDA event timer; .host: the wall clock.
    graphs=True: capture() records a batch (the calls run once, outside the clocks) and its replay costs the
    host `launch` ms once, the stream `device` ms per recorded call."""

    def __init__(self, host, device, graphs=False, launch=0.003):
        self.cost, self.launch = (host, device), launch
        self.h = self.d = 0.0  # host clock; when the stream's last queued work ends
        self.recording = None
        if graphs:
            self.capture = self._capture
        stream = self

        class Host:
            def mark(self):
                return stream.h

            def elapsed_ms(self, a, b):
                return b - a

            def sync(self):
                pass
        self.host = Host()

    def call(self):
        if self.recording is not None:
            self.recording.append(1)
            return
        self.h += self.cost[0]
        self.d = max(self.d, self.h) + self.cost[1]

    def _capture(self, run_batch):
        self.recording = []
        run_batch()
        n, self.recording = len(self.recording), None

        def replay():
            self.h += self.launch
            self.d = max(self.d, self.h) + n * self.cost[1]
        return replay

    def mark(self):
        return max(self.d, self.h)

    def elapsed_ms(self, a, b):
        return b - a

    def sync(self):
        self.h = max(self.h, self.d)


def test_device_time_leaves_out_host_dispatch():
    """The defect (issue 27): an event pair around each call counts the call's dispatch as device time when the
    host is the slower side, as it is for short kernels: with 12 us of dispatch per call and a 5 us kernel, the
    stream waits for each launch and the pairs measure the host's pace, 12 us. Graph replays give the kernel's
    time; the host's time per call is reported apart."""
    rot = bench.Rotation([()])
    s = FakeStream(host=0.012, device=0.005, graphs=True)
    alone = bench.measure(s.call, rot, s, reps=20, warmup=4, batch=1, host_timer=s.host, graph=False)
    assert alone.median == pytest.approx(0.012) and alone.method == "batch"  # what the old loop measured
    st = bench.measure(s.call, rot, s, host_timer=s.host)
    assert st.method == "graph" and st.median == pytest.approx(0.005, rel=0.01)  # 5 us + 3 us of launch per batch
    assert st.host.unit == "us" and st.host.median == pytest.approx(12.0) and st.host.n == 5
    assert "host 12 us/call" in str(st) and "graph" in str(st)
    assert bench.Stats.from_dict(st.to_dict()) == st and "host" not in alone.scaled(1, "ms").host.to_dict()
    # no graphs (a timer without capture, or graph=False): back-to-back batches run at the host's pace here,
    # which the host time says; where the device is the slower side they give its time
    plain = FakeStream(host=0.012, device=0.005)
    st2 = bench.measure(plain.call, rot, plain, host_timer=plain.host)
    assert st2.method == "batch" and st2.median == pytest.approx(0.012, rel=0.01)
    assert st2.host.median == pytest.approx(12)
    slow = FakeStream(host=0.004, device=0.010)
    assert bench.measure(slow.call, rot, slow, host_timer=slow.host).median == pytest.approx(0.010, rel=0.01)
    with pytest.raises(ValueError, match="at least one call"):
        bench.measure(s.call, rot, s, batch=0, host_timer=s.host)


def test_calls_that_cannot_be_captured_are_timed_back_to_back():
    s = FakeStream(host=0.004, device=0.010)

    def refuse(run_batch):
        raise RuntimeError("operation not permitted when stream is capturing")
    s.capture = refuse
    st = bench.measure(s.call, bench.Rotation([()]), s, host_timer=s.host)
    assert st.method == "batch" and st.median == pytest.approx(0.010, rel=0.01)


def test_measure_host_reports_microseconds_per_call():
    clock = FakeClock()
    calls = []

    def fn():
        clock.now += 0.004  # 4 us
        calls.append(1)
    st = bench.measure_host(fn, calls=100, repeats=5, timer=clock)
    assert st.unit == "us" and st.median == pytest.approx(4.0) and st.n == 5
    assert len(calls) == 1 + 500


# --- rotation against L2 -----------------------------------------------------------------------

def test_thread_cpu_timer_counts_work_not_waiting():
    import time
    cpu = bench.ThreadCpuTimer()
    a = cpu.mark()
    time.sleep(0.05)  # waiting: wall time, no CPU time
    slept = cpu.elapsed_ms(a, cpu.mark())
    a = cpu.mark()
    sum(range(3_000_000))  # working: tens of ms of CPU time, whatever else the machine runs
    worked = cpu.elapsed_ms(a, cpu.mark())
    assert slept < 5 and worked > 5, (slept, worked)


def test_rotation_count():
    MB = 1 << 20
    assert bench.rotation_count(1 * MB, 50 * MB) == 64                        # capped
    assert bench.rotation_count(30 * MB, 50 * MB) == 6                        # ceil(150 / 30) + 1
    assert bench.rotation_count(256 * MB, 50 * MB) == 2                       # at least two
    assert bench.rotation_count(10 * MB, 50 * MB, max_total_bytes=50 * MB) == 5
    assert bench.rotation_count(4096 * MB, 50 * MB, max_total_bytes=1024 * MB) == 2  # min beats the cap
    n = bench.rotation_count(3 * MB, 50 * MB, max_sets=1000)
    assert (n - 1) * 3 * MB >= 3 * 50 * MB                                    # the others exceed 3x L2
    with pytest.raises(ValueError):
        bench.rotation_count(0, 50 * MB)


def test_rotation_cycles_and_sizes():
    a, b = torch.ones(4), torch.ones(8)
    rot = bench.Rotation([(a, b), (b, a)])
    assert len(rot) == 2 and rot.next()[0] is a and rot.next()[0] is b and rot.next()[0] is a
    assert bench.set_bytes([a, b]) == 48
    with pytest.raises(ValueError):
        bench.Rotation([])


# --- data and validation -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_random_tensor_is_fresh_and_never_zero(dtype):
    x = bench.random_tensor((256, 64), dtype)
    y = bench.random_tensor((256, 64), dtype)
    assert x.dtype == dtype and x.shape == (256, 64)
    assert not torch.equal(x, y)
    bench.check_not_degenerate(x)
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    assert torch.equal(bench.random_tensor((8,), dtype, generator=g1), bench.random_tensor((8,), dtype, generator=g2))
    s = bench.random_tensor((4096,), torch.float32, scale=0.01)
    assert 0.005 < float(s.std()) < 0.02


def test_degenerate_inputs_are_refused():
    with pytest.raises(ValueError, match="all zeros"):
        bench.check_not_degenerate(torch.zeros(10, 10))
    mostly = torch.randn(100, 100)
    mostly[:50] = 0
    with pytest.raises(ValueError, match="zeros"):
        bench.check_not_degenerate(mostly)
    bad = torch.randn(10)
    bad[3] = float("inf")
    with pytest.raises(ValueError, match="non-finite"):
        bench.check_not_degenerate(bad)
    bench.check_not_degenerate(torch.empty(0))


def test_validation_against_a_float64_reference():
    a = torch.randn(64, 128, dtype=torch.float64)
    b = torch.randn(128, 96, dtype=torch.float64)
    ref = a @ b
    good = (a.bfloat16().float() @ b.bfloat16().float()).bfloat16()
    err = bench.validate(good, ref)
    assert 0 < err < bench.tolerance_for(torch.bfloat16)
    assert bench.relative_error(ref, ref) == 0.0
    with pytest.raises(bench.ValidationError, match="relative error"):
        bench.validate((a @ b.flip(0)).bfloat16(), ref)              # wrong indexing
    with pytest.raises(bench.ValidationError, match="relative error"):
        bench.validate(good.float().mul(1.05).bfloat16(), ref)       # 5% off
    poisoned = good.clone()
    poisoned[3, 7] = float("nan")                                    # one unwritten element
    assert bench.relative_error(poisoned, ref) == math.inf
    with pytest.raises(bench.ValidationError):
        bench.validate(poisoned, ref)
    with pytest.raises(bench.ValidationError, match="shape"):
        bench.validate(good[:, :95], ref)
    with pytest.raises(ValueError, match="all zeros"):
        bench.relative_error(good, torch.zeros_like(ref))
    # float16 is held to a tighter tolerance than bfloat16
    assert bench.tolerance_for(torch.float16) < bench.tolerance_for(torch.bfloat16)
    assert bench.tolerance_for("float32") == bench.TOLERANCE["float32"]


def test_poison_is_a_no_op_on_cpu():
    bench.poison_allocator(1 << 20, "cpu")


# --- arithmetic --------------------------------------------------------------------------------

def test_flops_bytes_and_roofline():
    assert bench.matmul_flops(2, 3, 4) == 48 and bench.matmul_flops(2, 3, 4, batch=5) == 240
    assert bench.tflops(2e12, 1000.0) == pytest.approx(2.0)
    assert bench.min_bytes(8, 16, 32) == 2 * (8 * 32 + 32 * 16 + 8 * 16)
    assert bench.min_bytes(8, 16, 32, batch=2, batched_b=False) == 2 * (2 * 8 * 32 + 32 * 16 + 2 * 8 * 16)
    assert bench.min_bytes(8, 16, 32, extra_out_reads=1) == 2 * (8 * 32 + 32 * 16 + 2 * 8 * 16)
    # 8192^3 bf16 on 790 TFLOP/s and 4.3 TB/s: compute-bound; 16 x 4096 x 4096: memory-bound
    big = bench.roofline_ms(bench.matmul_flops(8192, 8192, 8192), bench.min_bytes(8192, 8192, 8192), 790, 4300)
    assert big == pytest.approx(2 * 8192 ** 3 / 790e12 * 1e3)
    small = bench.roofline_ms(bench.matmul_flops(16, 4096, 4096), bench.min_bytes(16, 4096, 4096), 790, 4300)
    assert small == pytest.approx(bench.min_bytes(16, 4096, 4096) / 4300e9 * 1e3)
