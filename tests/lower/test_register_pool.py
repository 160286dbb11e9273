"""setmaxnreg's register pool and its warpgroup rule (issue 28, items 1 and 2).

The pool setmaxnreg.inc draws from is per CTA: registers per thread at entry (ptxas's count, or the
__launch_bounds__(threads, 1) cap 65536 / threads rounded down to a multiple of 8) times the CTA's threads
-- 168 x 384 = 64,512 for the three-warpgroup kernels -- and an increase blocks until registers are free.
Role budgets beyond it hang on a GPU while compiling without a ptxas warning: the schedule rules refuse them
with the numbers (schedule/register_pool.h), Kernel.build checks them again against ptxas's count, the
autotuner's space drops them, and the interpreter models the pool (an increase never granted is a deadlock
report with the numbers). setmaxnreg is .sync.aligned over a warpgroup: the interpreter makes it a
128-thread collective, and check_uniformity refuses it under a thread- or warp-divergent branch."""
import re

import pytest

import heddle
from heddle import _C
from heddle.tuning import autotune as at
from support.wgmma_defs import build, inputs
from support.interp_defs import needs_cxx

ScheduleError = heddle.ScheduleError


def lower_err(fd, target="sm_90a"):
    with pytest.raises(ScheduleError) as e:
        fd.lower(target)
    return str(e.value)


# --- the schedule rule ------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", ["coop", "pingpong", "3role"])
def test_budgets_beyond_the_pool_are_refused_with_the_numbers(variant):
    m = lower_err(build(variant, stages=3, prefetch=1, regs=(48, 232)))
    assert "the role budgets need 65,536 registers" in m, m
    assert "register pool, which setmaxnreg.inc draws from, is 64,512 (168 registers per thread at entry, " \
           "the __launch_bounds__(384, 1) cap, x 384 threads)" in m, m
    assert "would hang" in m and "lower 'load' 48 -> 40" in m, m
    m = lower_err(build(variant, stages=3, prefetch=1, regs=(32, 240)))
    assert "need 65,536 registers (load 32 x 128 + mma 240 x 256" in m or \
           "need 65,536 registers (load 32 x 128 + mma 240 x 128" in m, m
    assert "'load' 32 -> 24" in m, m


@pytest.mark.parametrize("variant", ["coop", "pingpong", "3role"])
@pytest.mark.parametrize("regs", [(40, 232), (24, 240), (64, 168)])
def test_budgets_that_fit_the_pool_lower(variant, regs):
    # (40, 232) is the pool exactly: 40 x 128 + 232 x 256 = 64,512 = 168 x 384 (ran right on an H200)
    src = build(variant, stages=3, prefetch=1, regs=regs).lower("sm_90a").source
    assert f"setmaxnreg_dec<{regs[0]}>" in src and f"<{regs[1]}>();" in src


def test_the_check_uses_ptxas_s_count_when_the_kernel_is_compiled():
    low = build("coop", stages=3, prefetch=1, regs=(40, 232)).lower("sm_90a")
    low.check_register_pool(168)  # the count the GPU window saw: fits exactly
    with pytest.raises(ScheduleError, match=r"is 61,440 \(160 registers per thread at entry, ptxas's count, x 384"):
        low.check_register_pool(160)
    build("pipeline", stages=3, prefetch=1).lower("sm_90a").check_register_pool(32)  # no budgets: nothing to check


def test_register_pool_problem_binding():
    # the autotuner's 128x128 three-role candidate: 24 / 160 x 2 warpgroups / 80 x 2 on 640 threads
    m = _C.register_pool_problem([("load", 1, 24), ("mma", 2, 160), ("epilogue", 2, 80)])
    assert "need 64,512 registers" in m and "is 61,440 (96 registers per thread" in m, m
    assert _C.register_pool_problem([("load", 1, 40), ("mma", 2, 232)]) == ""
    assert _C.register_pool_problem([("load", 1, 0), ("mma", 2, 0)]) == ""  # no setmaxnreg at all


