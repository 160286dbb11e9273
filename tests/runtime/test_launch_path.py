"""The launch path before a first GPU run (issue 27), without a GPU: a stand-in libcuda
(tests/fake_cuda/libcuda_fake.c, loaded through HEDDLE_LIBCUDA_PATH in a subprocess) with several devices of
chosen compute capabilities, a parameter table, and failures injected per entry point.

* target vs device: a binary whose architecture does not load on the device is refused before the driver
  loads it, naming the kernel, its target, the capability and the target to compile for; target_for_device
  maps capabilities exactly; Fusion.compile() / Kernel.build() without a target take the device's;
* driver failures are heddle.DriverError naming the call and the kernel; a rejected tensor map lists what
  the driver was given; HEDDLE_SYNC_LAUNCH=1 waits after each launch and names the kernel that faulted;
* context: a launch runs in the primary context of the device it names and leaves the thread's context as it
  was; the arguments are checked against the driver's parameter table (cuFuncGetParamInfo, where it exists)."""
import re

import pytest
import torch

import heddle
from support.env import build_fake_libcuda, fake_cuda_env, requires_nvrtc, run_python_with_C
from heddle import _C
from heddle.core import inputs
from heddle.core import kernel as kernel_mod
from heddle.core import runtime
from support.launch_defs import AXPY

ARGS = "[('ptr', 0x1000), ('ptr', 0x2000), ('f32', 2.5), ('i32', 77)]"


def run_fake(lib, log, code, arch="sm_90a", **settings):
    """Run `code` with `k`, axpy compiled for `arch`, loaded against the stand-in libcuda; (stdout, log lines)."""
    prelude = (f"r = rt.compile({AXPY!r}, 'axpy.cu', {arch!r})\n"
               "k = rt.Kernel.load(r, 'axpy')\n"
               f"args = {ARGS}\n"
               "def attempt(f):\n"
               "    try:\n        f()\n        print('ok')\n"
               "    except Exception as e:\n        print(type(e).__name__ + ': ' + str(e))\n")
    proc = run_python_with_C(prelude + code, env_updates=fake_cuda_env(lib, log, **settings))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines(), log.read_text().splitlines() if log.exists() else []


# --- target vs device ------------------------------------------------------------------------------

@pytest.mark.parametrize("cc,target", [((8, 0), "sm_80"), ((8, 6), "sm_80"), ((8, 9), "sm_80"),
                                       ((9, 0), "sm_90a"), ((10, 0), "sm_100a")])
def test_each_capability_gets_the_target_that_loads_there(cc, target):
    assert _C.cuda_target_for(*cc) == target
    assert _C.cuda_arch_mismatch(target, *cc) == ""


@pytest.mark.parametrize("cc,why", [((10, 3), "heddle has no kernels for this device"),
                                    ((12, 0), "heddle has no kernels for this device"),
                                    ((7, 5), "needs compute capability 8.0 or newer")])
def test_a_capability_without_a_target_is_refused_naming_the_targets(cc, why):
    with pytest.raises(heddle.ScheduleError) as e:
        _C.cuda_target_for(*cc)
    msg = str(e.value)
    assert f"compute capability {cc[0]}.{cc[1]}" in msg and why in msg
    assert "sm_80 (8.x), sm_90a (only 9.0), sm_100a (only 10.0)" in msg


@pytest.mark.parametrize("arch,cc,loads", [
    ("sm_80", (8, 0), True), ("sm_80", (8, 6), True), ("sm_80", (9, 0), False), ("sm_80", (12, 0), False),
    ("sm_86", (8, 0), False), ("sm_86", (8, 9), True), ("sm_90a", (9, 0), True), ("sm_90a", (10, 0), False),
    ("sm_100a", (10, 0), True), ("sm_100a", (10, 3), False), ("sm_100f", (10, 3), True), ("sm_120", (12, 1), True),
    ("compute_80", (9, 0), True), ("compute_90", (8, 6), False), ("gfx942", (9, 0), True),
])
def test_which_binaries_load_on_which_capability(arch, cc, loads):
    assert (_C.cuda_arch_mismatch(arch, *cc) == "") == loads


