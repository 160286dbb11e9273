"""Digests that tie a prepared wheel to the tree it was built from (tools/gpu_window.sh prepare writes them to
.whl/STAMP; the window's install stage compares them with the tree it was sent).

native: everything compiled into heddle._C (src/, CMakeLists.txt, cmake/, pyproject.toml): a change there
  means the wheel is stale and the window builds from source instead.
python: python/heddle/**.py: a change there is laid over the installed wheel.

    python3 tools/window/prepare_stamp.py [ROOT]     # prints native=... and python=...
"""
from __future__ import annotations

import hashlib
import os
import sys


def _digest(root, parts, suffixes=None) -> str:
    h = hashlib.sha256()
    for part in parts:
        base = os.path.join(root, part)
        files = [base] if os.path.isfile(base) else sorted(
            os.path.join(d, f) for d, _, fs in os.walk(base) for f in fs)
        for path in files:
            if suffixes and not path.endswith(suffixes):
                continue
            if "__pycache__" in path or path.endswith((".so", ".pyc")):
                continue
            h.update(os.path.relpath(path, root).encode() + b"\0")
            with open(path, "rb") as f:
                h.update(f.read())
    return h.hexdigest()[:16]


def digests(root) -> dict:
    return {"native": _digest(root, ["src", "CMakeLists.txt", "cmake", "pyproject.toml"]),
            "python": _digest(root, [os.path.join("python", "heddle")], (".py",))}


if __name__ == "__main__":
    for k, v in digests(sys.argv[1] if len(sys.argv) > 1 else os.getcwd()).items():
        print(f"{k}={v}")
