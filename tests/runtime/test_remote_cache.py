"""HEDDLE_REMOTE_CACHE=redis://host:port against a real redis-server the tests start (skipped when the
machine has none; .ci/run installs Debian's redis-server): kernels compiled on one machine are verified
and used on another, a value that fails verification is compiled instead, autotune results are shared,
and a server that dies mid-run (or never answers) leaves heddle working from its local cache, warned once."""
import json
import shutil
import socket
import subprocess
import time

import pytest

from support.env import nvrtc_wheel_dirs, requires_nvrtc, rt, run_python_with_C

REDIS = shutil.which("redis-server")
pytestmark = pytest.mark.skipif(REDIS is None, reason="redis-server is not installed (apt-get install redis-server)")


def kernel(tag):
    return f'extern "C" __global__ void k(float* x) {{ x[threadIdx.x] += {tag}.f; }} // remote {tag}\n'


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def redis(tmp_path):
    port = free_port()
    proc = subprocess.Popen([REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    break
        except OSError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            pytest.skip("redis-server did not start")
        time.sleep(0.05)
    yield proc, f"redis://127.0.0.1:{port}"
    if proc.poll() is None:
        proc.kill()
    proc.wait()


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """Switch this process between 'machines': an empty disk cache and an empty memory cache each time."""
    n = [0]

    def fresh():
        n[0] += 1
        rt.set_cache_dir(str(tmp_path / f"machine{n[0]}"))
        rt.cache_clear(memory=True)
    yield fresh
    rt.set_cache_dir(None)
    rt.cache_clear(memory=True)


@requires_nvrtc
def test_a_kernel_compiled_on_one_machine_is_verified_and_used_on_another(redis, machine, monkeypatch):
    _, url = redis
    monkeypatch.setenv("HEDDLE_REMOTE_CACHE", url)
    machine()
    first = rt.compile(kernel(1), "k.cu", "sm_80")
    assert first.cache_source == "compiled" and rt.remote_enabled()
    machine()
    other = rt.compile(kernel(1), "k.cu", "sm_80")
    assert other.cache_source == "remote" and other.cubin == first.cubin and other.key == first.key
    rt.cache_clear(memory=True)
    assert rt.compile(kernel(1), "k.cu", "sm_80").cache_source == "disk"  # kept on this machine's disk


@requires_nvrtc
@pytest.mark.parametrize("damage", ["garbage", "flipped_byte", "another_key"])
def test_a_remote_value_that_fails_verification_is_compiled_instead(redis, machine, monkeypatch, damage):
    _, url = redis
    monkeypatch.setenv("HEDDLE_REMOTE_CACHE", url)
    machine()
    good = rt.compile(kernel(2), "k.cu", "sm_80")
    stored = rt.remote_get("heddle:kernel:" + good.key)
    assert stored is not None and stored[:8] == b"HEDDLEK1"
    if damage == "garbage":
        bad = b"not an entry"
    elif damage == "flipped_byte":
        bad = stored[:200] + bytes([stored[200] ^ 1]) + stored[201:]
    else:  # a valid entry of another kernel under this key
        bad = rt.remote_get("heddle:kernel:" + rt.compile(kernel(3), "k.cu", "sm_80").key)
    rt.remote_put("heddle:kernel:" + good.key, bad)
    machine()
    again = rt.compile(kernel(2), "k.cu", "sm_80")
    assert again.cache_source == "compiled" and again.cubin == good.cubin
    assert rt.remote_enabled()  # a bad value is not a dead server


PROBE = """
import os, signal, sys
rt.set_extra_search_dirs({dirs!r})
sources = [{k1!r}, {k2!r}, {k3!r}]
print(rt.compile(sources[0], "k.cu", "sm_80").cache_source, rt.remote_enabled())
os.kill({pid}, signal.SIGKILL)   # the server dies mid-run
import time; time.sleep(0.3)
for s in sources[1:]:
    print(rt.compile(s, "k.cu", "sm_80").cache_source, rt.remote_enabled())
rt.cache_clear(memory=True)
print(rt.compile(sources[0], "k.cu", "sm_80").cache_source)
"""


@requires_nvrtc
def test_a_server_that_dies_mid_run_leaves_the_local_cache_working_warned_once(redis, tmp_path):
    proc, url = redis
    code = PROBE.format(dirs=rt.extra_search_dirs() + nvrtc_wheel_dirs(), k1=kernel(4), k2=kernel(5), k3=kernel(6),
                        pid=proc.pid)
    r = run_python_with_C(code, env_updates={"HEDDLE_CACHE_DIR": str(tmp_path / "c"), "HEDDLE_REMOTE_CACHE": url})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split("\n")[:4] == ["compiled True", "compiled False", "compiled False", "disk"]
    assert r.stderr.count("heddle: warning: remote cache") == 1, r.stderr
    assert "working from the local cache" in r.stderr


@requires_nvrtc
def test_a_server_that_never_answers_costs_one_warning(tmp_path):
    port = free_port()  # nothing listens there
    code = (f"rt.set_extra_search_dirs({rt.extra_search_dirs() + nvrtc_wheel_dirs()!r})\n"
            f"for t in range(3): print(rt.compile('extern \"C\" __global__ void k() {{}} // ' + str(t), 'k.cu', "
            "'sm_80').cache_source)\n")
    r = run_python_with_C(code, env_updates={"HEDDLE_CACHE_DIR": str(tmp_path / "c"),
                                             "HEDDLE_REMOTE_CACHE": f"redis://127.0.0.1:{port}"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["compiled"] * 3
    assert r.stderr.count("heddle: warning: remote cache") == 1 and "unreachable" in r.stderr


def test_autotune_results_are_shared_and_verified(redis, tmp_path, monkeypatch, capsys):
    from heddle.tuning import autotune as at
    _, url = redis
    monkeypatch.setenv("HEDDLE_REMOTE_CACHE", url)
    entry = {"status": "timed", "ms": 0.123, "source": "abc"}
    at.Store(str(tmp_path / "a.json")).put("p1", "sm_90a problem", {"cfg": entry})
    elsewhere = at.Store(str(tmp_path / "b.json"))
    assert elsewhere.entries("p1") == {"cfg": entry}
    assert json.load(open(tmp_path / "b.json"))["problems"]["p1"]["configs"] == {"cfg": entry}  # kept locally
    doc = json.loads(rt.remote_get(at.REMOTE_PREFIX + "p1"))
    doc["body"] = doc["body"].replace("0.123", "0.001")  # a faster config than measured: refused
    rt.remote_put(at.REMOTE_PREFIX + "p1", json.dumps(doc).encode())
    assert at.Store(str(tmp_path / "c.json")).entries("p1") == {}
    assert "remote tuning entry heddle:tune:p1 rejected (checksum mismatch)" in capsys.readouterr().err
