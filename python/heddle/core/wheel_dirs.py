"""The library folders of the nvidia-* pip wheels (NVRTC) in this interpreter's site-packages.

Imports nothing from heddle: tests/conftest.py loads this file by path, so the test suite finds NVRTC
even when `import heddle` fails.
"""
import os
import site
import sys

SUBDIRS = ("nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib", "nvidia/cu12/lib")


def wheel_dirs():
    roots = []
    try:
        roots += site.getsitepackages()
    except AttributeError:
        pass
    try:
        roots.append(site.getusersitepackages())
    except AttributeError:
        pass
    roots += [p for p in sys.path if p.endswith("site-packages")]
    out = []
    for r in roots:
        for sub in SUBDIRS:
            d = os.path.join(r, sub)
            if os.path.isdir(d) and d not in out:
                out.append(d)
    return out
