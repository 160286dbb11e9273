"""Builders shared by the launch tests (tests/runtime/test_driver.py, test_launch_plan.py, test_launch_path.py,
test_tma_launch_plans.py, test_cluster_launch.py): a CUDA C kernel for the driver, small matmul kernels and
their operands, a fake driver's loaded kernel that records each launch."""
import torch

import heddle
from heddle import _C
from heddle.pytorch.matmul import MatmulSpec
from support.matmul_defs import matmul_fusion, schedule

AXPY = r"""
extern "C" __global__ void axpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""


def kernel_for(epilogue="bias_gelu", vec=(8, 8)):
    fd, a, b = matmul_fusion(m="M", n=96, k=64, dtype="bf16", layout="NN", batched=False, epilogue=epilogue)
    schedule(fd, a, b, bm=64, bn=32, bk=32, wm=2, wn=1, stages=2, prefetch=1)
    return heddle.Kernel(fd, fd.lower("sm_80", vec[0], vec[1]), None, "sm_80", vec[0], vec[1])


def operands(m=70, offset=0):
    """x [m, 64], w [64, 96], bias [96] in bf16; `offset` elements into x's storage (alignment class)."""
    x = torch.randn(m * 64 + offset).bfloat16()[offset:].view(m, 64)
    return x, torch.randn(64, 96).bfloat16(), torch.randn(96).bfloat16()


class Recorder:
    """A fake driver's loaded kernel: records each launch."""

    def __init__(self):
        self.launches = []

    def launch(self, grid, block, smem, stream, args):
        self.launches.append((tuple(grid), tuple(block), smem, stream, list(args)))


def launch_addresses(launch):
    """The pointer arguments of a recorded launch and the global addresses of its tensor maps (the interpreter's
    encoder puts the address at byte 16)."""
    ptrs = [v for kind, v in launch[4] if kind == "ptr"]
    maps = [int.from_bytes(v[16:24], "little") for kind, v in launch[4] if kind == "bytes"]
    return set(ptrs) | set(maps)


def hopper_kernel():
    """An sm_90a kernel (TMA loads, TMA-store epilogue) whose tensor maps the interpreter's encoder makes."""
    spec = MatmulSpec(dtype="bf16", batched=False, batched_b=False, k=256, n=256, trans_a=False, trans_b=False,
                      bias=None, residual=None, activation=None, alpha=None, out_dtype="bf16")
    fd = spec.build_fusion()
    fd.auto_schedule("sm_90a", -1, 256, 256)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    k._map_encoder = _C.interp.encode_tensor_map_tiled
    return k
