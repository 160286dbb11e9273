"""Build heddle._C_aten on the GPU machine, against that machine's own torch (docs/gpu-window.md, install).

The window's wheel is built on the CPU machine without torch (build isolation), and heddle uses _C_aten
only under the torch it was compiled against (heddle.core.aten), so a window without this step measures
the eager calls' Python-reads path. The module is one source file (src/heddle/aten/aten_module.cpp) that
needs torch's headers and libraries and nothing of heddle's core, so the machine's C++ compiler builds it
in well under a minute, the same flags as CMakeLists.txt's _C_aten target.

    python build_aten.py --site /tmp/heddle-site [--root REPO] [--cxx c++]

Writes <site>/heddle/_C_aten<EXT_SUFFIX> atomically (a process importing heddle meanwhile sees the module
whole or not at all) and prints one line: what was built against which torch, or why nothing was.
Exit status 0 when built, 1 otherwise (never fatal to the window).
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def command(root: str, out: str, cxx: str) -> list:
    """The compile-and-link command for the running Python's torch (CMakeLists.txt's _C_aten flags)."""
    import torch  # the machine's torch: the one heddle will run under

    tdir = os.path.dirname(torch.__file__)
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    return [cxx, "-O2", "-std=c++20", "-shared", "-fPIC", "-fvisibility=hidden",
            f'-DHEDDLE_TORCH_VERSION="{torch.__version__}"', f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
            "-I", os.path.join(root, "src"), "-I", os.path.join(tdir, "include"),
            "-I", sysconfig.get_paths()["include"],
            os.path.join(root, "src", "heddle", "aten", "aten_module.cpp"),
            "-L", os.path.join(tdir, "lib"), "-ltorch_python", "-ltorch_cpu", "-lc10",
            f"-Wl,-rpath,{os.path.join(tdir, 'lib')}", "-o", out]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--site", required=True, help="the folder holding the installed heddle package")
    ap.add_argument("--root", default=ROOT, help="the heddle source tree (default: this script's)")
    ap.add_argument("--cxx", default=os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or "c++")
    args = ap.parse_args(argv)
    pkg = os.path.join(args.site, "heddle")
    if not os.path.isdir(pkg):
        print(f"build_aten: no heddle package in {args.site}")
        return 1
    try:
        import torch
    except ImportError as e:
        print(f"build_aten: torch does not import ({e}): nothing to build against")
        return 1
    final = os.path.join(pkg, "_C_aten" + sysconfig.get_config_var("EXT_SUFFIX"))
    fd, tmp = tempfile.mkstemp(prefix=".C_aten-", suffix=".so", dir=pkg)
    os.close(fd)
    cmd = command(args.root, tmp, args.cxx)
    print("build_aten: " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    t = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        os.unlink(tmp)
        print((r.stdout + r.stderr)[-2000:])
        print(f"build_aten: compile failed (rc {r.returncode}) after {time.time() - t:.0f} s")
        return 1
    os.replace(tmp, final)
    print(f"build_aten: built {os.path.basename(final)} against torch {torch.__version__} in {time.time() - t:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
