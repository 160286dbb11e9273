"""What a cached kernel's cubin is made of (issue 31 item 4: <= 64 KiB per cached kernel), on a CPU.

Per kernel variant of benchmarks/test_compile_bench.py, compiled once (cache off): the cubin's ELF sections
grouped by what they hold -- the machine code (.text.<kernel>), the constant banks, the kernel's attributes
for the driver (.nv.info*, notes, compat, call graph), the symbol and string tables, relocations, initialised
global data, debug frames, and the ELF headers and alignment padding between sections -- with the data objects
its symbol table names (before stop 39: the static constexpr data members of the device headers' templates,
which NVVM emitted as .global variables although the code read none of them, each with a symbol, a name string,
a relocated address in constant bank 4 and its initial value; the headers now write them as enumerators), and
what the bytes would take compressed at rest (zlib levels 1 and 6) with the time to decompress them (wall,
median of 30). Byte counts and one timing, recorded, not asserted: rows go to compile.json (notes of
docs/perf.md's compile table, benchmarks/report.py).

test_constexpr_members_as_enumerators measures what those data objects cost: the kernel's source with its
device headers inlined, once as they are (enumerators) and once with every enumerator member written back as
the `static constexpr` data member it was (tools/cubin_compare.py as_members), both compiled; it records both
sizes and whether the machine code (.text) and the kernel parameter bank (.nv.constant0) are byte-identical
(`python3 tools/cubin_compare.py` checks the same for every printed kernel)."""
from __future__ import annotations

import os
import sys
import time
import zlib

import pytest

from heddle import _C, bench

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_compile_bench import VARIANTS, _fresh, _not_lowered, needs_nvrtc  # noqa: E402  (the same kernels)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from cubin_compare import (DEVICE_HEADERS, SHT_NOBITS, as_members, compared_differences, data_objects,  # noqa: E402
                           elf_sections, inline_headers, working_tree_headers)


def group_of(name: str) -> str:
    for prefix, group in ((".text.", "text"), (".nv.constant", "constant banks"), (".rela", "relocations"),
                          (".nv.info", "driver attributes"), (".note", "driver attributes"),
                          (".nv.compat", "driver attributes"), (".nv.callgraph", "driver attributes"),
                          (".symtab", "symbols + strings"), (".strtab", "symbols + strings"),
                          (".shstrtab", "symbols + strings"), (".nv.global.init", "initialised globals"),
                          (".debug", "debug frames")):
        if name.startswith(prefix):
            return group
    return "other"


@needs_nvrtc
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_cubin_sections(variant, recorder):
    if _not_lowered(variant, recorder, "cubin_sections"):
        pytest.skip(f"{variant} does not lower in this build")
    fd, target = _fresh(variant)
    low = fd.lower(target)
    blob = bytes(_C.runtime.compile(low.source, low.name, low.rtc_arch, isolate=False, use_cache=False).cubin)
    sections = elf_sections(blob)
    groups: dict = {}
    in_sections = 0
    for name, kind, _offset, size in sections:
        if kind == SHT_NOBITS or not size:  # shared memory, zero-filled globals: no bytes in the file
            continue
        groups[group_of(name)] = groups.get(group_of(name), 0) + size
        in_sections += size
    assert 0 < groups.get("text", 0) <= in_sections <= len(blob)
    groups["ELF headers + padding"] = len(blob) - in_sections
    objects = data_objects(blob, sections)
    compressed = {}
    for level in (1, 6):
        packed = zlib.compress(blob, level)
        assert zlib.decompress(packed) == blob
        samples = []
        for _ in range(30):
            a = time.perf_counter_ns()
            zlib.decompress(packed)
            samples.append((time.perf_counter_ns() - a) / 1e3)
        compressed[f"zlib{level}"] = {"bytes": len(packed), "decompress_us": round(bench.summarize(samples).median, 1)}
    recorder.add("compile", {"suite": "cubin", "step": "cubin_sections", "variant": variant, "status": "ok",
                             "kernel": low.name, "cubin_bytes": len(blob), "sections": groups,
                             "data_objects": len(objects), "data_object_bytes": sum(s for _, s in objects),
                             "data_object_names_bytes": sum(len(n) + 1 for n, _ in objects),
                             "compressed": compressed})


@needs_nvrtc
@pytest.mark.skipif(not os.path.isdir(DEVICE_HEADERS), reason="needs the device headers of a source checkout")
def test_constexpr_members_as_enumerators(recorder):
    variant = "sm_90a Hopper GEMM (TMA + warp-specialized wgmma)"
    if _not_lowered(variant, recorder, "cubin_enumerators"):
        pytest.skip(f"{variant} does not lower in this build")
    fd, target = _fresh(variant)
    low = fd.lower(target)
    row = {"suite": "cubin", "step": "cubin_enumerators", "variant": variant, "status": "ok", "kernel": low.name}
    blobs = {}
    for label, read in (("members", lambda name: as_members(working_tree_headers(name))),
                        ("enumerators", working_tree_headers)):
        blob = bytes(_C.runtime.compile(inline_headers(low.source, read), low.name, low.rtc_arch, isolate=False,
                                        use_cache=False).cubin)
        blobs[label] = blob
        row[label] = {"cubin_bytes": len(blob), "data_objects": len(data_objects(blob))}
    differs = compared_differences(blobs["members"], blobs["enumerators"])
    row["text_identical"] = not any(n.startswith(".text.") for n in differs)
    row["constant0_identical"] = not any(n.startswith(".nv.constant0.") for n in differs)
    recorder.add("compile", row)
