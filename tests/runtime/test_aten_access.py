"""The eager tables' ATen access (heddle._C_aten; docs/runtime.md, "Eager calls in one C++ call"), without a
GPU: a PlanTable or CallTable given heddle._C_aten.access reads an exact torch.Tensor from its at::Tensor and
allocates outputs with at::empty, and must give the same keys, the same refusals and the same launches as the
tables that read tensors through their Python attributes. Skipped where the module is not built for the
running torch (a build whose Python had no torch)."""
import ctypes

import pytest
import torch

import heddle
from heddle import _C
from heddle.core import aten
from support.launch_defs import Recorder, kernel_for, operands

rt = _C.runtime
ACCESS = aten.access()
pytestmark = pytest.mark.skipif(ACCESS is None, reason=f"heddle._C_aten: {aten.status()}")


class _Sub(torch.Tensor):
    pass


def _tables():
    return rt.PlanTable(torch.empty, 8), rt.PlanTable(torch.empty, 8, aten=ACCESS)


def _variants():
    """Tensor triples the signature must tell apart, or refuse, the same way through both reads."""
    x, w, b = operands()
    big = torch.randn(140 * 64).bfloat16()
    yield "plain", (x, w, b)
    yield "another alignment class", operands(offset=1)
    yield "a transposed view", (x, w.t().contiguous().t(), b)
    yield "a strided view", (big.view(140, 64)[::2], w, b)
    yield "another dtype", (x.half(), w.half(), b.half())
    yield "a 0-d tensor", (x, w, torch.tensor(1.0))
    yield "nine dims (read through Python)", (x, w, torch.zeros([1] * 9))
    yield "requires grad", (x, w.clone().requires_grad_(True), b)
    yield "a subclass (read through Python)", (x.as_subclass(_Sub), w, b)
    yield "an nn.Parameter (read through Python)", (x, torch.nn.Parameter(w, requires_grad=False), b)
    yield "a negative view", (x, torch._neg_view(w), b)
    yield "a ZeroTensor", (x, torch._efficientzerotensor(64, 96, dtype=torch.bfloat16), b)
    yield "a tensor without storage", (x, torch.empty(64, 96, dtype=torch.bfloat16, device="meta"), b)
    yield "not a tensor", (x, 3, b)


@pytest.mark.parametrize("name,tensors", list(_variants()), ids=[n for n, _ in _variants()])
def test_both_reads_give_the_same_key(name, tensors):
    py, at = _tables()
    key = py.key(tensors)
    assert at.key(tensors) == key
    refused = name in ("a negative view", "a ZeroTensor", "a tensor without storage", "not a tensor")
    assert (key is None) == refused
    if key is not None:  # ndim, sizes, ndim, strides, dtype, device, address % 16 per tensor
        x = tensors[0]
        assert key[:7] == [2, *x.shape, 2, *x.stride(), id(x.dtype)]
        assert key[7:9] == [-1, x.data_ptr() % 16]


def _planned(table, rec):
    k = kernel_for()
    first = operands()
    out, grid, args, parts = k._prepare(first)
    table.add(first, k.plan(rec, grid, args, parts), [out])
    return first, out


def test_a_planned_call_allocates_its_output_through_aten_and_launches_it():
    rec = Recorder()
    _, at = _tables()
    first, out = _planned(at, rec)
    keep = []
    for _ in range(3):
        x, w, b = operands()
        o = at.run(0, (x, w, b))
        assert type(o) is torch.Tensor and o.shape == out.shape == (70, 96) and o.dtype == torch.bfloat16
        assert o.device.type == "cpu" and not o.requires_grad and o.is_contiguous()
        ptrs = [v for kind, v in rec.launches[-1][4] if kind == "ptr"]
        assert ptrs == [x.data_ptr(), w.data_ptr(), b.data_ptr(), o.data_ptr()]
        keep.append(o)
    assert len({o.data_ptr() for o in keep}) == 3 and len(rec.launches) == 3
    wg = first[1].clone().requires_grad_(True)  # no_grad: a tensor that requires grad is refused, as before
    assert at.run(0, (first[0], wg, first[2]), False, torch.Tensor, True) is None
    assert at.run(0, (first[0].as_subclass(_Sub), first[1], first[2]), False, torch.Tensor) is None
    assert len(rec.launches) == 3


