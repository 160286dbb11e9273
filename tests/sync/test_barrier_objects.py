"""The barrier objects of the AMDGPU execution-synchronization model (LLVM AMDGPUExecutionSynchronization;
docs/backends.md, "Barrier objects"): gfx1250 named barriers (s_barrier_init / join / leave / signal id /
signal_isfirst / wait id, the NULL barrier), the drop of the workgroup barrier by a thread that ends, the
simulator's FAIL/OK pair for each rule of the model, a producer/consumer wave split on named barriers
simulated clean with every mutant flagged, the wave-uniformity check, and the printer's spellings
(assembled by clang-19 for gfx1200: no compiler here knows gfx1250)."""
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from heddle import _C, verify
from support.sync_defs import roles

DEVICE_DIR = Path(__file__).resolve().parents[2] / "src" / "heddle" / "codegen" / "device"
CLANG = shutil.which("clang-19")
HIP_RUNTIME_H = "/usr/include/hip/hip_runtime.h"
needs_clang = pytest.mark.skipif(not CLANG or not os.path.exists(HIP_RUNTIME_H),
                                 reason="clang-19 and the HIP headers are needed (apt-get install clang-19 "
                                        "libamdhip64-dev)")

# 128 threads = 4 wave32 waves; warp 0 initialises the named barriers, then the workgroup barrier (-1)
# orders every init before every other use (init must come first in barrier-modification-order)
INIT = [("if", "warp == 0", [("barrier_init", 1, 4)]), ("barrier_signal", -1), ("barrier_wait", -1)]
ALL_WAIT = [("barrier_join", 1), ("barrier_signal", 1), ("barrier_wait", 1)]


def lab(prog, target="gfx1250", stages=1):
    return _C.sync_lab(prog, stages, target=target, plan=False)


def run(prog, target="gfx1250", stages=1, seeds=(("adversarial", 0), ("random", 1), ("random", 2)), **scalars):
    l = lab(prog, target, stages)
    return [verify.simulate(l, None, s, seed, scalars=scalars or None) for s, seed in seeds]


def clean(prog, target="gfx1250", **scalars):
    for r in run(prog, target, **scalars):
        assert r.ok, r.report()


def flagged(prog, target="gfx1250", stages=1, **scalars):
    """Every schedule flags the program; returns all messages."""
    out = []
    for r in run(prog, target, stages, **scalars):
        assert not r.ok, "the planted defect was not found"
        out += r.findings
    return "\n".join(out)


# --- the model's rules: a FAIL/OK pair each ---------------------------------------------------------------

def test_wait_on_a_barrier_not_joined():
    clean(INIT + ALL_WAIT)
    msg = flagged(INIT + [("barrier_signal", 1), ("barrier_wait", 1)])
    assert "undefined behaviour: s_barrier_wait on named barrier 1 by a thread that has not joined it" in msg
    # joining the NULL barrier unjoins: a wait after it is a wait on a barrier not joined
    msg = flagged(INIT + [("barrier_join", 1), ("barrier_join", 0), ("barrier_signal", 1), ("barrier_wait", 1)])
    assert "has not joined it" in msg


def test_wait_goes_to_the_barrier_joined_last():
    two = [("if", "warp == 0", [("barrier_init", 1, 4), ("barrier_init", 2, 4)]), ("barrier_signal", -1),
           ("barrier_wait", -1)]
    clean(two + ALL_WAIT + [("barrier_join", 2), ("barrier_signal", 2), ("barrier_wait", 2)])
    msg = flagged(two + [("barrier_join", 1), ("barrier_join", 2), ("barrier_signal", 1), ("barrier_wait", 1)])
    assert "waits on barrier 1 while the barrier it joined last is 2" in msg


def test_arrive_after_drop():
    # wave 3 leaves after one phase; the other three waves run a second phase of expected count 3
    ok = INIT + ALL_WAIT + [("barrier_leave",), ("if", "warp < 3", ALL_WAIT)]
    clean(ok)
    bad = INIT + ALL_WAIT + [("barrier_leave",), ("if", "warp < 3", ALL_WAIT, [("barrier_signal", 1)])]
    assert "misuse: arrive after this thread dropped barrier 1" in flagged(bad)


