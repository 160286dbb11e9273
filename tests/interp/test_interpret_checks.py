"""What the interpreter reports and refuses: findings name printed-source lines, threads and buffers; a
printer bug that NVRTC compiles and the kernel-IR simulator cannot see is caught; inline asm without a
runtime primitive, a missing host compiler and launch arguments that do not match the printed
signature are clear errors; HEDDLE_INTERPRET=1 routes heddle.matmul and Kernel.op through it."""
import os
import subprocess
import sys

import pytest
import torch

import heddle
from heddle.interpret import _Mutated, interpret, source_mutants
from support.interp_defs import inputs, kernel, needs_cxx, sm80, sm90

pytestmark = needs_cxx
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def mutant(k, kind, needle):
    return next(m for m in source_mutants(k.source) if m.kind == kind and needle in m.what)


def test_race_report_names_lines_threads_and_bytes():
    k = kernel(sm80(stages=3, prefetch=2, k=32 * 7), "sm_80")
    m = next(m for m in source_mutants(k.source) if m.kind == "delete_sync" and m.what == "heddle::block_sync();"
             and "sync 3" in k.source.split("\n")[m.line - 1])
    r = interpret(_Mutated(k, m.source), *inputs(k.fusion, 104, seed=1), max_findings=3)
    assert r.races, r.report()
    text = r.races[0]
    assert "race on shared bytes" in text and "thread " in text and "warp " in text
    assert "line " in text and ("copy_tile_async" in text or "acc.step" in text), text


def test_flipped_parity_is_a_deadlock_naming_each_wait():
    k = kernel(sm90("3role", stages=3, prefetch=1), "sm_90a")
    m = mutant(k, "flip_parity", "fullC")
    r = interpret(_Mutated(k, m.source), *inputs(k.fusion, 130, seed=1), sms=2)
    assert r.deadlocks, r.report()
    assert "mbarrier.try_wait.parity" in r.deadlocks[0] and "threads " in r.deadlocks[0]


def test_short_expect_tx_is_reported():
    k = kernel(sm90("pipeline", stages=3, prefetch=1), "sm_90a")
    m = mutant(k, "shrink_expect_tx", "expect_tx")
    r = interpret(_Mutated(k, m.source), *inputs(k.fusion, 130, seed=1))
    assert not r.ok
    assert any("TMA load" in t or "transaction bytes" in t or "race" in t for _, t in r.findings), r.report()


def test_missing_proxy_fence_is_reported():
    k = kernel(sm90("3role", stages=3, prefetch=1), "sm_90a")
    m = mutant(k, "delete_sync", "fence_proxy_async")
    r = interpret(_Mutated(k, m.source), *inputs(k.fusion, 130, seed=1), sms=2)
    assert any("fence.proxy.async" in t for t in r.races), r.report()


def test_printer_bug_caught_by_interpret_missed_by_nvrtc_and_the_simulator():
    fd = sm80(stages=3, prefetch=1, k=32 * 4)
    ins = inputs(fd, 100, seed=2)  # M = 100: the last m-tile is ragged
    env = dict(os.environ, HEDDLE_TEST_PRINTER_BUG="epilogue_row_bound")
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "import heddle, torch\n"
        "from support.interp_defs import sm80, inputs\n"
        "from heddle.interpret import interpret\n"
        "from heddle import verify\n"
        "fd = sm80(stages=3, prefetch=1, k=32 * 4)\n"
        "low = fd.lower('sm_80')\n"
        "assert 'row > M' in low.source\n"
        "ins = inputs(fd, 100, seed=2)\n"
        "print('SIM_OK', verify.simulate(low, ins).ok)\n"
        "if heddle.nvrtc_available():\n"
        "    print('NVRTC_OK', fd.compile('sm_80').binary is not None)\n"
        "r = interpret(low, *ins, fusion=fd)\n"
        "print('INTERP_OK', r.ok)\n"
        "print(r.report())\n" % os.path.join(ROOT, "tests"))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "SIM_OK True" in p.stdout          # the simulator runs the kernel IR: it never sees the printed text
    if heddle.nvrtc_available():
        assert "NVRTC_OK True" in p.stdout    # the bug compiles
    assert "INTERP_OK False" in p.stdout
    assert "outside every tensor" in p.stdout and "heddle::store_pair(D + at" in p.stdout, p.stdout
    # without the switch, the same kernel is clean
    assert interpret(kernel(fd, "sm_80"), *ins).ok


