"""What the memory cache and a built Kernel keep per kernel: the cubin and launch facts (one copy, shared), not
the PTX (read back from the disk entry when asked for; kept when HEDDLE_KEEP_PTX=1 or HEDDLE_DUMP names ptx),
and the cache's front table (a cheap digest of the key material -> the sha256 key) handing each source its own
kernel."""
import pytest

import heddle
from support.env import requires_nvrtc, rt
from support.matmul_defs import matmul_fusion, schedule


def kernel(tag):
    return f'extern "C" __global__ void k(float* x) {{ x[threadIdx.x] *= {tag}.f; }} // {tag}\n'


def small_matmul(layout):
    """A fresh, scheduled 64x64 f16 matmul fusion (each layout its own kernel)."""
    fd, a, b = matmul_fusion(n=64, k=64, dtype="f16", layout=layout, epilogue="none")
    schedule(fd, a, b, bm=64, bn=64, bk=32, stages=2)
    return fd


@requires_nvrtc
def test_memory_entry_holds_no_ptx_and_reads_it_back_from_disk(cache, monkeypatch):
    monkeypatch.delenv("HEDDLE_KEEP_PTX", raising=False)
    monkeypatch.delenv("HEDDLE_DUMP", raising=False)
    first = rt.compile(kernel(201), "k.cu", "sm_80")
    assert first.cache_source == "compiled" and not first.ptx_dropped and ".entry" in first.ptx
    held = rt.cache_memory_bytes()
    assert held >= len(first.cubin) + len(first.log)
    hit = rt.compile(kernel(201), "k.cu", "sm_80")
    assert hit.cache_source == "memory" and hit.ptx_dropped and hit.key == first.key
    assert hit.cubin == first.cubin and hit.ptx == first.ptx  # the PTX from the disk entry
    assert hit.stats.registers == first.stats.registers and hit.ptxas == first.ptxas
    # the same entry stored with its PTX (asked for) holds exactly the PTX more
    rt.cache_clear(memory=True)
    monkeypatch.setenv("HEDDLE_KEEP_PTX", "1")
    assert rt.compile(kernel(201), "k.cu", "sm_80").cache_source == "disk"
    assert rt.cache_memory_bytes() == held + len(first.ptx)


@requires_nvrtc
def test_memory_hit_without_disk_says_how_to_keep_ptx(cache, monkeypatch):
    monkeypatch.setenv("HEDDLE_DISABLE_DISK_CACHE", "1")
    monkeypatch.delenv("HEDDLE_KEEP_PTX", raising=False)
    monkeypatch.delenv("HEDDLE_DUMP", raising=False)
    rt.compile(kernel(202), "k.cu", "sm_80")
    hit = rt.compile(kernel(202), "k.cu", "sm_80")
    assert hit.cache_source == "memory" and hit.ptx_dropped
    with pytest.raises(heddle.RuntimeUnavailable, match="HEDDLE_KEEP_PTX"):
        hit.ptx


@requires_nvrtc
@pytest.mark.parametrize("env", [("HEDDLE_KEEP_PTX", "1"), ("HEDDLE_DUMP", "cuda, ptx")])
def test_keep_ptx_in_memory_when_asked(cache, monkeypatch, env):
    monkeypatch.setenv("HEDDLE_DISABLE_DISK_CACHE", "1")
    monkeypatch.setenv(*env)
    first = rt.compile(kernel(203), "k.cu", "sm_80")
    assert rt.cache_memory_bytes() >= len(first.cubin) + len(first.ptx)
    hit = rt.compile(kernel(203), "k.cu", "sm_80")
    assert hit.cache_source == "memory" and not hit.ptx_dropped and hit.ptx == first.ptx


