"""What a definition takes is checked where it enters (issue 16, items 1 and 6), on the CPU: tensors of
another Fusion, input names (C identifiers, no keywords) and Python values that would otherwise reach
pybind (shapes, schedule arguments) are heddle errors naming the argument."""
import gc

import pytest
import torch

import heddle
from support.matmul_defs import matmul_fusion


# --- 1: a tensor of another Fusion is refused at the call ------------------------------------------
def test_tensor_of_another_fusion_is_refused_naming_both():
    fd1, fd2 = heddle.Fusion(), heddle.Fusion()
    x = fd1.input("x", "bf16", ["M", 64])
    w = fd2.input("w", "bf16", [64, 32])
    with pytest.raises(heddle.ScheduleError, match=f"matmul: tensor w belongs to fusion #{fd2._f.serial}, not to "
                                                   f"fusion #{fd1._f.serial} that is being built"):
        fd1.matmul(x, w)
    y = fd1.matmul(x, fd1.input("w", "bf16", [64, 32]))
    bias = fd2.input("bias", "bf16", [32])
    with pytest.raises(heddle.ScheduleError, match="add: tensor bias belongs to fusion"):
        y + bias
    with pytest.raises(heddle.ScheduleError, match="cache_after: tensor w belongs to fusion"):
        fd1.cache_after(w)
    with pytest.raises(heddle.ScheduleError, match="output: tensor T"):
        fd2.output(y * 2.0)
    del fd2, w, bias
    gc.collect()
    fd1.output(y.to("bf16"))  # fd1 is intact: nothing of fd2 got in
    assert "w" in str(fd1) and "bias" not in str(fd1)


def test_serials_differ():
    assert heddle.Fusion()._f.serial != heddle.Fusion()._f.serial


# --- 6: Python values and names checked at the boundary ----------------------------------------------
@pytest.mark.parametrize("name", ["def", "class", "lambda", "int", "a b", "x;y", "é", "1x", "", "__x"])
def test_input_names_must_be_identifiers_and_not_keywords(name):
    with pytest.raises(heddle.ScheduleError, match=r"input name .* (not allowed: names are C identifiers|keyword)"):
        heddle.Fusion().input(name, "bf16", ["M", 64])


@pytest.mark.parametrize("shape, match", [
    (["M", None], r"input 'x' axis 1: size .* must be an int, got None"),
    (["M", 64.0], r"input 'x' axis 1: size .* must be an int, got 64.0"),
    (["M", 2 ** 63], r"input 'x' axis 1: size .* out of range"),
    ("M", r"input 'x': shape must be a list"),
])
def test_shape_values_are_checked(shape, match):
    with pytest.raises(heddle.ScheduleError, match=match):
        heddle.Fusion().input("x", "bf16", shape)


def test_schedule_arguments_are_checked():
    fd, a, b = matmul_fusion(m="M", n=128, k=64, dtype="bf16")
    mm = fd.schedule()
    with pytest.raises(heddle.ScheduleError, match=r"split\('m'\): factor must be an int, got 2.5"):
        mm.split("m", 2.5)
    with pytest.raises(heddle.ScheduleError, match="split: axis must be a str, got None"):
        mm.split(None, 64)
    with pytest.raises(heddle.ScheduleError, match=r"split\('m'\): factor = 18446744073709551616 is out of range"):
        mm.split("m", 2 ** 64)
    c = fd.cache_after(a)
    with pytest.raises(heddle.ScheduleError, match="circular_buffer: stages must be an int, got None"):
        c.circular_buffer(None)
    with pytest.raises(heddle.ScheduleError, match="role 'mma' option 'registers' must be an int, got '232'"):
        mm.warp_specialize({"load": 1, "mma": {"warpgroups": 1, "registers": "232"}})
    with pytest.raises(heddle.ScheduleError, match="role 'load' .* must be an int, got 1.5"):
        mm.warp_specialize({"load": 1.5})
    with pytest.raises(heddle.ScheduleError, match="matmul: b must be a tensor of this fusion"):
        heddle.Fusion().matmul(a, torch.zeros(2, 2))
    with pytest.raises(heddle.ScheduleError, match="lower: vec_a must be an int, got None"):
        fd.lower("sm_80", None)


def test_keyword_name_never_reaches_the_op_schema():
    fd = heddle.Fusion()
    with pytest.raises(heddle.ScheduleError, match="'def' is a C, C\\+\\+ or Python keyword"):
        fd.input("def", "bf16", [64])
    fd.input("def_in", "bf16", [64])  # the suggested name works
