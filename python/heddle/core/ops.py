"""Epilogue ops on heddle tensors: heddle.ops.gelu(x), ...; arithmetic uses + - * / directly."""
from .fusion import Tensor, ops_quantize, ops_unary

# heddle's activations (epilogue unary ops a matmul op can end with): the one list the torch face, the op
# names and the reference evaluator use (the C++ core's unary ops, heddle/bindings/ir_bindings.cpp)
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh")


def relu(x: Tensor) -> Tensor:
    return ops_unary("relu", x)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """GELU; approximate='none' (erf, torch's default) or 'tanh'."""
    if approximate not in ("none", "tanh"):
        from .errors import ScheduleError
        raise ScheduleError(f"gelu(approximate='{approximate}'): use 'none' (erf) or 'tanh'")
    return ops_unary("gelu" if approximate == "none" else "gelu_tanh", x)


def silu(x: Tensor) -> Tensor:
    return ops_unary("silu", x)


def sigmoid(x: Tensor) -> Tensor:
    return ops_unary("sigmoid", x)


def tanh(x: Tensor) -> Tensor:
    return ops_unary("tanh", x)


def cast(x: Tensor, dtype) -> Tensor:
    return x.to(dtype)


def quantize(y: Tensor, dtype="e4m3", group=128) -> tuple:
    """Quantize y to an 8-bit float with a scale computed from y (docs/fp8.md "Computed output scales").

    Returns (q, s): per row of y, in groups of `group` elements of its last axis (128: DeepGEMM's 1 x 128
    layout, the scale_a a block128 matmul takes; "row": one scale per row, s [M, 1]),
        s[m, j] = max(amax |y[m, j*group : (j+1)*group]|, 1e-4) / max_finite   (f32; 448 e4m3, 57344 e5m2)
        q[m, n] = satfinite(y[m, n] / s[m, n // group])                       (dtype, y's shape)
    A ragged last group takes the columns inside N only. Mark both as outputs: fd.output(q); fd.output(s).

    group="mx32": an MX-format output (docs/fp8.md "MX formats"), the next scales="mx32" matmul's (a, scale_a):
    s e8m0 per row and 32 columns in torch's blocked layout [round_up(M, 128), round_up(N/32, 4)] (N a multiple
    of 32), its code the OCP MX FLOOR exponent floor(log2 amax) - emax + 127 (emax 8 e4m3, 15 e5m2; clamped to
    [0, 254]); q = satfinite(y / 2^(code - 127)). sm_100a's tcgen05 kernels only.
    """
    if group in ("row", "mx32"):
        pass  # the C++ core names them (kQuantRow, kQuantMx32)
    elif isinstance(group, bool) or not isinstance(group, int) or group <= 0:
        from .errors import ScheduleError
        raise ScheduleError(f"quantize({y.name}): group={group!r}; use group=128 (1 x 128 blocks), group='row' "
                            "or group='mx32' (an MX-format output)")
    return ops_quantize(y, dtype, group)