@pytest.mark.parametrize("cc,want", [((8, 0), "sm_80"), ((8, 9), "sm_80"), ((9, 0), "sm_90a"), ((10, 0), "sm_100a"),
                                     ((10, 3), None), ((12, 0), None)])
def test_target_for_device_maps_exactly(monkeypatch, cc, want):
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: cc)
    if want:
        assert runtime.target_for_device(0) == want
    else:  # before this, every capability >= 10 became sm_100a, which loads only on 10.0
        with pytest.raises(heddle.ScheduleError, match=rf"compute capability {cc[0]}\.{cc[1]}.*sm_100a \(only 10\.0\)"):
            runtime.target_for_device(0)


def test_compile_without_a_target_takes_the_devices(monkeypatch):
    from support.matmul_defs import matmul_fusion, schedule
    fd, a, b = matmul_fusion(n=64, k=64, dtype="bf16")
    schedule(fd, a, b, bm=64, bn=64, bk=32, stages=2)
    monkeypatch.setattr(runtime, "gpu_available", lambda: False)
    assert runtime.default_target() == "sm_80"
    assert heddle.Kernel.build(fd, rtc=False).target == "sm_80"
    monkeypatch.setattr(runtime, "gpu_available", lambda: True)
    monkeypatch.setattr(runtime, "target_for_device", lambda device=None: "sm_90a")
    assert runtime.default_target() == "sm_90a"
    k = heddle.Kernel.build(fd, rtc=False)
    assert k.target == "sm_90a" and k.lowered.rtc_arch == "sm_90a"
    assert heddle.Kernel.build(fd, "sm_80", rtc=False).target == "sm_80"  # an explicit target stays


@requires_nvrtc
def test_a_binary_the_device_cannot_load_is_refused_before_the_driver(fake_libcuda, tmp_path):
    log = tmp_path / "log"
    out, lines = run_fake(fake_libcuda, log, "attempt(lambda: k.launch((1,), (32,), 0, 0, args, device=0))\n"
                                             "attempt(lambda: k.launch((1,), (32,), 0, 0, args, device=1))\n",
                          arch="sm_80", devices=2, cc="9.0,8.6")
    assert out[0].startswith("InputError: kernel 'axpy' was compiled for sm_80, which does not load on CUDA device 0 "
                             "(compute capability 9.0): a binary for sm_80 runs only on compute capability 8.x")
    assert "Compile it for this device's target, 'sm_90a'" in out[0] and "target_for_device()" in out[0]
    assert out[1] == "ok"  # 8.6 runs sm_80 binaries
    loads = [l for l in lines if l.startswith("cuModuleLoadData")]
    assert loads == ["cuModuleLoadData ctx=1"]  # the driver never saw the binary device 0 cannot run


@requires_nvrtc
@pytest.mark.parametrize("cc,advice", [("10.0", "Compile it for this device's target, 'sm_100a'"),
                                       ("12.0", "heddle has no target for this device: no heddle target runs on a "
                                                "CUDA device of compute capability 12.0")])
def test_an_sm90a_binary_elsewhere_says_what_to_do(fake_libcuda, tmp_path, cc, advice):
    out, _ = run_fake(fake_libcuda, tmp_path / "log", "attempt(lambda: k.launch((1,), (32,), 0, 0, args))\n", cc=cc)
    assert "an architecture-specific ('a') binary runs only on compute capability 9.0" in out[0]
    assert advice in out[0]


# --- driver errors -------------------------------------------------------------------------------

