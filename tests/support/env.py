"""The test suite's access to the built extension and its runtime, shared by conftest.py and the tests
(``from support.env import C, rt, requires_nvrtc``):

  * ``C``              -- the built extension ``heddle._C`` (loaded directly if ``import heddle`` fails)
  * ``heddle_error``   -- look up a mapped exception class (heddle._C.X, else heddle.X)
  * ``requires_nvrtc`` -- the ``nvrtc`` marker: skipped with the loader's reason when NVRTC is missing
  * ``run_python_with_C`` -- a fresh interpreter where ``C`` is heddle._C loaded from the same file
  * ``build_fake_libcuda`` / ``fake_cuda_env`` -- a stand-in libcuda (tests/fake_cuda/libcuda_fake.c) and the
    environment of a subprocess that loads it
"""
import glob
import importlib
import importlib.util
import os
import subprocess
import sys

import pytest

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/

def _load_extension():
    try:
        return importlib.import_module("heddle._C")
    except Exception as package_error:
        # heddle/__init__.py failed (package in flux): load only the extension module.
        spec = importlib.util.find_spec("heddle")
        for location in (spec.submodule_search_locations or []) if spec else []:
            for path in glob.glob(os.path.join(location, "_C*.so")):
                ext = importlib.util.spec_from_file_location("heddle._C", path)
                mod = importlib.util.module_from_spec(ext)
                ext.loader.exec_module(mod)  # a broken extension raises here, with its own error
                sys.modules["heddle._C"] = mod
                return mod
        raise package_error


C = _load_extension()
rt = C.runtime


def heddle_error(name):
    """The Python class a C++ heddle error type is mapped to."""
    cls = getattr(C, name, None)
    if cls is None:
        cls = getattr(importlib.import_module("heddle"), name)
    return cls


def _load_wheel_dirs():
    """heddle/core/wheel_dirs.py, loaded by path: it imports nothing from heddle, so this works even when
    `import heddle` fails."""
    spec = importlib.util.find_spec("heddle")
    for location in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(location, "core", "wheel_dirs.py")
        if os.path.exists(path):
            mod = importlib.util.module_from_spec(importlib.util.spec_from_file_location("_heddle_wheel_dirs", path))
            mod.__spec__.loader.exec_module(mod)
            return mod.wheel_dirs
    raise ImportError("heddle/core/wheel_dirs.py not found next to the heddle package")


nvrtc_wheel_dirs = _load_wheel_dirs()  # library directories of the nvidia-cuda-nvrtc pip wheels


rt.set_extra_search_dirs(list(dict.fromkeys(rt.extra_search_dirs() + nvrtc_wheel_dirs())))


def nvrtc_unavailable_reason():
    try:
        rt.nvrtc_info()
        return None
    except Exception as e:  # RuntimeUnavailable, mapped
        return str(e)


requires_nvrtc = pytest.mark.nvrtc


def run_python_with_C(code, env_updates=None, env_remove=()):
    """Run `code` in a fresh interpreter where `C` is heddle._C (loaded from the same file).

    For behaviour fixed at first use in a process (library search, driver probing)."""
    prelude = (
        "import importlib.util, sys\n"
        f"_spec = importlib.util.spec_from_file_location('heddle._C', {C.__file__!r})\n"
        "C = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(C)\n"
        "rt = C.runtime\n"
    )
    env = dict(os.environ)
    for key in env_remove:
        env.pop(key, None)
    env.update(env_updates or {})
    return subprocess.run([sys.executable, "-c", prelude + code], env=env, capture_output=True, text=True,
                          timeout=300)


FAKE_CUDA_SOURCE = os.path.join(TESTS, "fake_cuda", "libcuda_fake.c")


def build_fake_libcuda(out, *flags):
    """Compile the stand-in libcuda to `out` (flags: -DFAKE_CUDA_11, -DFAKE_CUDA_12_0 for older drivers)."""
    import shutil
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler for the stand-in libcuda")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", *flags, "-o", str(out), FAKE_CUDA_SOURCE], check=True,
                   capture_output=True)
    return out


def fake_cuda_env(lib, log, **settings):
    """The environment of a subprocess that loads the stand-in libcuda `lib`, logging to `log`; settings:
    FAKE_CUDA_* variables without the prefix (devices=2, cc="9.0,8.6", params="8,8", fail="cuLaunchKernel:701").
    The subprocess loads heddle._C alone: it is pointed at the NVRTC this process found."""
    env = {"HEDDLE_LIBCUDA_PATH": str(lib), "FAKE_CUDA_LOG": str(log), "HEDDLE_NVRTC_PATH": rt.nvrtc_info()["path"]}
    env.update({"FAKE_CUDA_" + k.upper(): str(v) for k, v in settings.items()})
    return env


def gpu_unavailable_reason():
    try:
        import torch
    except Exception as e:  # pragma: no cover
        return f"torch not importable: {e}"
    if not torch.cuda.is_available():
        return "no CUDA device visible to torch"
    if not rt.driver_available():
        return rt.driver_unavailable_reason()
    return None
