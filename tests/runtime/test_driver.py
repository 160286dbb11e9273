"""CUDA driver probing and kernel launch. Without libcuda (CPU CI) everything must fail cleanly with
RuntimeUnavailable naming libcuda; with a GPU, a real launch is checked against torch."""
import pytest

from support.env import heddle_error, requires_nvrtc, rt, run_python_with_C
from support.launch_defs import AXPY

HAVE_DRIVER = rt.driver_available()
no_driver_only = pytest.mark.skipif(HAVE_DRIVER, reason="a CUDA driver is present on this machine")



@no_driver_only
def test_driver_unavailable_with_reason_naming_libcuda():
    assert rt.driver_available() is False
    reason = rt.driver_unavailable_reason()
    assert "libcuda" in reason
    assert "libcuda.so.1" in reason  # the paths it tried
    assert "HEDDLE_LIBCUDA_PATH" in reason  # how to fix it


def test_libcuda_path_env_is_tried_first(tmp_path):
    bogus = tmp_path / "libcuda.so.1"
    bogus.write_text("not a library")
    proc = run_python_with_C("print(rt.driver_available()); print(rt.driver_unavailable_reason())",
                             env_updates={"HEDDLE_LIBCUDA_PATH": str(bogus)})
    assert proc.returncode == 0, proc.stderr
    if proc.stdout.startswith("True"):
        pytest.skip("the system libcuda loaded after the bogus HEDDLE_LIBCUDA_PATH")
    lines = proc.stdout.splitlines()
    assert lines[0] == "False"
    tried = [l for l in lines if "(HEDDLE_LIBCUDA_PATH)" in l or "(dynamic loader path)" in l]
    assert str(bogus) in tried[0] and "HEDDLE_LIBCUDA_PATH" in tried[0]
    assert "libcuda.so.1" in tried[1]


@no_driver_only
@pytest.mark.parametrize("call", [
    lambda: rt.device_info(0),
    lambda: rt.device_count(),
    lambda: rt.encode_tensor_map_tiled(9, 0, [64, 64], [128], [64, 64], [1, 1]),
])
def test_device_queries_raise_runtime_unavailable(call):
    with pytest.raises(heddle_error("RuntimeUnavailable"), match="libcuda"):
        call()


@requires_nvrtc
@no_driver_only
def test_launch_without_driver_raises_cleanly():
    r = rt.compile(AXPY, "axpy.cu", "sm_80")
    k = rt.Kernel.load(r, "axpy")
    assert k.name == "axpy" and k.binary_key == r.key
    args = [("ptr", 0x1000), ("ptr", 0x2000), ("f32", 2.0), ("i32", 4)]
    with pytest.raises(heddle_error("RuntimeUnavailable"), match="CUDA driver unavailable.*libcuda"):
        k.launch((1,), (128,), 0, 0, args)
    with pytest.raises(heddle_error("RuntimeUnavailable")):
        k.num_registers()
    # the process is intact: the same kernel object still answers
    with pytest.raises(heddle_error("RuntimeUnavailable")):
        k.launch((1, 1, 1), (32, 1, 1), 64 * 1024, 0, args)


@requires_nvrtc
def test_bad_argument_kind_is_an_input_error():
    k = rt.Kernel.load(rt.compile(AXPY, "axpy.cu", "sm_80"), "axpy")
    with pytest.raises(heddle_error("InputError"), match="unknown kernel argument kind 'u8'"):
        k.launch((1,), (1,), 0, 0, [("u8", 1)])
    with pytest.raises(heddle_error("InputError"), match="grid must have 1 to 3 entries"):
        k.launch((1, 1, 1, 1), (1,), 0, 0, [])


# --- with a GPU -----------------------------------------------------------------------------------

gpu_only = pytest.mark.skipif(not HAVE_DRIVER, reason="needs a CUDA driver and GPU")


@pytest.mark.gpu
@gpu_only
def test_device_info_on_gpu():
    info = rt.device_info(0)
    assert info["cc_major"] >= 7 and info["sms"] > 0 and info["smem_optin"] >= 48 * 1024


@pytest.mark.gpu
@gpu_only
@requires_nvrtc
def test_launch_axpy_on_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    info = rt.device_info(0)
    arch = f"sm_{info['cc_major']}{info['cc_minor']}"
    k = rt.Kernel.load(rt.compile(AXPY, "axpy.cu", arch), "axpy")
    n = 1000
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    expect = 3.0 * x + y
    stream = torch.cuda.current_stream().cuda_stream
    k.launch(((n + 127) // 128,), (128,), 0, stream, [("ptr", y), ("ptr", x), ("f32", 3.0), ("i32", n)])
    torch.cuda.synchronize()
    torch.testing.assert_close(y, expect)
    assert k.num_registers() > 0


@pytest.mark.gpu
@gpu_only
@requires_nvrtc
def test_launch_with_large_dynamic_smem_on_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    info = rt.device_info(0)
    if info["smem_optin"] < 100 * 1024:
        pytest.skip("device cannot opt into 100 KiB of shared memory")
    src = r"""
    extern "C" __global__ void fill(float* out, int n) {
      extern __shared__ float buf[];
      for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = float(i);
      __syncthreads();
      for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = buf[n - 1 - i];
    }"""
    arch = f"sm_{info['cc_major']}{info['cc_minor']}"
    k = rt.Kernel.load(rt.compile(src, "fill.cu", arch), "fill")
    n = 100 * 1024 // 4
    out = torch.empty(n, device="cuda")
    k.launch((1,), (256,), n * 4, 0, [("ptr", out), ("i32", n)])
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), torch.arange(n - 1, -1, -1, dtype=torch.float32))


@requires_nvrtc
def test_out_of_range_launch_values_are_input_errors():
    """Issue 16: values that would be truncated to 32 bits (or refused by the driver) are InputErrors
    naming the value, before the driver is asked; never pybind's 'Unable to cast'."""
    k = rt.Kernel.load(rt.compile(AXPY, "axpy.cu", "sm_80"), "axpy")
    with pytest.raises(heddle_error("InputError"), match=r"kernel argument \('i32', value\) must be an int in "
                                                         r"\[-2147483648, 2147483647\], got 2147483648"):
        k.launch((1,), (1,), 0, 0, [("i32", 2 ** 31)])
    with pytest.raises(heddle_error("InputError"), match=r"\('i64', value\) must be an int .* got None"):
        k.launch((1,), (1,), 0, 0, [("i64", None)])
    with pytest.raises(heddle_error("InputError"), match=r"grid\[0\] must be an int .* got 1.5"):
        k.launch((1.5,), (1,), 0, 0, [])
    with pytest.raises(heddle_error("InputError"), match=r"grid 1x65536x1 exceeds the driver's limits"):
        k.launch((1, 65536), (32,), 0, 0, [])
