"""HEDDLE_REMOTE_CACHE=redis://host:port against a real redis-server the tests start, through redis-py
(skipped when the machine has either missing; .ci/run installs Debian's redis-server, the test extra
redis-py): kernels compiled on one machine are verified and used on another, a value that fails
verification is compiled instead, autotune results are shared, and a server that dies mid-run (or never
answers) leaves heddle working from its local cache, warned once."""
import contextlib
import importlib.util
import json
import shutil
import socket
import subprocess
import time

import pytest

from support.env import nvrtc_wheel_dirs, requires_nvrtc, rt, run_python_with_C

REDIS = shutil.which("redis-server")
pytestmark = pytest.mark.skipif(importlib.util.find_spec("redis") is None,
                                reason="redis-py is not installed (pip install 'heddle[redis]')")


def kernel(tag):
    return f'extern "C" __global__ void k(float* x) {{ x[threadIdx.x] += {tag}.f; }} // remote {tag}\n'


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def redis_server(tmp_path, *options, url="redis://127.0.0.1:{port}", port_option="--port"):
    """A redis-server on a free port (skipped when there is none, or it does not start): (process, url)."""
    import redis as redis_py
    if REDIS is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    url = url.format(port=port)
    args = [port_option, str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(tmp_path)]
    if port_option != "--port":
        args += ["--port", "0"]
    proc = subprocess.Popen([REDIS, *args, *options], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis_py.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
    deadline = time.monotonic() + 20
    while True:
        try:
            if client.ping():
                break
        except redis_py.RedisError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            pytest.skip("redis-server did not start")
        time.sleep(0.05)
    client.close()
    try:
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


@pytest.fixture
def redis(tmp_path):
    with redis_server(tmp_path) as server:
        yield server


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
    before = rt.remote_stats()
    first = rt.compile(kernel(1), "k.cu", "sm_80")
    assert first.cache_source == "compiled" and rt.remote_enabled()
    machine()
    other = rt.compile(kernel(1), "k.cu", "sm_80")
    assert other.cache_source == "remote" and other.cubin == first.cubin and other.key == first.key
    after = rt.remote_stats()
    assert {k: after[k] - before[k] for k in after} == {"hits": 1, "misses": 1, "stores": 1, "failures": 0,
                                                         "rejected": 0}
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
    rejected = rt.remote_stats()["rejected"]
    again = rt.compile(kernel(2), "k.cu", "sm_80")
    assert again.cache_source == "compiled" and again.cubin == good.cubin
    assert rt.remote_stats()["rejected"] == rejected + 1
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


# The client: redis-py built from the URL (python/heddle/core/remote_cache.py); AUTH, TLS and deadlines.

def one_process(code, url, **env):
    """`code` in a fresh interpreter with HEDDLE_REMOTE_CACHE=url (warnings are once per process)."""
    r = run_python_with_C(code, env_updates={"HEDDLE_REMOTE_CACHE": url, **env})
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.split(), r.stderr


def test_urls_give_redis_py_clients_with_tls_auth_database_and_deadlines():
    import redis as redis_py
    from heddle.core import remote_cache as rc
    tls = rc.client_for("rediss://alice:s3cret@cache.example:6380/3?ssl_cert_reqs=none", 0.5).connection_pool
    assert issubclass(tls.connection_class, redis_py.SSLConnection)
    kw = tls.connection_kwargs
    assert (kw["host"], kw["port"], kw["db"], kw["username"], kw["password"], kw["ssl_cert_reqs"]) == \
        ("cache.example", 6380, 3, "alice", "s3cret", "none")
    assert kw["socket_timeout"] == kw["socket_connect_timeout"] == 0.5 and kw["retry"].get_retries() == 0
    plain = rc.client_for("redis://cache.example", 2.0).connection_pool
    assert not issubclass(plain.connection_class, redis_py.SSLConnection)
    assert plain.connection_kwargs["host"] == "cache.example" and "password" not in plain.connection_kwargs


@pytest.mark.parametrize("url", ["http://cache.example", "cache.example:6379", "redis://"])
def test_a_url_that_is_not_redis_is_refused(url):
    from heddle.core import remote_cache as rc
    with pytest.raises(rc.RemoteCacheFailure, match="is not a redis:// or rediss:// URL"):
        rc.connect(url)


def test_the_deadline_comes_from_the_environment(monkeypatch):
    from heddle.core import remote_cache as rc
    for raw, seconds in [("0.25", 0.25), ("", 2.0), ("soon", 2.0), ("-1", 2.0)]:
        monkeypatch.setenv("HEDDLE_REMOTE_CACHE_TIMEOUT", raw)
        assert rc.timeout_seconds() == seconds


def test_auth_with_the_password_in_the_url(tmp_path, monkeypatch):
    with redis_server(tmp_path, "--requirepass", "s3cret", url="redis://:s3cret@127.0.0.1:{port}") as (_, url):
        monkeypatch.setenv("HEDDLE_REMOTE_CACHE", url)
        rt.remote_put("heddle:test:auth", b"\x00value")
        assert rt.remote_get("heddle:test:auth") == b"\x00value" and rt.remote_enabled()
        monkeypatch.setenv("HEDDLE_REMOTE_CACHE", url.replace(":s3cret@", ""))  # no password: NOAUTH
        failures = rt.remote_stats()["failures"]
        assert rt.remote_get("heddle:test:auth") is None and not rt.remote_enabled()
        assert rt.remote_stats()["failures"] == failures + 1
        out, err = one_process("print(rt.remote_get('heddle:test:auth'), rt.remote_enabled())",
                               url.replace("s3cret", "guess"))
    assert out == ["None", "False"]
    assert err.count("heddle: warning: remote cache") == 1 and "refused the credentials" in err
    assert "redis://:***@127.0.0.1" in err and "guess" not in err  # the password is not printed


def test_a_tls_server_through_rediss(tmp_path, monkeypatch):
    if shutil.which("openssl") is None:
        pytest.skip("no openssl to make a certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    tls = ["--tls-cert-file", str(cert), "--tls-key-file", str(key), "--tls-ca-cert-file", str(cert),
           "--tls-auth-clients", "no"]
    with redis_server(tmp_path, *tls, url=f"rediss://127.0.0.1:{{port}}?ssl_ca_certs={cert}",
                      port_option="--tls-port") as (_, url):
        monkeypatch.setenv("HEDDLE_REMOTE_CACHE", url)
        rt.remote_put("heddle:test:tls", b"over tls")
        assert rt.remote_get("heddle:test:tls") == b"over tls" and rt.remote_enabled()


def test_a_server_that_accepts_but_never_answers_costs_one_deadline():
    with socket.socket() as listener:  # the kernel accepts connections; nobody reads or answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        code = ("import time\nprint(rt.remote_enabled())\nt = time.monotonic()\n"
                "print(rt.remote_get('heddle:test:t'), rt.remote_enabled(), time.monotonic() - t)\n"
                "print(rt.remote_get('heddle:test:t'))\n")
        out, err = one_process(code, f"redis://127.0.0.1:{listener.getsockname()[1]}", HEDDLE_REMOTE_CACHE_TIMEOUT="0.5")
    assert out[:3] == ["True", "None", "False"] and out[4] == "None"
    assert 0.5 <= float(out[3]) < 2.5  # one deadline, no retries
    assert err.count("heddle: warning: remote cache") == 1 and "timed out" in err


def test_without_redis_py_a_set_url_says_how_to_install_it():
    code = "import sys\nsys.modules['redis'] = None\nprint(rt.remote_enabled(), rt.remote_get('heddle:test:m'))\n"
    out, err = one_process(code, "redis://127.0.0.1:9")
    assert out == ["False", "None"]
    assert err.count("heddle: warning: remote cache") == 1 and "pip install 'heddle[redis]'" in err
