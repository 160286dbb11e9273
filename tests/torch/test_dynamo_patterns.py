"""Patterns of real models the backend fuses beyond single aten ops (heddle/pytorch/dynamo_patterns.py and
heddle/dynamo_fuse.py): activations written out (GPT-2's gelu_new, the erf GELU, x * sigmoid(x)), tanh,
clone (eval dropout) as identity, a scale after the bias, a scale after a 4-D reshape of a bmm result,
operands stored transposed without a transpose node; and the message when an operand cannot be read.
Numbers against eager on CPU (heddle's ops compute the fused chain with torch there)."""
import math

import pytest
import torch
import torch.nn as nn

import heddle.dynamo as hd
from heddle.dynamo import heddle_backend

pytestmark = pytest.mark.usefixtures("_fresh_dynamo")  # tests/torch/conftest.py

BF16 = torch.bfloat16


class Act(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.lin = nn.Linear(64, 96)
        self.f = f

    def forward(self, x):
        return self.f(self.lin(x))


WRITTEN = {
    "gelu_tanh": lambda h: 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0)))),
    "gelu": lambda h: h * 0.5 * (1.0 + torch.erf(h / math.sqrt(2.0))),
    "silu": lambda h: h * torch.sigmoid(h),
    "tanh": torch.tanh,
}


def _run(model, *xs):
    with torch.no_grad():
        ref = model(*xs)
        out = torch.compile(model, backend=heddle_backend, options={"fallback": "eager"})(*xs)
    torch.testing.assert_close(out.float(), ref.float(), atol=3e-2, rtol=3e-2)
    [r] = hd.reports
    return r


def _x(*shape, seed=1):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(BF16)


@pytest.mark.parametrize("act", sorted(WRITTEN))
def test_activation_written_out_is_one_op(act):
    torch.manual_seed(0)
    r = _run(Act(WRITTEN[act]).to(BF16), _x(2, 8, 64))
    [g] = r.groups
    assert g.summary.endswith(f"-> {act}" + ("" if act == "tanh" else f" (written out: {len(g.nodes) - 2} ops)"))
    assert not [d for d in r.decisions if d.status == "other" and d.op in ("mul", "tanh", "erf", "sigmoid", "pow")]


def test_near_miss_is_not_an_activation():
    # 0.5 * h * (1 + tanh(h)) is no heddle activation: the chain stops, the ops stay with torch
    torch.manual_seed(0)
    r = _run(Act(lambda h: 0.5 * h * (1.0 + torch.tanh(h))).to(BF16), _x(2, 8, 64))
    [g] = r.groups
    assert "->" not in g.summary and "has 2 users" in g.stop


class ScaleAfterBias(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(64, 32)
        self.drop = nn.Dropout(0.1)

    def forward(self, x, res):
        return self.drop(torch.relu(self.lin(x) * 0.5)) + res


def test_scale_after_bias_and_eval_dropout():
    torch.manual_seed(0)
    m = ScaleAfterBias().to(BF16).eval()
    r = _run(m, _x(16, 64), _x(16, 32, seed=2))
    [g] = r.groups
    assert g.summary == "addmm(a, b^T) + bias * 0.5 (bias scaled too) -> relu + residual", g.summary


class Scores(nn.Module):
    def forward(self, q, k):   # [B, H, S, D] @ [B, H, D, S] (a transposed view, no transpose of the bmm operand)
        return torch.matmul(q, k.transpose(-1, -2)) * 0.125


def test_4d_scores_scale_and_strided_operand():
    r = _run(Scores(), _x(2, 4, 8, 16), _x(2, 4, 8, 16, seed=2))
    [g] = r.groups
    assert "(viewed as [2, 4, 8, 8]) * 0.125" in g.summary, g.summary
    assert r.unfused_matmuls == []


class Strided(nn.Module):
    def forward(self, x, w):
        return x @ w


def test_operand_read_from_its_strides():
    w = _x(24, 64, seed=3).t()          # [64, 24] stored column-major, no transpose node in the graph
    r = _run(Strided(), _x(16, 64), w)
    [g] = r.groups
    assert g.summary.startswith("mm(a, b^T)")


def test_operand_that_cannot_be_read_says_why():
    w = _x(64, 48, seed=3)[:, ::2]      # neither rows nor columns contiguous
    r = _run(Strided(), _x(16, 64), w)
    [d] = r.unfused_matmuls
    assert "neither its rows (last stride) nor its columns (second-to-last stride) are contiguous" in d.reason
    assert "(48, 2)" in d.reason
