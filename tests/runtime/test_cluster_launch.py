"""Launches in thread-block clusters: LoadedKernel.launch(..., cluster=(x, y, z)) (and a LaunchPlan made with
cluster=, as heddle.Kernel makes one for a clustered kernel) goes through
cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, a plain launch still through cuLaunchKernel.
Without a GPU a stand-in libcuda (tests/fake_cuda/libcuda_fake.c, loaded through HEDDLE_LIBCUDA_PATH in
a subprocess, tests/conftest.py) records what the driver is handed; the cluster rules are InputErrors before any
driver call."""
import os

import pytest

from support.env import build_fake_libcuda, fake_cuda_env, heddle_error, requires_nvrtc, rt, run_python_with_C
from support.launch_defs import AXPY


@requires_nvrtc
def test_cluster_launch_passes_the_cluster_dimension_attribute(fake_libcuda, tmp_path):
    log = tmp_path / "launches.log"
    code = (
        f"r = rt.compile({AXPY!r}, 'axpy.cu', 'sm_90a')\n"
        "k = rt.Kernel.load(r, 'axpy')\n"
        "args = [('ptr', 0x1000), ('ptr', 0x2000), ('f32', 2.5), ('i32', 77)]\n"
        "k.launch((4, 3), (128,), 0, 7, args)\n"
        "k.launch((4, 3), (128,), 0, 7, args, cluster=(2,))\n"
        "k.launch((4, 6, 2), (384,), 200000, 0, args, cluster=(1, 2, 2))\n"
        "rt.LaunchPlan(k, (4, 1, 1), (128, 1, 1), 0, args, [], (2, 1, 1)).launch(7, [])\n"  # a clustered kernel's plan
        "print(rt.driver_available())\n"
    )
    proc = run_python_with_C(code, env_updates=fake_cuda_env(fake_libcuda, log))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"
    assert [l for l in log.read_text().splitlines() if l.startswith("cuLaunch")] == [
        "cuLaunchKernel grid=4,3,1 block=128 smem=0 stream=7 a=2.5 n=77 ctx=0",
        "cuLaunchKernelEx grid=4,3,1 block=128 smem=0 stream=7 a=2.5 n=77 attr0=4:2,1,1 ctx=0",
        "cuLaunchKernelEx grid=4,6,2 block=384 smem=200000 stream=0 a=2.5 n=77 attr0=4:1,2,2 ctx=0",
        "cuLaunchKernelEx grid=4,1,1 block=128 smem=0 stream=7 a=2.5 n=77 attr0=4:2,1,1 ctx=0",
    ]


@requires_nvrtc
@pytest.mark.parametrize("grid,cluster,match", [
    ((3, 1, 1), (2, 1, 1), r"clusters of 2x1x1 CTAs must divide the grid 3x1x1 \(grid.x = 3 is not a multiple of 2\)"),
    ((4, 5, 1), (2, 2, 1), r"grid.y = 5 is not a multiple of 2"),
    ((4, 1, 1), (0, 1, 1), r"grid.x = 4 is not a multiple of 0"),
    ((16, 1, 1), (16, 1, 1), r"a cluster of 16x1x1 = 16 CTAs exceeds the portable cluster size of 8"),
])
def test_cluster_rules_are_input_errors_before_the_driver(grid, cluster, match):
    k = rt.Kernel.load(rt.compile(AXPY, "axpy.cu", "sm_90a"), "axpy")
    with pytest.raises(heddle_error("InputError"), match=match):
        k.launch(grid, (128,), 0, 0, [], cluster=cluster)
    with pytest.raises(heddle_error("InputError"), match="cluster must have 1 to 3 entries"):
        k.launch((2,), (128,), 0, 0, [], cluster=())


@requires_nvrtc
def test_cluster_launch_needs_cuLaunchKernelEx(tmp_path):
    """A driver older than CUDA 12 (no cuLaunchKernelEx) runs plain launches and refuses clustered ones
    with RuntimeUnavailable naming the call."""
    old = build_fake_libcuda(tmp_path / "libcuda.so.1", "-DFAKE_CUDA_11")
    code = (
        f"r = rt.compile({AXPY!r}, 'axpy.cu', 'sm_90a')\n"
        "k = rt.Kernel.load(r, 'axpy')\n"
        "args = [('ptr', 0), ('ptr', 0), ('f32', 1.0), ('i32', 1)]\n"
        "k.launch((2,), (32,), 0, 0, args)\n"
        "try:\n    k.launch((2,), (32,), 0, 0, args, cluster=(2,))\n"
        "except Exception as e:\n    print(type(e).__name__, e)\n"
    )
    proc = run_python_with_C(code, env_updates=fake_cuda_env(old, os.devnull))
    assert proc.returncode == 0, proc.stderr
    assert "RuntimeUnavailable cuLaunchKernelEx is missing from" in proc.stdout
    assert "CUDA 12.0 or newer" in proc.stdout
