"""Epilogue operands read in aligned column pairs (vec_e=2, passes/vectorize_epilogue_reads.cpp): the staged
sm_90a epilogue (the wgmma fragment in pairs of adjacent columns, TMA-stored) reads a bias row or a residual
with one 32-bit (16-bit pair) or 64-bit (f32 pair) load instead of two scalar loads; vec_e is an alignment
class like vec_a / vec_b, checked at launch and chosen by heddle.matmul from the tensors.

Checked here: the lowering (name, kernel IR, printed read, what stays scalar), NVRTC (half the global loads;
the auto bias + GELU + residual kernel, which spills with scalar reads, does not), the CPU interpreter of the
printed source (float64-right numbers on ragged shapes for bf16 and f32 operands, both layouts; source
mutants of the pair column caught as a misaligned or out-of-bounds read), the launch check and
heddle.matmul's choice."""
import re

import pytest
import torch

import heddle
from support.env import requires_nvrtc
from heddle.core.interpret import _Mutated
from heddle.core.kernel import _pair_ok, _vec_e_for
from heddle.interpret import interpret
from heddle.pytorch.matmul import FusedMatmul, MatmulSpec
from support.wgmma_defs import assert_interprets_clean, inputs, nvrtc_sm90
from support.interp_defs import needs_cxx

COLV = "const int colv = n0 + lc0 < N - 2 ? n0 + lc0 : N - 2;"


def spec(n=200, k=96, bias="bf16", residual=None, activation="gelu_tanh", row_bias=None):
    return MatmulSpec("bf16", False, False, k, n, False, False, (bias, 1) if bias else None,
                      (residual, 2) if residual else None, activation, None, "bf16", row_bias=row_bias)


def scheduled(s, layout="auto", m=-1):
    """The automatic kernel for operands that suit pair reads (heddle.matmul's vec_e=2 choice), lowered below
    with vec_e=1 as well to compare the reads."""
    fd = s.build_fusion()
    fd.auto_schedule("sm_90a", m, s.n, s.k, tma=True, sms=132, epilogue_layout=layout, epilogue_pairs=True)
    return fd


def data(fd, M, seed=0):
    return inputs(fd, M, seed=seed)


def test_lowering_reads_bias_and_residual_in_pairs():
    fd = scheduled(spec(residual="bf16"))
    scalar, pairs = fd.lower("sm_90a"), fd.lower("sm_90a", vec_e=2)
    assert pairs.name == scalar.name + "_ev2", pairs.name
    assert pairs.pair_operands == ["bias", "residual"] and scalar.pair_operands == []
    assert "epilogue reads E_bias two columns per load (aligned pairs)" in pairs.kernel_ir
    assert "epilogue reads E_residual two columns per load" in pairs.kernel_ir
    src = pairs.source
    assert COLV in src and COLV not in scalar.source
    assert "heddle::load_pair(E_bias + (long long)colv);" in src
    assert "heddle::load_pair(E_residual + (long long)row * E_residual_s0 + (long long)colv);" in src
    assert "E_bias[(long long)col_0" not in src and "E_bias[(long long)col_0" in scalar.source
    assert "vectorize_epilogue_reads" in [n for n, *_ in pairs.passes]


def test_what_stays_scalar():
    # a per-row bias (broadcast along the columns) is one element per pair: not read in pairs
    fd = scheduled(spec(bias=None, row_bias=("bf16", 2)))
    low = fd.lower("sm_90a", vec_e=2)
    assert low.pair_operands == [] and "_ev2" not in low.name and "load_pair" not in low.source
    # a kernel whose epilogue runs per element (AMD MFMA: its fragment registers walk rows) is unchanged by
    # vec_e=2 (the sm_80 mma.sync epilogue runs in pairs: tests/codegen/test_mma_sync_epilogue_pairs.py)
    fd = spec().build_fusion()
    fd.auto_schedule("gfx942", -1, 200, 96)
    assert fd.lower("gfx942", vec_e=2).source == fd.lower("gfx942").source
    # a bias from its TMA ring is read from shared memory (as one word already)
    s = spec()
    fd = s.build_fusion()
    fd.cache_after(next(t for t in fd.inputs if t.name == "bias"), "tma_load").circular_buffer(2)
    fd.auto_schedule("sm_90a", -1, s.n, s.k, tma=True, sms=132)
    assert fd.lower("sm_90a", vec_e=2).pair_operands == []


def test_vec_e_out_of_range_is_a_named_error():
    with pytest.raises(heddle.ScheduleError, match=r"lower\(vec_e=4\): an epilogue operand is read 1 or 2"):
        scheduled(spec()).lower("sm_90a", vec_e=4)


