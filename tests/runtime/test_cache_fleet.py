"""The kernel cache across processes: a warm process never loads NVRTC (the disk cache remembers the
compiler's version by library file), concurrent processes compile a kernel once (a per-key lock file),
and a lock held too long makes the waiter compile itself, with one warning."""
import fcntl
import json
import os
import subprocess
import sys
import time

from support.env import C, nvrtc_wheel_dirs, requires_nvrtc, rt, run_python_with_C


def kernel(tag):
    return f'extern "C" __global__ void k(float* x) {{ x[threadIdx.x] *= {tag}.f; }} // fleet {tag}\n'


PROBE = """
import json, os, sys, time
rt.set_extra_search_dirs({dirs!r})
go = {go!r}
while go and not os.path.exists(go):  # start together
    time.sleep(0.005)
r = rt.compile({src!r}, "k.cu", "sm_80")
maps = open("/proc/self/maps").read()
print(json.dumps({{"source": r.cache_source, "nvrtc_loaded": "libnvrtc" in maps, "cubin": len(r.cubin)}}))
"""


LOAD_C = ("import importlib.util\n"
          f"_spec = importlib.util.spec_from_file_location('heddle._C', {C.__file__!r})\n"
          "C = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(C)\n"
          "rt = C.runtime\n")


def probe(cache_dir, src, go="", **env):
    code = PROBE.format(dirs=rt.extra_search_dirs() + nvrtc_wheel_dirs(), go=go, src=src)
    return run_python_with_C(code, env_updates={"HEDDLE_CACHE_DIR": str(cache_dir), **env})


def result(proc):
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@requires_nvrtc
def test_warm_process_never_loads_nvrtc(tmp_path):
    d = tmp_path / "cache"
    cold = result(probe(d, kernel(1)))
    assert cold["source"] == "compiled" and cold["nvrtc_loaded"] and cold["cubin"] > 0
    warm = result(probe(d, kernel(1)))
    assert warm == {"source": "disk", "nvrtc_loaded": False, "cubin": cold["cubin"]}
    # HEDDLE_NVRTC_PATH naming nothing: the search goes on to the same library, still not loaded
    nowhere = result(probe(d, kernel(1), HEDDLE_NVRTC_PATH=str(tmp_path / "missing" / "libnvrtc.so.13")))
    assert nowhere == warm
    # a kernel the cache does not hold: NVRTC loads then, and compiles it
    other = result(probe(d, kernel(2)))
    assert other["source"] == "compiled" and other["nvrtc_loaded"]


MEMO = """
import glob, json, os, shutil
rt.set_extra_search_dirs({dirs!r})
first = rt.compile({a!r}, "k.cu", "sm_80")
shutil.rmtree(os.path.join({d!r}, "compilers"))  # the version record gone: this process read it once already
second = rt.compile({b!r}, "k.cu", "sm_80")
maps = open("/proc/self/maps").read()
print(json.dumps({{"sources": [first.cache_source, second.cache_source], "nvrtc_loaded": "libnvrtc" in maps}}))
"""


@requires_nvrtc
def test_nvrtc_version_record_read_once_per_process(tmp_path):
    d = tmp_path / "cache"
    result(probe(d, kernel(6)))
    result(probe(d, kernel(7)))
    assert (d / "compilers").is_dir()
    code = MEMO.format(dirs=rt.extra_search_dirs() + nvrtc_wheel_dirs(), a=kernel(6), b=kernel(7), d=str(d))
    out = result(run_python_with_C(code, env_updates={"HEDDLE_CACHE_DIR": str(d)}))
    # the second lookup used the version remembered in memory: still a disk hit, NVRTC never loaded
    assert out == {"sources": ["disk", "disk"], "nvrtc_loaded": False}


@requires_nvrtc
def test_warm_start_through_a_link_to_the_same_library(tmp_path):
    d = tmp_path / "cache"
    result(probe(d, kernel(3)))
    lib = rt.nvrtc_info()["path"]
    link = tmp_path / "libnvrtc.so.13"
    link.symlink_to(lib)  # the identity is the file's, not the name's
    assert result(probe(d, kernel(3), HEDDLE_NVRTC_PATH=str(link))) == \
        {"source": "disk", "nvrtc_loaded": False, "cubin": result(probe(d, kernel(3)))["cubin"]}


@requires_nvrtc
def test_concurrent_processes_compile_a_kernel_once(tmp_path):
    d, go = tmp_path / "cache", tmp_path / "go"
    result(probe(d, kernel(4)))  # NVRTC's version recorded, so the race below is over the kernel alone
    code = PROBE.format(dirs=rt.extra_search_dirs() + nvrtc_wheel_dirs(), go=str(go), src=kernel(5))
    env = {**os.environ, "HEDDLE_CACHE_DIR": str(d)}
    procs = [subprocess.Popen([sys.executable, "-c", LOAD_C + code], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    time.sleep(1.0)  # every process imported and waiting
    go.write_text("")
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    sources = sorted(json.loads(out.strip().splitlines()[-1])["source"] for out, _ in outs)
    assert sources == ["compiled", "disk", "disk", "disk"]
    assert not [f for f in os.listdir(d) if f.endswith(".lock")]  # the holder removed its lock file


@requires_nvrtc
def test_a_lock_held_too_long_is_waited_out_then_compiled_here(tmp_path):
    d = tmp_path / "cache"
    result(probe(d, kernel(6)))  # creates the directory and records NVRTC's version
    key = rt.compile(kernel(7), "k.cu", "sm_80", use_cache=False).key
    with open(d / f".{key}.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another compiler, stuck
        t0 = time.monotonic()
        p = probe(d, kernel(7), HEDDLE_COMPILE_LOCK_TIMEOUT="0.5")
        waited = time.monotonic() - t0
    r = result(p)
    assert r["source"] == "compiled"
    assert waited >= 0.5
    assert p.stderr.count("compiling it here too") == 1
