"""Hopper calls on their launch plan (issue 31, item 1; runtime/launch_plan.h), without a GPU: a plan keeps its
encoded tensor maps and gives each call's maps that call's addresses (cuTensorMapReplaceAddress, or the map
encoded again from its description), so repeated calls with rotating inputs and fresh outputs never take the
full path; a misaligned address still does, and gets TMA's InputError; split-K and stream-K plans take the
workspace of their call's stream, never another stream's or one replaced by a larger one.

In this process the maps come from the interpreter's encoder (its layout: the global address at byte 16) and a
recorder stands in for the driver; in a subprocess the stand-in libcuda (tests/fake_cuda/libcuda_fake.c) runs
the C++ launch path itself: its maps name their address, and its launches log the maps they were given."""
import os
import struct
import subprocess
import sys

import pytest
import torch

import heddle
from support.env import build_fake_libcuda, fake_cuda_env, requires_nvrtc
from heddle import _C
from heddle.core import inputs
from support.wgmma_defs import inputs as make_inputs
from support.launch_defs import Recorder, hopper_kernel
from support.split_k_defs import sm90 as split_k_sm90
from support.stream_k_defs import sm90 as stream_k_sm90

rt = _C.runtime
INTERP = _C.interp.encode_tensor_map_tiled


def map_address(blob: bytes) -> int:
    """The global address of a map the interpreter's encoder made (hrt_ptx.h TensorMap: magic, 8 bytes of
    fields, padding, then the address at byte 16)."""
    return struct.unpack_from("<Q", blob, 16)[0]


def operands(m=128):
    return torch.randn(m, 256).bfloat16(), torch.randn(256, 256).bfloat16()


def first_call(k, tensors):
    """The full path of a call (what Kernel.__call__ does for CUDA tensors), leaving the plan behind."""
    return k._launch(tensors, inputs.check(k.name, k._inputs, k._matmul_expr, tensors))


def launched_maps(launch):
    """The addresses of the tensor maps a recorded launch was given."""
    return [map_address(v) for kind, v in launch[4] if kind == "bytes"]


def test_a_plan_gives_another_calls_tensors_the_maps_the_full_path_encodes():
    k = hopper_kernel()
    a, b = operands()
    out, grid, args, parts = k._prepare((a, b), k._map_encoder, sms=4)
    plan = k.plan(Recorder(), grid, args, parts)
    assert parts.slots == [] or all(align == 1 for _, _, align in parts.slots)  # TMA reads A and B, stores D
    assert sorted(t for _, t, _ in parts.maps) == [0, 1, 2]  # a map over a, b and the output
    assert sorted(map_address(v) for kind, v in args if kind == "bytes") == sorted(
        t.data_ptr() for t in (a, b, out))
    a2, b2 = operands()
    out2, grid2, want = k.prepare((a2, b2), tensor_map_encoder=INTERP, sms=4)
    assert plan.args((a2, b2, out2)) == want and grid2 == grid  # every map byte as a fresh encoding's
    assert plan.args((a, b, out)) == args  # the plan's own addresses: its own maps


def test_a_misaligned_address_takes_the_full_path_and_gets_the_input_error():
    k = hopper_kernel()
    k._loaded = Recorder()
    a, b = operands()
    first_call(k, (a, b))
    odd = torch.randn(128 * 256 + 4).bfloat16()[4:].view(128, 256)  # 8 bytes into a 16-byte line
    out, _, _, parts = k._prepare((a, b), k._map_encoder, sms=4)
    plan = k.plan(Recorder(), (1, 1, 1), k.prepare((a, b), tensor_map_encoder=INTERP, sms=4)[2], parts)
    assert plan.args((odd, b, out)) is None  # the map slot breaks: nothing bound
    assert (odd, b) not in k._plans and k.run_planned((odd, b)) is None  # another address class: no plan
    with pytest.raises(heddle.InputError, match=r"input 'a'.*TMA.*base address 0x[0-9a-f]+ is not 16-byte aligned"):
        first_call(k, (odd, b))
    assert k.full_path_calls == 2 and len(k._loaded.launches) == 1


def test_repeated_calls_with_rotating_inputs_and_fresh_outputs_take_the_plan():
    """A loop keeping its previous outputs alive (so no output comes back at an old address) and inputs
    rotating over three sets: one full-path call, then every call through the plan, each launch's maps
    holding that call's addresses."""
    k = hopper_kernel()
    k._loaded = rec = Recorder()
    sets = [operands() for _ in range(3)]
    outs = [first_call(k, sets[0])]
    for i in range(1, 7):
        a, b = sets[i % 3]
        outs.append(k(a, b))
        assert sorted(launched_maps(rec.launches[-1])) == sorted([a.data_ptr(), b.data_ptr(), outs[-1].data_ptr()])
    assert k.full_path_calls == 1 and len(rec.launches) == 7 and len({o.data_ptr() for o in outs}) == 7
    assert all(o.shape == (128, 256) and o.dtype == torch.bfloat16 for o in outs)


