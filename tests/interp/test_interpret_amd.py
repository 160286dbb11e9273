"""heddle.interpret on the AMD kernels (gfx90a, gfx942: wave64, MFMA, LDS DMA retired by s_waitcnt vmcnt;
gfx1200: wave32, WMMA, GFX12 split barriers): the printed HIP source, compiled by the host compiler
against the runtime's AMD primitives, runs on ragged shapes with the right numbers (float64 reference),
every epilogue rotating, with no race, deadlock or asynchronous misuse; source-level mutants (a barrier
line deleted, a vmcnt loosened by one, a stage index moved, a split signal / wait removed or moved) are
all caught, and stricter waits (vmcnt - 1) run clean. The full matrix runs under -m slow."""
import os

import pytest
import torch

import heddle
from heddle.interpret import _Mutated, interpret, mutation_kill_rate, source_mutants, tightened_waits
from support.interp_defs import amd, inputs, kernel, needs_cxx
from support.matmul_defs import matmul_fusion

pytestmark = needs_cxx
TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/, for support in a subprocess
EPILOGUES = ["bias_gelu", "none", "silu_scale"]
LAYOUTS = ["NN", "TN", "NT", "TT"]
_table = []


def check(k, ins, schedules=(("adversarial", 0), ("random", 3))):
    for sched, seed in schedules:
        r = interpret(k, *ins, schedule=sched, seed=seed)
        assert r.ok, f"{k.name} [{sched}]:\n{r.report()}"
    return r


# (target, copy kind, stages, prefetch, warps m x n): the AMD schedule space (LDS DMA only on CDNA)
DEFAULT = [("gfx90a", "async_lds", 2, 1, (2, 1)), ("gfx90a", "async_lds", 3, 1, (1, 2)),
           ("gfx90a", "async_lds", 4, 3, (2, 1)), ("gfx90a", "plain", 2, 1, (2, 1)),
           ("gfx942", "async_lds", 3, 2, (1, 2)), ("gfx942", "plain", 1, 0, (2, 2)),
           ("gfx1200", "plain", 2, 1, (2, 2)), ("gfx1200", "plain", 3, 2, (1, 2))]


@pytest.mark.parametrize("i,case", list(enumerate(DEFAULT)), ids=[f"{c[0]}-{c[1]}-s{c[2]}p{c[3]}" for c in DEFAULT])
def test_amd_kernels_interpret_clean_with_the_right_numbers(i, case):
    target, kind, s, p, warps = case
    fd = amd(kind=kind, stages=s, prefetch=p, warps=warps, layout=LAYOUTS[i % 4], dtype=("f16", "bf16")[i % 2],
             epilogue=EPILOGUES[i % 3], k=32 * (s + 1) + 8)
    k = kernel(fd, target)
    r = check(k, inputs(fd, 72, seed=i))
    assert r.ctas == 2 * 2  # ceil(72/64) x ceil(72/64)


def test_amd_batched():
    fd = amd(kind="async_lds", stages=2, prefetch=1, batched=True, epilogue="silu_scale", k=72)
    r = check(kernel(fd, "gfx942"), inputs(fd, 40, seed=4, batch=2))
    assert r.output.shape == (2, 40, 72) and r.ctas == 2 * 2


@pytest.mark.slow
@pytest.mark.parametrize("target,kind", [("gfx90a", "async_lds"), ("gfx942", "async_lds"), ("gfx90a", "plain"),
                                         ("gfx942", "plain"), ("gfx1200", "plain")])
@pytest.mark.parametrize("s", [1, 2, 3, 4])
def test_amd_full_matrix(target, kind, s):
    for p in range(s):
        for i, layout in enumerate(LAYOUTS):
            if kind == "async_lds" and s == 1:
                continue
            warps = [(2, 1), (1, 2), (2, 2)][(p + i) % 3]
            fd = amd(kind=kind, stages=s, prefetch=p, layout=layout, dtype=("f16", "bf16")[i % 2], warps=warps,
                     epilogue=EPILOGUES[(p + i) % 3], k=32 * (3 * s + 1) + 8 * (i % 2))
            check(kernel(fd, target), inputs(fd, [72, 104, 64, 136][i], seed=p))


