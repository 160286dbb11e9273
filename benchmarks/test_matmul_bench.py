"""GEMM and fused-epilogue benchmarks (GPU; skipped without one).

Per case and dtype, in one process and on the same inputs:
  heddle (heddle.matmul, its automatic schedule; with --bench-autotune also the tuned config),
  cuBLAS (torch.matmul), Triton (benchmarks/triton_matmul.py, autotuned; when importable);
  fused epilogues: heddle vs torch eager vs torch.compile (default mode).

Method (heddle.bench): fresh random inputs (never zeros), a float64 reference on the GPU, every
implementation validated on inputs it has not seen with its output memory poisoned first; then
CUDA events around each call after warm-up, inputs rotated through enough sets to exceed 3x L2,
median and p20-p80 spread of >= 10 calls (~200 ms of measured time). The ceilings (cuBLAS at large
squares, device copy bandwidth) are measured in the same run.
"""
from __future__ import annotations

import pytest
import torch

import heddle
from heddle import bench
from heddle.api import MatmulSpec, _ops

import triton_matmul
from cases import DTYPES, FUSED, GEMM, Case

pytestmark = pytest.mark.gpu

DT = {"bf16": torch.bfloat16, "fp16": torch.float16}
HDT = {"bf16": "bf16", "fp16": "f16"}


def _params(cases):
    return [pytest.param(c, d, id=f"{c.id}-{d}", marks=[pytest.mark.quick] if c.quick else [])
            for c in cases for d in DTYPES]


# --- ceilings ----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def ceilings(recorder, bench_budget):
    """The machine's measured ceilings: best cuBLAS GEMM rate per dtype over large squares, and
    device-to-device copy bandwidth (bytes read + written)."""
    out = {}
    dev = torch.device("cuda")
    timer = bench.CudaEventTimer()
    for name, dt in DT.items():
        best = None
        for s in (8192, 16384):
            a = bench.random_tensor((s, s), dt, dev)
            b = bench.random_tensor((s, s), dt, dev, scale=s ** -0.5)
            st = bench.measure(lambda x, y: torch.matmul(x, y), bench.Rotation([(a, b)]), timer, bench_budget)
            tf = bench.tflops(bench.matmul_flops(s, s, s), st.median)
            if best is None or tf > best["tflops"]:
                best = {"tflops": tf, "shape": f"{s}^3", "ms": st.to_dict()}
            del a, b
        out[name] = best
    n = 1 << 29  # 1 GiB of fp16
    src = bench.random_tensor((n,), torch.float16, dev)
    dst = torch.empty_like(src)
    st = bench.measure(lambda s, d: d.copy_(s), bench.Rotation([(src, dst)]), timer, bench_budget)
    out["copy_gbps"] = 2 * n * 2 / (st.median * 1e-3) / 1e9
    del src, dst
    torch.cuda.empty_cache()
    recorder.set("gpu", "ceilings", out)
    return out


def test_ceiling(ceilings):
    assert ceilings["bf16"]["tflops"] > 0 and ceilings["copy_gbps"] > 0


# --- inputs ------------------------------------------------------------------------------------


def _input_sets(case: Case, dtype: str, with_bias=False, with_residual=False):
    dev = torch.device("cuda")
    dt = DT[dtype]
    gen = torch.Generator(dev)
    gen.manual_seed(hash((case.id, dtype)) & 0xFFFFFFFF)
    pre = (case.batch,) if case.batch > 1 else ()
    a_shape = pre + (case.m, case.k)
    b_shape = (pre if case.batched_b else ()) + ((case.n, case.k) if case.trans_b else (case.k, case.n))

    def one():
        t = [bench.random_tensor(a_shape, dt, dev, gen), bench.random_tensor(b_shape, dt, dev, gen, case.k ** -0.5)]
        if with_bias:
            t.append(bench.random_tensor((case.n,), dt, dev, gen))
        if with_residual:
            t.append(bench.random_tensor(pre + (case.m, case.n), dt, dev, gen))
        return t

    first = one()
    n = bench.rotation_count(bench.set_bytes(first), bench.l2_bytes(dev))
    sets = bench.Rotation([first] + [one() for _ in range(n - 1)])
    check = one()
    for i, x in enumerate(check):
        bench.check_not_degenerate(x, f"input {i}")
    return sets, check


def _ref_gemm(case: Case, a, b):
    bt = b.double().transpose(-1, -2) if case.trans_b else b.double()
    return torch.matmul(a.double(), bt)


def _ref_fused(case: Case, a, b, bias, residual=None):
    y = torch.matmul(a.double(), b.double().transpose(-1, -2)) + bias.double()
    if case.epilogue == "bias_gelu":
        return torch.nn.functional.gelu(y)
    return torch.nn.functional.silu(y) + residual.double()


# --- implementations ---------------------------------------------------------------------------


def _heddle_spec(case: Case, dtype: str) -> MatmulSpec:
    d = HDT[dtype]
    bias = (d, 1) if case.epilogue else None
    residual = (d, 2) if case.epilogue == "bias_silu_residual" else None
    act = {"bias_gelu": "gelu", "bias_silu_residual": "silu"}.get(case.epilogue)
    return MatmulSpec(dtype=d, batched=case.batch > 1, batched_b=case.batch > 1 and case.batched_b, k=case.k,
                      n=case.n, trans_a=False, trans_b=case.trans_b, bias=bias, residual=residual, activation=act,
                      alpha=None, out_dtype=d)


