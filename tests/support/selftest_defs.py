"""Builds and runs a host self-test program of the interpreter's runtime (tests/interp/*_selftest*.cpp):
one compile with the host C++ compiler, one run; the checks it printed as ``ok <name>``. Needs no heddle
build and no GPU."""
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CXX = shutil.which("g++") or shutil.which("clang++")


def run_selftest(tmp_path_factory, name, sources):
    """(completed run, set of passed check names) of the program built from `sources`."""
    if CXX is None:
        pytest.skip("no host C++ compiler (g++ or clang++) found")
    exe = tmp_path_factory.mktemp(name) / name
    cmd = [CXX, "-std=c++17", "-O1", "-Wall", f"-I{ROOT / 'src'}", *map(str, sources), "-o", str(exe)]
    build = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, f"compile failed: {' '.join(cmd)}\n{build.stdout}\n{build.stderr}"
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    ok = {line[3:].strip() for line in run.stdout.splitlines() if line.startswith("ok ")}
    return run, ok