@requires_nvrtc
def test_memory_entry_keeps_a_clean_log_once(cache, monkeypatch):
    """A clean compile's NVRTC log is its ptxas report (and a stray NUL): the memory entry holds the report once,
    and a hit's log reads as it; a log that says more (a front-end warning) is kept whole. Byte for byte: the
    clean entry holds exactly the log's bytes less than the result compiled."""
    monkeypatch.setenv("HEDDLE_DISABLE_DISK_CACHE", "1")
    monkeypatch.setenv("HEDDLE_KEEP_PTX", "1")  # the PTX held too: the entries differ by their logs alone
    clean = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 207.f; }\n'
    warned = 'extern "C" __global__ void k(float* x) { int u = 0; x[threadIdx.x] *= 207.f; }\n'
    first = rt.compile(clean, "k.cu", "sm_80")
    assert first.ptxas and first.log.rstrip("\0") == first.ptxas  # the compiled result has NVRTC's log
    hit = rt.compile(clean, "k.cu", "sm_80")
    assert hit.cache_source == "memory" and hit.log == first.ptxas and hit.held_bytes == first.held_bytes - len(
        first.log)
    rt.cache_clear(memory=True)
    w = rt.compile(warned, "k.cu", "sm_80")
    assert "#177-D" in w.log and w.log != w.ptxas
    hit = rt.compile(warned, "k.cu", "sm_80")
    assert hit.cache_source == "memory" and hit.log == w.log and hit.held_bytes == w.held_bytes


@requires_nvrtc
def test_a_ptx_only_compile_keeps_its_ptx_in_memory(cache, monkeypatch):
    """compute_XX compiles to PTX alone (no cubin): the memory entry keeps it, so a hit has it without the disk."""
    monkeypatch.setenv("HEDDLE_DISABLE_DISK_CACHE", "1")
    monkeypatch.delenv("HEDDLE_KEEP_PTX", raising=False)
    monkeypatch.delenv("HEDDLE_DUMP", raising=False)
    first = rt.compile(kernel(206), "k.cu", "compute_80")
    assert first.cubin == b"" and ".entry" in first.ptx
    hit = rt.compile(kernel(206), "k.cu", "compute_80")
    assert hit.cache_source == "memory" and not hit.ptx_dropped and hit.ptx == first.ptx
    assert rt.cache_memory_bytes() >= len(first.ptx)


@requires_nvrtc
def test_kernel_ptx_of_a_memory_hit_without_disk(cache, monkeypatch):
    """Kernel.ptx compiles the printed source again (uncached) when neither memory nor disk has the PTX."""
    monkeypatch.setenv("HEDDLE_DISABLE_DISK_CACHE", "1")
    monkeypatch.delenv("HEDDLE_KEEP_PTX", raising=False)
    monkeypatch.delenv("HEDDLE_DUMP", raising=False)
    heddle.Kernel.build(small_matmul("NN"), "sm_80")
    k = heddle.Kernel.build(small_matmul("NN"), "sm_80")
    assert k.binary.cache_source == "memory" and k.binary.ptx_dropped
    assert "mma.sync.aligned" in k.ptx


@requires_nvrtc
def test_kernel_ptx_compiled_again_takes_the_builds_options(cache, monkeypatch):
    """The PTX compiled again for a memory hit is the build's: the same NVRTC options (-lineinfo: .loc lines)."""
    monkeypatch.setenv("HEDDLE_DISABLE_DISK_CACHE", "1")
    monkeypatch.delenv("HEDDLE_KEEP_PTX", raising=False)
    monkeypatch.delenv("HEDDLE_DUMP", raising=False)
    heddle.Kernel.build(small_matmul("NT"), "sm_80", options=["-lineinfo"])
    k = heddle.Kernel.build(small_matmul("NT"), "sm_80", options=["-lineinfo"])
    assert k.binary.cache_source == "memory" and k.binary.ptx_dropped
    assert "\t.loc\t" in k.ptx
    plain = heddle.Kernel.build(small_matmul("NN"), "sm_80", use_cache=False)
    assert "\t.loc\t" not in plain.ptx


