"""The C++ layers include one way (docs/architecture.md, "Layers"), like the Python import direction of
test_package.py: every `#include "heddle/<folder>/..."` in src/heddle names a folder whose floor is at or
below the including file's. A folder inherits its parent's floor unless the table lists it; a folder the
table does not place fails the test (a new folder chooses its floor here). `#include "heddle/<file>.cuh"`
names an embedded device header (src/heddle/codegen/device)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "heddle"

# folder (relative to src/heddle) -> floor; a file may include its own floor and those below.
FLOORS = {
    "ir": 0,                 # the fusion IR, errors
    "kir": 1,                # the kernel IR
    "target": 2,             # TargetInfo
    "schedule": 3,           # schedules and their rules
    "sync": 4,               # the sync plan: hazards, planner, rings (issue 30)
    "lower": 5,              # lowering: lower.cpp, analysis/, passes/, explain
    "codegen": 6,            # printers and the device headers they embed
    "runtime": 7,            # compile, load, launch, cache
    "runtime/cuda": 7,       # backends beside the interface (issue 30)
    "runtime/hip": 7,
    "runtime/cache": 7,
    "interp": 8,             # the CPU interpreter (host builds of printed sources)
    "verify": 8,             # the kernel-IR simulator
    "bindings": 9,           # pybind11: everything
    "aten": 9,
    "worker": 9,             # heddle-rtc-worker: the isolated compile's program (runtime/rtc_isolate.h)               # heddle._C_aten: the eager tables' ATen access (the one torch-linked file)
}


INCLUDE = re.compile(r'^\s*#\s*include\s+"heddle/([^"]+)"', re.M)


def floor(rel: str) -> int:
    """The floor of a file or folder path relative to src/heddle: its deepest listed ancestor's."""
    parts = rel.split("/")
    for n in range(len(parts), 0, -1):
        key = "/".join(parts[:n])
        if key in FLOORS:
            return FLOORS[key]
    raise AssertionError(f"src/heddle/{rel} is in no layer: add its folder to FLOORS in {Path(__file__).name}")


def sources():
    return sorted(p for p in SRC.rglob("*") if p.suffix in (".h", ".cpp") and p.is_file())


def includes():
    """(including file, included path), both relative to src/heddle."""
    for path in sources():
        rel = path.relative_to(SRC).as_posix()
        for target in INCLUDE.findall(path.read_text(errors="replace")):
            if "/" not in target:  # heddle/<file>.cuh: an embedded device header
                target = "codegen/device/" + target
            yield rel, target


def test_every_folder_has_a_floor():
    for d in sorted(p for p in SRC.rglob("*") if p.is_dir()):
        floor(d.relative_to(SRC).as_posix())


def test_includes_run_down_the_layers():
    upward, seen = [], 0
    for rel, target in includes():
        seen += 1
        assert (SRC / target).exists(), f"src/heddle/{rel} includes heddle/{target}, which does not exist"
        if floor(target) > floor(rel):
            upward.append(f"src/heddle/{rel} (floor {floor(rel)}) includes heddle/{target} (floor {floor(target)})")
    assert seen > 100, seen
    assert not upward, "includes that run back up a layer:\n  " + "\n  ".join(upward)