def _heddle_kernel_info(case, dtype, tensors) -> dict:
    """The heddle kernel heddle.matmul ran: its name (tile, stages, load kind) and resources."""
    fm = _ops.get(_heddle_spec(case, dtype))
    if fm is None:
        return {}
    try:
        k = fm.kernel_for(list(tensors), heddle.runtime.target_for_device(tensors[0].device))
    except Exception as e:  # noqa: BLE001 - information only
        return {"config": f"unknown ({type(e).__name__})"}
    return {"config": k.name, "registers": k.stats.registers, "smem": k.lowered.smem_bytes}


def _gemm_impls(case: Case, dtype: str, autotune: bool):
    tb = case.trans_b
    impls = {
        "heddle": lambda a, b: heddle.matmul(a, b, trans_b=tb),
        "cublas": (lambda a, b: torch.matmul(a, b.transpose(-1, -2))) if tb else (lambda a, b: torch.matmul(a, b)),
    }
    if triton_matmul.available:
        impls["triton"] = lambda a, b: triton_matmul.matmul(a, b, trans_b=tb)
    if autotune:
        from heddle import autotune as at
        fm_holder = {}

        def tuned(a, b):
            k = fm_holder.get("k")
            if k is None:
                heddle.matmul(a, b, trans_b=tb)  # registers the op
                fm = _ops[_heddle_spec(case, dtype)]
                from heddle.kernel import _vec_for
                k = at.matmul_kernel(fm, heddle.runtime.target_for_device(a.device), _vec_for(a), _vec_for(b),
                                     case.m, case.batch, progress=True)
                fm_holder["k"] = k
            return k(a, b)
        impls["heddle_tuned"] = tuned
    return impls


def _fused_impls(case: Case):
    act = case.epilogue

    if act == "bias_gelu":
        def eager(x, w, b):
            return torch.nn.functional.gelu(torch.nn.functional.linear(x, w, b))

        def hed(x, w, b):
            return heddle.matmul(x, w, bias=b, activation="gelu", trans_b=True)
    else:
        def eager(x, w, b, r):
            return torch.nn.functional.silu(torch.nn.functional.linear(x, w, b)) + r

        def hed(x, w, b, r):
            return heddle.matmul(x, w, bias=b, activation="silu", residual=r, trans_b=True)
    torch._dynamo.reset()
    return {"heddle": hed, "torch_eager": eager, "torch_compile": torch.compile(eager)}


# --- the measurement ---------------------------------------------------------------------------


def _run(case: Case, dtype: str, impls, sets, check, ref, recorder, ceilings, budget):
    failures = []
    timer = bench.CudaEventTimer()
    ceiling = ceilings[dtype]["tflops"]
    nbytes = bench.min_bytes(case.m, case.n, case.k, case.batch, 2,
                             extra_out_reads=1 if case.epilogue == "bias_silu_residual" else 0,
                             batched_b=case.batched_b)
    floor_ms = bench.roofline_ms(case.flops, nbytes, ceiling, ceilings["copy_gbps"])
    for name, fn in impls.items():
        rec = {"suite": case.suite, "case": case.id, "dtype": dtype, "B": case.batch, "M": case.m, "N": case.n,
               "K": case.k, "layout": case.layout, "batched_b": case.batched_b, "epilogue": case.epilogue,
               "impl": name, "sets": len(sets), "floor_ms": floor_ms}
        try:
            bench.poison_allocator(ref.numel() * 2, ref.device)
            out = fn(*check)
            torch.cuda.synchronize()
            rec["rel_err"] = bench.validate(out, ref, what=f"{name} {case.id} {dtype}")
            del out
            st = bench.measure(fn, sets, timer, budget)
        except bench.ValidationError as e:
            rec.update(status="wrong", reason=str(e))
            failures.append(str(e))
        except Exception as e:  # noqa: BLE001 - recorded, then the test fails
            rec.update(status="error", reason=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            failures.append(f"{name}: {rec['reason']}")
        else:
            rec.update(status="ok", ms=st.to_dict(), tflops=bench.tflops(case.flops, st.median),
                       ceiling_tflops=ceiling, roofline_fraction=floor_ms / st.median)
            if name == "heddle":
                rec.update(_heddle_kernel_info(case, dtype, check))
            if name == "triton":
                rec["config"] = triton_matmul.best_config(*check[:2], trans_b=case.trans_b)
        recorder.add("gpu", rec)
    if failures:
        pytest.fail("; ".join(failures))


@pytest.mark.parametrize("case,dtype", _params(GEMM))
def test_gemm(case, dtype, recorder, ceilings, bench_budget, request):
    sets, check = _input_sets(case, dtype)
    ref = _ref_gemm(case, *check)
    impls = _gemm_impls(case, dtype, request.config.getoption("--bench-autotune"))
    _run(case, dtype, impls, sets, check, ref, recorder, ceilings, bench_budget)


@pytest.mark.parametrize("case,dtype", _params(FUSED))
def test_fused_epilogue(case, dtype, recorder, ceilings, bench_budget):
    res = case.epilogue == "bias_silu_residual"
    sets, check = _input_sets(case, dtype, with_bias=True, with_residual=res)
    ref = _ref_fused(case, *check)
    _run(case, dtype, _fused_impls(case), sets, check, ref, recorder, ceilings, bench_budget)
