"""Host side of a launch, checked without a GPU: the argument list must match the kernel's parameter
list one by one (kinds and values), the grid must cover the output, and layouts the compiled copies
cannot take must be refused with InputError."""
import pytest
import torch

import heddle
from support.matmul_defs import matmul_fusion, schedule


def kernel_for(layout="NN", batched=False, epilogue="bias_gelu", vec=(8, 8)):
    fd, a, b = matmul_fusion(m="M", n=96, k=64, dtype="bf16", layout=layout, batched=batched, epilogue=epilogue)
    schedule(fd, a, b, bm=64, bn=32, bk=32, wm=2, wn=1, stages=2, prefetch=1)
    return heddle.Kernel(fd, fd.lower("sm_80", vec[0], vec[1]), None, "sm_80", vec[0], vec[1])


def test_args_follow_params_nn_with_bias():
    k = kernel_for()
    x = torch.randn(70, 64).bfloat16()
    w = torch.randn(64, 96).bfloat16()
    bias = torch.randn(96).bfloat16()
    out, grid, args = k.prepare((x, w, bias))
    names = [p[0] for p in k.lowered.params]
    assert names == ["A", "B", "M", "N", "K", "lda", "ldb", "E_bias", "E_bias_s0", "D", "ldd"]
    got = dict(zip(names, args))
    assert got["A"] == ("ptr", x.data_ptr()) and got["B"] == ("ptr", w.data_ptr())
    assert got["D"] == ("ptr", out.data_ptr()) and got["E_bias"] == ("ptr", bias.data_ptr())
    assert (got["M"], got["N"], got["K"]) == (("i32", 70), ("i32", 96), ("i32", 64))
    assert (got["lda"], got["ldb"], got["ldd"], got["E_bias_s0"]) == (("i64", 64), ("i64", 96), ("i64", 96), ("i64", 1))
    assert out.shape == (70, 96) and out.dtype == torch.bfloat16
    assert grid == (3, 2, 1)  # ceil(96/32) n-tiles on x, ceil(70/64) m-tiles on y


def test_transposed_and_batched_strides():
    k = kernel_for(layout="TT", batched=True, epilogue="silu_scale")
    x = torch.randn(3, 64, 48).bfloat16()   # A stored [B, K, M]
    w = torch.randn(3, 96, 64).bfloat16()   # B stored [B, N, K]
    out, grid, args = k.prepare((x, w))
    got = dict(zip([p[0] for p in k.lowered.params], args))
    assert got["lda"] == ("i64", 48) and got["ldb"] == ("i64", 64)
    assert got["batch_stride_a"] == ("i64", 64 * 48) and got["batch_stride_b"] == ("i64", 96 * 64)
    assert got["batch_stride_d"] == ("i64", 48 * 96) and got["M"] == ("i32", 48)
    assert out.shape == (3, 48, 96) and grid == (3, 1, 3)


def test_strided_rows_use_the_real_leading_dimension():
    k = kernel_for()
    big = torch.randn(70, 128).bfloat16()
    x = big[:, :64]  # rows 128 apart
    out, grid, args = k.prepare((x, torch.randn(64, 96).bfloat16(), torch.randn(96).bfloat16()))
    assert dict(zip([p[0] for p in k.lowered.params], args))["lda"] == ("i64", 128)


def test_layouts_the_copies_cannot_take_are_refused():
    k = kernel_for()
    w, bias = torch.randn(64, 96).bfloat16(), torch.randn(96).bfloat16()
    with pytest.raises(heddle.InputError, match="last axis has stride"):
        k.prepare((torch.randn(64, 70).bfloat16().t(), w, bias))
    odd = torch.randn(70, 67).bfloat16()[:, :64]  # row stride 67: not a multiple of 8 elements
    with pytest.raises(heddle.InputError, match="row stride 67 .* not aligned to the kernel's 8-element copies; "
                                                "recompile with vec=1"):
        k.prepare((odd, w, bias))


def test_short_k_prepares_like_any_other():
    # one k-tile under a 2-stage pipeline: the prologue's loads past the end are predicated, so the
    # launch goes ahead (numbers: tests/lower/test_short_trips.py)
    k = kernel_for()
    out, grid, args = k.prepare((torch.randn(70, 16).bfloat16(), torch.randn(16, 96).bfloat16(),
                                 torch.randn(96).bfloat16()))
    assert tuple(out.shape) == (70, 96) and ("i32", 16) in args  # K