@pytest.mark.parametrize("target", ["gfx90a", "gfx942", "gfx1200"])
def test_auto_scheduled_amd_kernel_interprets(target):
    fd, _, _ = matmul_fusion(m="M", n=128, k=160, epilogue="bias_gelu")
    fd.auto_schedule(target)
    k = heddle.Kernel.build(fd, target, rtc=False)
    g = torch.Generator().manual_seed(3)
    ins = [torch.randn(100, 160, generator=g).half(), torch.randn(160, 128, generator=g).half(),
           torch.randn(128, generator=g).half()]
    r = interpret(k, *ins, schedule="random", seed=1)
    assert r.ok, r.report()


def test_heddle_interpret_mode_runs_heddle_matmul_through_an_amd_kernel(monkeypatch):
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    monkeypatch.setenv("HEDDLE_INTERPRET_TARGET", "gfx1200")
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(40, 64, generator=g).half(), torch.randn(64, 48, generator=g).half()
    y = heddle.matmul(a, b)
    torch.testing.assert_close(y.float(), a.float() @ b.float(), atol=2e-2, rtol=2e-2)


def test_parallel_ctas_give_the_sequential_result():
    # workers=3: three CTAs at once (own OS thread and shared window each); same bits, same verdicts
    fd = amd(kind="async_lds", stages=2, prefetch=1, n=136, k=96)
    k = kernel(fd, "gfx90a")
    ins = inputs(fd, 136, seed=9)
    seq = interpret(k, *ins)
    par = interpret(k, *ins, workers=3)
    assert seq.ok and par.ok and par.ctas == seq.ctas == 3 * 3, par.report()
    assert torch.equal(seq.output, par.output)
    mu = next(m for m in source_mutants(k.source) if m.kind == "delete_sync" and "block_sync" in m.what)
    bad = interpret(_Mutated(k, mu.source), *ins, workers=3, max_findings=4)
    assert bad.races and bad.counts["race"] == interpret(_Mutated(k, mu.source), *ins).counts["race"]
    ctas = [int(t.rsplit("(CTA ", 1)[1].rstrip(")")) for t in bad.races]
    assert ctas == sorted(ctas)  # merged in CTA order whichever thread ran them


# --- source-level mutants -------------------------------------------------------------------------

MUTANT_CASES = [("gfx90a", "async_lds", 3, 2, (2, 1)), ("gfx1200", "plain", 3, 2, (2, 2)),
                pytest.param("gfx942", "async_lds", 2, 1, (1, 2), marks=pytest.mark.slow),
                pytest.param("gfx942", "async_lds", 4, 2, (2, 1), marks=pytest.mark.slow),
                pytest.param("gfx90a", "plain", 2, 1, (2, 1), marks=pytest.mark.slow),
                pytest.param("gfx1200", "plain", 2, 1, (1, 2), marks=pytest.mark.slow)]


@pytest.mark.parametrize("target,kind,s,p,warps", MUTANT_CASES)
def test_amd_source_mutants_all_killed(target, kind, s, p, warps):
    fd = amd(kind=kind, stages=s, prefetch=p, warps=warps, k=32 * (2 * s + 1))
    k = kernel(fd, target)
    ins = inputs(fd, 70, seed=1)
    res = mutation_kill_rate(k, *ins)
    _table.append((target, k.name, res))
    want = {"delete_sync", "swap_stage"} | ({"loosen_wait"} if kind == "async_lds" else set()) | \
        ({"move_split"} if target == "gfx1200" and s > 2 else set())
    assert want <= set(res["by_kind"]), res["by_kind"]
    assert not res["survivors"], res["survivors"]
    # waiting for more (vmcnt - 1) is never wrong: those equivalent mutants run clean
    for m in tightened_waits(k.source):
        r = interpret(_Mutated(k, m.source), *ins)
        assert r.ok, f"{m}:\n{r.report()}"