@requires_nvrtc
@pytest.mark.parametrize("residual,layout", [(None, "auto"), ("bf16", "auto"), (None, "cooperative")])
def test_nvrtc_halves_the_global_loads(residual, layout):
    s = spec(n=4096, k=4096, residual=residual)
    fd = scheduled(s, layout)
    counts = {}
    for v in (1, 2):
        low = fd.lower("sm_90a", vec_e=v)
        r = heddle._C.runtime.compile(low.source, low.name, "sm_90a", isolate=True)
        counts[v] = (re.findall(r"ld\.global\.nc\.(\w+)", r.ptx), r.stats.spill_stores)
    (scalar, _), (pairs, spills) = counts[1], counts[2]
    assert set(scalar) == {"u16"} and set(pairs) == {"u32"} and 2 * len(pairs) == len(scalar), counts
    nvrtc_sm90(fd.lower("sm_90a", vec_e=2))  # no spills, setmaxnreg honoured
    if residual:  # with scalar reads the auto bias + GELU + residual kernel spills (ptxas hoists 160 loads)
        assert counts[1][1] > 0 and spills == 0, counts


@requires_nvrtc
def test_nvrtc_f32_bias_reads_64_bit_pairs():
    fd = scheduled(spec(n=4096, k=4096, bias="f32"))
    r = nvrtc_sm90(fd.lower("sm_90a", vec_e=2))
    assert "ld.global.nc.v2.f32" in r.ptx and "ld.global.nc.f32" not in r.ptx


@needs_cxx
@pytest.mark.parametrize("kw,layout,M", [(dict(), "auto", 130), (dict(bias="f32", residual="bf16"), "auto", 77),
                                         (dict(residual="f32", activation=None), "cooperative", 150)])
def test_interpreter_numbers_on_ragged_shapes(kw, layout, M):
    # N = 200: the last n-tile's pairs past N read the last whole pair (clipped by the TMA store)
    fd = scheduled(spec(**kw), layout)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False, vec_e=2)
    assert k.lowered.pair_operands
    assert_interprets_clean(k, data(fd, M, seed=M), sms=2)


@needs_cxx
@pytest.mark.parametrize("bad,finding", [
    ("const int colv = n0 + lc0 + 1 < N - 2 ? n0 + lc0 + 1 : N - 2;", "misaligned address"),  # odd column
    ("const int colv = n0 + lc0;", "outside every tensor"),  # no clamp: the last tile reads past the bias
])
def test_interpreter_catches_pair_column_mutants(bad, finding):
    fd = scheduled(spec())
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False, vec_e=2)
    assert COLV in k.source
    r = interpret(_Mutated(k, k.source.replace(COLV, bad)), *data(fd, 70), sms=1)
    assert not r.ok and finding in r.report(), r.report()


def _no_maps(*args, **kw):  # prepare's tensor-map encoder: the bytes do not matter here
    return b"\0" * 128


def test_launch_checks_the_pair_layout():
    fd = scheduled(spec())
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False, vec_e=2)
    a, b, bias = data(fd, 64)
    k.prepare([a, b, bias], tensor_map_encoder=_no_maps, sms=1)  # aligned: accepted
    odd = torch.zeros(201, dtype=torch.bfloat16)[1:]  # 2-byte aligned only
    with pytest.raises(heddle.InputError, match=r"input 'bias': the kernel reads it two columns per load \(vec_e=2\)"
                                                r".*recompile with vec_e=1"):
        k.prepare([a, b, odd], tensor_map_encoder=_no_maps, sms=1)
    strided = torch.zeros(400, dtype=torch.bfloat16)[::2]
    assert not _pair_ok(odd) and not _pair_ok(strided) and _pair_ok(bias)
    assert _pair_ok(torch.zeros(64, 1)) and not _pair_ok(torch.zeros(63, 3, dtype=torch.bfloat16)[:, :2])


@needs_cxx
def test_scalar_kernel_runs_misaligned_operands():
    fd = scheduled(spec())
    a, b, bias = data(fd, 70, seed=3)
    odd = torch.empty(201, dtype=torch.bfloat16)[1:]
    odd.copy_(bias)
    assert _vec_e_for([odd]) == 1 and _vec_e_for([bias]) == 2
    assert_interprets_clean(heddle.Kernel.build(fd, "sm_90a", rtc=False), [a, b, odd], sms=2)


def test_heddle_matmul_picks_vec_e_from_the_operands():
    fm = FusedMatmul(spec(residual="bf16"))
    a, b, bias, res = data(fm.fusion, 200)  # M <= 64 takes one MMA warpgroup storing directly: nothing to pair
    k = fm.kernel_for([a, b, bias, res], "sm_90a")
    assert k.vec_e == 2 and k.name.endswith("_ev2")
    res_t = torch.zeros(200, 200, dtype=torch.bfloat16).t()  # columns not contiguous
    k1 = fm.kernel_for([a, b, bias, res_t], "sm_90a")
    # scalar reads of a residual: the cooperative layout (ping-pong would spill: tests/schedule/test_epilogue_layout.py)
    assert k1.vec_e == 1 and "_ev2" not in k1.name and "_ws2coop_" in k1.name
    assert "_ev2" in fm.describe("sm_90a", sms=132).splitlines()[-1]
