"""heddle.matmul's front (_C.runtime.CallTable, docs/runtime.md "Eager calls") without a GPU: a repeated
plain eager call is one C++ call through the plan its first call left, with the new tensors' addresses;
anything the front does not key (another dtype, shape, alignment, a tensor subclass such as nn.Parameter,
a bool where an int was, a tensor that requires grad under grad mode, a mode or a trace) still takes the
full path with its checks, errors, autograd and custom op. CPU tensors stand in for CUDA ones: only a
fake driver's plan launches them (the recorder below), as in tests/runtime/test_launch_plan.py."""
import pytest
import torch

import heddle
from heddle import _C
from heddle.core.kernel import _vec_for, plan_table
from heddle.pytorch import matmul as hm

N, K = 40, 72  # a problem no other test uses: its op's plans are this file's


class Recorder:
    """A fake driver's loaded kernel: records each launch (stream, pointer arguments)."""

    def __init__(self):
        self.launches = []

    def launch(self, grid, block, smem, stream, args):
        self.launches.append((stream, [v for kind, v in args if kind == "ptr"]))


def operands(m=16, offset=0):
    """x [m, K] (`offset` elements into its storage), w [N, K] (trans_b), bias [N], bf16."""
    x = torch.randn(m * K + offset).bfloat16()[offset:].view(m, K)
    return x, torch.randn(N, K).bfloat16(), torch.randn(N).bfloat16()


def call(x, w, bias, **kw):
    return heddle.matmul(x, w, bias=bias, activation=kw.pop("activation", "gelu"), trans_b=True, **kw)


def reference(x, w, bias, alpha=1.0):
    return torch.nn.functional.gelu(alpha * (x.double() @ w.double().t()) + bias.double())


@pytest.fixture
def planned():
    """(the recorder, the op): the op of call() has a plan for operands() in its table, launched by the
    recorder; both tables are emptied afterwards (their plans launch nothing real)."""
    rec = Recorder()
    x, w, bias = operands()
    name, args = hm._op_and_args(x, w, bias, "gelu", None, None, False, True, None)
    fm = hm._by_name[name]
    k = fm.kernel("sm_80", _vec_for(x), _vec_for(w), 16, rtc=False, sms=132)
    k._loaded = rec
    k._launch(args, None, fm._eager)
    assert len(rec.launches) == 1 and args in fm._eager
    hm._calls.clear()
    yield rec, fm
    fm._eager.clear()
    k._plans.clear()
    hm._calls.clear()


def test_a_repeated_call_is_one_call_through_the_front(planned):
    rec, fm = planned
    x, w, bias = operands()
    out = call(x, w, bias)  # the front has not seen it: the op's table launches it and the front adopts it
    assert len(rec.launches) == 2 and len(hm._calls) == 1
    x, w, bias = operands()
    out2 = call(x, w, bias)  # the front's plan, the new addresses
    assert len(rec.launches) == 3 and len(hm._calls) == 1
    assert rec.launches[-1] == (0, [x.data_ptr(), w.data_ptr(), bias.data_ptr(), out2.data_ptr()])
    assert out2.shape == out.shape == (16, N) and out2.dtype == torch.bfloat16 and out2.data_ptr() != out.data_ptr()
    act = "".join(["ge", "lu"])  # an equal str that is another object: compared by value
    call(x, w, bias, activation=act)
    assert len(rec.launches) == 4 and len(hm._calls) == 1
    call(x, w, bias, out_dtype=torch.bfloat16)  # the same op, another call: keyed on its own
    assert len(rec.launches) == 5 and len(hm._calls) == 2
    fm.k_share = "none"  # the op's plans are dropped, and the front's with them
    assert len(hm._calls) == 0 and len(fm._eager) == 0


