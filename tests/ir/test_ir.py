"""Fusion IR: definition, printing, dtype/shape inference, definition errors, and the torch reference.

CPU only. Every error test asserts the exception type and that the message names the tensor(s) and
says what would be valid.
"""
import math

import pytest
import torch

import heddle
from heddle import reference

ScheduleError = heddle.ScheduleError


def mm_fusion(dt="bf16", a_shape=("M", 256), b_shape=(256, 512), **kw):
    fd = heddle.Fusion()
    a = fd.input("a", dt, list(a_shape))
    b = fd.input("b", dt, list(b_shape))
    return fd, a, b, fd.matmul(a, b, **kw)


# --- printing -------------------------------------------------------------------------------------

def test_print_matmul_epilogue():
    fd, a, b, acc = mm_fusion()
    bias = fd.input("bias", "bf16", [512])
    fd.output(heddle.ops.gelu(acc + bias).to("bf16"))
    s = str(fd)
    assert s.startswith("fusion {")
    assert "input  a (bf16)[M, 256]" in s
    assert "input  b (bf16)[256, 512]" in s
    assert "input  bias (bf16)[512]" in s
    assert f"{acc.name} (f32)[M, 512] = matmul(a, b)  // layout NN, f32 accumulate" in s
    assert f"= add({acc.name}, bias)" in s
    assert "= gelu(" in s
    assert "(bf16)[M, 512] = cast(" in s and ", bf16)" in s
    assert f"output {fd.outputs[0].name}" in s


@pytest.mark.parametrize("ta,tb,layout,call", [
    (False, False, "NN", "matmul(a, b)"),
    (False, True, "NT", "matmul(a, b^T)"),
    (True, False, "TN", "matmul(a^T, b)"),
    (True, True, "TT", "matmul(a^T, b^T)"),
])
def test_print_layouts(ta, tb, layout, call):
    fd = heddle.Fusion()
    a = fd.input("a", "f16", [64, 32] if ta else [32, 64])   # trans_a: stored [K, M]
    b = fd.input("b", "f16", [16, 64] if tb else [64, 16])   # trans_b: stored [N, K]
    acc = fd.matmul(a, b, trans_a=ta, trans_b=tb)
    fd.output(acc.to("f16"))
    assert acc.shape == [32, 16]
    s = str(fd)
    assert f"= {call}  // layout {layout}" in s


def test_print_scalar_ops_both_sides():
    fd, a, b, acc = mm_fusion()
    left = 1.0 - acc
    right = acc * 2
    fd.output(left + right)
    s = str(fd)
    assert f"{left.name} (f32)[M, 512] = sub(1, {acc.name})" in s
    assert f"{right.name} (f32)[M, 512] = mul({acc.name}, 2)" in s


def test_print_cache_line():
    fd, a, b, acc = mm_fusion()
    fd.output(acc)
    fd.cache_after(a, "cp_async")
    assert "cache  a_smem (bf16)[M, 256] = cp_async(a) in shared" in str(fd)


def test_exprs_are_plain_dicts_in_topological_order():
    fd, a, b, acc = mm_fusion(trans_b=False)
    y = (1.0 - acc).to("bf16")
    fd.output(y)
    ex = fd.exprs()
    assert [e["op"] for e in ex] == ["matmul", "sub", "cast"]
    assert ex[0]["inputs"] == ["a", "b"] and ex[0]["output"] == acc.name and ex[0]["dtype"] == "f32"
    assert ex[1]["scalar"] == 1.0 and ex[1]["scalar_on_left"] is True
    assert ex[2]["cast"] == "bf16" and ex[2]["output"] == y.name


# --- dtype promotion ------------------------------------------------------------------------------

def test_matmul_accumulates_in_f32_and_bias_promotes():
    fd, a, b, acc = mm_fusion()
    bias = fd.input("bias", "bf16", [512])
    assert acc.dtype == "f32"
    assert (acc + bias).dtype == "f32"
    assert (acc + bias).to("bf16").dtype == "bf16"


def test_dtype_promotion_pointwise():
    fd = heddle.Fusion()
    x = fd.input("x", "bf16", [8, 8])
    y = fd.input("y", "f16", [8, 8])
    assert (x * x).dtype == "bf16"          # same dtype stays
    assert (x + y).dtype == "f32"           # f16 with bf16 -> f32
    assert (x + x.to("f32")).dtype == "f32"
    assert (x * 3).dtype == "bf16"          # a scalar does not promote
    assert heddle.ops.relu(x).dtype == "bf16"


def test_dtype_names_accept_torch_dtypes_and_aliases():
    fd = heddle.Fusion()
    assert fd.input("p", torch.bfloat16, [4]).dtype == "bf16"
    assert fd.input("q", torch.float16, [4]).dtype == "f16"
    assert fd.input("r", "half", [4]).dtype == "f16"
    assert fd.input("s", "float32", [4]).dtype == "f32"