def test_expected_count_mismatch():
    clean(INIT + ALL_WAIT)
    # too high: the phase never completes (a wait that never completes is undefined)
    high = [("if", "warp == 0", [("barrier_init", 1, 5)]), ("barrier_signal", -1), ("barrier_wait", -1)] + ALL_WAIT
    assert "a named-barrier wait that never completes" in flagged(high)
    # too low: the phase completes before wave 3 arrives, so its write is not ordered before the reads
    low = [("if", "warp == 0", [("barrier_init", 1, 3)]), ("barrier_signal", -1), ("barrier_wait", -1),
           ("if", "warp == 3", [("write", "X", 0, "w@96:128")]), ("barrier_join", 1), ("barrier_signal", 1),
           ("barrier_wait", 1), ("if", "warp < 3", [("read", "X", 0, "r@0:96")])]
    ok = [("if", "warp == 0", [("barrier_init", 1, 4)])] + low[1:]
    clean(ok)
    assert "race" in flagged(low)


def test_init_must_come_first():
    clean(INIT + ALL_WAIT)
    msg = flagged(ALL_WAIT + [("if", "warp == 0", [("barrier_init", 1, 4)])])
    assert "barrier 1 is used before any s_barrier_init" in msg


def test_drop_race():
    clean(INIT + ALL_WAIT + [("barrier_leave",)])  # arrive, wait for the phase, then drop: fine
    bad = INIT + [("barrier_join", 1), ("barrier_signal", 1),
                  ("if", "warp < 3", [("barrier_wait", 1)], [("barrier_leave",)])]
    assert "undefined behaviour (drop race)" in flagged(bad)


def test_thread_end_drops_the_workgroup_barrier_not_a_named_one():
    # AMD: a wave that ends before the workgroup barrier drops it, so the others complete it
    early_exit = [("write", "X", 0, "a@0:96"), ("if", "warp < 3", [("barrier_signal", -1), ("barrier_wait", -1),
                                                                   ("read", "X", 0, "b@0:96")])]
    clean(early_exit, "gfx1250")
    clean(early_exit, "gfx1200")
    block = [("write", "X", 0, "a@0:64"), ("if", "warp < 1", [("barrier",), ("read", "X", 0, "b@0:64")])]
    clean(block, "gfx90a")  # s_barrier on GFX6-11: the ended wavefront 1 dropped it
    # a signal without its wait before the end: the implicit drop races the arrive
    racy = [("if", "warp < 3", [("barrier_signal", -1), ("barrier_wait", -1)], [("barrier_signal", -1)])]
    assert "drop race: the implicit drop of the workgroup barrier" in flagged(racy, "gfx1200")
    # named barriers are not dropped by a thread's end: waves 0-2 wait for wave 3 forever
    named = INIT + [("if", "warp < 3", ALL_WAIT)]
    assert "a named-barrier wait that never completes" in flagged(named)


def test_cuda_keeps_exited_threads_out_of_the_barrier():
    prog = [("write", "X", 0, "a@0:64"), ("if", "warp < 2", [("barrier",), ("read", "X", 0, "b@0:64")])]
    with pytest.raises(_C.HeddleError, match="must be executed by the whole block"):
        lab(prog, "sm_80")  # bar.sync 0 is a block collective on CUDA (check_uniformity)


# --- a producer/consumer split of waves on named barriers (the AMD counterpart of warp specialization) ----

def producer_consumer(stages=2):
    """Waves 0-1 copy k-tile i into stage i % S and signal full[s]; waves 2-3 wait on full[s], read the
    stage and signal empty[s]; producers wait on empty[s] before overwriting a stage. Each named barrier
    expects all 4 waves per phase; a wave joins the barrier it is about to wait on."""
    full, empty = (lambda s: 1 + s), (lambda s: 1 + stages + s)
    init = [("if", "warp == 0", [("barrier_init", b, 4) for b in range(1, 2 * stages + 1)]),
            ("barrier_signal", -1), ("barrier_wait", -1)]

    def per_stage(body):
        out = body(stages - 1)
        for s in reversed(range(stages - 1)):
            out = [("if", f"i % {stages} == {s}", body(s), out)]
        return out

    def produce(s):
        return [("if", f"{stages} <= i", [("barrier_join", empty(s)), ("barrier_signal", empty(s)),
                                          ("barrier_wait", empty(s))]),
                ("write", "X", f"i % {stages}", "copy@0:64"), ("barrier_signal", full(s))]

    def consume(s):
        return [("barrier_join", full(s)), ("barrier_signal", full(s)), ("barrier_wait", full(s)),
                ("read", "X", f"i % {stages}", "mma@64:128"),
                ("if", f"i + {stages} < N", [("barrier_signal", empty(s))])]

    return init + [("if", "warp < 2", [("loop", "i", 0, "N", "serial", per_stage(produce))],
                    [("loop", "i", 0, "N", "serial", per_stage(consume))])]