# --- issue 16: launch-path checks (8, 9, 10) on the host ----------------------------------------------
def test_batch_stride_must_keep_every_batch_aligned():
    k = kernel_for(batched=True, epilogue="silu_scale")
    x = torch.randn(3 * 16385).bfloat16().as_strided((3, 70, 64), (16385, 64, 1))  # batch stride 16,385
    with pytest.raises(heddle.InputError, match="input 'a': batch stride 16385 elements is not a multiple of the "
                                                "kernel's 8-element copies.*vec=1"):
        k.prepare((x, torch.randn(3, 64, 96).bfloat16()))


def test_sizes_beyond_32_bits_refused():
    k = kernel_for(epilogue="silu_scale")
    x = torch.randn(1, 64).bfloat16().expand(2 ** 31, 64)  # no memory behind the rows
    with pytest.raises(heddle.InputError, match=r"M=2147483648 does not fit the kernel's 32-bit size parameters"):
        k.prepare((x, torch.randn(64, 96).bfloat16()))


def test_grid_beyond_driver_limits_refused():
    k = kernel_for(batched=True, epilogue="silu_scale")
    x = torch.randn(1, 70, 64).bfloat16().expand(65536, 70, 64)
    w = torch.randn(1, 64, 96).bfloat16().expand(65536, 64, 96)
    with pytest.raises(heddle.InputError, match=r"grid.z = 65536 blocks exceeds the driver's limit of 65535"):
        k.prepare((x, w))
    k = kernel_for(epilogue="silu_scale")  # 64-row tiles on grid.y
    x = torch.randn(1, 64).bfloat16().expand(64 * 65535 + 1, 64)
    with pytest.raises(heddle.InputError, match=r"grid.y = 65536 blocks exceeds the driver's limit of 65535"):
        k.prepare((x, torch.randn(64, 96).bfloat16()))
    with pytest.raises(heddle.InputError, match="grid.x = 2147483648"):
        heddle.kernel.check_grid("k", (2 ** 31, 1, 1))


def test_launch_runs_under_the_tensors_device(monkeypatch):
    """A fake driver: records which device is current when the kernel is launched and which stream it gets."""
    k = kernel_for(epilogue="silu_scale")
    current = ["0"]
    events = []

    class Guard:
        def __init__(self, device):
            self.device, self.saved = str(device), None

        def __enter__(self):
            self.saved, current[0] = current[0], self.device

        def __exit__(self, *exc):
            current[0] = self.saved

    def raw_stream(device):
        events.append(("stream", str(device), current[0]))
        return 1000 + len(events)

    class Loaded:
        def launch(self, grid, block, smem, stream, args):
            events.append(("launch", current[0], stream, tuple(grid)))

    monkeypatch.setattr(torch.Tensor, "get_device", lambda self: 1)  # the CPU tensors stand for cuda:1 ...
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)      # ... while cuda:0 is current
    monkeypatch.setattr(torch.cuda, "device", Guard)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", raw_stream, raising=False)
    k._loaded = Loaded()
    x, w = torch.randn(70, 64).bfloat16(), torch.randn(64, 96).bfloat16()
    out = k._launch((x, w), {})
    assert events == [("stream", "1", "1"), ("launch", "1", 1001, (3, 2, 1))]
    assert current[0] == "0" and out.shape == (70, 96)
    y = k.run_planned((torch.randn(70, 64).bfloat16(), torch.randn(64, 96).bfloat16()))  # the plan: same guard
    assert events[2:] == [("stream", "1", "1"), ("launch", "1", 1003, (3, 2, 1))]
    assert current[0] == "0" and y.shape == (70, 96)


def test_heddle_matmul_picks_a_copy_width_the_batch_stride_allows():
    x = torch.randn(3 * 16385).bfloat16().as_strided((3, 70, 64), (16385, 64, 1))
    assert heddle.kernel._vec_for(x) == 1  # the variant heddle.matmul compiles for this layout
    assert heddle.kernel._vec_for(torch.randn(3, 70, 64).bfloat16()) == 8
    # 8-bit operands: 16 bytes would be 16 elements, but a copy moves at most 8 (validate's rule)
    assert heddle.kernel._vec_for(torch.zeros(64, 64).to(torch.float8_e4m3fn)) == 8
    assert heddle.kernel._vec_for(torch.zeros(64, 68).to(torch.float8_e5m2)[:, :64]) == 4
