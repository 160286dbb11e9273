"""Kernel cache: memory -> disk -> compile order, on-disk verification (corrupt entries are removed
and recompiled), key contents, directory selection and permissions, and SHA-256 against hashlib."""
import hashlib
import os
import random
import stat
import subprocess
import sys
import threading

import pytest

from support.env import requires_nvrtc, rt


def kernel(tag):
    """A distinct source per test, so the process-wide memory cache never links two tests."""
    return f'extern "C" __global__ void k(float* x) {{ x[threadIdx.x] *= {tag}.f; }} // {tag}\n'


def entry_path(cache_dir, result):
    return cache_dir / f"{result.key}.bin"


@requires_nvrtc
def test_memory_then_disk_then_memory(cache):
    src = kernel(101)
    first = rt.compile(src, "k.cu", "sm_80")
    assert first.cache_source == "compiled"
    assert rt.compile(src, "k.cu", "sm_80").cache_source == "memory"
    rt.cache_clear(memory=True)
    from_disk = rt.compile(src, "k.cu", "sm_80")
    assert from_disk.cache_source == "disk"
    assert from_disk.cubin == first.cubin and from_disk.ptx == first.ptx and from_disk.log == first.log
    assert from_disk.stats.registers == first.stats.registers  # re-parsed from the stored report
    assert from_disk.key == first.key
    assert rt.compile(src, "k.cu", "sm_80").cache_source == "memory"
    assert rt.cache_stats() == {"memory_hits": 2, "disk_hits": 1, "compiles": 1, "corrupt": 0,
                                "disk_write_errors": 0, "evictions": 0}


@requires_nvrtc
def test_entry_file_layout(cache):
    r = rt.compile(kernel(102), "k.cu", "sm_80")
    data = entry_path(cache, r).read_bytes()
    assert data[:8] == b"HEDDLEK1"
    assert int.from_bytes(data[8:12], "little") == 1  # format version
    assert int.from_bytes(data[12:16], "little") == 64
    assert data[16:80] == r.key.encode()
    payload_len = int.from_bytes(data[80:88], "little")
    payload = data[88:88 + payload_len]
    assert len(data) == 88 + payload_len + 32
    assert data[-32:] == hashlib.sha256(payload).digest()
    assert r.cubin in payload
    assert [p for p in os.listdir(cache)] == [f"{r.key}.bin"]  # no temp files left behind


