"""Small real models for the torch.compile backend tests (tests/torch/test_dynamo*.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    """Linear + GELU + Linear."""

    def __init__(self, d=64, h=128):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class GatedFFN(nn.Module):
    """A transformer block's feed-forward with SiLU gating (LLaMA style), with its residual."""

    def __init__(self, d=64, h=96):
        super().__init__()
        self.w1 = nn.Linear(d, h, bias=False)
        self.w3 = nn.Linear(d, h, bias=False)
        self.w2 = nn.Linear(h, d, bias=False)

    def forward(self, x):
        return x + self.w2(F.silu(self.w1(x)) * self.w3(x))


class ResidualLinear(nn.Module):
    """x + relu(Linear(x))."""

    def __init__(self, d=64):
        super().__init__()
        self.lin = nn.Linear(d, d)

    def forward(self, x):
        return x + torch.relu(self.lin(x))


class ScaledSigmoid(nn.Module):
    """sigmoid(0.5 * (x @ W^T) + b) cast to float32: scale, bias, activation and cast in one op."""

    def __init__(self, d=64, n=32):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n, d) / d ** 0.5)
        self.bias = nn.Parameter(torch.randn(n))

    def forward(self, x):
        return torch.sigmoid((x @ self.weight.t()) * 0.5 + self.bias).float()


class RowBias(nn.Module):
    """relu(x @ W^T + r) with a per-row bias r [rows, 1] (one value per token) and a column bias."""

    def __init__(self, d=64, n=96, rows=24, row_first=False):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n, d) / d ** 0.5)
        self.bias = nn.Parameter(torch.randn(n))
        self.row = nn.Parameter(torch.randn(rows, 1))
        self.row_first = row_first

    def forward(self, x):
        y = x @ self.weight.t()
        y = y + self.row + self.bias if self.row_first else y + self.bias + self.row
        return torch.relu(y)


class Attention(nn.Module):
    """q @ k^T (bmm) scaled, softmax, @ v: the bmm + scale is fused, softmax is not an epilogue."""

    def forward(self, q, k, v):
        s = torch.bmm(q, k.transpose(1, 2)) * 0.125
        return torch.bmm(torch.softmax(s.float(), -1).to(q.dtype), v)


class SelfAttention(nn.Module):
    """LayerNorm, dropout, q / k / v projections with biases on the same input (one merged heddle op), softmax
    attention."""

    def __init__(self, d=64):
        super().__init__()
        self.norm, self.drop = nn.LayerNorm(d), nn.Dropout(0.1)
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x):
        h = self.drop(self.norm(x))
        s = torch.softmax((self.q(h) @ self.k(h).transpose(1, 2)).float() * 0.125, -1).to(x.dtype)
        return s @ self.v(h)


def build(cls, dtype=torch.bfloat16, seed=0, **kw):
    torch.manual_seed(seed)
    return cls(**kw).to(dtype)
