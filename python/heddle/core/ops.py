"""Epilogue ops on heddle tensors: heddle.ops.gelu(x), ...; arithmetic uses + - * / directly."""
from .fusion import Tensor, ops_unary

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
