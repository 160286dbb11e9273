"""The grouped calls' eager path (docs/grouped.md "Eager calls"): heddle.grouped_mm, grouped_mm_gated and
grouped_mm_masked key a repeated plain eager call in a front of their own (heddle/pytorch/grouped_front.py) and
launch it in one C++ call through the plan the grouped kernel's first launch left, with the new tensors'
addresses -- a new offs / counts tensor of the same signature included, whatever it holds. Checked without a
GPU: a recorder stands in for the driver (CPU tensors, the sm_90a kernels lowered, the TMA one's maps made by
the interpreter's encoder); every wrong input is still its InputError, on a first call and after the front was
filled; under HEDDLE_INTERPRET=1 grouped_mm's eager path (no op layer) gives the op's bytes; modes and
gradients still take the op."""
import re

import pytest
import torch

import heddle
from heddle import _C
from heddle.core import inputs
from heddle.core.errors import InputError
from heddle.core.kernel import Kernel, _vec_for
from heddle.pytorch import grouped, grouped_gated, grouped_masked
from support.interp_defs import needs_cxx
from support.launch_defs import Recorder, launch_addresses

pytestmark = needs_cxx

BF16 = torch.bfloat16
E, T, MAXT, K, N = 3, 40, 24, 64, 48


def _call(kind, seed=0, ends=(5, 5, 33)):
    """(the function, its arguments) of one call of `kind`: grouped_mm with w a transposed view of [E, N, K] and
    a per-expert bias, grouped_mm_gated with w1, w3 [E, K, N], grouped_mm_masked with a per-expert bias."""
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape):
        return (torch.randn(*shape, generator=g) * 0.5).to(BF16)
    if kind == "mm":
        return heddle.grouped_mm, dict(x=rnd(T, K), w=rnd(E, N, K).transpose(-1, -2),
                                       offs=torch.tensor(ends, dtype=torch.int32), bias=rnd(E, N), activation="silu")
    if kind == "gated":
        return heddle.grouped_mm_gated, dict(x=rnd(T, K), w1=rnd(E, K, N), w3=rnd(E, K, N),
                                             offs=torch.tensor(ends, dtype=torch.int32))
    return heddle.grouped_mm_masked, dict(x=rnd(E, MAXT, K), w=rnd(E, K, N), counts=torch.tensor(
        [min(e, MAXT) for e in ends], dtype=torch.int32), bias=rnd(E, N), activation="relu")


MODULES = {"mm": (grouped, "device_kernel"), "gated": (grouped_gated, "_device_kernel"),
           "masked": (grouped_masked, "_device_kernel")}


def _kernel(kind, tensors):
    """The sm_90a kernel of the call's signature, lowered only (grouped_mm's: TMA + wgmma), a kernel of this
    test's own (the modules' kernel caches are left alone)."""
    x, w = tensors[0], tensors[1]
    if kind == "mm":
        fd = grouped.grouped_fusion("bf16", K, N, True, "bf16", True, "silu", "bf16")
    elif kind == "gated":
        fd = grouped_gated.gated_fusion("bf16", K, N, False, "silu", "bf16")
    else:
        fd = grouped_masked.masked_fusion("bf16", K, N, False, "bf16", True, "relu", "bf16")
    fd.auto_schedule("sm_90a", -1, N, K)
    k = Kernel.build(fd, "sm_90a", vec_a=_vec_for(x), vec_b=_vec_for(w), rtc=False)
    k._map_encoder = _C.interp.encode_tensor_map_tiled
    k._loaded = Recorder()
    return k


def _kernel_tensors(kind, args):
    """The kernel's tensors of a call (what the function passes it)."""
    if kind == "mm":
        return [args["x"], args["w"].transpose(-1, -2), args["bias"], args["offs"]]
    if kind == "gated":
        return [args["x"], args["w1"], args["w3"], args["offs"]]
    return [args["x"], args["w"], args["bias"].unsqueeze(1), args["counts"]]


@pytest.fixture(params=list(MODULES))
def planned(request, monkeypatch):
    """(kind, the recorder, the module): the kernel has a plan for _call(kind)'s tensors, launched by the
    recorder, and stands for the device's kernel of CPU tensors; the front is emptied before and after."""
    kind = request.param
    module, name = MODULES[kind]
    _, args = _call(kind)
    tensors = _kernel_tensors(kind, args)
    kern = _kernel(kind, tensors)
    kern._launch(tensors, inputs.check(kern.name, kern._inputs, kern._matmul_expr, tensors))
    assert len(kern._loaded.launches) == 1 and len(kern._plans) == 1
    monkeypatch.setattr(module, name, lambda sig, ts: kern)
    module._calls.clear()
    yield kind, kern._loaded, module
    module._calls.clear()


@pytest.mark.parametrize("python_reads", [False, True])  # tensors read through ATen (where built) or Python
def test_a_repeated_call_is_one_call_through_the_front(planned, monkeypatch, python_reads):
    kind, rec, module = planned
    if python_reads:
        monkeypatch.setattr(module, "_calls", grouped.front.call_table(python_reads=True))
        monkeypatch.setattr(module, "_front", module._calls.fast_run)
    fn, args = _call(kind)
    first = args
    out = fn(**args)  # the kernel's plan launches it, the front keys the call
    assert len(rec.launches) == 2 and len(module._calls) == 1
    assert out.dtype == BF16 and out.shape == (*args["x"].shape[:-1], N)

    def no_checks(*a, **kw):
        raise AssertionError("a repeated call took the checks")
    monkeypatch.setattr(module, "_check_gated" if kind == "gated" else "_check", no_checks)
    fn, args = _call(kind, seed=1, ends=(0, 17, 29))  # the same signature at other addresses, other group ends
    out2 = fn(**args)
    assert len(rec.launches) == 3 and len(module._calls) == 1
    assert out2.shape == out.shape and out2.data_ptr() != out.data_ptr()
    # every tensor of the launch is this call's: the new offs / counts by its address, never the first call's
    launched = launch_addresses(rec.launches[-1])
    assert launched >= {t.data_ptr() for t in (*args.values(), out2) if isinstance(t, torch.Tensor)}
    assert out.data_ptr() not in launched and len(module._calls) == 1
    # each argument slot holds the same argument's tensor as the first call's launch (pick: offs where offs was)
    for name in first:
        if isinstance(first[name], torch.Tensor):
            was = _slots(rec.launches[1], first[name].data_ptr())
            assert was and _slots(rec.launches[2], args[name].data_ptr()) == was, name