def test_heddle_matmul_calls_of_an_sm90a_kernel_take_the_plan():
    """The front (CallTable) and the op's table adopt a Hopper plan like any other."""
    from heddle.core.kernel import _vec_for
    from heddle.pytorch import matmul as hm
    x, w = operands(16)
    name, args = hm._op_and_args(x, w, None, None, None, None, False, False, None)
    fm = hm._by_name[name]
    k = fm.kernel("sm_90a", _vec_for(x), _vec_for(w), 16, rtc=False, sms=132)
    k._map_encoder, k._loaded = INTERP, Recorder()
    k._launch(args, inputs.check(k.name, k._inputs, k._matmul_expr, args), fm._eager)
    hm._calls.clear()
    try:
        keep = []
        for _ in range(4):
            x, w = operands(16)
            keep.append(heddle.matmul(x, w))
            assert sorted(launched_maps(k._loaded.launches[-1])) == sorted(t.data_ptr() for t in (x, w, keep[-1]))
        assert k.full_path_calls == 1 and len(k._loaded.launches) == 5 and len(hm._calls) == 1
    finally:
        fm._eager.clear()
        k._plans.clear()
        hm._calls.clear()


# --- split-K and stream-K: the workspace of the call's stream -------------------------------------

WORKSPACE_KERNELS = [("split-k", lambda: split_k_sm90(2)), ("stream-k", lambda: stream_k_sm90(11))]


def _workspace_kernel(make):
    k = heddle.Kernel.build(make(), "sm_90a", rtc=False)
    k._map_encoder, k._loaded = INTERP, Recorder()
    return k


def _ptr(launch, k, name):
    names = [p[0] for p in k.lowered.params]
    kind, value = launch[4][names.index(name)]
    assert kind == "ptr"
    return value


@pytest.mark.parametrize("name,make", WORKSPACE_KERNELS, ids=[w[0] for w in WORKSPACE_KERNELS])
def test_workspace_kernels_take_their_plan_with_the_streams_workspace(name, make):
    k = _workspace_kernel(make)
    assert k.lowered.needs_workspace
    keep = [first_call(k, make_inputs(k.fusion, 70, seed=0))]
    ws, flags = k._workspaces[("cpu", 0)]
    for seed in (1, 2, 3):
        tensors = make_inputs(k.fusion, 70, seed=seed)
        keep.append(k(*tensors))
        launch = k._loaded.launches[-1]
        assert (_ptr(launch, k, "ws"), _ptr(launch, k, "flags")) == (ws.data_ptr(), flags.data_ptr())
        assert sorted(launched_maps(launch)) == sorted(t.data_ptr() for t in tensors[:2])  # A and B by TMA
        assert _ptr(launch, k, "D") == keep[-1].data_ptr()  # the direct store
    assert k.full_path_calls == 1 and len(k._loaded.launches) == 4


@pytest.mark.parametrize("name,make", WORKSPACE_KERNELS, ids=[w[0] for w in WORKSPACE_KERNELS])
def test_a_plan_never_takes_another_streams_workspace_nor_a_replaced_one(name, make):
    k = _workspace_kernel(make)
    small = make_inputs(k.fusion, 70)
    first_call(k, small)
    out, grid, args, parts = k._prepare(small, k._map_encoder)
    plan = k.plan(Recorder(), grid, args, parts)
    ws, flags = k._workspaces[("cpu", 0)]
    bound = plan.args((*small, out))
    assert ("ptr", ws.data_ptr()) in bound and ("ptr", flags.data_ptr()) in bound
    assert plan.args((*small, out), stream=7) is None  # stream 7 has no workspace yet: the full path makes one
    need = parts.workspace[2]
    ws7, flags7 = torch.empty(need * 64 * 64), torch.zeros(need, dtype=torch.int32)
    k._ws_table.set(-1, 7, ws7, flags7, need)
    bound7 = plan.args((*small, out), stream=7)
    assert ("ptr", ws7.data_ptr()) in bound7 and ("ptr", flags7.data_ptr()) in bound7
    k._ws_table.set(-1, 9, ws7, flags7, need - 1)
    assert plan.args((*small, out), stream=9) is None  # too small for this signature
    # a larger problem grows stream 0's workspace: the small plan then takes the new one, the old is kept
    first_call(k, make_inputs(k.fusion, 1000))
    ws2, flags2 = k._workspaces[("cpu", 0)]
    assert ws2.data_ptr() != ws.data_ptr() and flags2.numel() >= 2 * flags.numel()
    assert any(r[0] is ws for r in k._retired)
    bound = plan.args((*small, out))
    assert ("ptr", ws2.data_ptr()) in bound and ("ptr", flags2.data_ptr()) in bound
    assert k._ws_table.get(-1, 0) == (ws2.data_ptr(), flags2.data_ptr(), flags2.numel())


# --- the C++ launch path against the stand-in libcuda ----------------------------------------------

