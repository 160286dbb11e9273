"""Eager calls through a launch plan (runtime/launch_plan.h, Kernel.run_planned), without a GPU: a plan
made from one call binds another call's tensors to exactly the arguments the full path (prepare) gives
them; an address that breaks the kernel's alignment or a tensor map's address is refused (the full path
runs instead); the plan table (_C.runtime.PlanTable) tells call signatures apart in C++; a fake driver
sees the second call launched through the plan; heddle.matmul skips the custom op only for plain eager
calls."""
import pytest
import torch

import heddle
from heddle import _C
from heddle.core import inputs
from heddle.core.kernel import plan_table
from heddle.pytorch.matmul import MatmulSpec, eager_call_ok, fused_matmul_op
from support.launch_defs import Recorder, hopper_kernel, kernel_for, operands

rt = _C.runtime


def make_plan(k, tensors, launcher=None):
    out, grid, args, parts = k._prepare(tensors, k._map_encoder)
    return k.plan(launcher or Recorder(), grid, args, parts), out, grid, args


def test_a_plan_binds_another_calls_tensors_to_the_arguments_prepare_gives():
    k = kernel_for()
    first = operands()
    plan, out, grid, args = make_plan(k, first)
    assert plan.args((*first, out)) == args and plan.grid == tuple(grid)
    second = operands()  # same signature, other addresses
    table = plan_table()
    table.add(first, plan, [out])
    assert second in table
    out2, grid2, want = k.prepare(second)
    got = plan.args((*second, out2))
    assert got == want and grid2 == grid
    ptrs = [v for kind, v in got if kind == "ptr"]
    assert ptrs == [second[0].data_ptr(), second[1].data_ptr(), second[2].data_ptr(), out2.data_ptr()]


def test_an_address_the_vector_copies_cannot_take_breaks_the_plan():
    k = kernel_for()
    first = operands()
    plan, out, _, _ = make_plan(k, first)
    odd = operands(offset=1)  # x starts 2 bytes into a 16-byte copy
    table = plan_table()
    table.add(first, plan, [out])
    assert odd not in table  # another alignment class: another plan
    assert plan.args((*odd, out)) is None
    with pytest.raises(heddle.InputError, match="input 'a'.*not aligned"):
        k.prepare(odd)  # what the full path says instead


def _as_bytes(kind, value):
    """What the driver reads for a (kind, value) argument: a blob as it is, a scalar little-endian and
    zero-extended to the 8 bytes its slot holds (runtime/launch.h KernelArg)."""
    import struct
    if kind == "bytes":
        return value
    raw = struct.pack({"ptr": "<Q", "i64": "<q", "i32": "<i", "f32": "<f"}[kind], value)
    return raw + bytes(8 - len(raw))


def test_the_packed_argument_array_holds_the_bound_arguments():
    """LaunchPlan packs the driver's array without copying the plan's arguments: scalars and addresses
    by value, tensor maps read in place from the plan. Each pointer's bytes equal the (kind, value) list."""
    k = kernel_for()
    first = operands()
    plan, out, _, _ = make_plan(k, first)
    second = operands()
    out2 = torch.empty_like(out)
    want = [_as_bytes(kind, v) for kind, v in plan.args((*second, out2))]
    assert plan.packed((*second, out2)) == want
    assert plan.packed((*operands(offset=1), out2)) is None  # a broken slot packs nothing
    (a, b, hout), args, _, hplan = hopper_plan()
    got = hplan.packed((a, b, hout))
    assert got == [_as_bytes(kind, v) for kind, v in args] and any(len(g) == 128 for g in got)  # the tensor maps
    a2, out2 = a.clone(), torch.empty_like(hout)  # other addresses: the maps patched, packed like the rest
    assert hplan.packed((a2, b, out2)) == [_as_bytes(kind, v) for kind, v in hplan.args((a2, b, out2))]