def test_what_the_front_does_not_key_takes_the_full_path(planned):
    rec, fm = planned
    x, w, bias = operands()
    call(x, w, bias)
    call(x, w, bias)
    n = len(rec.launches)
    assert n == 3 and len(hm._calls) == 1
    with pytest.raises(heddle.InputError, match="operands are torch.bfloat16 and torch.float16"):
        call(x, w.half(), bias)
    with pytest.raises(heddle.InputError, match="a gives K=72 but b gives K=71"):
        call(x, w[:, :71], bias)
    with pytest.raises(heddle.InputError, match="'bias' has dtype torch.float64"):
        call(x, w, bias.double())
    with pytest.raises(heddle.InputError, match="input 'b'.*stride"):
        call(x, w.t().contiguous().t(), bias)  # a column-major weight: declare it with trans_b instead
    # the CPU op computes these (torch, float32): right numbers, no launch
    for y in (call(x, w, torch.nn.Parameter(bias, requires_grad=False)),  # a subclass (nn.Parameter)
              call(operands(offset=1)[0], w, bias),                        # another alignment class
              call(x, w, bias, activation="relu")):                        # another op
        assert y.shape == (16, N)
    assert len(rec.launches) == n
    xo = operands(offset=1)[0]
    torch.testing.assert_close(call(xo, w, bias).double(), reference(xo, w, bias), atol=0.1, rtol=0.05)
    # grad mode and a tensor that requires grad: autograd records the op
    wg = w.clone().requires_grad_(True)
    y = call(x, wg, bias)
    assert y.requires_grad and y.grad_fn is not None and len(rec.launches) == n
    with torch.no_grad():  # nothing to record: the front
        call(x, wg, bias)
    assert len(rec.launches) == n + 1
    # a function mode, a fake-tensor mode, a trace: the op, never the front
    with torch.device("cpu"):
        call(x, w, bias)
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        fy = call(mode.from_tensor(x), mode.from_tensor(w), mode.from_tensor(bias))
        assert fy.shape == (16, N) and type(fy).__name__ == "FakeTensor"
    from torch.fx.experimental.proxy_tensor import make_fx
    gm = make_fx(lambda a, b, c: call(a, b, c))(x, w, bias)
    assert any(str(node.target).startswith("heddle.") for node in gm.graph.nodes)
    assert len(rec.launches) == n + 1


def test_a_negative_view_is_never_launched_through_a_plan(planned):
    """A negative view (torch._neg_view; x.conj().imag makes one) has its tensor's shape, strides, dtype and
    address: the plans would hand the kernel memory that holds -x. The signature reads the bit, so such a
    call takes the full path (its value resolved: right numbers), on a first call and after plain ones."""
    rec, fm = planned
    x, w, bias = operands()
    neg = torch._neg_view
    for args in ((neg(x), w, bias), (x, neg(w), bias), (x, w, neg(bias))):  # first: before the front has one
        torch.testing.assert_close(call(*args).double(), reference(*args), atol=0.1, rtol=0.05)
    call(x, w, bias)
    call(x, w, bias)  # the front holds this call now
    n = len(rec.launches)
    assert n == 3 and len(hm._calls) == 1
    for args in ((neg(x), w, bias), (x, neg(w), bias), (x, w, neg(bias))):
        assert hm._calls.run(*args, None, "gelu", None, False, True, None) is None
        assert fm.planned(list(args)) is None and fm._eager.run(0, list(args), True) is None
        torch.testing.assert_close(call(*args).double(), reference(*args), atol=0.1, rtol=0.05)
        assert neg(neg(x)).is_neg() is False and call(neg(neg(x)), w, bias) is not None  # the bit cleared: a plan
    assert len(rec.launches) == n + 3 and len(hm._calls) == 1
    zero = torch._efficientzerotensor(x.shape, dtype=x.dtype)  # no memory: never a plan either
    assert hm._calls.run(zero, w, bias, None, "gelu", None, False, True, None) is None and fm.planned([zero, w, bias]) is None


def test_a_view_into_storage_and_an_empty_problem_keep_their_meaning(planned):
    """What else a signature could hide: a view `offset` elements into its storage launches with its own
    address (the alignment class is keyed, the address read per call); a view with a row stride of 0 or
    another offset class is another signature; an empty problem never launches (M = 0: an empty result;
    K = 0 would be another op)."""
    rec, fm = planned
    x, w, bias = operands()
    call(x, w, bias)
    call(x, w, bias)
    n = len(rec.launches)
    x8 = operands(offset=8)[0]  # 16 bytes into its storage: the same alignment class
    y = call(x8, w, bias)
    assert len(rec.launches) == n + 1 and rec.launches[-1][1] == [x8.data_ptr(), w.data_ptr(), bias.data_ptr(),
                                                                 y.data_ptr()]
    assert x8.data_ptr() == x8.untyped_storage().data_ptr() + 16
    rows = x[:1].expand(16, K)  # every row the same memory: keyed by its strides, the full path reads it right
    torch.testing.assert_close(call(rows, w, bias).double(), reference(rows, w, bias), atol=0.1, rtol=0.05)
    empty = call(x[:0], w, bias)
    assert empty.shape == (0, N) and len(rec.launches) == n + 1


def test_a_bool_is_not_the_int_it_equals(planned):
    """alpha=True is refused even after alpha=1 (== True, same hash) was planned: the key holds the type."""
    spec_alpha = hm._op_and_args(*operands(), "gelu", None, 1, False, True, None)[0]
    fa = hm._by_name[spec_alpha]
    x, w, bias = operands()
    k = fa.kernel("sm_80", _vec_for(x), _vec_for(w), 16, rtc=False, sms=132)
    k._loaded = rec = Recorder()
    try:
        k._launch([x, w, bias], None, fa._eager)
        call(x, w, bias, alpha=1)
        call(x, w, bias, alpha=1)
        assert len(rec.launches) == 3 and len(hm._calls) == 1
        with pytest.raises(heddle.InputError, match="alpha=True must be a Python number"):
            call(x, w, bias, alpha=True)
        call(x, w, bias, alpha=1.0)  # a float: keyed on its own, same op
        assert len(hm._calls) == 2
    finally:
        fa._eager.clear()
        k._plans.clear()