def test_the_call_table_reads_the_grad_mode_through_aten():
    rec = Recorder()
    source = rt.PlanTable(torch.empty, 8, aten=ACCESS)
    (x, w, b), _ = _planned(source, rec)
    wg = w.clone().requires_grad_(True)
    args = (x, wg, b, None, "gelu")
    calls = rt.CallTable(torch.empty, 4, exact_type=torch.Tensor, identity_types=[torch.dtype], blockers=[],
                         grad_enabled=lambda: False,  # not asked: ATen's grad mode is
                         current_device=None, raw_stream=None, aten=ACCESS)
    assert calls.adopt(args, source)
    assert calls.run(*args) is None  # grad mode on, a tensor requires grad: the full path
    with torch.no_grad():
        assert calls.run(*args) is not None
    assert len(rec.launches) == 1


def test_a_capsule_of_another_layout_is_refused():
    with pytest.raises(heddle.InputError, match="heddle._C_aten.access"):
        rt.PlanTable(torch.empty, 8, aten=object())
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    other = (ctypes.c_uint32 * 16)(99, 64)  # ABI 99
    with pytest.raises(heddle.InputError, match="ABI 99.*rebuild heddle"):
        rt.CallTable(torch.empty, 4, exact_type=torch.Tensor, identity_types=[], blockers=[], grad_enabled=None,
                     current_device=None, raw_stream=None,
                     aten=new(ctypes.addressof(other), b"heddle._C_aten.access", None))


def test_heddle_aten_0_turns_it_off(monkeypatch):
    monkeypatch.setenv("HEDDLE_ATEN", "0")
    assert aten.access() is None and "HEDDLE_ATEN=0" in aten.status()
    monkeypatch.delenv("HEDDLE_ATEN")
    assert aten.access() is ACCESS and aten.status().startswith("on")


def test_a_module_built_for_another_torch_is_not_used(monkeypatch):
    from heddle import _C_aten
    monkeypatch.setattr(_C_aten, "torch_version", "0.0.0+other")
    assert aten.access() is None and "rebuild heddle against this torch" in aten.status()


def _python_modes():
    from heddle.core import torch_compat
    return any(bool(q()) for q in torch_compat.mode_queries())


def _modes_seen_in(transform):
    """(ATen's answer, the Python queries' answer) inside `transform` (a torch.func transform)."""
    from heddle import _C_aten
    seen = []

    def f(x):
        seen.append((_C_aten.modes_active(), _python_modes()))
        return (x * x).sum()
    transform(f)(torch.randn(3))
    return seen[0]


def test_the_mode_check_answers_as_torchs_three_queries():
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.overrides import BaseTorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    from heddle import _C_aten
    assert _C_aten.modes_active() is False and _python_modes() is False

    class Dispatch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    for mode in (Dispatch(), FakeTensorMode(), BaseTorchFunctionMode(), torch.device("meta")):
        with mode:
            assert _C_aten.modes_active() is True and _python_modes() is True, mode
        assert _C_aten.modes_active() is False
    for transform in (torch.func.vmap, torch.func.grad, lambda f: torch.func.jacrev(f), torch.func.functionalize):
        assert _modes_seen_in(transform) == (True, True)
    assert _C_aten.modes_active() is False and _python_modes() is False


def test_a_planned_call_under_a_mode_takes_the_full_path():
    from torch.utils._python_dispatch import TorchDispatchMode
    rec = Recorder()
    source = rt.PlanTable(torch.empty, 8, aten=ACCESS)
    (x, w, b), _ = _planned(source, rec)
    calls = rt.CallTable(torch.empty, 4, exact_type=torch.Tensor, identity_types=[], blockers=[],
                         grad_enabled=None, current_device=None, raw_stream=None, aten=ACCESS)
    assert calls.adopt((x, w, b), source) and calls.run(x, w, b) is not None

    class Dispatch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    with Dispatch():
        assert calls.run(x, w, b) is None
    assert len(rec.launches) == 1