@pytest.mark.parametrize("stages", [2, 3])
def test_producer_consumer_waves_simulate_clean_and_every_mutant_is_flagged(stages):
    l = _C.sync_lab(roles(stages), stages, target="gfx1250", roles=True)  # the pass places the protocol
    # the same ops as the hand-written protocol; the pass's also carry their reasons ("# sync N: ...")
    assert re.sub(r"\s+# sync \d+:.*$", "", l.kernel_ir, flags=re.M) == \
        _C.sync_lab(producer_consumer(stages), stages, target="gfx1250", plan=False).kernel_ir
    trips = [{"N": n} for n in (stages, stages + 1, 2 * stages + 1)]
    for t in trips:
        for sched, seed in (("adversarial", 0), ("random", 1)):
            r = verify.simulate(l, None, sched, seed, scalars=t)
            assert r.ok, f"{t}:\n{r.report()}\n{l.kernel_ir}"
    report = verify.kill_rate(l, [None] * len(trips), scalars=trips)
    assert report.total >= 8 * stages and not report.survivors, str(report)
    kinds = {m.description.split()[0] + " " + m.description.split()[1] for m in verify.mutants(l)}
    assert {"delete s_barrier_init", "delete s_barrier_join", "hoist s_barrier_signal", "sink s_barrier_wait"} <= kinds


def test_role_splits_the_pass_refuses():
    with pytest.raises(_C.ScheduleError, match="splits wave 1; roles must be whole waves"):
        _C.sync_lab(roles(2, "tid < 40"), 2, target="gfx1250", roles=True)
    with pytest.raises(_C.ScheduleError, match="no named barriers"):
        _C.sync_lab(roles(2), 2, target="gfx1200", roles=True)
    with pytest.raises(_C.ScheduleError, match="9 stages need 18 named barriers"):
        _C.sync_lab(roles(9), 9, target="gfx1250", roles=True)


def test_without_the_named_barriers_the_roles_race():
    def strip(p):  # the same program with every named-barrier op removed
        out = []
        for s in p:
            if s[0].startswith("barrier") and s[1:2] != (-1,):
                continue
            if s[0] == "if":
                s = ("if", s[1], strip(s[2])) + ((strip(s[3]),) if len(s) > 3 else ())
            elif s[0] == "loop":
                s = s[:5] + (strip(s[5]),)
            out.append(s)
        return out
    bare = strip(producer_consumer(2))
    assert "barrier_join" not in repr(bare) and "race" in flagged(bare, stages=2, N=3)


# --- wave uniformity ---------------------------------------------------------------------------------------

def test_named_barrier_ops_need_wave_uniform_control_flow():
    lab(INIT + [("if", "warp < 2", ALL_WAIT)])  # whole waves: fine
    with pytest.raises(_C.HeddleError, match="must be executed by a warp together.*lane < 16"):
        lab(INIT + [("if", "lane < 16", [("barrier_join", 1)])])
    with pytest.raises(_C.HeddleError, match="must be executed by a warp together"):
        lab([("if", "tid < 40", [("barrier_signal", -1), ("barrier_wait", -1)])], "gfx1200")


def test_barrier_ids_follow_the_target():
    with pytest.raises(_C.HeddleError, match="gfx1200.*only the workgroup barrier -1"):
        lab(ALL_WAIT, "gfx1200")
    with pytest.raises(_C.HeddleError, match="barrier 17"):
        lab([("barrier_join", 17)])
    assert _C.target_info("gfx1250")["named_barriers"] == 16 and _C.target_info("gfx1200")["named_barriers"] == 0


