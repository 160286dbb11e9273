"""Memory per cached kernel (issue 31 item 4), on a CPU: what Kernel.build keeps of a freshly compiled kernel.

Per kernel variant of benchmarks/test_compile_bench.py, with a fresh disk cache (so the kernel is compiled):
  - the bytes of the compiled result the Kernel holds (RtcResult.held_bytes: cubin, PTX if kept, logs, names),
    and whether it is the memory cache's own entry (held once) or a copy of its own beside it;
  - the heap bytes that Kernel.build leaves allocated while the kernel is alive (glibc's mallinfo2: what the
    process really keeps, the lowering context and source included; skipped elsewhere);
each for the build as it is (the PTX left on disk) and as it was before (the Kernel kept the compiled result with
its PTX: compile_lowered(keep_ptx=True)), in the same process. Byte counts, not timings: nothing is asserted
about them beyond what each build claims (compiled, PTX dropped or kept). Rows go to compile.json (notes of
docs/perf.md's compile table, benchmarks/report.py)."""
from __future__ import annotations

import ctypes
import gc
import os
import sys

import pytest

import heddle
from heddle import _C

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_compile_bench import VARIANTS, _fresh, needs_nvrtc  # noqa: E402  (the same kernels)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                "fsmblks", "uordblks", "fordblks", "keepcost")]


def _heap_bytes():
    """Bytes allocated through malloc now (glibc: in-use chunks plus mmapped ones), or None without mallinfo2."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
    except (OSError, AttributeError):
        return None
    gc.collect()
    m = libc.mallinfo2()
    return m.uordblks + m.hblkhd


def _build(variant, keep_ptx):
    """A fresh Kernel.build of `variant` (compiled: the caller's cache directory is empty), and the heap bytes
    it left allocated. keep_ptx=True: the build as it was before, its result kept with the PTX."""
    fd, target = _fresh(variant)
    compile_lowered = _C.runtime.compile_lowered

    def keeping(*args, **kwargs):
        return compile_lowered(*args, **{**kwargs, "keep_ptx": True})
    before = _heap_bytes()
    try:
        if keep_ptx:
            _C.runtime.compile_lowered = keeping
        kernel = heddle.Kernel.build(fd, target)
    finally:
        _C.runtime.compile_lowered = compile_lowered
    after = _heap_bytes()
    return kernel, None if before is None else after - before


@needs_nvrtc
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_kernel_memory(recorder, tmp_path, monkeypatch, variant):
    monkeypatch.delenv("HEDDLE_KEEP_PTX", raising=False)
    monkeypatch.delenv("HEDDLE_DUMP", raising=False)
    monkeypatch.delenv("HEDDLE_DISABLE_DISK_CACHE", raising=False)
    row = {"suite": "kernel_memory", "step": "kernel_memory", "variant": variant}
    # the first build of the process allocates for good (NVRTC, tables): a build before the measured ones
    for label, keep in (("warm", False), ("before", True), ("after", False)):
        monkeypatch.setenv("HEDDLE_CACHE_DIR", str(tmp_path / label))
        _C.runtime.set_cache_dir(None)
        _C.runtime.cache_clear(memory=True)
        try:
            kernel, heap = _build(variant, keep)
        except heddle.ScheduleError as e:  # a variant this build does not lower: say so
            recorder.add("compile", {**row, "status": "not_lowered", "reason": str(e).splitlines()[0]})
            pytest.skip(str(e).splitlines()[0])
        b = kernel.binary
        assert b.cache_source == "compiled" and b.ptx_dropped != keep
        row[label] = {"result_bytes": b.held_bytes, "shared_with_cache": b.shares_memory_entry,
                      "cache_bytes": _C.runtime.cache_memory_bytes(), "heap_bytes": heap}
        row["cubin_bytes"] = len(b.cubin)
        del kernel, b
    _C.runtime.cache_clear(memory=True)
    _C.runtime.set_cache_dir(None)
    recorder.add("compile", {**row, "status": "ok"})
    print(variant, row)
