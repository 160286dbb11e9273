"""heddle.interpret on every kernel family heddle generates for CUDA: the printed source, compiled by the
host compiler, runs on ragged shapes with the right numbers (against float64 torch) and no race,
deadlock or asynchronous misuse, under the adversarial and a random schedule. The full matrix
(every stages x prefetch x layout x dtype) runs under -m slow."""
import pytest

from heddle.interpret import _Mutated, interpret
from support.interp_defs import inputs, kernel, needs_cxx, sm80, sm90

pytestmark = needs_cxx
LAYOUTS = ["NN", "TN", "NT", "TT"]
SP = [(s, p) for s in (2, 3, 4, 5) for p in range(s)]


def check(k, ins, sms=None, schedules=(("adversarial", 0), ("random", 3))):
    for sched, seed in schedules:
        r = interpret(k, *ins, schedule=sched, seed=seed, sms=sms)
        assert r.ok, f"{k.name} [{sched}]:\n{r.report()}"
    return r


@pytest.mark.parametrize("i,sp", list(enumerate(SP)))
def test_sm80_cp_async_every_stages_and_prefetch(i, sp):
    s, p = sp
    layout, dtype = LAYOUTS[i % 4], ("bf16", "f16")[i % 2]
    fd = sm80(stages=s, prefetch=p, layout=layout, dtype=dtype, k=32 * (s + 2))
    k = kernel(fd, "sm_80")
    r = check(k, inputs(fd, 104, seed=i))
    assert r.ctas == 2 * 4  # ceil(104/64) x ceil(200/64)


@pytest.mark.slow
@pytest.mark.parametrize("s,p", SP)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_sm80_full_matrix(s, p, layout, dtype):
    fd = sm80(stages=s, prefetch=p, layout=layout, dtype=dtype, k=32 * (3 * s + 1))
    check(kernel(fd, "sm_80"), inputs(fd, 136, seed=s * 7 + p))


@pytest.mark.parametrize("stages,prefetch", [(1, 0), (2, 0), (2, 1), (3, 1)])
def test_sm80_plain_loads(stages, prefetch):
    fd = sm80(stages=stages, prefetch=prefetch, kind="plain", layout="TN", k=32 * 4)
    check(kernel(fd, "sm_80"), inputs(fd, 72, seed=stages))


def test_sm80_batched_and_other_epilogue():
    fd = sm80(stages=3, prefetch=1, batched=True, epilogue="silu_scale", dtype="f16", k=32 * 4)
    r = check(kernel(fd, "sm_80"), inputs(fd, 40, seed=5, batch=3))
    assert r.output.shape == (3, 40, 200) and r.ctas == 3 * 4


def test_sm80_and_sm90_tanh_epilogue():
    # tanh(0.25 * acc + bias): the interpreter's numbers against float64 torch.tanh
    for fd, target in ((sm80(stages=2, prefetch=1, epilogue="bias_tanh", k=32 * 3), "sm_80"),
                       (sm90("pipeline", epilogue="bias_tanh", k=16 * 5), "sm_90a")):
        k = kernel(fd, target)
        ns = "heddle::ool::"  # both the pair epilogue: tanh out of line, once per pair
        assert ns + "tanh(" in k.source
        ins = inputs(fd, 40, seed=11)
        check(k, ins, schedules=(("adversarial", 0),))
        for wrong in (ns + "sigmoid(", "("):   # the printed epilogue op edited: wrong numbers, caught
            bad = _Mutated(k, k.source.replace(ns + "tanh(", wrong))
            assert not interpret(bad, *ins).ok, wrong


HOPPER = [("pipeline", 3, 1, "NN"), ("pipeline", 4, 3, "TT"), ("pipeline", 2, 0, "NT"), ("block_sync", 3, 1, "TN"),
          ("coop", 4, 2, "NN"), ("coop", 2, 1, "TN"), ("pingpong", 3, 2, "NT"), ("pingpong", 4, 2, "NN"),
          ("3role", 3, 1, "NN"), ("3role", 2, 0, "TT")]


@pytest.mark.parametrize("variant,s,p,layout", HOPPER)
def test_sm90_families(variant, s, p, layout):
    fd = sm90(variant, stages=s, prefetch=p, layout=layout)
    k = kernel(fd, "sm_90a")
    # sms=2: the persistent kernels walk several tiles per CTA (ring phases continue across tiles)
    r = check(k, inputs(fd, 200, seed=s), sms=2)
    if variant in ("coop", "pingpong", "3role"):
        assert r.ctas == 2


@pytest.mark.parametrize("trips", [1, 2, 3, 5, 10])
def test_sm90_warp_specialized_any_trip_count(trips):
    # warp-specialized loops take any k-tile count (docs/sync-cases.md case 2): 1 .. 3s+1 with s = 3
    fd = sm90("3role", stages=3, prefetch=1, k=16 * trips)
    check(kernel(fd, "sm_90a"), inputs(fd, 130, seed=trips), sms=2)


def test_sm90_f16_silu_epilogue_and_batched_pipeline():
    fd = sm90("coop", stages=3, prefetch=1, dtype="f16", epilogue="silu_scale", k=16 * 7)
    check(kernel(fd, "sm_90a"), inputs(fd, 130, seed=3), sms=2)
    fd = sm90("pipeline", stages=3, prefetch=2, batched=True, k=16 * 5)
    r = check(kernel(fd, "sm_90a"), inputs(fd, 70, seed=2, batch=2))
    assert r.output.shape[0] == 2


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["pipeline", "coop", "pingpong", "3role"])
@pytest.mark.parametrize("s", [2, 3, 4, 5, 6])
def test_sm90_full_matrix(variant, s):
    for p in range(s):
        for i, layout in enumerate(["NN", "TT", "NT", "TN"]):
            fd = sm90(variant, stages=s, prefetch=p, layout=layout, k=16 * (3 * s + 1))
            check(kernel(fd, "sm_90a"), inputs(fd, [200, 100, 64, 130][i], seed=p), sms=2)
