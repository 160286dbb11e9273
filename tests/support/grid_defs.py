"""Checks shared by the kernels with a grid-level edge (split-K: test_split_k.py, stream-K: test_stream_k.py):
the simulator, the interpreter's determinism and source mutants of the reduction, the PTX of the flags."""
import torch

import heddle
from heddle.interpret import mutation_kill_rate, source_mutants


def simulator_clean_and_every_mutant_killed(k, ins):
    r = heddle.simulate(k, ins)
    assert r.ok, r.report()
    kinds = {m.kind for m in heddle.verify.mutants(k)}
    assert "shift_flag" in kinds
    kr = heddle.verify.kill_rate(k, [ins])
    assert kr.killed == kr.total, kr


def same_bits_under_two_random_schedules(k, ins):
    a = heddle.interpret(k, *ins, schedule="random", seed=1)
    b = heddle.interpret(k, *ins, schedule="random", seed=7)
    assert a.ok and b.ok, (a.report(), b.report())
    assert torch.equal(a.output, b.output)


def reduction_mutants_killed(k, ins, marker):
    """The source mutants after the line holding `marker` (the reduction's branch): each grid release / wait
    deleted or moved to the next flag, and each block barrier of the reduction deleted, all killed."""
    lines = k.source.split("\n")
    first = 1 + lines.index([l for l in lines if marker in l][0])
    mine = [m for m in source_mutants(k.source) if m.line > first]
    assert sorted(m.kind for m in mine) == ["delete_sync"] * 4 + ["shift_flag"] * 2, mine
    res = mutation_kill_rate(k, *ins, where=lambda m: m.line > first, schedules=(("adversarial", 0),))
    assert res["total"] == 6 and not res["survivors"], res["survivors"]


def no_spills_and_gpu_scope_flags(r, name):
    st = r.stats
    assert st.spill_stores == 0 and st.spill_loads == 0 and st.stack_frame == 0, (name, r.ptxas)
    assert "ld.acquire.gpu.global.b32" in r.ptx and "fence.acq_rel.gpu" in r.ptx
    assert "st.relaxed.gpu.global.b32" in r.ptx