def test_unknown_inline_asm_is_a_clear_error():
    k = kernel(sm80(stages=2, prefetch=1, k=32 * 3), "sm_80")
    src = k.source.replace("  acc.zero();\n", "  acc.zero();\n  asm volatile(\"nanosleep.u32 20;\");\n", 1)
    with pytest.raises(heddle.CompileError, match="inline asm statement.*nanosleep.*no primitive"):
        interpret(_Mutated(k, src), *inputs(k.fusion, 64, seed=1))


def test_no_host_compiler_is_runtime_unavailable():
    code = ("import heddle\n"
            "try:\n    heddle._C.interp.host_compiler()\nexcept heddle.RuntimeUnavailable as e:\n    print('UNAVAILABLE', e)\n")
    env = dict(os.environ, HEDDLE_HOST_CXX="/nonexistent/g++")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "UNAVAILABLE" in p.stdout and "HEDDLE_HOST_CXX" in p.stdout, p.stdout + p.stderr


def test_launch_arguments_checked_against_the_printed_signature():
    k = kernel(sm80(stages=2, prefetch=1, k=32 * 3), "sm_80")
    lib = heddle._C.interp.build(k.source, k.name)
    kinds = [kind for kind, _ in lib.params()]
    assert kinds[:3] == ["ptr", "ptr", "i32"]  # A, B, M
    args = [("ptr", 0), ("ptr", 0), ("i64", 1)] + [("i32", 0)] * (len(kinds) - 3)
    with pytest.raises(heddle.InputError, match="parameter 2 .*'M'.* is i32 .* passes 'i64'"):
        lib.run([1, 1, 1], [128, 1, 1], 0, args, [p[0] for p in k.lowered.params], [])


def test_a_negative_view_is_read_as_its_value():
    """The interpreter hands the kernel the tensors' memory, as a launch does: a negative view (whose memory
    holds its negation) is resolved first, else the kernel would compute with -a (tests/runtime/test_launch_plan.py:
    the plan tables and Kernel.prepare refuse one)."""
    k = kernel(sm80(stages=2, prefetch=1, k=32 * 3), "sm_80")  # the kernel of the test above: one host build
    a, b, bias = inputs(k.fusion, 64, seed=1)
    r = interpret(k, torch._neg_view(a), b, bias)
    assert r.ok, r.report()
    want = torch.nn.functional.gelu(-a.double() @ b.double() + bias.double())
    torch.testing.assert_close(r.output.double(), want, atol=0.05, rtol=0.02)


def test_tensor_map_encoder_refuses_what_the_driver_refuses():
    enc = heddle._C.interp.encode_tensor_map_tiled
    t = torch.zeros(64, 64, dtype=torch.bfloat16)
    assert len(enc(9, t.data_ptr(), [64, 64], [128], [64, 64], [1, 1], swizzle=3)) == 128
    with pytest.raises(heddle.InputError, match="16"):
        enc(9, t.data_ptr() + 2, [64, 64], [128], [64, 64], [1, 1], swizzle=3)
    with pytest.raises(heddle.InputError):
        enc(9, t.data_ptr(), [64, 64], [100], [64, 64], [1, 1], swizzle=3)  # stride not a multiple of 16


def test_heddle_interpret_env_routes_matmul():  # Kernel.op: test_demo_runs_under_heddle_interpret
    code = ("import torch, heddle\n"
            "g = torch.Generator().manual_seed(0)\n"
            "x = torch.randn(70, 64, generator=g).bfloat16(); w = torch.randn(64, 136, generator=g).bfloat16()\n"
            "b = torch.randn(136, generator=g).bfloat16()\n"
            "y = heddle.matmul(x, w, bias=b, activation='gelu')\n"
            "ref = torch.nn.functional.gelu(x.double() @ w.double() + b.double())\n"
            "err = ((y.double() - ref).abs() / (1 + ref.abs())).max().item()\n"
            "print('ERR', err)\n")
    env = dict(os.environ, HEDDLE_INTERPRET="1", HEDDLE_INTERPRET_TARGET="sm_80")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    err = float(p.stdout.split("ERR")[1])
    assert err < 2e-2


def test_demo_runs_under_heddle_interpret():
    env = dict(os.environ, HEDDLE_INTERPRET="1")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "demo.py")], env=env, capture_output=True,
                       text=True, timeout=600)
    assert "HEDDLE_INTERPRET=1" in p.stdout and "max relative error" in p.stdout, p.stdout + p.stderr
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr
