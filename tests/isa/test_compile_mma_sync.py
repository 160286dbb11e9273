"""NVRTC compile checks of the generated kernels (no GPU needed): every stage count and prefetch,
the four layouts, f16 and bf16, ragged sizes (which choose narrower copies), batched and plain-load
variants; the ptxas report must show no spills."""
import pytest

from support.matmul_defs import matmul_fusion, schedule

pytestmark = pytest.mark.nvrtc

# (stages, prefetch): every prefetch in [-s, s-1]; negative ones normalise to the same kernel,
# which the in-memory cache then serves (asserted below).
SWEEP = [(s, p) for s in (2, 3, 4, 5) for p in range(-s, s)]


def build(stages, prefetch, layout="NN", dtype="f16", m="M", n=256, k=128, vec=(8, 8), kind="cp_async",
          target="sm_80", **kw):
    fd, a, b = matmul_fusion(m=m, n=n, k=k, dtype=dtype, layout=layout, **kw)
    # synchronous copies stage through registers: a 64-row tile keeps them clear of spills
    schedule(fd, a, b, bm=128 if kind == "cp_async" else 64, stages=stages, prefetch=prefetch, kind=kind)
    return fd.compile(target, vec_a=vec[0], vec_b=vec[1])


def assert_clean(kern):
    s = kern.stats
    assert kern.binary.cubin[:4] == b"\x7fELF"
    assert s.registers > 0
    assert s.spill_stores == 0 and s.spill_loads == 0, kern.ptxas
    assert "mma.sync.aligned.m16n8k16" in kern.ptx


@pytest.mark.parametrize("stages,prefetch", SWEEP)
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_sweep_compiles_without_spills(stages, prefetch, layout, dtype):
    kern = build(stages, prefetch, layout, dtype)
    assert_clean(kern)
    p = prefetch + stages if prefetch < 0 else prefetch
    if p > 0:
        assert "cp.async.wait_group" in kern.ptx and "cp.async.commit_group" in kern.ptx
    if prefetch < 0:  # the same kernel as its normalised twin: that build is a cache hit
        twin = build(stages, p, layout, dtype)
        assert twin.binary.key == kern.binary.key and twin.binary.cache_source in ("memory", "disk")


def _vec(ld):
    return next(v for v in (8, 4, 2, 1) if ld % v == 0)


@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_ragged_1000x199x1001(layout, dtype):
    """M=1000, K=199, N=1001: leading dimensions that are not multiples of 8 take narrower copies;
    odd ones take synchronous (plain) copies."""
    M, K, N = 1000, 199, 1001
    ta, tb = layout[0] == "T", layout[1] == "T"
    lda, ldb = (M if ta else K), (K if tb else N)
    vec = (_vec(lda), _vec(ldb))
    kind = "cp_async" if min(vec) >= 2 else "plain"
    kern = build(3, 2, layout, dtype, m=M, n=N, k=K, vec=vec, kind=kind)
    assert_clean(kern)
    assert ("cp.async" in kern.ptx) == (kind == "cp_async")


def test_batched_and_other_epilogue_compile():
    assert_clean(build(3, 2, batched=True, epilogue="silu_scale"))
    k = build(2, 1, dtype="bf16", epilogue="bias_tanh")   # heddle::tanh -> tanhf through NVRTC
    assert_clean(k)
    assert "heddle::ool::tanh(" in k.source  # the pair epilogue calls it out of line (heddle_math.cuh)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_ampere_path_compiles_for_newer_targets(target):
    kern = build(4, 3, target=target)
    assert_clean(kern)
    assert f".target {target}" in kern.ptx


def test_hedle_dump_prints_stages_even_from_cache(monkeypatch, capfd):
    build(4, 3)  # warm the cache
    monkeypatch.setenv("HEDDLE_DUMP", "kernel_ir,sync,cuda,ptxas")
    kern = build(4, 3)
    err = capfd.readouterr().err
    assert kern.binary.cache_source in ("memory", "disk")
    for stage in ("kernel_ir", "sync", "cuda", "ptxas"):
        assert f"===== heddle {stage} =====" in err
    assert "cp.async.wait_group(2)" in err and "__global__" in err