def _slots(launch, address):
    """The argument indices of a recorded launch that hold `address` (a pointer, or a tensor map's global)."""
    return [i for i, (kind, v) in enumerate(launch[4])
            if (kind == "ptr" and v == address) or (kind == "bytes" and int.from_bytes(v[16:24], "little") == address)]


BAD = {  # kind -> (argument overrides of the planned call, the InputError's words)
    "mm": [(dict(offs=torch.tensor([1, 2], dtype=torch.int32)), "offs must be [E] = [3]"),
           (dict(offs=torch.tensor([1, 2, 3])), "offs has dtype torch.int64"),
           (dict(bias=torch.zeros(2, N, dtype=BF16)), "bias must be [N]"),
           (dict(activation="swish"), "activation 'swish'")],
    "gated": [(dict(w3=torch.zeros(E, K, 16, dtype=BF16)), "w3 has shape"),
              (dict(x=torch.zeros(T, K)), "x has dtype torch.float32"),
              (dict(offs=torch.tensor([1, 2], dtype=torch.int32)), "offs must be [E] = [3]")],
    "masked": [(dict(counts=torch.tensor([1, 2, 3])), "counts has dtype torch.int64"),
               (dict(x=torch.zeros(T, K, dtype=BF16)), "x must be [E, max_tokens, K]"),
               (dict(out_dtype=torch.int8), "out_dtype torch.int8")],
}


def test_every_wrong_input_is_still_an_input_error(planned):
    """On the front's first call of a signature and after the front keyed a planned one."""
    kind, rec, module = planned
    fn, args = _call(kind)
    for bad, match in BAD[kind]:
        with pytest.raises(InputError, match=re.escape(match)):
            fn(**{**args, **bad})
    fn(**args)
    assert len(module._calls) == 1
    for bad, match in BAD[kind]:
        with pytest.raises(InputError, match=re.escape(match)):
            fn(**{**args, **bad})
    assert len(rec.launches) == 2


def _spy_op(monkeypatch):
    runs = []
    op_run = grouped._run
    monkeypatch.setattr(grouped, "_run", lambda spec, ts: runs.append(1) or op_run(spec, ts))
    return runs


def test_the_eager_path_gives_the_ops_numbers_under_the_interpreter(monkeypatch):
    """HEDDLE_INTERPRET=1, CPU tensors: heddle.grouped_mm's eager call (the op's implementation not called) and the
    same call through torch.ops.heddle give the same bytes, the printed kernel interpreted; nothing is keyed (no
    plan on the CPU)."""
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    monkeypatch.setenv("HEDDLE_INTERPRET_TARGET", "sm_80")
    runs = _spy_op(monkeypatch)
    _, args = _call("mm", seed=2)
    out = heddle.grouped_mm(**args)
    assert runs == [] and len(grouped._calls) == 0
    spec, tensors = grouped.grouped_spec(**args)
    via_op = getattr(torch.ops.heddle, spec.op_name())(*tensors)
    assert runs == [1]
    assert torch.equal(out[:33], via_op[:33]) and out[:33].float().abs().sum() > 0  # rows past offs[-1]: unwritten


def test_modes_and_gradients_take_the_op(monkeypatch):
    """A function mode (torch.device(...)) or a tensor that requires grad: grouped_mm goes through its custom op
    (the dispatcher, autograd: the backward reaches x)."""
    runs = _spy_op(monkeypatch)
    _, args = _call("mm", seed=3)
    heddle.grouped_mm(**args)
    assert runs == []
    with torch.device("cpu"):
        heddle.grouped_mm(**args)
    assert runs == [1]
    x = args.pop("x").clone().requires_grad_()
    heddle.grouped_mm(x, **args)[:33].float().sum().backward()
    assert runs[0] == 1 and len(runs) >= 2 and x.grad is not None and x.grad.abs().sum() > 0


def test_a_mode_or_a_gradient_is_never_served_by_the_front(planned, monkeypatch):
    """After the front keyed a call: the same call under a function mode (torch.device(...)) or with x requiring
    grad runs the checks again (the front's mode and grad rules), and is not keyed; the plain call is served."""
    kind, rec, module = planned
    fn, args = _call(kind)
    fn(**args)
    assert len(module._calls) == 1
    name = "_check_gated" if kind == "gated" else "_check"
    checks, check = [], getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a: checks.append(1) or check(*a))
    with torch.device("cpu"):
        fn(**args)
    assert checks == [1]
    with torch.no_grad():  # no gradient to record: served
        fn(**{**args, "x": args["x"].clone().requires_grad_()})
    assert checks == [1]
    fn(**{**args, "x": args["x"].clone().requires_grad_()})
    assert checks == [1, 1] and len(module._calls) == 1
    fn(**args)
    assert checks == [1, 1]
