"""What a cached kernel's cubin is made of (issue 31 item 4: <= 64 KiB per cached kernel), on a CPU.

Per kernel variant of benchmarks/test_compile_bench.py, compiled once (cache off): the cubin's ELF sections
grouped by what they hold -- the machine code (.text.<kernel>), the constant banks, the kernel's attributes
for the driver (.nv.info*, notes, compat, call graph), the symbol and string tables, relocations, initialised
global data, debug frames, and the ELF headers and alignment padding between sections -- with the data objects
its symbol table names (static constexpr members of the device headers' templates, which NVVM emits as
.global variables although the code reads none of them, each with a symbol, a name string, a relocated address
in constant bank 4 and its initial value), and what the bytes would take compressed at rest (zlib levels 1 and
6) with the time to decompress them (wall, median of 30). Byte counts and one timing, recorded, not asserted:
rows go to compile.json (notes of docs/perf.md's compile table, benchmarks/report.py).

test_constexpr_members_as_enumerators measures what those data objects cost: the kernel's source with its
device headers inlined, once as they are and once with every `static constexpr int|bool X = e;` member
rewritten as an enumerator (`enum : int { X = e };`: the same constant, no object), both compiled; it
records both sizes and whether the machine code (.text) and the kernel parameter bank (.nv.constant0) are
byte-identical."""
from __future__ import annotations

import os
import re
import struct
import sys
import time
import zlib

import pytest

from heddle import _C, bench

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_compile_bench import VARIANTS, _fresh, _not_lowered, needs_nvrtc  # noqa: E402  (the same kernels)

SHT_NOBITS, SHT_SYMTAB, STT_OBJECT = 8, 2, 1
DEVICE_HEADERS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src", "heddle", "codegen",
                              "device")


def elf_sections(blob: bytes):
    """[(name, type, offset, size)] of an ELF64 little-endian image (a cubin), from its section headers."""
    assert blob[:4] == b"\x7fELF" and blob[4] == 2 and blob[5] == 1, "not an ELF64 little-endian image"
    shoff, = struct.unpack_from("<Q", blob, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", blob, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", blob, shoff + i * shentsize) for i in range(shnum)]
    names = heads[shstrndx][4]
    out = []
    for name_at, kind, _flags, _addr, offset, size, *_ in heads:
        end = blob.index(b"\0", names + name_at)
        out.append((blob[names + name_at:end].decode(), kind, offset, size))
    return out


def data_objects(blob: bytes, sections):
    """The data objects (STT_OBJECT) the symbol table names: [(name, size)]."""
    by_name = {s[0]: s for s in sections}
    _, _, symoff, symsize = by_name[".symtab"]
    _, _, stroff, _ = by_name[".strtab"]
    out = []
    for at in range(symoff, symoff + symsize, 24):
        name_at, info, _other, _shndx, _value, size = struct.unpack_from("<IBBHQQ", blob, at)
        if info & 0xF == STT_OBJECT:
            end = blob.index(b"\0", stroff + name_at)
            out.append((blob[stroff + name_at:end].decode(), size))
    return out


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


def _inlined(source: str, enumerators: bool) -> str:
    """`source` with its heddle device headers expanded in place (each once, as #pragma once would), their
    static constexpr int / bool data members turned into enumerators when `enumerators`."""
    seen = set()

    def expand(text):
        out = []
        for line in text.splitlines():
            m = re.match(r'#include "heddle/(\w+\.cuh)"', line)
            if m:
                if m.group(1) not in seen:
                    seen.add(m.group(1))
                    with open(os.path.join(DEVICE_HEADERS, m.group(1))) as f:
                        out.append(expand(f.read()))
                continue
            if line.strip() != "#pragma once":
                out.append(line)
        return "\n".join(out)
    text = expand(source)
    if enumerators:
        text = re.sub(r"static constexpr (int|bool) (\w+ = [^;{}]*);", r"enum : \1 { \2 };", text)
    return text


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
    for label, enumerators in (("as_is", False), ("enumerators", True)):
        source = _inlined(low.source, enumerators)
        assert "#include \"heddle/" not in source
        blob = bytes(_C.runtime.compile(source, low.name, low.rtc_arch, isolate=False, use_cache=False).cubin)
        sections = elf_sections(blob)
        blobs[label] = {name: blob[off:off + size] for name, kind, off, size in sections if kind != SHT_NOBITS}
        row[label] = {"cubin_bytes": len(blob), "data_objects": len(data_objects(blob, sections))}
    same = lambda prefix: all(blobs["as_is"][n] == blobs["enumerators"].get(n)
                              for n in blobs["as_is"] if n.startswith(prefix))
    row["text_identical"] = same(".text.")
    row["constant0_identical"] = same(".nv.constant0.")
    recorder.add("compile", row)