def hopper_plan():
    """A Hopper kernel's plan on the CPU (tensor maps encoded by the interpreter's encoder): ((a, b, out),
    arguments, plan parts, plan)."""
    k = hopper_kernel()
    a, b = torch.randn(128, 256).bfloat16(), torch.randn(256, 256).bfloat16()
    out, grid, args, parts = k._prepare((a, b), tensor_map_encoder=k._map_encoder, sms=4)
    return (a, b, out), args, parts, k.plan(Recorder(), grid, args, parts)


def test_a_plan_refuses_slots_that_are_not_pointer_arguments():
    k = kernel_for()
    out, grid, args, parts = k._prepare(operands())
    scalar = next(i for i, (kind, _) in enumerate(args) if kind != "ptr")
    with pytest.raises(heddle.InputError, match="not a pointer argument"):
        rt.LaunchPlan(Recorder(), grid, (k.lowered.threads, 1, 1), 0, args, [(scalar, 0, 1)])
    _, hargs, hparts, _ = hopper_plan()
    _, tensor, spec = hparts.maps[0]
    scalar = next(i for i, (kind, _) in enumerate(hargs) if kind != "bytes")
    with pytest.raises(heddle.InputError, match="not a tensor-map"):  # a map on an argument that is no map
        rt.LaunchPlan(Recorder(), (1, 1, 1), (128, 1, 1), 0, hargs, [], maps=[(scalar, tensor, spec)])


def test_the_plan_table_tells_every_part_of_the_signature_apart():
    k = kernel_for()
    first = operands()
    plan, out, _, _ = make_plan(k, first)
    table = plan_table()
    table.add(first, plan, [out])
    x, w, bias = operands()
    assert (x, w, bias) in table and len(table) == 1
    assert (x[:69], w, bias) not in table                          # shape
    assert (x, w.t().contiguous().t(), bias) not in table          # strides
    assert (x, w.half(), bias) not in table                        # dtype
    assert (x, w) not in table and (x, w, bias, bias) not in table  # tensor count
    assert (x, w, torch.randn(96).bfloat16()[:96]) in table
    assert (x, w, "bias") not in table and table.run(0, (x, w, None)) is None  # not tensors: the full path
    y = table.run(0, (x, w, bias), dry_run=True)  # CPU tensors: packed, not launched
    assert y.shape == out.shape and y.dtype == out.dtype and y.data_ptr() != out.data_ptr()
    # heddle.matmul's eager path also asks for exactly torch.Tensor and, under grad mode, no requires_grad
    sub = x.as_subclass(_Sub)
    assert table.run(0, (sub, w, bias), True) is not None and table.run(0, (sub, w, bias), True, torch.Tensor) is None
    wg = w.clone().requires_grad_(True)
    assert table.run(0, (x, wg, bias), True, torch.Tensor, False) is not None
    assert table.run(0, (x, wg, bias), True, torch.Tensor, True) is None
    assert table.run(0, (x, w, bias), True, torch.Tensor, True) is not None
    table.clear()
    assert (x, w, bias) not in table and table.run(0, (x, w, bias), dry_run=True) is None


class _Sub(torch.Tensor):
    pass


def test_the_plan_table_forgets_everything_beyond_its_capacity():
    k = kernel_for()
    table = rt.PlanTable(torch.empty, 2)
    for m in (70, 71, 72):
        t = operands(m=m)
        plan, out, _, _ = make_plan(k, t)
        table.add(t, plan, [out])
    assert len(table) == 1 and operands(m=72) in table and operands(m=70) not in table
    with pytest.raises(heddle.InputError, match="capacity"):
        rt.PlanTable(torch.empty, 0)