# --- shapes: broadcasting, symbols, batches --------------------------------------------------------

def test_broadcast_bias_row_and_column():
    fd, a, b, acc = mm_fusion()
    row = fd.input("row", "bf16", [512])
    col = fd.input("col", "bf16", ["M", 1])
    assert (acc + row).shape == ["M", 512]
    assert (acc + col).shape == ["M", 512]
    assert (col * row).shape == ["M", 512]


def test_broadcast_incompatible_shapes_error():
    fd, a, b, acc = mm_fusion()
    v = fd.input("v", "bf16", [384])
    with pytest.raises(ScheduleError) as ei:
        acc + v
    msg = str(ei.value)
    assert "cannot broadcast" in msg
    assert acc.name in msg and "v (bf16)[384]" in msg
    assert "512" in msg and "384" in msg
    assert "must match or one of them be 1" in msg


def test_broadcast_different_symbols_error():
    fd, a, b, acc = mm_fusion(b_shape=(256, "N"))
    w = fd.input("w", "bf16", ["N", 1])
    with pytest.raises(ScheduleError, match=r"axis 0 has sizes M and N"):
        acc + w


def test_symbolic_sizes_propagate():
    fd, a, b, acc = mm_fusion(a_shape=("M", "K"), b_shape=("K", "N"))
    assert acc.shape == ["M", "N"]
    y = heddle.ops.silu(acc + fd.input("bias", "bf16", ["N"])).to("bf16")
    assert y.shape == ["M", "N"]
    assert "(bf16)[M, N] = cast(" in str(fd)


def test_batched_matmul_shape():
    fd, a, b, acc = mm_fusion(a_shape=("B", "M", 64), b_shape=("B", 64, 32))
    assert acc.shape == ["B", "M", 32]


def test_batched_a_times_2d_b_shape():
    fd, a, b, acc = mm_fusion(a_shape=(3, "M", 64), b_shape=(64, 32))
    assert acc.shape == [3, "M", 32]


def test_batched_b_needs_batched_a():
    fd = heddle.Fusion()
    a = fd.input("a", "bf16", [64, 32])
    b = fd.input("b", "bf16", [3, 32, 64])
    with pytest.raises(ScheduleError) as ei:
        fd.matmul(a, b)
    msg = str(ei.value)
    assert "matmul(a, b)" in msg and "batched B needs a batched A" in msg and "make B rank 2" in msg


def test_batch_sizes_differ():
    fd = heddle.Fusion()
    a = fd.input("a", "bf16", [3, 64, 32])
    b = fd.input("b", "bf16", [4, 32, 64])
    with pytest.raises(ScheduleError, match=r"matmul\(a, b\): batch sizes differ: 3 vs 4"):
        fd.matmul(a, b)


# --- definition errors ------------------------------------------------------------------------------

def test_k_mismatch_names_both_tensors_and_sizes():
    fd = heddle.Fusion()
    a = fd.input("lhs", "bf16", [64, 32])
    b = fd.input("rhs", "bf16", [48, 64])
    with pytest.raises(ScheduleError) as ei:
        fd.matmul(a, b)
    msg = str(ei.value)
    assert "contraction sizes differ" in msg
    assert "lhs gives K=32" in msg and "rhs gives K=48" in msg


def test_k_mismatch_after_transposition():
    fd = heddle.Fusion()
    a = fd.input("a", "bf16", [64, 32])
    b = fd.input("b", "bf16", [48, 64])
    with pytest.raises(ScheduleError) as ei:
        fd.matmul(a, b, trans_b=True)   # b^T is [64, 48]: K=64 vs a's 32
    msg = str(ei.value)
    assert "a gives K=32" in msg and "b gives K=64" in msg and "after transposition" in msg


def test_f32_operands_rejected_with_advice():
    fd = heddle.Fusion()
    a = fd.input("a", "f32", [64, 32])
    b = fd.input("b", "f32", [32, 64])
    with pytest.raises(ScheduleError) as ei:
        fd.matmul(a, b)
    msg = str(ei.value)
    assert "matmul(a, b)" in msg and "f32 and f32" in msg
    assert "two f16, two bf16 or two 8-bit float" in msg and "declare the inputs bf16" in msg


def test_following_the_f32_advice_gives_a_schedulable_fusion():
    fd = heddle.Fusion()
    a = fd.input("a", "f32", [64, 32])
    b = fd.input("b", "f32", [32, 64])
    try:
        acc = fd.matmul(a.to("bf16"), b.to("bf16"))
    except ScheduleError as e:  # rejecting at definition (with host-side cast advice) is fine too
        assert "a" in str(e)
        return
    fd.output(acc)
    fd.auto_schedule("sm_80")


