"""`pip install` heddle into a fresh virtual environment, then torch.compile(..., backend="heddle") in a
subprocess that never imports heddle: dynamo must find the backend through the
`torch_dynamo_backends` entry point."""
import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROBE = textwrap.dedent("""
    import sys
    import torch
    assert "heddle" not in sys.modules
    model = torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.GELU()).to(torch.bfloat16)
    compiled = torch.compile(model, backend="heddle", options={"fallback": "eager"})
    x = torch.randn(8, 32, dtype=torch.bfloat16)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), atol=3e-2, rtol=3e-2)
    import heddle.dynamo
    print("heddle from", heddle.__file__)
    print("heddle ops", heddle.dynamo.stats["heddle_ops"])
""")


@pytest.mark.slow
def test_pip_install_then_backend_resolves_through_the_entry_point(tmp_path, request):
    for mod in ("venv", "ensurepip"):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"python has no {mod} module")
    for mod in ("scikit_build_core", "pybind11"):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"{mod} is not installed (needed to build without network: --no-build-isolation)")
    venv = tmp_path / "venv"
    r = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot create a virtual environment: {r.stderr.strip()[-300:]}")
    py = str(venv / "bin" / "python")
    if subprocess.run([py, "-m", "pip", "--version"], capture_output=True).returncode != 0:
        pytest.skip("pip is not available in the new virtual environment")
    # a persistent build directory makes reruns incremental (the C++ core takes ~1 min from scratch)
    try:
        build_dir = str(request.config.cache.mkdir("heddle-wheel-build"))
    except Exception:
        build_dir = str(tmp_path / "build")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    r = subprocess.run([py, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
                        "-C", f"build-dir={build_dir}", ROOT],
                       capture_output=True, text=True, env=env, timeout=1200)
    assert r.returncode == 0, "pip install failed:\n" + (r.stdout + r.stderr)[-4000:]
    r = subprocess.run([py, "-c", PROBE], capture_output=True, text=True, env=env, cwd=str(tmp_path),
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"heddle from {venv}" in r.stdout          # the installed copy, not the source tree
    assert "heddle ops 1" in r.stdout                 # addmm + bias + gelu became one heddle op
