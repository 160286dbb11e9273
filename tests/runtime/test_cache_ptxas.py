"""A memory-cache entry keeps the ptxas report's parsed facts (stats: registers, spills, stack, smem, advisories,
per kernel), not its text, when the disk entry holds the text (docs/runtime.md, "What memory keeps"): `.ptxas`
and a clean compile's `.log` read it back from there; HEDDLE_DUMP=ptxas, or no disk entry, keeps it in memory."""
import pytest

import heddle
from support.env import requires_nvrtc, rt
from support.matmul_defs import matmul_fusion, schedule


def kernel(tag):
    return f'extern "C" __global__ void k(float* x) {{ x[threadIdx.x] *= {tag}.f; }} // {tag}\n'


def _no_dump(monkeypatch):
    monkeypatch.delenv("HEDDLE_KEEP_PTX", raising=False)
    monkeypatch.delenv("HEDDLE_DUMP", raising=False)


@requires_nvrtc
def test_memory_entry_keeps_the_facts_and_leaves_the_text_on_disk(cache, monkeypatch):
    _no_dump(monkeypatch)
    first = rt.compile(kernel(301), "k.cu", "sm_80")
    assert first.cache_source == "compiled" and not first.report_on_disk and "Used" in first.ptxas
    hit = rt.compile(kernel(301), "k.cu", "sm_80")
    assert hit.cache_source == "memory" and hit.report_on_disk
    # byte for byte: the entry is the compiled result less its PTX, its log and its report
    assert hit.held_bytes == first.held_bytes - len(first.ptx) - len(first.log) - len(first.ptxas)
    assert rt.cache_memory_bytes() == hit.held_bytes + len(hit.key)
    assert (hit.stats.registers, hit.stats.spill_stores, hit.stats.stack_frame, hit.stats.smem) == \
        (first.stats.registers, first.stats.spill_stores, first.stats.stack_frame, first.stats.smem)
    assert hit.stats.kernels == first.stats.kernels and hit.stats.registers > 0
    assert hit.ptxas == first.ptxas and hit.log == first.ptxas   # read back from the disk entry


@requires_nvrtc
def test_a_dump_or_no_disk_entry_keeps_the_text(cache, monkeypatch):
    _no_dump(monkeypatch)
    first = rt.compile(kernel(302), "k.cu", "sm_80")
    rt.cache_clear(memory=True)
    monkeypatch.setenv("HEDDLE_DUMP", "ptxas")
    assert rt.compile(kernel(302), "k.cu", "sm_80").cache_source == "disk"
    hit = rt.compile(kernel(302), "k.cu", "sm_80")
    assert hit.cache_source == "memory" and not hit.report_on_disk and hit.ptxas == first.ptxas
    assert rt.cache_clear(memory=False, disk=True) >= 1
    assert hit.ptxas == first.ptxas   # held: the disk plays no part
    _no_dump(monkeypatch)
    monkeypatch.setenv("HEDDLE_DISABLE_DISK_CACHE", "1")   # nothing on disk: memory keeps the text
    rt.cache_clear(memory=True)
    rt.compile(kernel(303), "k.cu", "sm_80")
    hit = rt.compile(kernel(303), "k.cu", "sm_80")
    assert hit.cache_source == "memory" and not hit.report_on_disk and "Used" in hit.ptxas


@requires_nvrtc
def test_a_report_whose_disk_entry_is_gone(cache, monkeypatch):
    """The raw result says what happened and what to do; Kernel.ptxas compiles again, as Kernel.ptx does."""
    _no_dump(monkeypatch)
    rt.compile(kernel(304), "k.cu", "sm_80")
    hit = rt.compile(kernel(304), "k.cu", "sm_80")
    assert rt.cache_clear(memory=False, disk=True) >= 1
    with pytest.raises(heddle.RuntimeUnavailable, match="HEDDLE_DUMP=ptxas"):
        hit.ptxas
    fd, a, b = matmul_fusion(n=64, k=64, dtype="f16", layout="TN", epilogue="none")
    schedule(fd, a, b, bm=64, bn=64, bk=32, stages=2)
    built = heddle.Kernel.build(fd, "sm_80")
    want = built.ptxas   # the compiled result's own text, before any memory hit
    k = heddle.Kernel.build(fd, "sm_80")
    assert k.binary.cache_source == "memory" and k.binary.report_on_disk
    assert rt.cache_clear(memory=False, disk=True) >= 1
    again = k.ptxas   # compiled again, uncached: the same report but for ptxas's own timing lines
    assert _untimed(again) == _untimed(want) and f"Used {k.stats.registers} registers" in again


def _untimed(report):
    return [line for line in report.splitlines() if " time = " not in line]


@requires_nvrtc
def test_heddle_dump_ptxas_prints_a_memory_hits_report(cache, monkeypatch, capsys):
    _no_dump(monkeypatch)
    fd, a, b = matmul_fusion(n=64, k=64, dtype="f16", layout="NT", epilogue="none")
    schedule(fd, a, b, bm=64, bn=64, bk=32, stages=2)
    first = heddle.Kernel.build(fd, "sm_80")
    monkeypatch.setenv("HEDDLE_DUMP", "ptxas")
    again = heddle.Kernel.build(fd, "sm_80")
    err = capsys.readouterr().err
    assert again.binary.cache_source == "memory" and "===== heddle ptxas =====" in err
    assert f"Used {first.stats.registers} registers" in err
