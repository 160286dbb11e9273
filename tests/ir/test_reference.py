"""The torch reference evaluator (heddle.core.reference): every activation heddle names (ACTIVATIONS) has a
reference function, and it computes what torch's own function does."""
import pytest
import torch

import heddle
from heddle.core.fusion import ops_unary
from heddle.core.ops import ACTIVATIONS
from heddle.core.reference import evaluate

TORCH = {"relu": torch.relu, "gelu": torch.nn.functional.gelu,
         "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
         "silu": torch.nn.functional.silu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}


@pytest.mark.parametrize("act", ACTIVATIONS)
def test_every_activation_evaluates_like_torch(act):
    fd = heddle.Fusion()
    a, b = fd.input("a", "bf16", ["M", 8]), fd.input("b", "bf16", [8, 5])
    fd.output(ops_unary(act, fd.matmul(a, b)).to("f32"))
    g = torch.Generator().manual_seed(1)
    x, w = torch.randn(6, 8, generator=g).bfloat16(), torch.randn(8, 5, generator=g).bfloat16()
    got = evaluate(fd, [x, w])  # float64 by default
    torch.testing.assert_close(got.double(), TORCH[act](x.double() @ w.double()), atol=1e-6, rtol=1e-6)
