#!/usr/bin/env python3
"""Compile printed kernels against two versions of the device headers with NVRTC and compare the cubins' machine
code (`.text.<kernel>`) and kernel parameter bank (`.nv.constant0.<kernel>`) byte for byte.

A device-header change that should not alter what runs (e.g. the stop-39 change that turned the headers'
`static constexpr` data members into enumerators, which drops ~30 data objects per kernel from the cubin) is
proved here for every printed kernel of tests/test_printed_sources.py (the window families on sm_80 / sm_90a /
sm_100a, the sm_80 stage ladder, the tcgen05 families; the AMD kernels need hiprtc and are listed as skipped).

Each kernel is lowered once; its source is compiled twice with its `#include "heddle/..."` lines expanded in
place (each header once, as #pragma once does): once with the BEFORE headers, once with the working tree's.
BEFORE is
  --before REV       the headers at git revision REV (e.g. the commit before a header change), or
  --members          (default) the working tree's headers with every enumerator member written back as the
                     `static constexpr` data member it was (`enum : int { X = e };` -> `static constexpr int X = e;`).
Only the section bytes are compared: the whole cubin differs anyway (the symbol and string tables, and
`.note.nv.tkinfo` records the command line).

    python3 tools/cubin_compare.py [--before REV | --members] [-k SUBSTRING] [--json OUT]

Exit status 1 when any kernel's .text or .nv.constant0 differs or a compile fails. The helpers (ELF sections,
data objects, header inlining) are shared with benchmarks/test_cubin_sections_bench.py and
tests/codegen/test_header_enumerators.py.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import struct
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEVICE_HEADERS = os.path.join(ROOT, "src", "heddle", "codegen", "device")
SHT_NOBITS, STT_OBJECT = 8, 1
COMPARED = (".text.", ".nv.constant0.")  # what runs, and the parameters it is launched with

_INCLUDE = re.compile(r'#include "heddle/(\w+\.cuh)"')
_ENUM_MEMBER = re.compile(r"enum : (int|bool|unsigned) \{ ([A-Za-z_]\w* = [^{}]*?) \};")


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


def data_objects(blob: bytes, sections=None):
    """The data objects (STT_OBJECT) the symbol table names: [(name, size)]."""
    by_name = {s[0]: s for s in sections or elf_sections(blob)}
    _, _, symoff, symsize = by_name[".symtab"]
    _, _, stroff, _ = by_name[".strtab"]
    out = []
    for at in range(symoff, symoff + symsize, 24):
        name_at, info, _other, _shndx, _value, size = struct.unpack_from("<IBBHQQ", blob, at)
        if info & 0xF == STT_OBJECT:
            end = blob.index(b"\0", stroff + name_at)
            out.append((blob[stroff + name_at:end].decode(), size))
    return out


def section_bytes(blob: bytes):
    """{name: bytes} of the sections that have bytes in the file."""
    return {name: blob[off:off + size] for name, kind, off, size in elf_sections(blob) if kind != SHT_NOBITS}


def compared_differences(before: bytes, after: bytes):
    """Names of the .text / .nv.constant0 sections whose bytes differ (or that only one cubin has)."""
    a, b = section_bytes(before), section_bytes(after)
    names = sorted(n for n in a.keys() | b.keys() if n.startswith(COMPARED))
    return [n for n in names if a.get(n) != b.get(n)]


def as_members(header_text: str) -> str:
    """A device header with its enumerator members written back as `static constexpr` data members."""
    return _ENUM_MEMBER.sub(r"static constexpr \1 \2;", header_text)


def working_tree_headers(name: str) -> str:
    with open(os.path.join(DEVICE_HEADERS, name)) as f:
        return f.read()


def git_headers(rev: str):
    """A reader of the device headers at git revision `rev`."""
    def read(name):
        return subprocess.run(["git", "-C", ROOT, "show", f"{rev}:src/heddle/codegen/device/{name}"], check=True,
                              capture_output=True, text=True).stdout
    return read


def inline_headers(source: str, read=working_tree_headers) -> str:
    """`source` with its `#include "heddle/X.cuh"` lines replaced by read("X.cuh"), recursively, each header once."""
    seen = set()

    def expand(text):
        out = []
        for line in text.splitlines():
            m = _INCLUDE.match(line)
            if m:
                if m.group(1) not in seen:
                    seen.add(m.group(1))
                    out.append(expand(read(m.group(1))))
                continue
            if line.strip() != "#pragma once":
                out.append(line)
        return "\n".join(out)
    text = expand(source)
    assert '#include "heddle/' not in text
    return text


def compile_cubin(source: str, name: str, arch: str) -> bytes:
    from heddle import _C
    return bytes(_C.runtime.compile(source, name, arch, isolate=False, use_cache=False).cubin)


def compare_kernel(low, before_read, after_read=working_tree_headers):
    """One lowered kernel compiled with both header versions: a dict row (sizes, data objects, differences)."""
    blobs = {label: compile_cubin(inline_headers(low.source, read), low.name, low.rtc_arch)
             for label, read in (("before", before_read), ("after", after_read))}
    row = {"kernel": low.name, "arch": low.rtc_arch, "differs": compared_differences(blobs["before"], blobs["after"])}
    for label, blob in blobs.items():
        row[label] = {"cubin_bytes": len(blob), "data_objects": len(data_objects(blob)),
                      "text_bytes": sum(len(v) for n, v in section_bytes(blob).items() if n.startswith(".text."))}
    return row


def printed_cases():
    """(name, target, make) of every printed kernel tests/test_printed_sources.py pins."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    if importlib.util.find_spec("heddle") is None:  # a source checkout run as a script; never ahead of an install,
        sys.path.append(os.path.join(ROOT, "python"))  # whose sys.path the tests hand to their subprocesses
    from test_printed_sources import cases
    return cases()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--before", metavar="REV", help="the device headers at this git revision")
    group.add_argument("--members", action="store_true", help="(default) enumerators written back as members")
    ap.add_argument("-k", default="", help="only the cases whose name contains this")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    before = git_headers(args.before) if args.before else (lambda name: as_members(working_tree_headers(name)))
    rows, bad = [], 0
    for name, target, make in printed_cases():
        if args.k not in name:
            continue
        if target.startswith("gfx"):
            rows.append({"case": name, "status": "skipped: an AMD kernel (hiprtc, not NVRTC)"})
            print(f"{name}: skipped (AMD)", flush=True)
            continue
        t0 = time.perf_counter()
        try:
            row = {"case": name, "status": "ok", **compare_kernel(make(target).lower(target), before)}
        except Exception as e:  # a compile that fails on either side is a failure of the check, reported per case
            row = {"case": name, "status": f"error: {str(e).splitlines()[0] if str(e) else type(e).__name__}"}
        if row["status"] != "ok" or row["differs"]:
            bad += 1
        b, a = row.get("before", {}), row.get("after", {})
        print(f"{name}: {row['status']}; cubin {b.get('cubin_bytes')} -> {a.get('cubin_bytes')} B, data objects "
              f"{b.get('data_objects')} -> {a.get('data_objects')}; differs: {row.get('differs')} "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
        rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"before": args.before or "members", "rows": rows}, f, indent=1)
    ok = sum(1 for r in rows if r["status"] == "ok" and not r["differs"])
    print(f"{ok} kernels with identical .text and .nv.constant0, {bad} different or failed, "
          f"{sum(1 for r in rows if r['status'].startswith('skipped'))} skipped")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