def test_second_call_launches_through_the_plan():
    """The fake driver of test_launch_args: the first call takes the full path and leaves a plan, the
    second (same signature, new tensors) launches through it with the new addresses."""
    k = kernel_for()
    k._loaded = rec = Recorder()
    first, second = operands(), operands()
    assert k.run_planned(first) is None  # no plan yet
    k._launch(first, None)
    out = k.run_planned(second)
    assert out is not None and out.shape == (70, 96)
    assert len(rec.launches) == 2
    _, _, want = k.prepare(second)
    got = rec.launches[1][4]
    assert [a for a in got if a[0] != "ptr"] == [a for a in want if a[0] != "ptr"]
    assert [v for kind, v in got if kind == "ptr"] == [t.data_ptr() for t in second] + [out.data_ptr()]
    assert rec.launches[1][:4] == rec.launches[0][:4] and rec.launches[1][3] == 0  # CPU tensors: stream 0
    assert k.run_planned(operands(m=71)) is None  # another M: another signature
    assert k.run_planned(operands(offset=1)) is None


def test_a_repeated_kernel_call_is_one_plan_table_call():
    """Kernel.__call__ of a planned signature: PlanTable.call finds the plan, the stream (CPU tensors: 0, no device
    query), allocates the output like the first call's and launches; nothing else, no full path."""
    k = kernel_for()
    k._loaded = rec = Recorder()
    first, second = operands(), operands()
    k._launch(first, None)
    want_out, _, want = k.prepare(second)
    out = k(*second)
    assert k.full_path_calls == 1 and len(rec.launches) == 2 and rec.launches[1][3] == 0
    assert (out.shape, out.dtype, out.device, out.requires_grad) == (want_out.shape, want_out.dtype,
                                                                     want_out.device, False)
    got = rec.launches[1][4]
    assert [a for a in got if a[0] != "ptr"] == [a for a in want if a[0] != "ptr"]
    assert [v for kind, v in got if kind == "ptr"] == [t.data_ptr() for t in second] + [out.data_ptr()]
    # the rules run() applies: exactly this type, nothing requiring grad; another signature: no plan
    assert k._plans.call((second[0].as_subclass(_Sub), *second[1:]), torch.Tensor) is None
    wg = second[1].clone().requires_grad_(True)
    assert k._plans.call((second[0], wg, second[2]), torch.Tensor, True) is None
    assert k._plans.call(operands(m=71)) is None and k._plans.call((1, 2, 3)) is None
    assert len(rec.launches) == 2


def test_eager_call_ok_only_for_plain_eager_calls():
    x, w = torch.randn(8, 16), torch.randn(16, 8)
    assert eager_call_ok([x, w], "cpu")
    assert not eager_call_ok([x, w], "cuda")  # the op's device
    wg = w.clone().requires_grad_(True)
    assert not eager_call_ok([x, wg], "cpu")  # autograd records the op
    with torch.no_grad():
        assert eager_call_ok([x, wg], "cpu")
    with torch.device("cpu"):  # a torch function mode
        assert not eager_call_ok([x, w], "cpu")
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        fx = mode.from_tensor(x)
        assert not eager_call_ok([fx, fx], "cpu")
    from torch.fx.experimental.proxy_tensor import make_fx
    seen = []
    make_fx(lambda a: seen.append(eager_call_ok([a, a], "cpu")) or a + 1)(x)
    assert seen == [False]  # tracing: the op must appear in the graph
    seen.clear()
    torch.func.vmap(lambda a: seen.append(eager_call_ok([a, a], "cpu")) or a)(x)
    assert seen == [False]


def test_heddle_matmul_on_cpu_still_goes_through_the_op_and_its_checks():
    x, w = torch.randn(8, 64).bfloat16(), torch.randn(64, 32).bfloat16()
    y = heddle.matmul(x, w)
    torch.testing.assert_close(y.float(), x.float() @ w.float(), atol=2e-2, rtol=2e-2)
    spec = MatmulSpec(dtype="bf16", batched=False, batched_b=False, k=64, n=32, trans_a=False, trans_b=False,
                      bias=None, residual=None, activation=None, alpha=None, out_dtype="bf16")
    fm = fused_matmul_op(spec)
    assert fm.run([x, w]).shape == (8, 32) and len(fm._eager) == 0  # CPU results are not planned
    with pytest.raises(heddle.InputError, match="input 'b' axis 0"):
        fm.run([x, torch.randn(63, 32).bfloat16()])


