"""The CPU interpreter on gfx1250 named barriers (heddle_hip_barriers.cuh under HEDDLE_INTERPRET ->
src/heddle/interp/rt/hrt_barrier_objects.cpp, the AMDGPU execution-synchronization model the simulator also
runs): small hand-written HIP kernels of 4 wave32 waves, compiled for the host as heddle compiles a printed
kernel. A FAIL/OK pair per rule of the model (init first, join before wait, expected counts, drop lowers the
count, arrive after drop, drop race, a thread's end drops no named barrier, the NULL barrier,
signal_isfirst), and the producer/consumer wave split on full/empty named barriers (the protocol
named_barrier_roles places and the HIP printer prints, checked op for op) with the right numbers and every
source mutant (a sync line deleted, a named signal moved up or a wait moved down) caught."""
import json
import re

import pytest
import torch

from heddle import _C
from heddle.interpret import InterpretResult, source_mutants
from support.interp_defs import needs_cxx

pytestmark = needs_cxx

HEAD = """#include "heddle/heddle_types.cuh"
#include "heddle/heddle_hip_copy.cuh"
#include "heddle/heddle_hip_barriers.cuh"
#ifndef __align__
#define __align__(n) __attribute__((aligned(n)))
#endif
extern "C" __global__ void nb_kernel(const float* __restrict__ X, float* __restrict__ D, int N) {
  extern __shared__ __align__(16) unsigned char heddle_smem[];
  float* st = reinterpret_cast<float*>(heddle_smem);
  const int tid = threadIdx.x, warp = tid / 32;
"""
# warp 0 initialises barrier 1 for all four waves; the workgroup barrier orders the init before every use
INIT = """  if (warp == 0) {
    heddle::barrier_init<1, 4>();
  }
  heddle::barrier_signal();
  heddle::barrier_wait();
"""
SYNC = """  heddle::barrier_join<1>();
  heddle::barrier_signal<1>();
  heddle::barrier_wait<1>();
"""
# every wave writes its slot, meets on barrier 1, then reads a slot of another wave
EXCHANGE = ("  st[tid] = X[tid];\n", "  D[tid] = st[(tid + 32) % 128];\n")


def run(body, n=1, schedules=(("adversarial", 0), ("random", 1), ("random", 2))):
    src = HEAD + body + "}\n"
    lib = _C.interp.build(src, "nb_kernel", "gfx1250")
    x = torch.arange(64 * max(n, 2), dtype=torch.float32) % 97 - 40
    out = []
    for sched, seed in schedules:
        d = torch.full((128,), float("nan"))
        regions = [("X", x.data_ptr(), x.numel() * 4, False, 4), ("D", d.data_ptr(), d.numel() * 4, True, 4)]
        text = lib.run([1, 1, 1], [128, 1, 1], 4096, [("ptr", x.data_ptr()), ("ptr", d.data_ptr()), ("i32", n)],
                       ["X", "D", "N"], regions, sched, seed, 0, 4, [], False, 1)
        out.append((InterpretResult("nb_kernel", sched, seed, json.loads(text), d, [], lib), x))
    return out


def clean(body, n=1):
    for r, x in run(body, n):
        assert r.ok, r.report()
    return r.output, x


def flagged(body, n=1):
    """Every schedule finds the planted defect; the findings of all of them."""
    text = []
    for r, _ in run(body, n):
        assert not r.ok, "the planted defect was not found"
        text += [f"[{k}] {t}" for k, t in r.findings]
    return "\n".join(text)


def exchange(sync):
    return EXCHANGE[0] + sync + EXCHANGE[1]


def test_exchange_through_a_named_barrier():
    d, x = clean(INIT + exchange(SYNC))
    assert torch.equal(d, x[(torch.arange(128) + 32) % 128])
    assert "race" in flagged(INIT + exchange(""))  # the same exchange with no barrier


def test_wait_needs_a_join():
    msg = flagged(INIT + exchange(SYNC.replace("  heddle::barrier_join<1>();\n", "")))
    assert "undefined behaviour: a wait on named barrier 1 by a thread that has not joined it" in msg
    # joining the NULL barrier unjoins
    msg = flagged(INIT + exchange(SYNC.replace("<1>();\n  heddle::barrier_signal", "<1>();\n  heddle::barrier_join<0>();"
                                                                                  "\n  heddle::barrier_signal")))
    assert "has not joined it" in msg
    # the NULL barrier's signal and wait are no-ops: they do not order the exchange
    clean(INIT + exchange(SYNC) + "  heddle::barrier_signal<0>();\n  heddle::barrier_wait<0>();\n")
    assert "race" in flagged(INIT + exchange("  heddle::barrier_signal<0>();\n  heddle::barrier_wait<0>();\n"))


