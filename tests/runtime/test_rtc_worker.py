"""The isolated compile's worker process (runtime/rtc_isolate.h): an isolated compile execs heddle-rtc-worker
(posix_spawn), never forks this process, so no lock another thread holds can be copied into the compiler's
process. Its failures are clear errors: missing program, no answer, timeout, malformed request."""
import os
import stat
import struct
import subprocess

import pytest

from support.env import C, heddle_error, requires_nvrtc, rt

AXPY = 'extern "C" __global__ void axpy(float* y, const float* x, float a, int n) { y[0] = a * x[0] + n; }'
WORKER = os.path.join(os.path.dirname(C.__file__), "heddle-rtc-worker")


def script(tmp_path, body):
    path = tmp_path / "worker.sh"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_the_worker_ships_beside_the_extension():
    assert os.access(WORKER, os.X_OK), f"{WORKER} missing: the build installs heddle-rtc-worker beside heddle._C"


@requires_nvrtc
def test_an_isolated_compile_runs_the_worker_program(monkeypatch, tmp_path):
    log = tmp_path / "calls"
    monkeypatch.setenv("HEDDLE_RTC_WORKER", script(tmp_path, f'echo "$$" >> {log}\nexec {WORKER} "$@"'))
    a = rt.compile(AXPY, "a.cu", "sm_80", isolate=True, use_cache=False)
    b = rt.compile(AXPY.replace("axpy", "axpz"), "b.cu", "sm_80", isolate=True, use_cache=False)
    assert a.cubin[:4] == b.cubin[:4] == b"\x7fELF"
    pids = log.read_text().split()
    assert len(pids) == 2 and os.getpid() not in map(int, pids)  # two exec'd workers, one per compile
    rt.compile(AXPY.replace("axpy", "axpw"), "c.cu", "sm_80", isolate=False, use_cache=False)
    assert len(log.read_text().split()) == 2  # an in-process compile starts none


@requires_nvrtc
def test_a_missing_worker_says_where_it_looked_and_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setenv("HEDDLE_RTC_WORKER", str(tmp_path / "nowhere"))
    with pytest.raises(heddle_error("RuntimeUnavailable"), match="nowhere is missing.*HEDDLE_RTC_ISOLATE=0"):
        rt.compile(AXPY, "a.cu", "sm_80", isolate=True, use_cache=False)


@requires_nvrtc
def test_a_worker_that_never_answers_is_killed_at_the_timeout(monkeypatch, tmp_path):
    monkeypatch.setenv("HEDDLE_RTC_WORKER", script(tmp_path, "exec sleep 60"))
    monkeypatch.setenv("HEDDLE_RTC_ISOLATE_TIMEOUT_S", "1")
    with pytest.raises(heddle_error("CompileError"), match=r"a\.cu for sm_80 within 1 s .*worker was killed"):
        rt.compile(AXPY, "a.cu", "sm_80", isolate=True, use_cache=False)


@requires_nvrtc
def test_a_worker_that_exits_without_an_answer_is_a_compile_error(monkeypatch, tmp_path):
    monkeypatch.setenv("HEDDLE_RTC_WORKER", script(tmp_path, "exit 3"))
    with pytest.raises(heddle_error("CompileError"), match=r"exited \(status 3\) without a result"):
        rt.compile(AXPY, "a.cu", "sm_80", isolate=True, use_cache=False)


def test_the_worker_answers_a_malformed_request_with_an_error_tag():
    out = subprocess.run([WORKER], input=b"not a request", capture_output=True, timeout=60).stdout
    tag, size = struct.unpack("<IQ", out[:12])
    assert tag == 3 and b"not a heddle-rtc-worker request" in out[12:12 + size]
