"""Shared pytest hooks and fixtures (the helpers the tests import are in tests/support/, e.g. support/env.py):
  * every test runs with HEDDLE_CACHE_DIR pointing into a per-session temporary directory, so the
    suite never writes to ~/.cache/heddle
  * ``nvrtc`` tests skip with the loader's reason when NVRTC is missing; ``gpu`` tests without a CUDA GPU;
    ``slow`` sweeps unless asked for
  * ``fake_libcuda``   -- a stand-in libcuda (tests/fake_cuda/libcuda_fake.c) built once per session
  * ``cache``          -- an empty kernel cache (tests/runtime/test_cache*.py)
"""
import os

import pytest

from support.env import build_fake_libcuda, gpu_unavailable_reason, nvrtc_unavailable_reason, rt


def pytest_runtest_setup(item):
    if item.get_closest_marker("nvrtc") is not None:
        reason = nvrtc_unavailable_reason()
        if reason is not None:
            pytest.skip("NVRTC not found: " + reason.splitlines()[0] +
                        " (pip install nvidia-cuda-nvrtc, or set HEDDLE_NVRTC_PATH)")


@pytest.fixture(autouse=True, scope="session")
def _session_cache_dir(tmp_path_factory):
    """Keep the kernel cache of the whole test session out of the user's home directory."""
    old = os.environ.get("HEDDLE_CACHE_DIR")
    os.environ["HEDDLE_CACHE_DIR"] = str(tmp_path_factory.mktemp("heddle-cache"))
    yield
    if old is None:
        os.environ.pop("HEDDLE_CACHE_DIR", None)
    else:
        os.environ["HEDDLE_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def fake_libcuda(tmp_path_factory):
    return build_fake_libcuda(tmp_path_factory.mktemp("fake_cuda") / "libcuda.so.1")


def pytest_collection_modifyitems(config, items):
    reason = None
    # `slow` sweeps run only when asked for: -m slow (or an -m expression naming it) or HEDDLE_SLOW=1
    run_slow = "slow" in (config.getoption("-m") or "") or os.environ.get("HEDDLE_SLOW", "0") not in ("", "0")
    for item in items:
        if item.get_closest_marker("slow") is not None and not run_slow:
            item.add_marker(pytest.mark.skip(reason="slow sweep: run with -m slow or HEDDLE_SLOW=1"))
        if item.get_closest_marker("gpu") is not None:
            reason = reason or gpu_unavailable_reason() or ""
            if reason:
                item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU: " + reason))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty kernel-cache directory in tmp_path (the returned path, not created yet), an empty
    memory cache with zeroed stats, and the default memory bound (test_cache*.py)."""
    d = tmp_path / "cache"
    monkeypatch.setenv("HEDDLE_CACHE_DIR", str(d))
    monkeypatch.delenv("HEDDLE_DISABLE_DISK_CACHE", raising=False)
    monkeypatch.delenv("HEDDLE_MEMORY_CACHE_SIZE", raising=False)
    rt.set_cache_dir(None)
    rt.cache_clear(memory=True)
    rt.cache_reset_stats()
    yield d
    rt.cache_clear(memory=True)
