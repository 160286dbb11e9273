"""The AMD runtime: hiprtc through dlopen and the kernel cache (key: source, headers, options, arch,
hiprtc / HIP versions), crash isolation, the HIP runtime's clear refusal without an AMD GPU, and the
Python API routing gfx targets to hiprtc / HipKernel (ROCm torch: target_for_device)."""
import types

import pytest

import heddle
from support.env import C, run_python_with_C
from support.matmul_defs import matmul_fusion

rt = C.runtime
SRC = 'extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }\n'


def _hiprtc_missing():
    return None if rt.hiprtc_available() else "hiprtc not found (apt-get install libamdhip64-dev)"


needs_hiprtc = pytest.mark.skipif(_hiprtc_missing() is not None, reason=str(_hiprtc_missing()))


@needs_hiprtc
def test_hiprtc_version_names_the_compiler_and_runtime():
    info = rt.hiprtc_info()
    assert info["version"].startswith("hiprtc ") and "HIP runtime" in info["version"]
    assert rt.hiprtc_options("gfx90a") == ["-std=c++17", "-O3", "--gpu-architecture=gfx90a"]


@needs_hiprtc
def test_compile_hip_goes_through_the_cache():
    rt.cache_clear()
    a = rt.compile_hip(SRC, "twice.hip", "gfx90a")
    b = rt.compile_hip(SRC, "twice.hip", "gfx90a")
    assert a.cubin[:4] == b"\x7fELF" and a.arch == "gfx90a" and a.ptx == ""
    assert a.key == b.key and b.cache_source == "memory"
    assert rt.compile_hip(SRC, "twice.hip", "gfx90a:xnack-").key != a.key  # the arch is in the key
    assert rt.compile_hip(SRC, "twice.hip", "gfx90a", options=["-DX=1"]).key != a.key
    assert rt.compile_hip(SRC, "twice.hip", "gfx90a", isolate=False, use_cache=False).key == a.key
    nv = [rt.compile(SRC, "twice.hip", "sm_80", use_cache=False).key] if rt.nvrtc_available() else []
    assert a.key not in nv  # the compiler (hiprtc and its version) is in the key


@needs_hiprtc
def test_compile_errors_carry_the_log():
    with pytest.raises(C.CompileError) as ei:
        rt.compile_hip(SRC.replace("2.0f", "nope"), "bad.hip", "gfx90a", isolate=False, use_cache=False)
    msg = str(ei.value)
    assert "failed to compile bad.hip for gfx90a" in msg and "undeclared identifier 'nope'" in msg
    assert "--gpu-architecture=gfx90a" in msg


@needs_hiprtc
def test_a_hiprtc_crash_is_isolated():
    # Debian's hiprtc 5.2 aborts on gfx942: the worker process dies, this process gets a CompileError
    try:
        r = rt.compile_hip(SRC, "twice.hip", "gfx942", use_cache=False)
    except C.CompileError as e:
        assert "hiprtc crashed with signal" in str(e) and "gfx942" in str(e) and "this process is unaffected" in str(e)
    else:  # a newer hiprtc compiles it
        assert r.cubin[:4] == b"\x7fELF"


def test_hip_runtime_refuses_clearly_without_an_amd_gpu():
    if rt.hip_available():
        pytest.skip("an AMD GPU is present")
    reason = rt.hip_unavailable_reason()
    assert "libamdhip64" in reason or "no AMD GPU" in reason
    if not rt.hiprtc_available():
        return
    k = rt.HipKernel.load(rt.compile_hip(SRC, "twice.hip", "gfx90a"), "twice")
    with pytest.raises(C.RuntimeUnavailable) as ei:
        k.launch((1, 1, 1), (64, 1, 1), 0, 0, [("ptr", 0)])
    assert str(ei.value) == reason


def test_hiprtc_search_order_honours_the_environment():
    r = run_python_with_C("print(rt.hiprtc_search_paths()[:2])",
                          env_updates={"HEDDLE_HIPRTC_PATH": "/opt/x/libhiprtc.so", "ROCM_PATH": "/opt/rocm-9"})
    assert r.returncode == 0, r.stderr
    assert "['/opt/x/libhiprtc.so', '/opt/rocm-9/lib/libhiprtc.so.6']" in r.stdout


def test_target_for_rocm_torch(monkeypatch):
    import torch
    from heddle import runtime
    monkeypatch.setattr(torch.version, "hip", "6.2", raising=False)
    for arch, want in (("gfx942:sramecc+:xnack-", "gfx942"), ("gfx90a", "gfx90a"), ("gfx1200", "gfx1200")):
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d=None, a=arch: types.SimpleNamespace(gcnArchName=a))
        assert runtime.target_for_device(0) == want
    # the HIP targets with a matmul path come from the C++ target table; gfx1250 is there for the barrier
    # model only
    for arch in ("gfx1030", "gfx1250"):
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d=None, a=arch: types.SimpleNamespace(gcnArchName=a))
        with pytest.raises(heddle.ScheduleError, match=f"AMD device {arch}: heddle targets gfx1200, gfx90a, gfx942"):
            runtime.target_for_device(0)


@needs_hiprtc
def test_heddle_matmul_builds_its_amd_kernel():
    from heddle.api import MatmulSpec, fused_matmul_op
    spec = MatmulSpec(dtype="f16", batched=False, batched_b=False, k=256, n=192, trans_a=False, trans_b=True,
                      bias=("f16", 1), residual=None, activation="silu", alpha=None, out_dtype="f16")
    k = fused_matmul_op(spec).kernel("gfx90a", 8, 8)
    assert k.target == "gfx90a" and k.binary.arch == "gfx90a" and k.binary.cubin[:4] == b"\x7fELF"
    assert "heddle::MmaAmd<" in k.source and "heddle::wait_vmcnt<" in k.source
    assert k.lowered.barriers_per_main_iteration == 1


def test_the_target_picks_the_runtime_backend_once_in_cpp():
    """runtime/backend.h: the lowered kernel names its backend (chosen from TargetInfo in C++), and one
    runtime.load gives that backend's launcher; Python never looks at the architecture's name."""
    lowered = {}
    for target, backend, report in (("gfx90a", "hip", False), ("sm_80", "cuda", True)):
        fd, _, _ = matmul_fusion(dtype="f16", layout="NN", epilogue="bias_gelu")
        fd.auto_schedule(target)
        low = lowered[target] = fd.lower(target)
        assert (low.backend, low.compiler_report) == (backend, report)
    if rt.hiprtc_available():
        low = lowered["gfx90a"]
        binary = rt.compile_lowered(low, use_cache=False)
        assert binary.key == rt.compile_hip(low.source, low.name, "gfx90a", use_cache=False).key
        k = rt.load(binary, low.name, low.backend)
        assert isinstance(k, rt.HipKernel) and isinstance(k, rt.KernelLauncher) and k.name == low.name
        with pytest.raises(C.InputError, match="'cuda' and 'hip'"):
            rt.load(binary, low.name, "metal")