@requires_nvrtc
@pytest.mark.parametrize("fail,code,smem,match", [
    ("cuModuleLoadData", 209, 0, r"cuModuleLoadData failed for kernel 'axpy' \(axpy.cu, sm_90a\): "
                                 r"CUDA_ERROR_NO_BINARY_FOR_GPU"),
    ("cuFuncSetAttribute", 1, 100000, r"cuFuncSetAttribute failed for kernel 'axpy' \(opting into 100000 B of dynamic "
                                      r"shared memory\): CUDA_ERROR_INVALID_VALUE"),
    ("cuLaunchKernel", 701, 0, r"cuLaunchKernel failed for kernel 'axpy' \(grid 3x1x1, block 32x1x1, 0 B dynamic "
                               r"smem\): CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"),
])
def test_driver_failures_are_driver_errors(fake_libcuda, tmp_path, fail, code, smem, match):
    assert issubclass(heddle.DriverError, heddle.HeddleError)
    assert not issubclass(heddle.DriverError, heddle.CompileError)
    out, _ = run_fake(fake_libcuda, tmp_path / "log",
                      f"attempt(lambda: k.launch((3,), (32,), {smem}, 0, args))\n"
                      "print(issubclass(C.DriverError, C.HeddleError))\n", fail=f"{fail}:{code}")
    assert out[0].startswith("DriverError: ") and re.search(match, out[0]), out[0]
    assert out[1] == "True"


@requires_nvrtc
def test_a_rejected_tensor_map_lists_what_the_driver_was_given(fake_libcuda, tmp_path):
    code = ("attempt(lambda: rt.encode_tensor_map_tiled(9, 0x10000, [64, 1000], [128], [128, 64], [1, 1], swizzle=3, "
            "l2_promotion=2, what=\"operand A (input 'a') of kernel K\"))\n")
    out, _ = run_fake(fake_libcuda, tmp_path / "log", code, fail="cuTensorMapEncodeTiled:1")
    msg = out[0]
    assert msg.startswith("DriverError: cuTensorMapEncodeTiled rejected the tensor map of operand A (input 'a') of "
                          "kernel K (CUDA_ERROR_INVALID_VALUE")
    for part in ("data type 9 (BFLOAT16)", "rank 2", "address 0x10000", "dims [64, 1000]", "strides [128] bytes",
                 "box [128, 64]", "element strides [1, 1]", "swizzle 128B", "L2 promotion 128B",
                 "the inner box (128 x 2 bytes) exceeds the 128-byte swizzle span"):
        assert part in msg, part


def test_tma_names_the_tensor_whose_map_the_driver_encodes(monkeypatch):
    """heddle.core.tma passes the driver's encoder the operand, the input and the kernel (the interpreter's
    encoder, which takes no name, gets none)."""
    from heddle.core import tma
    seen = []

    def encoder(*args, **kw):
        seen.append(kw.get("what"))
        return bytes(128)
    monkeypatch.setattr(_C.runtime, "encode_tensor_map_tiled", encoder)
    t = torch.zeros(64, 64, dtype=torch.bfloat16)
    tma._encode(t, 2, "bf16", 64, 64, 64, 64, 64, 128, what="operand A (input 'a') of kernel K (tensor map tmA)")
    tma._encode(t, 2, "bf16", 64, 64, 64, 64, 64, 128, encoder=encoder)
    assert seen == ["operand A (input 'a') of kernel K (tensor map tmA)", None]


