"""8-bit float types in the definition (docs/fp8.md): e4m3 / e5m2 operands are accepted by the IR, mix with each
other but not with 16-bit types, are refused as epilogue tensors, and targets without an FP8 tensor-core
instruction (mma.sync, MFMA, WMMA) refuse them at schedule time naming the operand. CPU only."""
import pytest
import torch

import heddle
from heddle.core.inputs import DTYPES


def fp8_fusion(da="e4m3", db="e4m3", out="bf16", trans_b=True):
    fd = heddle.Fusion()
    a = fd.input("a", da, [256, 512])
    b = fd.input("b", db, [256, 512] if trans_b else [512, 256])
    fd.output(fd.matmul(a, b, trans_b=trans_b).to(out))
    return fd


@pytest.mark.parametrize("name,torch_name", [("e4m3", "float8_e4m3fn"), ("e5m2", "float8_e5m2")])
def test_fp8_names_follow_torch(name, torch_name):
    assert DTYPES[name] == torch_name and getattr(torch, torch_name).itemsize == 1
    fd = heddle.Fusion()
    t = fd.input("x", torch_name, [4, 8])
    assert t.dtype == name and str(t) == f"x ({name})[4, 8]"


@pytest.mark.parametrize("da,db", [("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e4m3"), ("e5m2", "e5m2")])
def test_fp8_operands_mix_formats(da, db):
    fp8_fusion(da, db)  # no error: the FP8 instructions take each operand's format separately


@pytest.mark.parametrize("other", ["bf16", "f16", "f32"])
def test_fp8_with_a_16_bit_operand_is_refused(other):
    with pytest.raises(heddle.ScheduleError, match=r"matmul\(a, b\): operands are e4m3 and " + other):
        fp8_fusion("e4m3", other)


def test_fp8_epilogue_tensor_is_refused():
    fd = heddle.Fusion()
    a = fd.input("a", "e4m3", [64, 64])
    b = fd.input("b", "e4m3", [64, 64])
    r = fd.input("res", "e4m3", [64, 64])
    with pytest.raises(heddle.ScheduleError, match=r"res is e4m3; 8-bit float tensors are matmul operands only"):
        fd.matmul(a, b, trans_b=True) + r


@pytest.mark.parametrize("target", ["sm_80", "gfx942", "gfx1200"])
def test_targets_without_fp8_tensor_cores_refuse_naming_the_operand(target):
    fd = fp8_fusion()
    with pytest.raises(heddle.ScheduleError,
                       match=rf"matmul operand a is e4m3: target {target} has no 8-bit float tensor-core instruction"):
        fd.auto_schedule(target)
