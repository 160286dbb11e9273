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
from heddle.pytorch.matmul import MatmulSpec
from heddle.pytorch.resolver import resolve_op

from support.matmul_op_defs import VARIANTS


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_op_names_round_trip(name):
    s = VARIANTS[name]
    fields = op_names.decode(s.op_name())
    assert fields is not None and MatmulSpec(**fields) == s


@pytest.mark.parametrize("bad", ["mm", "mm_bf16_nt_b00_k64_n32_obf16_extra",
                                 "mm_bf16_nt_b00_k64_n32_Agelu", "mm_f8_nt_b00_k64_n32_obf16",
                                 "mm_bf16_nt_b00_k64_n32_Bbf16rx_obf16", "mm_bf16_nt_b00_k64_n32_Aswish_obf16"])
def test_non_names_are_not_resolved(bad):
    assert op_names.decode(bad) is None or not resolve_op(bad)
    with pytest.raises(AttributeError):
        getattr(torch.ops.heddle, bad)


def test_an_unbuilt_kernel_op_name_says_why_it_cannot_resolve():
    with pytest.raises(heddle.InputError, match=r"fusion_0123abcd is a Kernel.op op: its name is a hash.*Kernel.build"):
        torch.ops.heddle.fusion_0123abcd
    op = _kernel().op  # built: resolved like any registered op
    name = op._name
    assert getattr(torch.ops.heddle, name).default is not None


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


_KERNEL = """
import heddle
from heddle.pytorch.matmul import MatmulSpec


def kernel():
    spec = MatmulSpec(dtype="bf16", batched=False, batched_b=False, k=64, n=32, trans_a=False, trans_b=True,
                      bias=("bf16", 1), residual=None, activation="silu", alpha=None, out_dtype="bf16")
    fd = spec.build_fusion()
    fd.auto_schedule("sm_80", -1, 32, 64)
    return heddle.Kernel.build(fd, "sm_80", rtc=False)
"""


def _kernel():
    scope = {}
    exec(_KERNEL, scope)
    return scope["kernel"]()


class _KernelOpModel(torch.nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = op
        self.w = torch.nn.Parameter(torch.randn(32, 64).bfloat16())
        self.b = torch.nn.Parameter(torch.randn(32).bfloat16())

    def forward(self, x):
        return self.op(x, self.w, self.b)


def _run_fresh(code, *args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=600)


def _save_kernel_op_program(tmp_path):
    torch.manual_seed(0)
    model = _KernelOpModel(_kernel().op)
    x = torch.randn(8, 64).bfloat16()
    ep = torch.export.export(model, (x,))
    path = str(tmp_path / "kop.pt2")
    torch.export.save(ep, path)
    torch.save((x, model(x)), path + ".ref")
    return path


def test_a_kernel_op_loads_once_its_kernel_is_built_and_says_so_otherwise(tmp_path):
    path = _save_kernel_op_program(tmp_path)
    name = heddle.pytorch.export.op_names_in(path)
    assert len(name) == 1 and name[0].startswith("fusion_"), name
    r = _run_fresh(_LOAD, path)  # nothing built: the name alone says nothing to build
    assert r.returncode != 0 and "is a Kernel.op op" in r.stderr and "heddle.Kernel.build" in r.stderr, r.stderr[-3000:]
    r = _run_fresh(_KERNEL + "\nkernel().op\n" + _LOAD, path)  # the documented way: build it, then load
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"heddle.{name[0]}.default" in r.stdout, r.stdout


_LOAD_OPS = """
import sys, torch
import heddle
print("registered", heddle.pytorch.load_ops(sys.argv[1]))
print("resolved", sorted(n for n in torch.ops.heddle.__dict__ if n.startswith("mm_")))
"""


def test_load_ops_registers_the_ops_a_saved_program_names(tmp_path):
    torch.manual_seed(0)
    path = str(tmp_path / "block.pt2")
    torch.export.save(torch.export.export(_Block().to(torch.bfloat16), (torch.randn(2, 8, 64).bfloat16(),)), path)
    names = heddle.pytorch.export.op_names_in(path)
    assert len(names) == 2 and all(n.startswith("mm_bf16_nt_b10_k") for n in names), names
    r = _run_fresh(_LOAD_OPS, path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"registered {names}" in r.stdout and f"resolved {names}" in r.stdout, r.stdout
    with pytest.raises(heddle.InputError, match="not a saved program"):
        heddle.pytorch.load_ops(str(tmp_path / "block.pt2.missing"))


class _GatedModel(torch.nn.Module):
    def __init__(self, name):
        super().__init__()
        self.name = name
        self.w1 = torch.nn.Parameter(torch.randn(96, 64).bfloat16())
        self.w3 = torch.nn.Parameter(torch.randn(96, 64).bfloat16())

    def forward(self, x):
        return getattr(torch.ops.heddle, self.name)(x, self.w1, self.w3)


def test_load_ops_registers_a_gated_op_a_saved_program_names(tmp_path):
    # the torch.compile backend's gated pairs (SwiGLU) are ops too: load_ops must find them in the archive
    from heddle.pytorch.dynamo_gated import GatedSpec
    name = GatedSpec("bf16", 64, 96, True, "silu", "bf16").op_name()
    path = str(tmp_path / "gated.pt2")
    torch.export.save(torch.export.export(_GatedModel(name), (torch.randn(5, 64).bfloat16(),)), path)
    assert heddle.pytorch.export.op_names_in(path) == [name]
    r = _run_fresh("import sys, torch, heddle\nprint('registered', heddle.pytorch.load_ops(sys.argv[1]))", path)
    assert r.returncode == 0 and f"registered {[name]}" in r.stdout, r.stderr[-3000:]


def test_load_ops_names_a_kernel_op_it_cannot_build(tmp_path):
    path = _save_kernel_op_program(tmp_path)
    r = _run_fresh("import sys, heddle\nheddle.pytorch.load_ops(sys.argv[1])", path)
    assert r.returncode != 0 and "InputError" in r.stderr and "is a Kernel.op op" in r.stderr, r.stderr[-3000:]


_AOTI_LOAD = """
import sys, torch
import heddle
print("registered", heddle.pytorch.load_ops(sys.argv[1]))
runner = torch._inductor.aoti_load_package(sys.argv[1])
x, ref = torch.load(sys.argv[1] + ".ref")
out = runner(x)
assert out.dtype == ref.dtype and torch.equal(out, ref), (out.float() - ref.float()).abs().max()
print("ran")
"""


@pytest.mark.slow  # AOTInductor compiles C++: about a minute on 2 cores
def test_aoti_package_with_heddle_ops_loads_in_a_fresh_process(tmp_path):
    torch.manual_seed(0)
    model = _Block().to(torch.bfloat16)
    x = torch.randn(2, 8, 64).bfloat16()
    path = str(tmp_path / "block_aoti.pt2")
    torch._inductor.aoti_compile_and_package(torch.export.export(model, (x,)), package_path=path)
    torch.save((x, model(x)), path + ".ref")
    names = heddle.pytorch.export.op_names_in(path)
    assert len(names) == 2, names
    r = _run_fresh("import sys, torch\nimport heddle\ntorch._inductor.aoti_load_package(sys.argv[1])", path)
    assert r.returncode != 0 and "Could not find schema for heddle::mm_" in r.stderr  # why load_ops exists
    r = _run_fresh(_AOTI_LOAD, path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"registered {names}" in r.stdout and "ran" in r.stdout, r.stdout