# --- printer and device header ------------------------------------------------------------------------------

def test_the_named_barrier_ops_print():
    l = lab(INIT + ALL_WAIT + [("barrier_signal_isfirst", 1), ("barrier_join", 0), ("barrier_leave",)])
    assert "s_barrier_init 1, 4 wave(s)" in l.kernel_ir and "s_barrier_join 1" in l.kernel_ir
    assert _C.hip_sync_ops(l) == [
        "heddle::barrier_init<1, 4>();", "heddle::fence_release_workgroup(); heddle::barrier_signal();",
        "heddle::barrier_wait(); heddle::fence_acquire_workgroup();",
        "heddle::barrier_join<1>();", "heddle::barrier_signal<1>();", "heddle::barrier_wait<1>();",
        "heddle::barrier_signal_isfirst<1>();", "heddle::barrier_join<0>();", "heddle::barrier_leave();"]
    split = _C.sync_lab([("write", "X", 0, "a"), ("read", "X", 0, "b")], 1, target="gfx1200")
    assert _C.hip_sync_ops(split) == ["heddle::fence_release_workgroup(); heddle::barrier_signal();",
                                      "heddle::barrier_wait(); heddle::fence_acquire_workgroup();"]


@needs_clang
def test_device_header_asm_assembles_for_gfx12_and_refuses_elsewhere():
    d = Path(tempfile.mkdtemp(prefix="heddle_amd_nb_"))
    (d / "heddle").mkdir()
    for h in DEVICE_DIR.glob("*.cuh"):
        shutil.copy(h, d / "heddle" / h.name)
    (d / "k.hip").write_text('#include "heddle/heddle_hip_barriers.cuh"\n'
                             'extern "C" __global__ void k(int* out) {\n'
                             '  heddle::barrier_init<3, 4>();\n  heddle::barrier_join<3>();\n'
                             '  heddle::barrier_signal<3>();\n  heddle::barrier_wait<3>();\n'
                             '  if (heddle::barrier_signal_isfirst<3>()) out[0] = 1;\n'
                             '  heddle::barrier_join<0>();\n  heddle::barrier_leave();\n}\n')
    base = [CLANG, "-x", "hip", "--offload-arch=gfx1200", "--cuda-device-only", "-nogpulib", "-O3", "-S",
            "-include", "hip/hip_runtime.h", "-I", str(d), str(d / "k.hip"), "-o", "-"]
    # LLVM 19's assembler takes the GFX12 named-barrier mnemonics for gfx1200: a syntax check of the
    # header's inline asm (not of gfx1250 encodings, which no compiler here knows)
    res = subprocess.run(base[:-3] + ["-DHEDDLE_GFX12_BARRIER_ASM"] + base[-3:], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0 and "warning" not in res.stderr, res.stderr[-3000:]
    isa = [x.strip() for x in res.stdout.splitlines() if re.match(r"\s+s_(barrier|mov_b32 m0)", x)]
    assert isa == ["s_mov_b32 m0, 0x40003", "s_barrier_init m0", "s_barrier_join 3", "s_barrier_signal 3",
                   "s_barrier_wait 3", "s_barrier_signal_isfirst 3", "s_barrier_join 0", "s_barrier_leave"], isa
    res = subprocess.run(base, capture_output=True, text=True, timeout=300)  # a real gfx1200 build refuses
    assert res.returncode != 0 and "heddle named barriers: gfx1250 (GFX12.5) only" in res.stderr


@needs_clang
def test_clang19_does_not_know_gfx1250():
    # why gfx1250 is checked by the simulator only (docs/backends.md)
    res = subprocess.run([CLANG, "-x", "hip", "--offload-arch=gfx1250", "--cuda-device-only", "-nogpulib", "-S",
                          "-o", "-", "-"], input="", capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and "gfx1250" in res.stderr


def test_gfx1250_has_no_matmul_path():
    import heddle
    from support.matmul_defs import matmul_fusion
    fd, a, b = matmul_fusion()
    with pytest.raises(heddle.ScheduleError, match="gfx1250 has no lowering for its matrix cores"):
        fd.auto_schedule("gfx1250")