@requires_nvrtc
def test_sync_launch_names_the_kernel_that_faulted(fake_libcuda, tmp_path):
    code = ("print(rt.sync_launch_enabled())\n"
            "attempt(lambda: k.launch((6, 2), (128,), 1024, 7, args))\n")
    out, lines = run_fake(fake_libcuda, tmp_path / "log", code, fail="cuStreamSynchronize:700")
    assert out[0] == "False" and out[1] == "ok"  # off by default: no wait, the fault goes unseen here
    assert not any(l.startswith("cuStreamSynchronize") for l in lines)
    proc = run_python_with_C(
        f"r = rt.compile({AXPY!r}, 'axpy.cu', 'sm_90a')\nk = rt.Kernel.load(r, 'axpy')\n"
        "print(rt.sync_launch_enabled())\n"
        f"try:\n    k.launch((6, 2), (128,), 1024, 7, {ARGS}, device=0)\n"
        "except C.DriverError as e:\n    print(e)\n",
        env_updates={**fake_cuda_env(fake_libcuda, tmp_path / "log2", fail="cuStreamSynchronize:700"),
                     "HEDDLE_SYNC_LAUNCH": "1"})
    assert proc.returncode == 0, proc.stderr
    on, msg = proc.stdout.splitlines()
    assert on == "True"
    assert msg.startswith("kernel 'axpy' (sm_90a, grid 6x2x1, block 128x1x1, 1024 B dynamic smem, device 0, stream 7) "
                          "failed on the device: cuStreamSynchronize after its launch (HEDDLE_SYNC_LAUNCH=1) returned "
                          "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered")
    assert "compute-sanitizer" in msg and "unusable" in msg
    lines = (tmp_path / "log2").read_text().splitlines()
    assert lines[-3].startswith("cuLaunchKernel grid=6,2,1") and lines[-2] == "cuStreamSynchronize stream=7"
    assert lines[-1] == "cuCtxSetCurrent ctx=-1"  # the thread's context as it was, also after the error


# --- context ---------------------------------------------------------------------------------------

@requires_nvrtc
def test_a_launch_runs_in_its_devices_primary_context(fake_libcuda, tmp_path):
    code = ("k.launch((1,), (32,), 0, 0, args, device=1)\n"   # no current context: device 1's, then none again
            "k.launch((1,), (32,), 0, 0, args)\n"             # no device named: the current context, else device 0's
            "k.launch((2,), (32,), 0, 0, args, device=1)\n"   # device 0 current: device 1's for the launch, then 0's
            "rt.LaunchPlan(k, (3, 1, 1), (32, 1, 1), 0, args, [], (1, 1, 1), 1).launch(0, [])\n"
            "k.launch((4,), (32,), 0, 0, args, device=0)\n")  # already current: nothing to switch
    _, lines = run_fake(fake_libcuda, tmp_path / "log", code, devices=2)
    assert lines == [
        "cuCtxSetCurrent ctx=1", "cuModuleLoadData ctx=1",
        "cuLaunchKernel grid=1,1,1 block=32 smem=0 stream=0 a=2.5 n=77 ctx=1", "cuCtxSetCurrent ctx=-1",
        "cuCtxSetCurrent ctx=0", "cuModuleLoadData ctx=0",
        "cuLaunchKernel grid=1,1,1 block=32 smem=0 stream=0 a=2.5 n=77 ctx=0",
        "cuCtxSetCurrent ctx=1", "cuLaunchKernel grid=2,1,1 block=32 smem=0 stream=0 a=2.5 n=77 ctx=1",
        "cuCtxSetCurrent ctx=0",
        "cuCtxSetCurrent ctx=1", "cuLaunchKernel grid=3,1,1 block=32 smem=0 stream=0 a=2.5 n=77 ctx=1",
        "cuCtxSetCurrent ctx=0",
        "cuLaunchKernel grid=4,1,1 block=32 smem=0 stream=0 a=2.5 n=77 ctx=0",
    ]