@requires_nvrtc
def test_front_table_gives_each_source_its_own_kernel(cache):
    a, b = rt.compile(kernel(204), "k.cu", "sm_80"), rt.compile(kernel(205), "k.cu", "sm_80")
    assert a.key != b.key
    for _ in range(2):  # hits through the front table, both ways round
        assert rt.compile(kernel(205), "k.cu", "sm_80").key == b.key
        assert rt.compile(kernel(204), "k.cu", "sm_80").key == a.key
    # the options and the program name are key material too
    c = rt.compile(kernel(204), "k.cu", "sm_80", lineinfo=True)
    d = rt.compile(kernel(204), "other.cu", "sm_80")
    assert len({a.key, c.key, d.key}) == 3 and c.cache_source == d.cache_source == "compiled"
    stats = rt.cache_stats()
    assert stats["memory_hits"] == 4 and stats["compiles"] == 4
    rt.cache_clear(memory=True)  # the front goes with the memory map: the next lookup reads the disk
    assert rt.compile(kernel(204), "k.cu", "sm_80").cache_source == "disk"


@requires_nvrtc
def test_dump_ptx_of_a_kernel_held_without_ptx(cache, monkeypatch, capfd):
    """HEDDLE_DUMP=ptx set after the kernel went into memory without its PTX (disk off) still prints it."""
    monkeypatch.setenv("HEDDLE_DISABLE_DISK_CACHE", "1")
    monkeypatch.delenv("HEDDLE_KEEP_PTX", raising=False)
    monkeypatch.delenv("HEDDLE_DUMP", raising=False)
    heddle.Kernel.build(small_matmul("TN"), "sm_80")
    monkeypatch.setenv("HEDDLE_DUMP", "ptx")
    k = heddle.Kernel.build(small_matmul("TN"), "sm_80")
    assert k.binary.cache_source == "memory" and k.binary.ptx_dropped
    assert "===== heddle ptx =====" in capfd.readouterr().err


@requires_nvrtc
def test_a_built_kernel_holds_the_caches_entry_and_no_ptx(cache, monkeypatch):
    """Kernel.build keeps what a launch needs: the memory cache's own result (the cubin and launch facts, held
    once), not the PTX it compiled, whether it compiled the kernel, read it from disk or hit memory; Kernel.ptx
    reads the PTX back from the disk entry."""
    monkeypatch.delenv("HEDDLE_KEEP_PTX", raising=False)
    monkeypatch.delenv("HEDDLE_DUMP", raising=False)
    before = rt.cache_memory_bytes()
    built = heddle.Kernel.build(small_matmul("TT"), "sm_80")
    b = built.binary
    assert b.cache_source == "compiled" and b.ptx_dropped and b.shares_memory_entry
    cubin = len(b.cubin)
    assert cubin <= b.held_bytes <= cubin + 8 * 1024  # beside the cubin: the ptxas report, log and names
    assert rt.cache_memory_bytes() - before == b.held_bytes + len(b.key)  # the cache's accounting: one copy
    assert "mma.sync.aligned" in built.ptx  # read back from the disk entry
    for source in ("disk", "memory"):
        if source == "disk":
            rt.cache_clear(memory=True)
        again = heddle.Kernel.build(small_matmul("TT"), "sm_80").binary
        assert again.cache_source == source and again.ptx_dropped and again.shares_memory_entry
        assert again.held_bytes == b.held_bytes and again.cubin == b.cubin


@requires_nvrtc
def test_a_built_kernel_keeps_its_ptx_when_asked(cache, monkeypatch):
    """HEDDLE_KEEP_PTX=1: the kernel and the memory cache keep the PTX (the same entry, held once)."""
    monkeypatch.setenv("HEDDLE_KEEP_PTX", "1")
    b = heddle.Kernel.build(small_matmul("TT"), "sm_80").binary
    assert b.cache_source == "compiled" and not b.ptx_dropped and b.shares_memory_entry
    assert b.held_bytes >= len(b.cubin) + len(b.ptx) and ".entry" in b.ptx


