"""heddle.scaled_mm's eager path (docs/runtime.md "Eager calls", docs/fp8.md "Eager calls"): a plain eager call
skips the custom-op layer as heddle.matmul's does, and a repeated one of a planned signature is one C++ call
(its front, a CallTable of its own) through the plan its first call left, with the new tensors' addresses.
Checked without a GPU: under HEDDLE_INTERPRET=1 the eager path gives the op's numbers (the printed kernel
interpreted on CPU tensors); with a recorder standing in for the driver (CPU tensors, sm_90a kernels whose tensor
maps the interpreter's encoder makes) the front launches per-tensor, per-row and block-scaled calls with their
own addresses; a scale the call has to copy (a layout the kernel does not read) is never keyed; every wrong
input is still the InputError naming it, on a first call and after the front was filled."""
import pytest
import torch

import heddle
from heddle import _C
from heddle.core.errors import InputError
from heddle.pytorch import scaled_mm as smm
from support.launch_defs import Recorder
from support.launch_defs import launch_addresses as _addresses

E4M3 = torch.float8_e4m3fn


def _operands(kind, m, k, n, seed=0):
    """(a, b, scale_a, scale_b) in the layouts the kernel reads as given: b column-major, block scale_a M-major
    (torch's BlockWise1x128) and block scale_b [ceil(K/128), ceil(N/128)] column-major (torch's
    BlockWise128x128: scale_b.t() contiguous)."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(E4M3)
    b = torch.randn(n, k, generator=g).to(E4M3).t()
    if kind == "tensor":
        return a, b, torch.rand(1, generator=g)[0] + 0.5, torch.rand(1, generator=g)[0] + 0.5
    if kind == "row":
        return a, b, torch.rand(m, 1, generator=g) + 0.5, torch.rand(1, n, generator=g) + 0.5
    kb, nb = -(-k // 128), -(-n // 128)
    sa = torch.exp2(torch.randint(-3, 4, (kb, m), generator=g).float()).t()       # [M, kb], M-major
    sb = torch.exp2(torch.randint(-3, 4, (nb, kb), generator=g).float()).t()      # [kb, nb], column-major
    return a, b, sa, sb


# per kind: a problem no other test uses (its op's plans and kernels are this file's)
SHAPES = {"tensor": (16, 96, 80), "row": (16, 96, 80), "block": (16, 288, 176)}


@pytest.fixture(params=["tensor", "row", "block"])
def planned(request):
    """(kind, the recorder, the op): the op has a plan for _operands(kind) in its eager table, launched by the
    recorder; the tables are emptied afterwards (their plans launch nothing real)."""
    kind = request.param
    m, k, n = SHAPES[kind]
    a, b, sa, sb = _operands(kind, m, k, n)
    bias = torch.randn(n, dtype=torch.bfloat16)
    spec, args = smm.scaled_spec(a, b, sa, sb, bias, out_dtype=torch.bfloat16)
    fm = smm.scaled_op(spec)
    tensors = fm.kernel_tensors(args)
    kern = fm.kernel_for(tensors, "sm_90a", rtc=False, sms=132)
    kern._map_encoder = _C.interp.encode_tensor_map_tiled
    rec = kern._loaded = Recorder()
    kern._launch(tensors, fm._check(tensors)[0], fm._eager)
    assert len(rec.launches) == 1 and len(fm._eager) == 1
    smm._calls.clear()
    yield kind, rec, fm
    fm._eager.clear()
    kern._plans.clear()
    smm._calls.clear()


@pytest.mark.parametrize("python_reads", [False, True])  # tensors read through ATen (where built) or Python
def test_a_repeated_call_is_one_call_through_the_front(planned, monkeypatch, python_reads):
    kind, rec, fm = planned
    if python_reads:
        monkeypatch.setattr(smm, "_calls", smm.call_table(python_reads=True))
        monkeypatch.setattr(smm, "_front", smm._calls.fast_run)
    m, k, n = SHAPES[kind]
    a, b, sa, sb = _operands(kind, m, k, n)
    bias = torch.randn(n, dtype=torch.bfloat16)
    out = heddle.scaled_mm(a, b, sa, sb, bias)  # the op's table launches it, the front keys the call
    assert len(rec.launches) == 2 and len(smm._calls) == 1
    assert out.shape == (m, n) and out.dtype == torch.bfloat16

    def no_checks(*args, **kw):
        raise AssertionError("a repeated call took the checks")
    monkeypatch.setattr(smm, "scaled_spec", no_checks)
    a, b, sa, sb = _operands(kind, m, k, n, seed=1)  # the same signature at other addresses
    bias = torch.randn(n, dtype=torch.bfloat16)
    out2 = heddle.scaled_mm(a, b, sa, sb, bias)
    assert len(rec.launches) == 3 and len(smm._calls) == 1
    assert out2.shape == (m, n) and out2.dtype == torch.bfloat16 and out2.data_ptr() != out.data_ptr()
    # every tensor of the launch is this call's (a scalar scale's address: its one element)
    assert _addresses(rec.launches[-1]) >= {t.data_ptr() for t in (a, b, sa, sb, bias, out2)}
    assert not _addresses(rec.launches[-1]) & {t.data_ptr() for t in (out,)}
    fm.k_share = "none"  # the op's plans are dropped, and the front's with them
    assert len(smm._calls) == 0 and len(fm._eager) == 0


BAD = [  # (argument overrides of a planned call, the InputError's words)
    (lambda a, b, sa, sb: dict(scale_a=sa.half()), "'scale_a' has dtype torch.float16"),
    (lambda a, b, sa, sb: dict(b=b.t().contiguous().t().contiguous()), "b must be column-major"),
    (lambda a, b, sa, sb: dict(a=a.float()), "'a' has dtype torch.float32"),
    (lambda a, b, sa, sb: dict(bias=torch.randn(8, dtype=torch.bfloat16)), "'bias' is torch.bfloat16 \\[8\\]"),
    (lambda a, b, sa, sb: dict(out_dtype=torch.int8), "out_dtype=torch.int8 is not supported"),
    (lambda a, b, sa, sb: dict(activation="swish"), "activation 'swish'"),
    (lambda a, b, sa, sb: dict(scale_b=torch.ones(3, 5)), "'scale_b'"),
    (lambda a, b, sa, sb: dict(out_dtype=torch.float32, out_scale="row"), "out_scale='row' quantizes"),
]


@pytest.mark.parametrize("bad,match", BAD)
def test_every_wrong_input_is_still_an_input_error(planned, bad, match):
    """On the front's first call of a signature and after the front keyed a planned one."""
    kind, rec, fm = planned
    m, k, n = SHAPES[kind]
    args = dict(zip(("a", "b", "scale_a", "scale_b"), _operands(kind, m, k, n)),
                bias=torch.randn(n, dtype=torch.bfloat16))
    with pytest.raises(InputError, match=match):
        heddle.scaled_mm(**{**args, **bad(*_operands(kind, m, k, n))})
    heddle.scaled_mm(**args)
    assert len(smm._calls) == 1
    with pytest.raises(InputError, match=match):
        heddle.scaled_mm(**{**args, **bad(*_operands(kind, m, k, n))})
    assert len(rec.launches) == 2