def test_loosened_vmcnt_is_a_race_on_the_printed_lines():
    fd = amd(kind="async_lds", stages=3, prefetch=2, k=32 * 5)
    k = kernel(fd, "gfx90a")
    mu = next(m for m in source_mutants(k.source) if m.kind == "loosen_wait" and "<16> -> <17>" in m.what)
    r = interpret(_Mutated(k, mu.source), *inputs(fd, 70, seed=1), max_findings=2)
    text = r.races[0]
    assert "read-after-write race" in text and "by the LDS DMA of wave" in text, text
    assert "acc.step(" in text and "heddle::copy_tile_async<" in text, text  # both printed lines, quoted


def test_split_barrier_wait_without_signal_is_a_deadlock_naming_it():
    fd = amd(kind="plain", stages=2, prefetch=1, warps=(2, 2), k=32 * 4)
    k = kernel(fd, "gfx1200")
    assert "heddle::barrier_signal();" in k.source and "heddle::barrier_wait();" in k.source
    mu = next(m for m in source_mutants(k.source) if m.kind == "delete_sync" and "barrier_signal" in m.what)
    r = interpret(_Mutated(k, mu.source), *inputs(fd, 64, seed=2), ctas=[0])
    assert r.deadlocks and "s_barrier_wait -1 without a s_barrier_signal of its own" in r.deadlocks[0], r.report()
    assert "heddle::barrier_wait();" in r.deadlocks[0]


def test_unknown_amd_builtin_and_asm_are_clear_errors():
    fd = amd(kind="plain", stages=2, prefetch=1, warps=(2, 2), k=64)
    k = kernel(fd, "gfx1200")
    ins = inputs(fd, 64, seed=0)
    marker = "  acc.zero();"
    assert marker in k.source
    for stmt, name in (("__builtin_amdgcn_s_sleep(1);", "__builtin_amdgcn_s_sleep"),
                       ('asm volatile("s_nop 0");', "inline asm")):
        src = k.source.replace(marker, marker + " " + stmt, 1)
        with pytest.raises(heddle.CompileError, match="no primitive of the execution runtime") as e:
            interpret(_Mutated(k, src), *ins)
        assert name in str(e.value) or name == "inline asm", str(e.value)
        assert stmt in str(e.value), str(e.value)  # the printed line, quoted


def test_print_kill_table(capsys):
    with capsys.disabled():
        for target, name, res in _table:
            kinds = ", ".join(f"{k} {a}/{b}" for k, (a, b) in sorted(res["by_kind"].items()))
            print(f"\n{target} {name}: {res['killed']}/{res['total']} killed ({kinds})")
    assert _table and all(r["total"] for _, _, r in _table)


@pytest.mark.slow
def test_clang_as_the_host_compiler(tmp_path):
    # the host compiler is found once per process: a child with HEDDLE_HOST_CXX=clang++ (its own cache)
    import os
    import shutil
    import subprocess
    import sys
    clang = shutil.which("clang++") or shutil.which("clang++-19")
    if clang is None:
        pytest.skip("no clang++")
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from heddle.interpret import interpret\nfrom support.interp_defs import amd, kernel, inputs, sm80\n"
            "for fd, t in ((amd(kind='async_lds', stages=2, prefetch=1), 'gfx90a'),\n"
            "              (amd(kind='plain', stages=2, prefetch=1, warps=(2, 2)), 'gfx1200'),\n"
            "              (sm80(stages=3, prefetch=1, k=128), 'sm_80')):\n"
            "    r = interpret(kernel(fd, t), *inputs(fd, 72, seed=1))\n"
            "    assert r.ok, r.report()\nprint('clang ok')\n") % TESTS
    env = dict(os.environ, HEDDLE_HOST_CXX=clang, HEDDLE_CACHE_DIR=str(tmp_path))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0 and "clang ok" in p.stdout, p.stdout[-3000:] + p.stderr[-3000:]
