"""Kernel cache robustness (issue 16, items 11, 12, 14): entries that are not regular files are never
read (no hang on a FIFO, no endless read of /dev/zero), problems warn once per process, an unsafe
shared directory is not used, and the memory cache is bounded (LRU) and released by cache_clear."""
import os
import stat
import time

import pytest

from support.env import nvrtc_wheel_dirs, requires_nvrtc, rt, run_python_with_C

pytestmark = requires_nvrtc


def kernel(tag):
    return f'extern "C" __global__ void k(float* x) {{ x[threadIdx.x] += {tag}.f; }} // robust {tag}\n'


def key_of(src):
    return rt.compile(src, "k.cu", "sm_80", use_cache=False).key


# --- item 11: what sits at an entry's path ------------------------------------------------------

@pytest.mark.parametrize("what", ["fifo", "dev_zero_link", "dangling_link", "directory", "oversized_sparse"])
def test_non_regular_entries_are_a_miss_and_replaced(cache, what):
    src = kernel(201 + ["fifo", "dev_zero_link", "dangling_link", "directory", "oversized_sparse"].index(what))
    path = cache / f"{key_of(src)}.bin"
    cache.mkdir(mode=0o700)
    if what == "fifo":
        os.mkfifo(path)
    elif what == "dev_zero_link":
        os.symlink("/dev/zero", path)
    elif what == "dangling_link":
        os.symlink(cache / "nowhere", path)
    elif what == "directory":
        path.mkdir()
    else:
        with open(path, "wb") as f:
            f.truncate(512 << 20)  # sparse: 512 MiB over the cap, no disk used
    t0 = time.monotonic()
    r = rt.compile(src, "k.cu", "sm_80")
    assert time.monotonic() - t0 < 60
    assert r.cache_source == "compiled" and rt.cache_stats()["corrupt"] == 1
    rt.cache_clear(memory=True)
    if what == "directory":  # rename cannot replace a directory: memory only, the write error counted
        assert rt.cache_stats()["disk_write_errors"] == 1
        return
    assert stat.S_ISREG(os.lstat(path).st_mode)  # replaced atomically by a real entry
    assert rt.compile(src, "k.cu", "sm_80").cache_source == "disk"


# --- item 12: warnings, once per process; unsafe directories ------------------------------------

WARN_SCRIPT = """
import os
rt.set_extra_search_dirs({dirs!r})
src = 'extern "C" __global__ void k(float* x) {{ x[0] = {tag}.f; }}'
for i in range(3):
    r = rt.compile(src + "//" + str(i), "k.cu", "sm_80")
    path = os.path.join(rt.cache_dir(), r.key + ".bin")
    {damage}
    rt.cache_clear(memory=True)
    rt.compile(src + "//" + str(i), "k.cu", "sm_80")
print(rt.cache_stats())
"""


def run_warn_script(tmp_path, damage, tag, cache_dir=None):
    code = WARN_SCRIPT.format(dirs=nvrtc_wheel_dirs(), tag=tag, damage=damage)
    env = {"HEDDLE_CACHE_DIR": str(cache_dir or tmp_path / "c")}
    p = run_python_with_C(code, env_updates=env, env_remove=("HEDDLE_DISABLE_DISK_CACHE",))
    assert p.returncode == 0, p.stderr
    return p


def test_corrupt_entries_warn_once(tmp_path):
    p = run_warn_script(tmp_path, "open(path, 'r+b').write(b'XXXXXXXX')", 211)
    assert "'corrupt': 3" in p.stdout
    lines = [l for l in p.stderr.splitlines() if "heddle: warning" in l]
    assert len(lines) == 1 and "kernel cache entry rejected and recompiled" in lines[0] and "bad magic" in lines[0]


def test_failed_writes_warn_once(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory should be")
    p = run_warn_script(tmp_path, "pass", 212, cache_dir=blocker / "sub")
    assert "'disk_write_errors': 6" in p.stdout
    lines = [l for l in p.stderr.splitlines() if "heddle: warning" in l]
    assert len(lines) == 1 and "cannot store a compiled kernel" in lines[0] and "HEDDLE_CACHE_DIR" in lines[0]


@pytest.mark.parametrize("mode,ok", [(0o700, True), (0o777, False), (0o770, False), (0o1777, True), (0o755, True)])
def test_group_or_other_writable_directory_is_not_used(cache, mode, ok, capfd):
    cache.mkdir()
    os.chmod(cache, mode)
    assert rt.cache_disk_usable() == ok
    r = rt.compile(kernel(220 + mode % 100), "k.cu", "sm_80")
    assert (cache / f"{r.key}.bin").exists() == ok
    if not ok:
        assert rt.cache_stats()["disk_write_errors"] == 0  # not an error: memory only, by design


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory to another user")
def test_directory_of_another_user_is_not_used(cache):
    cache.mkdir(mode=0o700)
    os.chown(cache, 65534, 65534)
    assert not rt.cache_disk_usable()
    r = rt.compile(kernel(230), "k.cu", "sm_80")
    assert not (cache / f"{r.key}.bin").exists()
    assert rt.compile(kernel(230), "k.cu", "sm_80").cache_source == "memory"


def test_unsafe_directory_warning_in_a_fresh_process(tmp_path):
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, 0o777)
    p = run_warn_script(tmp_path, "pass", 231, cache_dir=d)
    lines = [l for l in p.stderr.splitlines() if "heddle: warning" in l]
    assert len(lines) == 1 and f"not using the kernel cache directory {d}" in lines[0], p.stderr
    assert "writable by its group or by others (mode 777)" in lines[0]
    assert os.listdir(d) == []


# --- item 14: the memory cache is bounded ------------------------------------------------------

def test_memory_cache_is_lru_bounded(cache, monkeypatch):
    monkeypatch.setenv("HEDDLE_MEMORY_CACHE_SIZE", "2")
    assert rt.cache_memory_limit() == 2
    srcs = [kernel(240 + i) for i in range(3)]
    for s in srcs[:2]:
        rt.compile(s, "k.cu", "sm_80")
    assert rt.compile(srcs[0], "k.cu", "sm_80").cache_source == "memory"  # srcs[0] now most recent
    rt.compile(srcs[2], "k.cu", "sm_80")  # evicts srcs[1], the least recently used
    assert rt.cache_memory_size() == 2 and rt.cache_stats()["evictions"] == 1
    assert rt.compile(srcs[0], "k.cu", "sm_80").cache_source == "memory"
    assert rt.compile(srcs[2], "k.cu", "sm_80").cache_source == "memory"
    assert rt.compile(srcs[1], "k.cu", "sm_80").cache_source == "disk"  # still on disk
    assert rt.cache_memory_size() == 2


def test_memory_cache_limit_zero_and_default(cache, monkeypatch):
    assert rt.cache_memory_limit() == 1024
    monkeypatch.setenv("HEDDLE_MEMORY_CACHE_SIZE", "0")
    src = kernel(250)
    rt.compile(src, "k.cu", "sm_80")
    assert rt.cache_memory_size() == 0
    assert rt.compile(src, "k.cu", "sm_80").cache_source == "disk"


def test_cache_clear_releases_memory(cache):
    for i in range(3):
        rt.compile(kernel(260 + i), "k.cu", "sm_80")
    assert rt.cache_memory_size() == 3
    rt.cache_clear(memory=True)
    assert rt.cache_memory_size() == 0