def test_the_autotuner_space_drops_candidates_beyond_the_pool():
    space = at.config_space("sm_90a", at.Problem(4096, 4096, 4096))
    bad = [c for c in space if c.roles == (("load", 1, 24), ("mma", 8, 160), ("epilogue", 8, 80))]
    assert not bad
    assert all(not at.register_pool_problem(c) for c in space)
    assert any(c.roles == (("load", 1, 40), ("mma", 8, 232)) for c in space)  # the pool exactly: kept


# --- check_uniformity: never under a divergent branch ------------------------------------------------

@pytest.mark.parametrize("cond", ["tid < 64", "warp < 2", "lane == 0", "tid == 0"])
def test_setmaxnreg_under_a_divergent_branch_is_refused(cond):
    with pytest.raises(_C.HeddleError, match=r"check_uniformity: 'setmaxnreg.dec 40' must be executed by the whole block together, but it sits inside"):
        _C.sync_lab([("if", cond, [("setmaxnreg", 40)])], 1, plan=False, target="sm_90a")


def test_setmaxnreg_for_whole_warpgroups_is_accepted():
    _C.sync_lab([("setmaxnreg", 40)], 1, plan=False, target="sm_90a")
    _C.sync_lab([("if", "f", [("setmaxnreg", 40)])], 1, plan=False, target="sm_90a")  # a uniform scalar


# --- the interpreter: the pool and the collective -----------------------------------------------------

def _interpret_edited(fd, edit=None, M=77, **kw):
    from heddle.core.interpret import _Mutated
    from heddle.interpret import interpret
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    if edit:
        src = edit(k.lowered.source)
        assert src != k.lowered.source
        k = _Mutated(k, src)
    return interpret(k, *inputs(fd, M, seed=1), sms=1, **kw)


@needs_cxx
@pytest.mark.parametrize("variant", ["coop", "pingpong", "3role"])
def test_interpreter_reports_the_pool_deadlock(variant):
    # the hang: the load warpgroup keeps 48, so the second 232 increase never finds its registers
    fd = build(variant, stages=3, prefetch=1, regs=(40, 232))
    r = _interpret_edited(fd, lambda s: s.replace("setmaxnreg_dec<40>", "setmaxnreg_dec<48>"))
    text = "\n".join(r.deadlocks)
    assert re.search(r"setmaxnreg\.inc to 232 registers by warpgroup [123] \(needs 8192 more registers: 64 x 128; "
                     r"the CTA's register pool is 64512 = 168 registers per thread at entry \(the __launch_bounds__ "
                     r"cap\) x 384 threads, 7168 free\)", text), r.report()


@needs_cxx
def test_interpreter_pool_follows_ptxas_s_count():
    # 40 / 232 is exactly the launch-bounds pool; with 160 registers at entry (ptxas) it no longer fits
    fd = build("coop", stages=3, prefetch=1, regs=(40, 232))
    assert _interpret_edited(fd).ok
    r = _interpret_edited(fd, registers=160)
    assert any("needs 9216 more registers" in d and "61440 = 160 registers per thread at entry (ptxas)" in d
               for d in r.deadlocks), r.report()


@needs_cxx
def test_interpreter_reports_setmaxnreg_by_part_of_a_warpgroup():
    fd = build("coop", stages=3, prefetch=1, regs=(40, 232))
    r = _interpret_edited(fd, lambda s: s.replace("heddle::sm90::setmaxnreg_dec<40>();",
                                                  "if (threadIdx.x == 0) heddle::sm90::setmaxnreg_dec<40>();"))
    assert any("setmaxnreg.sync.aligned (a collective: 1 of 128 lanes arrived)" in d for d in r.deadlocks), r.report()


@needs_cxx
def test_interpreter_reports_setmaxnreg_values_that_differ_in_a_warpgroup():
    fd = build("coop", stages=3, prefetch=1, regs=(40, 232))
    r = _interpret_edited(fd, lambda s: s.replace(
        "heddle::sm90::setmaxnreg_dec<40>();",
        "if (threadIdx.x % 2) heddle::sm90::setmaxnreg_dec<40>(); else heddle::sm90::setmaxnreg_dec<48>();"))
    assert any("one instruction and value for the whole warpgroup" in e for e in r.errors), r.report()