def test_init_comes_first():
    msg = flagged(exchange(SYNC))
    assert "used before any s_barrier_init" in msg
    # the init not ordered before the other waves' joins: caught on every schedule, not only when it loses
    msg = flagged(INIT.replace("  heddle::barrier_signal();\n  heddle::barrier_wait();\n", "") + exchange(SYNC))
    assert "is not ordered before this use" in msg and "heddle::barrier_join<1>();" in msg


def test_expected_count_mismatch_is_a_deadlock():
    # 3 waves expected, 4 arrive: the 4th arrive opens a phase nobody completes
    msg = flagged(INIT.replace("<1, 4>", "<1, 3>") + exchange(SYNC))
    assert "[deadlock]" in msg and "s_barrier_wait 1" in msg and "heddle::barrier_wait<1>();" in msg


def test_drop_lowers_the_expected_count():
    # wave 3 leaves before the others arrive: 3 arrivals complete the phase (ordered by the workgroup barrier)
    body = INIT + """  if (warp == 3) {
    heddle::barrier_join<1>();
    heddle::barrier_leave();
  }
  heddle::barrier_signal();
  heddle::barrier_wait();
  if (warp < 3) {
    st[tid] = X[tid];
    heddle::barrier_join<1>();
    heddle::barrier_signal<1>();
    heddle::barrier_wait<1>();
    D[tid] = st[(tid + 32) % 96];
  } else {
    D[tid] = 0.0f;
  }
"""
    d, x = clean(body)
    assert torch.equal(d[:96], x[(torch.arange(96) + 32) % 96]) and not d[96:].any()
    # without the leave the phase waits for wave 3 forever (a thread's end drops no named barrier)
    msg = flagged(body.replace("    heddle::barrier_leave();\n", ""))
    assert "[deadlock]" in msg and "expects 128 lane arrivals per phase" in msg, msg
    # an arrive after the drop is misuse
    msg = flagged(body.replace("    heddle::barrier_leave();\n", "    heddle::barrier_leave();\n"
                                                                "    heddle::barrier_signal<1>();\n"))
    assert "misuse: arrive after this wave dropped barrier 1" in msg


def test_drop_race():
    body = INIT + """  heddle::barrier_join<1>();
  heddle::barrier_signal<1>();
  heddle::barrier_wait<1>();
  D[tid] = 1.0f;
"""
    clean(body)
    msg = flagged(body.replace("  heddle::barrier_wait<1>();\n", "  heddle::barrier_leave();\n"
                                                                "  heddle::barrier_wait<1>();\n"))
    assert "undefined behaviour (drop race)" in msg and "heddle::barrier_leave();" in msg


def test_thread_end_drops_the_workgroup_barrier_not_a_named_one():
    early = "  if (warp == 3) {\n    D[tid] = 0.0f;\n    return;\n  }\n"
    # wave 3 ends: the workgroup barrier (-1) no longer waits for it ...
    clean(early + "  heddle::barrier_signal();\n  heddle::barrier_wait();\n  D[tid] = 1.0f;\n")
    # ... a named barrier expecting it does
    msg = flagged(INIT + early + SYNC + "  D[tid] = 1.0f;\n")
    assert "[deadlock]" in msg and "expects 128 lane arrivals per phase" in msg and "threads 96-127 have exited" in msg


def test_signal_isfirst_is_true_in_one_wave_per_phase():
    body = INIT + """  heddle::barrier_join<1>();
  float firsts = 0.0f;
  for (int i = 0; i < N; ++i) {
    const bool first = heddle::barrier_signal_isfirst<1>();
    heddle::barrier_wait<1>();
    firsts += first ? 1.0f : 0.0f;
  }
  D[tid] = firsts;
"""
    d, _ = clean(body, n=3)
    per_wave = d.view(4, 32)
    assert (per_wave == per_wave[:, :1]).all() and per_wave.sum() == 3 * 32  # whole waves, one per phase


# --- the producer/consumer wave split on full/empty named barriers ---------------------------------------