_DRIVER_CALLS = r"""
import os, sys, torch, heddle
from heddle import _C
from heddle.core import inputs
from heddle.pytorch.matmul import MatmulSpec
spec = MatmulSpec(dtype="bf16", batched=False, batched_b=False, k=256, n=256, trans_a=False, trans_b=False,
                  bias=None, residual=None, activation=None, alpha=None, out_dtype="bf16")
fd = spec.build_fusion()
fd.auto_schedule("sm_90a", -1, 256, 256)
k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
k._loaded = _C.runtime.Kernel.load(_C.runtime.compile(AXPY, "axpy.cu", "sm_90a"), "axpy")  # the fake runs nothing
def ops():
    return torch.randn(128, 256).bfloat16(), torch.randn(256, 256).bfloat16()
t = ops()
_, _, args = k.prepare(t)
os.environ["FAKE_CUDA_PARAMS"] = ",".join(str(len(v) if kd == "bytes" else 4 if kd in ("i32", "f32") else 8)
                                          for kd, v in args)
open(os.environ["FAKE_CUDA_LOG"], "w").close()
keep = [k._launch(t, inputs.check(k.name, k._inputs, k._matmul_expr, t))]
print("call", *sorted(x.data_ptr() for x in (*t, keep[-1])))
held = [t]  # every call's inputs stay alive: no later tensor comes back at an earlier one's address
for i in range(3):
    t = ops()
    held.append(t)
    keep.append(k(*t))
    print("call", *sorted(x.data_ptr() for x in (*t, keep[-1])))
print("full", k.full_path_calls)
"""


def _run_driver_calls(lib, log):
    from support.launch_defs import AXPY
    env = {**fake_cuda_env(lib, log, log_args=1), "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", f"AXPY = {AXPY!r}\n" + _DRIVER_CALLS], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    calls = [[int(x) for x in line.split()[1:]] for line in proc.stdout.splitlines() if line.startswith("call")]
    full = [line for line in proc.stdout.splitlines() if line.startswith("full")]
    return calls, full, log.read_text().splitlines()


def _launch_maps(line):
    return sorted(int(a[4:], 16) for a in line.split(" args=")[1].split(",") if a.startswith("map:"))


def test_a_map_with_a_32_byte_interleave_takes_only_32_byte_aligned_addresses():
    """TMA's address rule per map (cuda_driver.h tensorMapAddressAlignment; CUDA Driver API, cuTensorMapEncodeTiled):
    16 bytes, 32 with CU_TENSOR_MAP_INTERLEAVE_32B. An address the map cannot take breaks the plan, so the call
    takes the full path and its checks, instead of handing the driver a map it refuses."""
    line = torch.zeros(4096, dtype=torch.uint8)
    base = (-line.data_ptr()) % 64  # a 64-byte aligned start inside it
    at = {off: line[base + off:base + off + 1024] for off in (0, 16, 32)}

    def encode(data_type, address, *rest, **options):  # the map names its address (as the recorder reads it)
        return struct.pack("<Q", address) + bytes(120)

    for interleave, takes in ((0, {0, 16, 32}), (2, {0, 32})):
        spec = (0, at[0].data_ptr(), [1024, 1, 1], [1024, 1024], [32, 1, 1], [1, 1, 1], interleave, 0, 0, 0)
        plan = rt.LaunchPlan(Recorder(), (1, 1, 1), (32, 1, 1), 0, [("bytes", encode(0, at[0].data_ptr()))], [],
                             maps=[(0, 0, spec)], encoder=encode)
        for off, t in at.items():
            bound = plan.args((t,))
            assert (bound is not None) == (off in takes), (interleave, off)
            if bound is not None:
                assert struct.unpack_from("<Q", bound[0][1])[0] == t.data_ptr()  # the call's address, patched


@requires_nvrtc
def test_the_driver_replaces_the_address_of_each_map_per_call(fake_libcuda, tmp_path):
    calls, full, lines = _run_driver_calls(fake_libcuda, tmp_path / "log")
    assert full == ["full 1"]
    launches = [l for l in lines if l.startswith("cuLaunchKernel")]
    assert [_launch_maps(l) for l in launches] == calls  # every launch's maps hold its call's a, b and output
    encodes = [l for l in lines if l.startswith("cuTensorMapEncodeTiled")]
    replaces = [l for l in lines if l.startswith("cuTensorMapReplaceAddress")]
    assert len(encodes) == 3 and len(replaces) == 9  # three maps encoded once, then patched per call


@requires_nvrtc
def test_without_cuTensorMapReplaceAddress_the_maps_are_encoded_again_in_cpp(tmp_path):
    old = build_fake_libcuda(tmp_path / "libcuda.so.1", "-DFAKE_CUDA_NO_REPLACE")
    calls, full, lines = _run_driver_calls(old, tmp_path / "log")
    assert full == ["full 1"]
    assert [_launch_maps(l) for l in lines if l.startswith("cuLaunchKernel")] == calls
    encodes = [l for l in lines if l.startswith("cuTensorMapEncodeTiled")]
    # three maps encoded by the full call, then again for each later call whose tensor moved: at most 3 x 3 more
    # (a map whose tensor came back at the same address, as a freed CPU output can, needs no new encode)
    assert 3 < len(encodes) <= 12 and not any(l.startswith("cuTensorMapReplaceAddress") for l in lines)