@requires_nvrtc
@pytest.mark.parametrize("damage", ["flip_payload_byte", "flip_checksum_byte", "truncate", "wrong_magic", "empty"])
def test_corrupt_entry_is_removed_and_recompiled(cache, damage):
    src = kernel(103)
    good = rt.compile(src, "k.cu", "sm_80")
    path = entry_path(cache, good)
    data = bytearray(path.read_bytes())
    if damage == "flip_payload_byte":
        data[len(data) // 2] ^= 0xFF
    elif damage == "flip_checksum_byte":
        data[-1] ^= 0x01
    elif damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "wrong_magic":
        data[:8] = b"HEDDLEK0"
    else:
        data = bytearray()
    path.write_bytes(bytes(data))

    rt.cache_clear(memory=True)
    again = rt.compile(src, "k.cu", "sm_80")
    assert again.cache_source == "compiled"
    assert again.cubin[:4] == b"\x7fELF"
    assert rt.cache_stats()["corrupt"] == 1
    # the rewritten entry is valid again
    rt.cache_clear(memory=True)
    assert rt.compile(src, "k.cu", "sm_80").cache_source == "disk"
    assert rt.cache_stats()["corrupt"] == 1


@requires_nvrtc
def test_entry_renamed_to_another_key_is_rejected(cache):
    a = rt.compile(kernel(104), "k.cu", "sm_80")
    b = rt.compile(kernel(105), "k.cu", "sm_80")
    entry_path(cache, a).replace(entry_path(cache, b))  # b's file now holds a's entry
    rt.cache_clear(memory=True)
    again = rt.compile(kernel(105), "k.cu", "sm_80")
    assert again.cache_source == "compiled" and rt.cache_stats()["corrupt"] == 1


@requires_nvrtc
def test_key_covers_arch_options_name_and_headers(cache):
    src = kernel(106)
    base = rt.compile(src, "k.cu", "sm_80").key
    assert rt.compile(src, "k.cu", "sm_80").key == base  # deterministic
    variants = [
        rt.compile(src, "k.cu", "sm_90a").key,
        rt.compile(src, "k.cu", "sm_80", options=["-DHEDDLE_TEST=1"]).key,
        rt.compile(src, "k.cu", "sm_80", options=["-DHEDDLE_TEST=2"]).key,
        rt.compile(src, "k.cu", "sm_80", max_registers=64).key,
        rt.compile(src, "k.cu", "sm_80", lineinfo=True).key,
        rt.compile(src, "k.cu", "sm_80", want_ptx=False).key,
        rt.compile(src, "other.cu", "sm_80").key,
        rt.compile(src, "k.cu", "sm_80", headers={"x.cuh": "// x"}).key,
        rt.compile(kernel(107), "k.cu", "sm_80").key,
    ]
    assert len(set(variants + [base])) == len(variants) + 1
    # isolation does not change code, so it does not change the key
    assert rt.compile(src, "k.cu", "sm_80", isolate=True).key == base


@requires_nvrtc
def test_key_covers_registered_env_vars(cache, monkeypatch):
    src = kernel(108)
    monkeypatch.delenv("HEDDLE_TEST_CODE_VAR", raising=False)
    monkeypatch.delenv("HEDDLE_TEST_OTHER_VAR", raising=False)
    assert "HEDDLE_FAST_MATH" in rt.code_env_vars()  # pre-registered
    unset = rt.compile(src, "k.cu", "sm_80").key
    monkeypatch.setenv("HEDDLE_TEST_OTHER_VAR", "1")  # not registered: no effect
    assert rt.compile(src, "k.cu", "sm_80").key == unset
    rt.register_code_env_var("HEDDLE_TEST_CODE_VAR")
    assert "HEDDLE_TEST_CODE_VAR" in rt.code_env_vars()
    assert rt.compile(src, "k.cu", "sm_80").key == unset  # registered but unset: keys unchanged
    keys = {unset}
    for value in ["", "1", "2"]:
        monkeypatch.setenv("HEDDLE_TEST_CODE_VAR", value)
        keys.add(rt.compile(src, "k.cu", "sm_80").key)
    assert len(keys) == 4
    monkeypatch.setenv("HEDDLE_FAST_MATH", "1")
    assert rt.compile(src, "k.cu", "sm_80").key not in keys


@requires_nvrtc
def test_directory_created_with_mode_0700(tmp_path, monkeypatch, cache):
    d = tmp_path / "deep" / "heddle-cache"
    monkeypatch.setenv("HEDDLE_CACHE_DIR", str(d))
    assert rt.cache_dir() == str(d)
    r = rt.compile(kernel(109), "k.cu", "sm_80")
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path / "deep").st_mode) == 0o700
    assert (d / f"{r.key}.bin").is_file()