def _not_their_memory(x, w, bias):
    """The calls of (x, w, bias) with one tensor whose memory does not hold its value: a negative view
    (torch._neg_view; x.conj().imag makes one too) of each tensor, and a ZeroTensor (no memory at all)."""
    neg = torch._neg_view
    return [(neg(x), w, bias), (x, neg(w), bias), (x, w, neg(bias)),
            (torch._efficientzerotensor(x.shape, dtype=x.dtype), w, bias)]


def test_a_tensor_whose_memory_is_not_its_value_takes_no_plan():
    """The plan tables key what a kernel reads (shape, strides, dtype, device, address class): a negative
    view has all of its tensor's, so the signature reads the bit too and refuses it (as a ZeroTensor's null
    address); the full path resolves it, and Kernel.prepare, which takes the addresses, names it."""
    k = kernel_for()
    k._loaded = rec = Recorder()
    k._launch(operands(), None)  # a plan for this signature in the kernel's own table
    x, w, bias = operands()
    for call in _not_their_memory(x, w, bias):
        assert call not in k._plans and k._plans.run(0, call, True) is None and k.run_planned(call) is None
    assert (x, w, bias) in k._plans and k.run_planned((x, w, bias)) is not None and len(rec.launches) == 2
    plan, out, _, _ = make_plan(k, (x, w, bias))
    assert k._plans.add((torch._neg_view(x), w, bias), plan, [out]) is False  # never found: not remembered
    with pytest.raises(heddle.InputError, match="input 'a' has torch's negative bit.*a.resolve_neg()"):
        k.prepare((torch._neg_view(x), w, bias))
    with pytest.raises(heddle.InputError, match="input 'a' is a ZeroTensor.*torch.zeros"):
        k.prepare(_not_their_memory(x, w, bias)[3])
    # what the eager full paths call first: the same values in plain tensors; plain calls untouched
    for call in _not_their_memory(x, w, bias):
        got = inputs.materialize(call)
        assert not any(t.is_neg() or t._is_zerotensor() for t in got)
        assert all(torch.equal(g, c) for g, c in zip(got, call))
    plain = (x, w, bias)
    assert inputs.materialize(plain) is plain
    # the conjugate bit: complex tensors only (a real one cannot carry it), which no dtype check takes
    c = torch.randn(70, 64, dtype=torch.complex64).conj()
    with pytest.raises(heddle.InputError, match="dtype torch.complex64"):
        k.bind((c, w, bias))
    with pytest.raises(heddle.InputError, match="'a' has dtype torch.complex64"):
        heddle.matmul(c, c.t())



def test_the_bound_call_keeps_its_table_alive_and_raises_heddle_errors():
    """PlanTable.fast_call (what Kernel.__call__ holds): call() as a builtin bound to the table, no pybind11
    dispatch; it outlives the table's own name and raises as the binding does."""
    import gc
    k = kernel_for()
    rec = Recorder()
    first = operands()
    plan, out, _, _ = make_plan(k, first, rec)
    table = plan_table()
    table.add(first, plan, [out])
    call = table.fast_call
    del table
    gc.collect()
    second = operands()
    o = call(second)
    assert o is not None and o.shape == (70, 96) and len(rec.launches) == 1
    assert [v for kind, v in rec.launches[0][4] if kind == "ptr"] == [t.data_ptr() for t in (*second, o)]
    assert call((1, 2)) is None and call(operands(m=71)) is None  # no signature; another signature
    with pytest.raises(heddle.InputError, match="one argument: the tensors"):
        call(first, first)