def test_mixed_f16_bf16_operands_rejected():
    fd = heddle.Fusion()
    a = fd.input("a", "f16", [64, 32])
    b = fd.input("b", "bf16", [32, 64])
    with pytest.raises(ScheduleError) as ei:
        fd.matmul(a, b)
    msg = str(ei.value)
    assert "matmul(a, b)" in msg and "f16 and bf16" in msg and "two f16, two bf16 or two 8-bit float" in msg


def test_rank1_operand_rejected():
    fd = heddle.Fusion()
    a = fd.input("vec", "bf16", [64])
    b = fd.input("b", "bf16", [64, 64])
    with pytest.raises(ScheduleError) as ei:
        fd.matmul(a, b)
    msg = str(ei.value)
    assert "matmul(vec, b)" in msg and "rank 2 or 3" in msg and "got 1 and 2" in msg


def test_second_matmul_rejected():
    fd, a, b, acc = mm_fusion()
    c = fd.input("c", "bf16", [512, 128])
    with pytest.raises(ScheduleError) as ei:
        fd.matmul(acc.to("bf16"), c)
    msg = str(ei.value)
    assert "already has a matmul" in msg and "two fusions" in msg


def test_duplicate_input_name_rejected():
    fd = heddle.Fusion()
    fd.input("x", "bf16", [4, 4])
    with pytest.raises(ScheduleError, match=r"input name 'x' is used twice; give each input its own name"):
        fd.input("x", "f16", [8])


def test_input_name_cannot_collide_with_generated_names():
    fd = heddle.Fusion()
    a = fd.input("a", "bf16", [32, 64])
    b = fd.input("b", "bf16", [64, 16])
    try:
        bias = fd.input("T3", "bf16", [16])
    except ScheduleError as e:
        assert "T3" in str(e)
        return
    acc = fd.matmul(a, b)
    assert acc is not bias
    assert acc.name != bias.name
    names = [t.name for t in fd.inputs] + [e["output"] for e in fd.exprs()]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("size", [0, -3])
def test_non_positive_size_rejected(size):
    fd = heddle.Fusion()
    with pytest.raises(ScheduleError) as ei:
        fd.input("x", "bf16", [size, 4])
    msg = str(ei.value)
    assert "input 'x'" in msg and "must be positive" in msg and "symbol such as 'M'" in msg


def test_empty_symbol_rejected():
    """A size '' is not a usable symbol: it would print as '[, 4]' and can never be bound at launch."""
    fd = heddle.Fusion()
    with pytest.raises(ScheduleError, match="input 'x'"):
        fd.input("x", "bf16", ["", 4])


@pytest.mark.parametrize("shape", [[], [1, 2, 3, 4]])
def test_unsupported_rank_rejected(shape):
    fd = heddle.Fusion()
    with pytest.raises(ScheduleError) as ei:
        fd.input("x", "bf16", shape)
    msg = str(ei.value)
    assert f"input 'x': rank {len(shape)} is not supported" in msg and "rank 1" in msg and "3" in msg


def test_output_that_is_an_input_rejected():
    fd, a, b, acc = mm_fusion()
    with pytest.raises(ScheduleError, match=r"output a is an input; outputs must be computed by the fusion"):
        fd.output(a)


def test_output_twice_rejected():
    fd, a, b, acc = mm_fusion()
    fd.output(acc)
    with pytest.raises(ScheduleError, match=rf"tensor {acc.name} is already an output"):
        fd.output(acc)


def test_unknown_op_name_lists_valid_ops():
    fd, a, b, acc = mm_fusion()
    with pytest.raises(ScheduleError) as ei:
        heddle.fusion.ops_unary("softplus", acc)
    msg = str(ei.value)
    assert "unknown op 'softplus'" in msg
    for op in ("add", "relu", "gelu", "silu", "sigmoid", "tanh"):
        assert op in msg


def test_binary_with_non_binary_op_rejected():
    fd, a, b, acc = mm_fusion()
    with pytest.raises(ScheduleError, match="relu is not a binary op"):
        fd._f.binary("relu", acc._tv, acc._tv)


def test_gelu_approximate_option_rejected():
    fd, a, b, acc = mm_fusion()
    with pytest.raises(ScheduleError, match=r"gelu\(approximate='fast'\): use 'none' \(erf\) or 'tanh'"):
        heddle.ops.gelu(acc, approximate="fast")


@pytest.mark.parametrize("where", ["input", "cast"])
def test_unknown_dtype_rejected(where):
    fd, a, b, acc = mm_fusion()
    with pytest.raises(ScheduleError) as ei:
        if where == "input":
            fd.input("x", "int8", [4])
        else:
            acc.to("float64")
    msg = str(ei.value)
    assert "unknown dtype" in msg and "float16, bfloat16, float32, float8_e4m3fn, float8_e5m2, float8_e8m0fnu (MX scales only) and float4_e2m1fn_x2" in msg