@requires_nvrtc
def test_directory_selection(tmp_path, monkeypatch, cache):
    monkeypatch.delenv("HEDDLE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert rt.cache_dir() == str(tmp_path / "xdg" / "heddle")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert rt.cache_dir() == str(tmp_path / "home" / ".cache" / "heddle")
    monkeypatch.setenv("HEDDLE_CACHE_DIR", str(tmp_path / "explicit"))
    assert rt.cache_dir() == str(tmp_path / "explicit")
    try:
        rt.set_cache_dir(str(tmp_path / "override"))
        assert rt.cache_dir() == str(tmp_path / "override")
        r = rt.compile(kernel(110), "k.cu", "sm_80")
        assert (tmp_path / "override" / f"{r.key}.bin").is_file()
    finally:
        rt.set_cache_dir(None)
    assert rt.cache_dir() == str(tmp_path / "explicit")


@requires_nvrtc
def test_disk_cache_can_be_disabled(cache, monkeypatch):
    monkeypatch.setenv("HEDDLE_DISABLE_DISK_CACHE", "1")
    assert not rt.cache_disk_enabled()
    src = kernel(111)
    assert rt.compile(src, "k.cu", "sm_80").cache_source == "compiled"
    assert not cache.exists()
    rt.cache_clear(memory=True)
    assert rt.compile(src, "k.cu", "sm_80").cache_source == "compiled"
    monkeypatch.setenv("HEDDLE_DISABLE_DISK_CACHE", "0")
    assert rt.cache_disk_enabled()


@requires_nvrtc
def test_use_cache_false_stores_nothing(cache):
    src = kernel(112)
    a = rt.compile(src, "k.cu", "sm_80", use_cache=False)
    b = rt.compile(src, "k.cu", "sm_80", use_cache=False)
    assert a.cache_source == b.cache_source == "compiled"
    assert a.key == b.key
    assert not cache.exists()
    assert rt.cache_stats()["compiles"] == 0  # bypassed the cache entirely


@requires_nvrtc
def test_clear_disk_removes_entries(cache):
    for tag in (113, 114):
        rt.compile(kernel(tag), "k.cu", "sm_80")
    (cache / "unrelated.txt").write_text("keep me")
    assert rt.cache_clear(memory=True, disk=True) == 2
    assert os.listdir(cache) == ["unrelated.txt"]
    assert rt.compile(kernel(113), "k.cu", "sm_80").cache_source == "compiled"


@requires_nvrtc
def test_unwritable_directory_still_compiles(cache, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("HEDDLE_CACHE_DIR", str(blocker / "sub"))
    r = rt.compile(kernel(115), "k.cu", "sm_80")
    assert r.cache_source == "compiled"
    assert rt.cache_stats()["disk_write_errors"] == 1
    assert rt.compile(kernel(115), "k.cu", "sm_80").cache_source == "memory"


@requires_nvrtc
def test_concurrent_requests_compile_once(cache):
    src = kernel(116)
    results, errors = [], []

    def work():
        try:
            results.append(rt.compile(src, "k.cu", "sm_80"))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(r.cache_source for r in results) == ["compiled"] + ["memory"] * 5
    assert len({r.cubin for r in results}) == 1
    assert rt.cache_stats()["compiles"] == 1


_SHA_IMPLS = ["", "portable"] + (["sha-ni"] if rt.sha256_sha_ni_available() else [])


@pytest.mark.parametrize("impl", _SHA_IMPLS)
@pytest.mark.parametrize("size", [0, 1, 3, 55, 56, 57, 63, 64, 65, 119, 120, 128, 191, 192, 1000, 1 << 20])
def test_sha256_matches_hashlib(size, impl):
    # both compressions (sha256.h): the x86 SHA extensions where the CPU has them, the portable one everywhere
    data = bytes((i * 131 + 7) & 0xFF for i in range(size))
    assert rt.sha256(data, impl) == hashlib.sha256(data).hexdigest()


def test_sha256_random_lengths_agree_between_compressions():
    r = random.Random(31)
    for n in list(range(0, 150)) + [r.randrange(150, 70000) for _ in range(20)]:
        data = r.randbytes(n)
        want = hashlib.sha256(data).hexdigest()
        assert [rt.sha256(data, impl) for impl in _SHA_IMPLS] == [want] * len(_SHA_IMPLS), n


def test_sha256_impl_is_named_and_can_be_forced_portable():
    assert rt.sha256_impl() == ("sha-ni" if rt.sha256_sha_ni_available() else "portable")
    code = "from heddle import _C; print(_C.runtime.sha256_impl())"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "HEDDLE_SHA256": "portable"})
    assert r.returncode == 0 and r.stdout.strip() == "portable", r.stderr[-2000:]
    with pytest.raises(ValueError, match="impl='sha3'"):
        rt.sha256(b"abc", "sha3")


def test_sha256_known_vectors():
    assert rt.sha256(b"abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert rt.sha256(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_embedded_headers_digest_is_the_files_manifest():
    """The digest standing for the embedded headers in every cache key is computed at build time
    (cmake/embed_headers.cmake): sha256 of "<name> <sha256 of text>\\n" per header in name order. It must cover
    exactly the embedded texts, which must be the files' bytes, so an edited header moves every key."""
    built, texts = rt.embedded_headers_digest()
    device = os.path.join(os.path.dirname(__file__), "..", "..", "src", "heddle", "codegen", "device")
    files = {"heddle/" + f: open(os.path.join(device, f), "rb").read() for f in os.listdir(device) if f.endswith(".cuh")}
    assert texts == files
    manifest = "".join(f"{name} {hashlib.sha256(text).hexdigest()}\n" for name, text in sorted(texts.items()))
    assert built == hashlib.sha256(manifest.encode()).hexdigest()