def test_a_kernel_launches_in_its_tensors_device(monkeypatch):
    """heddle.Kernel hands the LaunchPlan the outputs' device (its primary context runs the launch)."""
    from support.launch_defs import Recorder, kernel_for, operands
    k = kernel_for()
    k._loaded = Recorder()
    seen = {}
    real = _C.runtime.LaunchPlan

    def plan(*args, **kw):
        seen["device"] = kw["device"]
        return real(*args, **kw)
    monkeypatch.setattr(_C.runtime, "LaunchPlan", plan)
    monkeypatch.setattr(torch.Tensor, "get_device", lambda self: 1)  # CPU tensors standing in for cuda:1

    def on_device(index, launch):
        seen["on"] = index
        return launch(0)
    monkeypatch.setattr(kernel_mod, "_on_device", on_device)
    tensors = operands()
    k._launch(tensors, inputs.check(k.name, k._inputs, k._matmul_expr, tensors))
    assert seen == {"device": 1, "on": 1} and len(k._loaded.launches) == 1


@requires_nvrtc
def test_arguments_are_checked_against_the_kernels_parameter_table(fake_libcuda, tmp_path):
    code = ("print(k.param_sizes())\n"
            "attempt(lambda: k.launch((1,), (32,), 0, 0, args[:3]))\n"
            "attempt(lambda: k.launch((1,), (32,), 0, 0, args[:3] + [('i64', 77)]))\n"
            "attempt(lambda: rt.LaunchPlan(k, (1, 1, 1), (32, 1, 1), 0, args[:2] + [('i32', 1), ('i32', 77)], [])"
            ".launch(0, []))\n"
            "attempt(lambda: k.launch((1,), (32,), 0, 0, args))\n")
    out, lines = run_fake(fake_libcuda, tmp_path / "log", code)
    assert out[0] == "[8, 8, 4, 4]"
    assert out[1].startswith("InputError: launch of kernel 'axpy': its 4 parameters take [8, 8, 4, 4] bytes (the "
                             "driver's parameter table), but the launch passes 3 arguments [ptr 8, ptr 8, f32 4]")
    assert "argument 3 is 8 bytes where the parameter takes 4" in out[2]
    assert out[3] == "ok"  # a plan's i32 where the kernel takes a float: same size, nothing to tell them apart
    assert out[4] == "ok"
    assert sum(l.startswith("cuLaunchKernel") for l in lines) == 2


@requires_nvrtc
def test_the_parameter_check_follows_the_drivers_table_and_skips_without_one(fake_libcuda, tmp_path):
    out, _ = run_fake(fake_libcuda, tmp_path / "log", "attempt(lambda: k.launch((1,), (32,), 0, 0, args))\n",
                      params="8,8,4,4,128")  # a kernel that takes a tensor map too
    assert "its 5 parameters take [8, 8, 4, 4, 128] bytes" in out[0]
    old = build_fake_libcuda(tmp_path / "libcuda.so.1", "-DFAKE_CUDA_12_0")  # no cuFuncGetParamInfo (before 12.4)
    out, _ = run_fake(old, tmp_path / "log2", "print(k.param_sizes())\n"
                                              "attempt(lambda: k.launch((1,), (32,), 0, 0, args[:3] + [('i64', 1)]))\n",
                      params="8,8,4,4,128")
    assert out == ["None", "ok"]