@pytest.mark.parametrize("planned", ["block"], indirect=True)  # per-tensor and per-row scales are views
def test_a_scale_the_call_copies_is_never_keyed(planned):
    """A block scale_b [ceil(K/128), ceil(N/128)] row-major (scale_b.t() copied contiguous each call) or a
    row-major block scale_a (copied M-major): the op's plan launches the copy, the front never keys the call (its
    plan would launch the first call's copy)."""
    kind, rec, fm = planned
    m, k, n = SHAPES[kind]
    a, b, sa, sb = _operands(kind, m, k, n)
    bias = torch.randn(n, dtype=torch.bfloat16)
    for sa_, sb_ in ((sa, sb.contiguous()), (sa.contiguous(), sb)):
        heddle.scaled_mm(a, b, sa_, sb_, bias)
        assert len(smm._calls) == 0
        copied = sb_ if sa_ is sa else sa_
        assert copied.data_ptr() not in _addresses(rec.launches[-1])
    assert len(rec.launches) == 3


@pytest.mark.parametrize("kind,out_scale", [("tensor", None), ("row", None), ("block", None), ("row", "row")])
def test_the_eager_path_gives_the_ops_numbers_under_the_interpreter(monkeypatch, kind, out_scale):
    """HEDDLE_INTERPRET=1, CPU tensors: the eager call (no op layer: the op's implementation is not called) and
    the same call through torch.ops.heddle give the same bytes, the printed sm_90a kernel interpreted; with a
    computed output scale both return (out, scale)."""
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    m, k, n = (8, 32, 16) if kind != "block" else (8, 160, 32)
    a, b, sa, sb = _operands(kind, m, k, n, seed=2)
    bias = torch.randn(n, dtype=torch.bfloat16)
    kw = dict(activation="relu", out_scale=out_scale, out_dtype=E4M3 if out_scale else torch.bfloat16)
    runs = []
    op_run = smm.FusedScaledMatmul.run
    monkeypatch.setattr(smm.FusedScaledMatmul, "run", lambda self, t: runs.append(1) or op_run(self, t))
    out = heddle.scaled_mm(a, b, sa, sb, bias, **kw)
    assert runs == []
    spec, args = smm.scaled_spec(a, b, sa, sb, bias, **kw)
    via_op = getattr(torch.ops.heddle, spec.op_name())(*args)
    assert runs == [1]
    if out_scale is None:
        out, via_op = (out,), (via_op,)
    assert type(out) is tuple and len(out) == len(via_op)
    assert all(x.dtype == y.dtype and torch.equal(x.view(torch.uint8) if x.element_size() == 1 else x,
                                                  y.view(torch.uint8) if y.element_size() == 1 else y)
               for x, y in zip(out, via_op))
    assert out[0].float().abs().sum() > 0
    fm = smm.scaled_op(spec)
    assert {key[0] for key in fm.kernels} == {"sm_90a"}


def test_modes_and_gradients_take_the_op(monkeypatch):
    """A function mode (torch.device(...)) or an operand that requires grad: the call goes through the custom op
    (its dispatcher and autograd: no backward, an InputError on backward)."""
    runs = []
    op_run = smm.FusedScaledMatmul.run
    monkeypatch.setattr(smm.FusedScaledMatmul, "run", lambda self, t: runs.append(1) or op_run(self, t))
    a, b, sa, sb = _operands("row", 16, 32, 16)
    heddle.scaled_mm(a, b, sa, sb)
    assert runs == []
    with torch.device("cpu"):
        heddle.scaled_mm(a, b, sa, sb)
    assert runs == [1]
    sa = sa.clone().requires_grad_()
    out = heddle.scaled_mm(a, b, sa, sb)
    assert runs == [1, 1]
    with pytest.raises(InputError, match="no backward"):
        out.sum().backward()