def padded_kernel(tag):
    """kernel(tag) between two comments: 70 bytes before it, 101 after (several 32-byte stripes and a tail)."""
    return "//" + "a" * 67 + "\n" + kernel(tag) + "//" + "b" * 98 + "\n"


def _edits(src):
    """The source with one byte changed near its start, in a second stripe, in its last full 32-byte stripe
    and in its tail (the bytes the digest's stripes leave over), and one byte longer: every byte counts."""
    stripes = len(src) // 32 * 32
    spots = [2, 40, stripes - 1, len(src) - 2]
    assert all(src[i] in "ab" for i in spots) and stripes < len(src) - 2  # comment bytes: still compiles
    return [src[:i] + "c" + src[i + 1:] for i in spots] + [src + " "]


def test_key_and_front_digest_cover_every_input():
    """The memory front's digest moves with everything the sha256 key covers (source, program name, target,
    options, compiler version, heddle version), so a memory hit can only be the same kernel's."""
    src = padded_kernel(301)
    base = rt.cache_key_of(src, "k.cu", "sm_80", compiler_version="13.0")
    assert rt.cache_key_of(src, "k.cu", "sm_80", compiler_version="13.0") == base  # deterministic
    variants = [rt.cache_key_of(s, "k.cu", "sm_80", compiler_version="13.0") for s in _edits(src)] + [
        rt.cache_key_of(src, "other.cu", "sm_80", compiler_version="13.0"),
        rt.cache_key_of(src, "k.cu", "sm_90a", compiler_version="13.0"),
        rt.cache_key_of(src, "k.cu", "sm_80", lineinfo=True, compiler_version="13.0"),
        rt.cache_key_of(src, "k.cu", "sm_80", options=["-DX=1"], compiler_version="13.0"),
        rt.cache_key_of(src, "k.cu", "sm_80", compiler_version="13.1"),
        rt.cache_key_of(src, "k.cu", "sm_80", compiler_version="13.0", heddle_version="0.0.0-other"),
    ]
    assert len({k for k, _ in variants} | {base[0]}) == len(variants) + 1  # sha256 keys
    assert len({f for _, f in variants} | {base[1]}) == len(variants) + 1  # front digests
    # the source's digest stands in the front's material at the source's place, with its length: a source
    # and a name that shift bytes between them do not collide
    assert rt.cache_key_of("ab", "c", "sm_80")[1] != rt.cache_key_of("a", "bc", "sm_80")[1]


@requires_nvrtc
def test_memory_hit_never_serves_another_inputs_kernel(cache, monkeypatch):
    """With the kernel in memory, any change of source (first, middle, last byte, length), options, target or a
    code-changing environment variable compiles (or reads the disk), never hits the memory entry."""
    src = padded_kernel(302)
    first = rt.compile(src, "k.cu", "sm_80")
    assert rt.compile(src, "k.cu", "sm_80").cache_source == "memory"
    changed = [rt.compile(s, "k.cu", "sm_80") for s in _edits(src)] + [
        rt.compile(src, "k.cu", "sm_90a"),
        rt.compile(src, "k.cu", "sm_80", lineinfo=True),
        rt.compile(src, "k.cu", "sm_80", options=["-DHEDDLE_TEST=3"]),
        rt.compile(src, "other.cu", "sm_80"),
    ]
    monkeypatch.setenv("HEDDLE_FAST_MATH", "1")
    changed.append(rt.compile(src, "k.cu", "sm_80"))
    assert [r.cache_source for r in changed] == ["compiled"] * len(changed)
    assert len({r.key for r in changed} | {first.key}) == len(changed) + 1
    monkeypatch.delenv("HEDDLE_FAST_MATH")
    again = rt.compile(src, "k.cu", "sm_80")
    assert again.cache_source == "memory" and again.key == first.key