def _call_table(current_device=None, raw_stream=None, blockers=(), grad=lambda: False):
    return _C.runtime.CallTable(torch.empty, 2, exact_type=torch.Tensor, identity_types=[torch.dtype],
                                blockers=list(blockers), grad_enabled=grad, current_device=current_device,
                                raw_stream=raw_stream)


def _plan_for(args, launcher, python_reads=False):
    """A PlanTable holding a plan for args's tensors (the op of call(), launched by `launcher`); python_reads:
    the table reads tensors through their Python attributes even where heddle._C_aten is built (a test that
    monkeypatches one)."""
    tensors = [t for t in args if isinstance(t, torch.Tensor)]
    name, _ = hm._op_and_args(*tensors, "gelu", None, None, False, True, None)
    k = hm._by_name[name].kernel("sm_80", 8, 8, 16, rtc=False, sms=132)
    out, grid, kargs, parts = k._prepare(tensors)
    table = plan_table(python_reads)
    table.add(tensors, k.plan(launcher, grid, kargs, parts), [out])
    return table


def test_the_call_table_keys_values_and_checks_the_call_wide_state(monkeypatch):
    rec = Recorder()
    x, w, bias = operands()
    args = (x, w, bias, None, "gelu", 0.5, False, True, torch.bfloat16)
    source = _plan_for(args, rec)
    blocked = [False]
    t = _call_table(blockers=[lambda: blocked[0]])
    assert t.run(*args) is None and t.adopt(args, source) and len(t) == 1
    assert t.run(*args) is not None and len(rec.launches) == 1
    for other in ((x, w, bias, None, "gelu", 0.25, False, True, torch.bfloat16),   # a value
                  (x, w, bias, None, "gelu", 0.5, 0, True, torch.bfloat16),       # a type (0 == False)
                  (x, w, bias, None, "gelu", 0.5, False, True, torch.float16),    # an identity
                  (x, w, bias, None, "relu", 0.5, False, True, torch.bfloat16),   # a str
                  (x, w, None, bias, "gelu", 0.5, False, True, torch.bfloat16)):  # where the tensor is
        assert t.run(*other) is None
    assert not t.adopt((x, w, bias, [1]), source)  # a list: never keyed
    blocked[0] = True
    assert t.run(*args) is None
    blocked[0] = False
    t.dry_run = True
    assert t.run(*args) is not None and len(rec.launches) == 1  # packed, not launched
    t.dry_run = False
    assert t.adopt((*args[:5], 0.75, *args[6:]), source) and t.adopt((*args[:5], 1.0, *args[6:]), source)
    assert len(t) == 1  # over its capacity (2): emptied, then the new call
    t.clear()
    assert len(t) == 0 and t.run(*args) is None
    with pytest.raises(heddle.InputError, match="capacity"):
        _C.runtime.CallTable(torch.empty, 0, exact_type=torch.Tensor, identity_types=[], blockers=[],
                             grad_enabled=None, current_device=None, raw_stream=None)


def test_the_call_table_launches_on_the_current_device_and_its_stream(monkeypatch):
    rec = Recorder()
    x, w, bias = operands()
    args = (x, w, bias)
    source = _plan_for(args, rec, python_reads=True)  # get_device is monkeypatched below: Python reads
    current, streams = [0], []

    def raw_stream(index):
        streams.append(index)
        return 7000 + index

    t = _call_table(current_device=lambda: current[0], raw_stream=raw_stream)
    monkeypatch.setattr(torch.Tensor, "get_device", lambda self: 1)  # the CPU tensors stand for cuda:1
    assert t.adopt(args, source) is False  # the source's plan is for device -1: another signature
    source = _plan_for(args, rec, python_reads=True)  # made while the tensors say cuda:1
    assert t.adopt(args, source)
    assert t.run(*args) is None and streams == []  # cuda:0 is current: the full path switches devices
    current[0] = 1
    y = t.run(*args)
    assert y is not None and streams == [1] and rec.launches[-1][0] == 7001
    untracked = _call_table()  # no device queries (a torch without CUDA): device calls take the full path
    assert untracked.adopt(args, source) and untracked.run(*args) is None
    grad = _call_table(current_device=lambda: 1, raw_stream=raw_stream, grad=lambda: True)
    assert grad.adopt(args, source) and grad.run(*args) is not None
    wg = w.clone().requires_grad_(True)
    assert grad.adopt((x, wg, bias), source) and grad.run(x, wg, bias) is None  # under grad mode: autograd's