def producer_consumer(stages=2):
    """Waves 0-1 copy row i of X into stage i % S and signal full[s]; waves 2-3 wait on full[s], fold the
    stage into their sum and signal empty[s]; producers wait on empty[s] before overwriting a stage (the
    protocol of tests/sync/test_barrier_objects.py's producer_consumer, written as HIP)."""
    full, empty = (lambda s: 1 + s), (lambda s: 1 + stages + s)
    init = "".join(f"    heddle::barrier_init<{b}, 4>();\n" for b in range(1, 2 * stages + 1))
    prod, cons = [], []
    for s in range(stages):
        prod.append(f"""      if (i % {stages} == {s}) {{
        if ({stages} <= i) {{
          heddle::barrier_join<{empty(s)}>();
          heddle::barrier_signal<{empty(s)}>();
          heddle::barrier_wait<{empty(s)}>();
        }}
        const float v = X[i * 64 + tid];
        st[{s} * 64 + tid] = v;
        heddle::barrier_signal<{full(s)}>();
      }}
""")
        cons.append(f"""      if (i % {stages} == {s}) {{
        heddle::barrier_join<{full(s)}>();
        heddle::barrier_signal<{full(s)}>();
        heddle::barrier_wait<{full(s)}>();
        const float v = st[{s} * 64 + tid - 64];
        sum += v * (float)(i + 1);
        if (i + {stages} < N) {{
          heddle::barrier_signal<{empty(s)}>();
        }}
      }}
""")
    return (f"  if (warp == 0) {{\n{init}  }}\n  heddle::fence_release_workgroup(); heddle::barrier_signal();\n"
            f"  heddle::barrier_wait(); heddle::fence_acquire_workgroup();\n"
            f"  if (warp < 2) {{\n    D[tid + 64] = 0.0f;\n    for (int i = 0; i < N; ++i) {{\n{''.join(prod)}    }}\n"
            f"  }} else {{\n    float sum = 0.0f;\n    for (int i = 0; i < N; ++i) {{\n{''.join(cons)}    }}\n"
            f"    D[tid - 64] = sum;\n  }}\n")


def expected(x, n):
    rows = x.double()[:n * 64].view(n, 64)
    return (rows * torch.arange(1, n + 1, dtype=torch.float64)[:, None]).sum(0)


def test_the_hip_protocol_is_what_named_barrier_roles_places_and_prints():
    # the role split with no syncs (tests/sync/test_barrier_objects.py's roles()): the pass places the protocol and
    # the HIP printer spells it; its sync ops, in order, are the ones of the kernel interpreted below
    for stages in (2, 3):
        prog = [("if", "warp < 2", [("loop", "i", 0, "N", "serial", [("write", "X", f"i % {stages}", "copy@0:64")])],
                 [("loop", "i", 0, "N", "serial", [("read", "X", f"i % {stages}", "mma@64:128")])])]
        placed = _C.hip_sync_ops(_C.sync_lab(prog, stages, target="gfx1250", roles=True))
        ours = [m.group(0) for m in re.finditer(r"(heddle::fence_release_workgroup\(\); )?heddle::barrier_\w+(<[\d, ]+>)?"
                                                r"\(\);( heddle::fence_acquire_workgroup\(\);)?", producer_consumer(stages))]
        assert ours == placed


@pytest.mark.parametrize("stages,n", [(2, 5), (3, 4)])
def test_producer_consumer_waves_interpret_clean_with_the_right_numbers(stages, n):
    d, x = clean(producer_consumer(stages), n)
    torch.testing.assert_close(d[:64].double(), expected(x, n), rtol=1e-6, atol=1e-3)
    assert not d[64:].any()


def test_producer_consumer_source_mutants_all_caught():
    body = producer_consumer(2)
    src = HEAD + body + "}\n"
    mutants = source_mutants(src)
    kinds = {}
    for m in mutants:
        kinds.setdefault(m.kind, 0)
        kinds[m.kind] += 1
    assert kinds.get("delete_sync", 0) >= 2 + 4 + 3 + 5 and kinds.get("move_split", 0) >= 4, kinds
    survivors = []
    for m in mutants:
        mbody = m.source[len(HEAD):-len("}\n")]
        caught = False
        for r, x in run(mbody, 5, schedules=(("adversarial", 0), ("random", 1))):
            wrong = not torch.allclose(r.output[:64].double(), expected(x, 5), rtol=1e-6, atol=1e-3)
            if not r.ok or wrong:
                caught = True
                break
        if not caught:
            survivors.append(m)
    assert not survivors, survivors
