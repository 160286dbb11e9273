"""When heddle.matmul's torch custom ops register (FusedMatmul.op, docs/torch.md "When ops register"): on first
use by the op layer, the torch.ops.heddle resolver or the dynamo rewrite; never for a kernel alone (the first
kernel of a new process, benchmarks/test_import_bench.py). Each test takes a signature (N) no other test uses,
so the op starts unregistered in this process."""
import subprocess
import sys

import torch

import heddle
from heddle.pytorch.matmul import MatmulSpec, fused_matmul_op


def _spec(n: int) -> MatmulSpec:
    return MatmulSpec(dtype="bf16", batched=False, batched_b=False, k=64, n=n, trans_a=False, trans_b=False,
                      bias=("bf16", 1), residual=None, activation="relu", alpha=None, out_dtype="bf16")


def _in_dispatcher(name: str) -> bool:
    """Whether torch's dispatcher knows heddle::<name> (asked without torch.ops.heddle, whose resolver registers)."""
    try:
        torch._C._dispatch_find_schema_or_throw("heddle::" + name, "")
        return True
    except RuntimeError:
        return False


def _inputs(n: int, requires_grad: bool = False):
    g = torch.Generator().manual_seed(n)
    a = torch.randn(19, 64, generator=g).to(torch.bfloat16).requires_grad_(requires_grad)
    b = torch.randn(64, n, generator=g).to(torch.bfloat16)
    bias = torch.randn(n, generator=g).to(torch.bfloat16)
    return a, b, bias


def _reference(a, b, bias):
    return torch.relu(a.double() @ b.double() + bias.double())


def test_a_kernel_alone_registers_nothing():
    spec = _spec(40)
    fm = fused_matmul_op(spec)
    k = fm.kernel("sm_90a", 8, 8, rtc=False)   # lowered and printed, nothing compiled: no NVRTC needed
    assert k.source and not fm.op_registered and not _in_dispatcher(spec.op_name())


def test_the_op_property_registers_once():
    spec = _spec(56)
    fm = fused_matmul_op(spec)
    assert not _in_dispatcher(spec.op_name())
    op = fm.op
    assert fm.op_registered and _in_dispatcher(spec.op_name()) and fm.op is op
    a, b, bias = _inputs(56)
    torch.testing.assert_close(op(a, b, bias).double(), _reference(a, b, bias), rtol=2e-2, atol=2e-2)


def test_a_lookup_by_name_registers_it():
    spec = _spec(72)
    fm = fused_matmul_op(spec)   # known to heddle, not to torch yet: the resolver must still register it
    assert not fm.op_registered
    packet = getattr(torch.ops.heddle, spec.op_name())
    assert fm.op_registered and _in_dispatcher(spec.op_name())
    a, b, bias = _inputs(72)
    torch.testing.assert_close(packet(a, b, bias).double(), _reference(a, b, bias), rtol=2e-2, atol=2e-2)


def test_heddle_matmul_through_the_op_layer_registers_it():
    # CPU tensors take the op (the plain eager path is CUDA's); a gradient needs its autograd formula too
    a, b, bias = _inputs(88, requires_grad=True)
    y = heddle.matmul(a, b, bias=bias, activation="relu")
    fm = fused_matmul_op(_spec(88))
    assert fm.op_registered
    torch.testing.assert_close(y.double(), _reference(a, b, bias), rtol=2e-2, atol=2e-2)
    y.float().sum().backward()
    a64 = a.detach().double().requires_grad_(True)
    _reference(a64, b, bias).sum().backward()
    torch.testing.assert_close(a.grad.double(), a64.grad, rtol=3e-2, atol=3e-2)


def test_torch_compile_of_heddle_matmul_registers_it():
    torch._dynamo.reset()
    a, b, bias = _inputs(104)
    f = torch.compile(lambda a, b, bias: heddle.matmul(a, b, bias=bias, activation="relu"), backend="eager",
                      fullgraph=True)
    y = f(a, b, bias)
    assert fused_matmul_op(_spec(104)).op_registered
    torch.testing.assert_close(y.double(), _reference(a, b, bias), rtol=2e-2, atol=2e-2)
    torch._dynamo.reset()


def test_a_new_process_first_kernel_leaves_torch_ops_alone():
    """What benchmarks/test_import_bench.py times: import heddle, then one op's kernel; no op registered."""
    code = (
        "import torch, heddle\n"
        "from heddle.pytorch.matmul import MatmulSpec, fused_matmul_op\n"
        "s = MatmulSpec(dtype='bf16', batched=False, batched_b=False, k=64, n=24, trans_a=False, trans_b=True,\n"
        "               bias=None, residual=None, activation=None, alpha=None, out_dtype='bf16')\n"
        "fm = fused_matmul_op(s)\n"
        "fm.kernel('sm_80', 8, 8, rtc=False)\n"
        "try:\n"
        "    torch._C._dispatch_find_schema_or_throw('heddle::' + s.op_name(), '')\n"
        "    known = True\n"
        "except RuntimeError:\n"
        "    known = False\n"
        "print(fm.op_registered, known)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    registered, known = r.stdout.split()
    assert (registered, known) == ("False", "False"), r.stdout
