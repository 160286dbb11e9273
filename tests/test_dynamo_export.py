"""torch.export programs with heddle ops load in a fresh process (docs/torch.md, "Export").

heddle's matmul op names encode their whole signature (heddle/pytorch/op_names.py); `import heddle` makes
torch.ops.heddle register an op it has never built from its name on first lookup, which is what
torch.export.load's deserializer does.
"""
import os
import subprocess
import sys

import pytest
import torch

import heddle
from heddle.pytorch import op_names
from heddle.pytorch.matmul import MatmulSpec, resolve_op

from test_dynamo_ops import VARIANTS


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_op_names_round_trip(name):
    s = VARIANTS[name]
    fields = op_names.decode(s.op_name())
    assert fields is not None and MatmulSpec(**fields) == s


@pytest.mark.parametrize("bad", ["mm", "fusion_0123abcd", "mm_bf16_nt_b00_k64_n32_obf16_extra",
                                 "mm_bf16_nt_b00_k64_n32_Agelu", "mm_f8_nt_b00_k64_n32_obf16",
                                 "mm_bf16_nt_b00_k64_n32_Bbf16rx_obf16", "mm_bf16_nt_b00_k64_n32_Aswish_obf16"])
def test_non_names_are_not_resolved(bad):
    assert op_names.decode(bad) is None or not resolve_op(bad)
    with pytest.raises(AttributeError):
        getattr(torch.ops.heddle, bad)


_LOAD = """
import sys, torch
import heddle
ep = torch.export.load(sys.argv[1])
x, ref = torch.load(sys.argv[1] + ".ref")
out = ep.module()(x)
assert out.dtype == ref.dtype and torch.equal(out, ref), (out - ref).abs().max()
print("loaded", [str(n.target) for n in ep.graph.nodes if n.op == "call_function"])
"""


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(64, 96)
        self.down = torch.nn.Linear(96, 64)

    def forward(self, x):
        h = heddle.matmul(x, self.up.weight, bias=self.up.bias, activation="gelu_tanh", trans_b=True)
        return heddle.matmul(h, self.down.weight, bias=self.down.bias, residual=x, alpha=0.5, trans_b=True)


def test_exported_program_loads_in_a_fresh_process(tmp_path):
    torch.manual_seed(0)
    model = _Block().to(torch.bfloat16)
    x = torch.randn(2, 8, 64).to(torch.bfloat16)
    ep = torch.export.export(model, (x,))
    targets = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
    assert sum(t.startswith("heddle.mm_") for t in targets) == 2, targets
    path = str(tmp_path / "block.pt2")
    torch.export.save(ep, path)
    torch.save((x, model(x)), path + ".ref")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", _LOAD, path], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("heddle.mm_bf16_nt_b10_k") == 2, r.stdout