def test_arithmetic_with_non_number_is_a_type_error():
    fd, a, b, acc = mm_fusion()
    with pytest.raises(TypeError, match=rf"cannot add tensor {acc.name} and str"):
        acc + "1"


# --- the torch reference evaluator ----------------------------------------------------------------

def _erf_gelu(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def _tanh_gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


ACTS = {
    "relu": (heddle.ops.relu, lambda x: torch.clamp(x, min=0.0)),
    "gelu": (heddle.ops.gelu, _erf_gelu),
    "gelu_tanh": (lambda t: heddle.ops.gelu(t, approximate="tanh"), _tanh_gelu),
    "silu": (heddle.ops.silu, lambda x: x / (1.0 + torch.exp(-x))),
    "sigmoid": (heddle.ops.sigmoid, lambda x: 1.0 / (1.0 + torch.exp(-x))),
    "tanh": (heddle.ops.tanh, lambda x: (torch.exp(2 * x) - 1) / (torch.exp(2 * x) + 1)),
    "neg": (lambda t: -t, lambda x: -x),
}


def _rand(*shape, dt=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g).to(dt)


def _close(got, want):
    assert got.shape == want.shape
    torch.testing.assert_close(got.double(), want.double(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_reference_layouts(ta, tb):
    M, N, K = 24, 16, 40
    fd = heddle.Fusion()
    a = fd.input("a", "bf16", [K, M] if ta else [M, K])
    b = fd.input("b", "bf16", [N, K] if tb else [K, N])
    bias = fd.input("bias", "bf16", [N])
    fd.output(fd.matmul(a, b, trans_a=ta, trans_b=tb) + bias)
    A = _rand(K, M, seed=1) if ta else _rand(M, K, seed=1)
    B = _rand(N, K, seed=2) if tb else _rand(K, N, seed=2)
    C = _rand(N, seed=3)
    got = reference.evaluate(fd, [A, B, C])
    A64 = A.double().T if ta else A.double()
    B64 = B.double().T if tb else B.double()
    want = (A64 @ B64 + C.double()).float()
    assert got.dtype == torch.float32
    _close(got, want)


@pytest.mark.parametrize("b_batched", [False, True])
def test_reference_batched(b_batched):
    Bt, M, N, K = 3, 8, 16, 32
    fd = heddle.Fusion()
    a = fd.input("a", "f16", [Bt, M, K])
    b = fd.input("b", "f16", [Bt, K, N] if b_batched else [K, N])
    fd.output((fd.matmul(a, b) * 0.5).to("f16"))
    A = _rand(Bt, M, K, dt=torch.float16, seed=4)
    B = _rand(*([Bt, K, N] if b_batched else [K, N]), dt=torch.float16, seed=5)
    got = reference.evaluate(fd, [A, B])
    want = torch.stack([A[i].double() @ (B[i] if b_batched else B).double() for i in range(Bt)]) * 0.5
    assert got.dtype == torch.float16 and list(got.shape) == [Bt, M, N]
    assert torch.equal(got, want.to(torch.float16))


@pytest.mark.parametrize("act", sorted(ACTS))
def test_reference_activations(act):
    M, N, K = 16, 24, 32
    h_op, t_op = ACTS[act]
    fd = heddle.Fusion()
    a = fd.input("a", "bf16", [M, K])
    b = fd.input("b", "bf16", [K, N])
    bias = fd.input("bias", "bf16", [N])
    fd.output(h_op(fd.matmul(a, b) + bias))
    A, B, C = _rand(M, K, seed=6), _rand(K, N, seed=7), _rand(N, seed=8)
    got = reference.evaluate(fd, [A, B, C])
    want = t_op(A.double() @ B.double() + C.double()).float()
    _close(got, want)


def test_reference_scalar_ops_and_casts():
    M, N, K = 8, 8, 16
    fd = heddle.Fusion()
    a = fd.input("a", "bf16", [M, K])
    b = fd.input("b", "bf16", [K, N])
    acc = fd.matmul(a, b)
    fd.output(((1.0 - acc.to("bf16")) / 4 + 2 * acc).to("bf16"))
    A, B = _rand(M, K, seed=9), _rand(K, N, seed=10)
    x = A.double() @ B.double()
    want = ((1.0 - x.to(torch.bfloat16).double()) / 4 + 2 * x).to(torch.bfloat16)
    got = reference.evaluate(fd, [A, B])
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, want)
    # round_casts=False keeps the intermediate cast exact
    want_exact = ((1.0 - x) / 4 + 2 * x).to(torch.bfloat16)
    assert torch.equal(reference.evaluate(fd, [A, B], round_casts=False), want_exact)