@requires_nvrtc
def test_the_parameter_table_is_never_asked_past_its_last_entry(fake_libcuda, tmp_path):
    """Asking cuFuncGetParamInfo for an index past the last parameter fails with CUDA_ERROR_INVALID_VALUE, which
    compute-sanitizer reports as an API error on every kernel load (the first GPU window's memcheck: one error
    per process). With cuFuncGetParamCount the table is read whole; without it only the launch's argument count
    is asked, which still finds a kernel taking fewer parameters or other sizes."""
    code = ("print(k.param_sizes())\n"
            "attempt(lambda: k.launch((1,), (32,), 0, 0, args))\n"
            "attempt(lambda: k.launch((1,), (32,), 0, 0, args[:3] + [('i64', 1)]))\n")
    out, lines = run_fake(fake_libcuda, tmp_path / "log", code)
    assert out[0] == "[8, 8, 4, 4]" and out[1] == "ok" and "argument 3 is 8 bytes" in out[2]
    assert not [ln for ln in lines if "past the last parameter" in ln], lines
    (tmp_path / "nocount").mkdir()
    no_count = build_fake_libcuda(tmp_path / "nocount" / "libcuda.so.1", "-DFAKE_CUDA_NO_PARAM_COUNT")
    code = ("print(k.param_sizes())\n"
            "attempt(lambda: k.launch((1,), (32,), 0, 0, args))\n"
            "attempt(lambda: k.launch((1,), (32,), 0, 0, args + [('i32', 1)]))\n"
            "attempt(lambda: k.launch((1,), (32,), 0, 0, args[:3] + [('i64', 1)]))\n")
    out, lines = run_fake(no_count, tmp_path / "log2", code)
    assert out[0] == "None" and out[1] == "ok"  # no count: the whole table is unknown, the launch's part checked
    assert "its 4 parameters take [8, 8, 4, 4]" in out[2]  # one argument too many: the kernel has 4
    assert "argument 3 is 8 bytes" in out[3]
    past = [ln for ln in lines if "past the last parameter" in ln]
    assert len(past) == 1 and "index=4" in past[0], lines  # only the launch that passed 5 arguments asked for a 5th


# --- heddle's own argument lists against its kernels' signatures ----------------------------------

_C_TYPE_BYTES = {"int": 4, "unsigned": 4, "float": 4, "long long": 8, "heddle::TmaDesc": 128}


def signature_bytes(source):
    """The byte size of each parameter of the printed kernel (what cuFuncGetParamInfo reports on a GPU)."""
    m = re.search(r"__global__ void (?:__launch_bounds__\([^)]*\)\s*)?\w+\(([^)]*)\)", source, re.S)
    sizes = []
    for p in m.group(1).split(","):
        decl = " ".join(w for w in p.split()[:-1] if w not in ("const", "__grid_constant__", "__restrict__"))
        sizes.append(8 if "*" in decl else _C_TYPE_BYTES[decl])
    return sizes


def _families():
    from support.tcgen05_defs import build_epi
    from support.wgmma_defs import build as sm90
    from support.interp_defs import sm80
    from support.split_k_defs import sm80 as sm80_split_k
    from support.split_k_defs import sm90 as sm90_split_k
    from support.wgmma_defs import clustered
    return [("sm80", lambda: sm80(), "sm_80"),
            ("sm80-batched", lambda: sm80(batched=True), "sm_80"),
            ("sm80-split-k", lambda: sm80_split_k(3), "sm_80"),
            ("sm90-pipeline", lambda: sm90("pipeline"), "sm_90a"),
            ("sm90-coop-tma-store", lambda: sm90("coop", store="tma"), "sm_90a"),
            ("sm90-pingpong", lambda: sm90("pingpong"), "sm_90a"),
            ("sm90-3role-bias-tma", lambda: sm90("3role", bias_tma=2), "sm_90a"),
            ("sm90-split-k", lambda: sm90_split_k(2), "sm_90a"),
            ("sm90-cluster", lambda: clustered(), "sm_90a"),
            ("sm100-bias-tma", lambda: build_epi(), "sm_100a")]


@pytest.mark.parametrize("name,build,target", _families(), ids=[f[0] for f in _families()])
def test_the_arguments_heddle_passes_match_its_kernels_parameters(name, build, target):
    """What the parameter check compares on a GPU, checked here for every family: the argument list
    Kernel.prepare builds has the kernel's parameter count and each parameter's size."""
    from support.wgmma_defs import inputs as make_inputs
    fd = build()
    k = heddle.Kernel.build(fd, target, rtc=False)
    _, _, args = k.prepare(make_inputs(fd, 100), tensor_map_encoder=_C.interp.encode_tensor_map_tiled, sms=4)
    passed = [len(v) if kind == "bytes" else 4 if kind in ("i32", "f32") else 8 for kind, v in args]
    assert passed == signature_bytes(k.source), [kind for kind, _ in args]
