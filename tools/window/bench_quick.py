"""The GPU window's benchmark stage: a quick, prioritized set of timings that fits what is left of the window.

    python3 tools/window/bench_quick.py --out bench.jsonl --deadline EPOCH_SECONDS [--dry]

Each result is one JSON line in the schema of benchmarks/ (benchmarks/report.py reads it: a line with
"meta", one with "ceilings", then records), written as soon as it is measured, so a window cut short keeps
every number measured before the cut. Cases run in priority order and each is skipped when the time left
before the deadline is shorter than its estimate.

Method (docs/gpu-window.md, METHOD): fresh random inputs (never zeros), every implementation's output checked
once against an fp32 cuBLAS reference on inputs it is not timed on, with its output memory poisoned first;
then three times per call: `ms` device time from CUDA-graph replays of a batch of calls (the host out of the
loop; `timing` says "stream" where the calls could not be captured), `ms_stream` from CUDA events around a
batch of back-to-back calls on the stream (what an eager caller gets: host-bound when the host's time per
call exceeds the kernel's), and `host_us` on the host clock. Inputs are rotated through enough sets to exceed
3x L2; medians and p20-p80 over 7 batches.
--dry: CPU tensors, tiny shapes and the host clock; checks the plumbing (no number from it means anything).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import heddle  # noqa: E402
from heddle import bench  # noqa: E402

sys.path.insert(0, HERE)
import bench_grouped  # noqa: E402  (the grouped GEMM cases, issue 33)
import bench_fp8_variants  # noqa: E402  (where the block-scaled kernel's time goes)
import bench_mx  # noqa: E402  (the sm_100a block-scaled formats against torch's own, issue 32)


class Run:
    def __init__(self, out, deadline, dry):
        self.out, self.deadline, self.dry = out, deadline, dry
        self.dev = torch.device("cpu" if dry else "cuda")
        self.ceiling = None
        self.copy_gbps = None

    def left(self) -> float:
        return self.deadline - time.time()

    def write(self, obj) -> None:
        with open(self.out, "a") as f:
            f.write(json.dumps(obj, default=str) + "\n")
        print(json.dumps(obj, default=str)[:400], flush=True)

    # --- timing ---------------------------------------------------------------------------------
    def sync(self):
        if not self.dry:
            torch.cuda.synchronize()

    def device_ms(self, fn, sets, batches=7):
        """Per-call device time: events around `n` back-to-back calls (inputs rotated), `batches` times."""
        rot = bench.Rotation(sets)
        for _ in range(3):
            fn(*rot.next())
        self.sync()
        t0 = time.perf_counter()
        fn(*rot.next())
        self.sync()
        est = max(time.perf_counter() - t0, 1e-6)
        n = int(min(200, max(3, 0.02 / est)))  # a batch of >= ~20 ms, at most 200 calls
        samples = []
        for _ in range(batches):
            if self.dry:
                a = time.perf_counter()
                for _ in range(n):
                    fn(*rot.next())
                samples.append((time.perf_counter() - a) * 1e3 / n)
                continue
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(n):
                fn(*rot.next())
            e1.record()
            e1.synchronize()
            samples.append(e0.elapsed_time(e1) / n)
        return bench.summarize(samples), n

    def graph_ms(self, fn, sets, out_bytes, batches=7):
        """Per-call device time with the host out of the loop: `n` calls captured in one CUDA graph, its
        replays timed by events (outputs live in the graph's pool: n is capped so they stay under 2 GiB).
        None when the calls cannot be captured (the record then says so)."""
        if self.dry:
            return None, 0
        rot = bench.Rotation(sets)
        st, per = self.device_ms(fn, sets, batches=3)  # a first estimate of one call
        n = int(min(64, max(3, 5.0 / max(st.median, 1e-3)), max(3, (2 << 30) // max(out_bytes, 1))))
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                fn(*rot.next())
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(n):
                fn(*rot.next())
        graph.replay()
        torch.cuda.synchronize()
        samples = []
        for _ in range(batches):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            graph.replay()
            e1.record()
            e1.synchronize()
            samples.append(e0.elapsed_time(e1) / n)
        del graph
        return bench.summarize(samples), n

    def host_us(self, fn, sets, calls=50):
        """Host time per call: `calls` calls on the host clock, one synchronize at the end (so the queue
        never fills for the small problems this is read for)."""
        rot = bench.Rotation(sets)
        self.sync()
        a = time.perf_counter()
        for _ in range(calls):
            fn(*rot.next())
        b = time.perf_counter()
        self.sync()
        return (b - a) * 1e6 / calls

    # --- inputs -----------------------------------------------------------------------------------
    def sets(self, shapes, dtype=torch.bfloat16, scales=None):
        scales = scales or [1.0] * len(shapes)
        one = lambda: [bench.random_tensor(s, dtype, self.dev, scale=c) for s, c in zip(shapes, scales)]  # noqa: E731
        first = one()
        n = 1 if self.dry else bench.rotation_count(bench.set_bytes(first), bench.l2_bytes(self.dev),
                                                    max_total_bytes=4 << 30)
        return [first] + [one() for _ in range(n - 1)], one()

    def measure(self, rec, impls, sets, check, ref, flops, min_left=5.0, extra=None, tol=2e-2, value=None):
        """Validate then time every implementation; one record each (extra: more fields per implementation,
        such as the kernel a variant compiled to; tol: the validation tolerance, wider for 8-bit outputs;
        value: what of an output is validated against ref, default out.float())."""
        for name, fn in impls.items():
            if self.left() < min_left:
                self.write({**rec, "impl": name, "status": "skipped", "reason": "window deadline"})
                continue
            r = {**rec, "impl": name, **((extra or {}).get(name) or {})}
            try:
                if not self.dry:
                    bench.poison_allocator(ref.numel() * 2, self.dev)
                out = fn(*check)
                self.sync()
                got = value(out) if value is not None else out.float()
                r["rel_err"] = bench.validate(got, ref, tol=tol, what=f"{name} {rec['case']}")
                del out
                st, n = self.device_ms(fn, sets)
                r.update(status="ok", ms_stream=st.to_dict(), calls_per_batch=n, host_us=self.host_us(fn, sets))
                try:  # device time from graph replays; back-to-back calls (ms_stream) include host-bound gaps
                    g, gn = self.graph_ms(fn, sets, ref.numel() * 2)
                except Exception as e:  # noqa: BLE001 - not capturable: the stream time stands, and says so
                    g, gn = None, 0
                    r["graph_error"] = f"{type(e).__name__}: {str(e)[:300]}"
                    torch.cuda.synchronize()
                r["timing"] = "graph" if g else "stream"
                best = g or st
                r.update(ms=best.to_dict(), tflops=bench.tflops(flops, best.median))
                if g:
                    r["graph_calls"] = gn
                if self.ceiling:
                    r["ceiling_tflops"] = self.ceiling
            except bench.ValidationError as e:
                r.update(status="wrong", reason=str(e))
            except Exception as e:  # noqa: BLE001 - recorded
                r.update(status="error", reason=f"{type(e).__name__}: {str(e)[:600]}")
            self.write(r)


def meta(dry) -> dict:
    m = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
         "command": "tools/gpu_window.sh run (bench stage)" + (" --dry-run" if dry else ""),
         "python": platform.python_version(), "torch": torch.__version__, "heddle": heddle.__version__,
         "cpu_cores": os.cpu_count()}
    try:  # whether eager calls read tensors through ATen (heddle._C_aten) or their Python attributes
        from heddle.core import aten
        m["aten"] = aten.status()
    except Exception as e:  # noqa: BLE001
        m["aten"] = f"unknown ({type(e).__name__})"
    stamp = os.path.join(ROOT, ".whl", "STAMP")
    if os.path.exists(stamp):
        with open(stamp) as f:
            stamp = dict(ln.strip().split("=", 1) for ln in f if "=" in ln)
        m["commit"] = stamp.get("commit", "unknown")
        m["dirty"] = stamp.get("dirty") == "yes"  # the tree the wheel was built from
    if "commit" not in m:
        try:
            m["commit"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                         text=True, timeout=5).stdout.strip() or "unknown"
        except Exception:  # noqa: BLE001
            m["commit"] = "unknown"
    try:
        import triton
        m["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        m["triton"] = None
    if not dry and torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        m.update(gpu=p.name, gpu_sms=p.multi_processor_count, gpu_l2_bytes=getattr(p, "L2_cache_size", None),
                 cuda=torch.version.cuda)
    else:
        m["gpu"] = None
    return m


def ceilings(run: Run, size: int) -> None:
    """cuBLAS at a large square (bf16) and the device-to-device copy bandwidth (bytes read + written)."""
    sets, _ = run.sets([(size, size), (size, size)], scales=[1.0, size ** -0.5])
    st, _ = run.device_ms(lambda a, b: torch.matmul(a, b), sets)
    run.ceiling = bench.tflops(bench.matmul_flops(size, size, size), st.median)
    n = (1 << 29) if not run.dry else (1 << 16)
    src = bench.random_tensor((n,), torch.float16, run.dev)
    dst = torch.empty_like(src)
    cst, _ = run.device_ms(lambda s, d: d.copy_(s), [(src, dst)])
    run.copy_gbps = 2 * n * 2 / (cst.median * 1e-3) / 1e9
    run.write({"ceilings": {"bf16": {"tflops": run.ceiling, "shape": f"{size}^3", "ms": st.to_dict()},
                            "copy_gbps": run.copy_gbps}})
    del src, dst, sets


def gemm_case(run, m, n, k, suite="square", trans_b=False, triton_too=False):
    b_shape = (n, k) if trans_b else (k, n)
    sets, check = run.sets([(m, k), b_shape], scales=[1.0, k ** -0.5])
    bt = (lambda b: b.t()) if trans_b else (lambda b: b)
    ref = torch.matmul(check[0].float(), bt(check[1]).float())
    impls = {"heddle": lambda a, b: heddle.matmul(a, b, trans_b=trans_b),
             "cublas": lambda a, b: torch.matmul(a, bt(b))}
    if triton_too and not run.dry:
        import triton_matmul
        if triton_matmul.available:
            impls["triton"] = lambda a, b: triton_matmul.matmul(a, b, trans_b=trans_b)
    rec = {"suite": suite, "case": f"{suite}-{m}x{n}x{k}" + ("-nt" if trans_b else ""), "dtype": "bf16", "B": 1,
           "M": m, "N": n, "K": k, "layout": "NT" if trans_b else "NN", "epilogue": None}
    run.measure(rec, impls, sets, check, ref, bench.matmul_flops(m, n, k))


def fused_case(run, m, n, k, compile_too=False):
    """y = gelu(x @ W^T + bias), W an nn.Linear weight [N, K]."""
    sets, check = run.sets([(m, k), (n, k), (n,)], scales=[1.0, k ** -0.5, 1.0])
    x, w, b = check
    ref = F.gelu(torch.matmul(x.float(), w.float().t()) + b.float())

    def eager(x, w, b):
        return F.gelu(F.linear(x, w, b))
    impls = {"heddle": lambda x, w, b: heddle.matmul(x, w, bias=b, activation="gelu", trans_b=True),
             "torch_eager": eager,
             "cublaslt_fused": lambda x, w, b: torch._addmm_activation(b, x, w.t(), use_gelu=True)}
    if compile_too:
        impls["torch_compile"] = torch.compile(eager)
    rec = {"suite": "fused", "case": f"fused-{m}x{n}x{k}-nt-bias_gelu", "dtype": "bf16", "B": 1, "M": m, "N": n,
           "K": k, "layout": "NT", "epilogue": "bias_gelu"}
    run.measure(rec, impls, sets, check, ref, bench.matmul_flops(m, n, k))


def batched_case(run, b, m, n, k):
    sets, check = run.sets([(b, m, k), (b, k, n)], scales=[1.0, k ** -0.5])
    ref = torch.matmul(check[0].float(), check[1].float())
    impls = {"heddle": lambda x, y: heddle.matmul(x, y), "cublas": lambda x, y: torch.matmul(x, y)}
    rec = {"suite": "batched", "case": f"batched-{m}x{n}x{k}-b{b}", "dtype": "bf16", "B": b, "M": m, "N": n, "K": k,
           "layout": "NN", "epilogue": None}
    run.measure(rec, impls, sets, check, ref, bench.matmul_flops(m, n, k, b))


def variant_case(run, m, n, k, variants, suite="variants", only=None):
    """heddle's own kernel variants against each other on one problem (bias + GELU, NT): each a schedule
    built through auto_schedule's options and the scheduling API, compiled for the device. only: the target the
    variants are for (the dry run lowers for it; another device records the case as skipped)."""
    target = (only or "sm_90a") if run.dry else heddle.runtime.target_for_device()
    if only and target != only:
        run.write({"suite": suite, "case": f"{suite}-{m}x{n}x{k}", "impl": "heddle", "status": "skipped",
                   "reason": f"the variants are {only}'s; this device is {target}"})
        return
    sets, check = run.sets([(m, k), (n, k), (n,)], scales=[1.0, k ** -0.5, 1.0])
    ref = F.gelu(torch.matmul(check[0].float(), check[1].float().t()) + check[2].float())
    impls, info = {}, {}
    for label, opts, extra in variants:
        try:
            fd = heddle.Fusion()
            a = fd.input("x", "bf16", ["M", k]); w = fd.input("w", "bf16", [n, k]); bias = fd.input("bias", "bf16", [n])
            fd.output(heddle.ops.gelu(fd.matmul(a, w, False, True) + bias).to("bf16"))
            fd.auto_schedule(target, m, n, k, sms=bench_sms(run), **opts)
            if extra:
                extra(fd)
            kern = heddle.Kernel.build(fd, target, rtc=not run.dry)
            info[label] = {"config": kern.name, "registers": kern.stats.registers if kern.binary else None,
                           "smem": kern.lowered.smem_bytes}
            if run.dry:
                impls[label] = lambda x, w, b: heddle.reference.evaluate(fd, [x, w, b], torch.float32)
            else:
                impls[label] = (lambda kk: (lambda x, w, b: kk(x, w, b)))(kern)
        except Exception as e:  # noqa: BLE001 - the variant does not build: recorded
            run.write({"suite": suite, "case": f"{suite}-{m}x{n}x{k}", "impl": label, "status": "error",
                       "reason": f"{type(e).__name__}: {str(e)[:600]}"})
    rec = {"suite": suite, "case": f"{suite}-{m}x{n}x{k}-nt-bias_gelu", "dtype": "bf16", "B": 1, "M": m, "N": n,
           "K": k, "layout": "NT", "epilogue": "bias_gelu"}
    run.measure(rec, impls, sets, check, ref, bench.matmul_flops(m, n, k), extra=info)


def _fp8_sets(run, m, n, k, scaling, with_bias=False):
    """FP8 inputs in torch._scaled_mm's layouts: a [M, K] e4m3 row-major, b [K, N] e4m3 column-major (stored
    [N, K], an nn.Linear weight), f32 scales per tensor ([1]) or per row / column ([M, 1], [1, N]), values
    quantized from random bf16 with their own amax (so the codes cover the format's range)."""
    def quant(x, rows):
        amax = (x.float().abs().amax(dim=-1, keepdim=True) if rows else x.float().abs().amax().reshape(1))
        scale = (amax / 448.0).clamp(min=1e-12)
        return (x.float() / scale).to(torch.float8_e4m3fn), scale

    def one():
        a, sa = quant(bench.random_tensor((m, k), torch.bfloat16, run.dev), scaling == "row")
        w, sw = quant(bench.random_tensor((n, k), torch.bfloat16, run.dev, scale=k ** -0.5), scaling == "row")
        t = [a, w.t(), sa, sw.reshape(1, n) if scaling == "row" else sw]
        if with_bias:
            t.append(bench.random_tensor((n,), torch.bfloat16, run.dev))
        return t
    first = one()
    cnt = 1 if run.dry else bench.rotation_count(bench.set_bytes(first), bench.l2_bytes(run.dev),
                                                 max_total_bytes=4 << 30)
    return [first] + [one() for _ in range(cnt - 1)], one()


def _fp8_ref(a, b, sa, sb):
    return (a.float() * sa) @ (b.float() * sb)  # sa [M, 1] or [1]; sb [1, N] or [1] (b is [K, N])


def fp8_case(run, m, n, k, scaling):
    """heddle.scaled_mm against torch._scaled_mm (cuBLASLt) in one run: e4m3 x e4m3 -> bf16, per-tensor or
    per-row scales (docs/fp8.md)."""
    sets, check = _fp8_sets(run, m, n, k, scaling)
    ref = _fp8_ref(*check)
    impls = {"heddle": lambda a, b, sa, sb: heddle.scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16),
             "cublaslt": lambda a, b, sa, sb: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)}
    rec = {"suite": "fp8", "case": f"fp8-{m}x{n}x{k}-{scaling}", "dtype": "e4m3", "B": 1, "M": m, "N": n, "K": k,
           "layout": "NT", "epilogue": None, "scaling": scaling}
    run.measure(rec, impls, sets, check, ref, bench.matmul_flops(m, n, k))


def fp8_fused_case(run, m, n, k):
    """A quantized layer's whole epilogue in one kernel: per-row dequantize, bias, GELU, then an output scale
    and the satfinite cast to e4m3 (heddle.scaled_mm with scale_result), against torch._scaled_mm (bf16 out)
    plus the separate ops; checked against float64 within e4m3's half-ulp (tol 0.08)."""
    sets, check = _fp8_sets(run, m, n, k, "row", with_bias=True)
    so = torch.tensor([0.5], dtype=torch.float32, device=run.dev)
    ref = (F.gelu(_fp8_ref(*check[:4]) + check[4].float()) * so).to(torch.float8_e4m3fn).float()

    def separate(a, b, sa, sb, bias):
        y = torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
        return (F.gelu(y + bias).float() * so).to(torch.float8_e4m3fn)
    impls = {"heddle": lambda a, b, sa, sb, bias: heddle.scaled_mm(a, b, sa, sb, bias=bias, activation="gelu",
                                                                   out_dtype=torch.float8_e4m3fn, scale_result=so),
             "scaled_mm_then_ops": separate}
    rec = {"suite": "fp8_fused", "case": f"fp8_fused-{m}x{n}x{k}-row-bias_gelu_quant", "dtype": "e4m3", "B": 1,
           "M": m, "N": n, "K": k, "layout": "NT", "epilogue": "bias_gelu_quant", "scaling": "row"}
    run.measure(rec, impls, sets, check, ref, bench.matmul_flops(m, n, k), tol=8e-2)


def _quantize_1x128(y):
    """torch's separate ops for a 1x128 output scale (DeepGEMM's per_token_cast_to_fp8): amax per row and 128
    columns, clamped at 1e-4, s = amax / 448, q = (y / s) in e4m3. (q [M, N], s [M, ceil(N/128)])."""
    m, n = y.shape
    pad = -n % 128
    yp = (F.pad(y, (0, pad)) if pad else y).float().view(m, -1, 128)
    s = yp.abs().amax(dim=-1, keepdim=True).clamp(min=1e-4) / 448.0
    return (yp / s).to(torch.float8_e4m3fn).view(m, -1)[:, :n], s.view(m, -1)


def _dequantized(out):
    q, s = out
    return q.float() * s.repeat_interleave(128, dim=1)[:, :q.shape[1]]


def fp8_quant_case(run, m, n, k):
    """The computed 1x128 output scale (docs/fp8.md "Computed output scales"): per-row dequantize, bias, GELU,
    then amax per row and 128 columns and the e4m3 quantize in heddle.scaled_mm's epilogue (out_scale="1x128",
    returning (q, s)), against torch._scaled_mm (bf16 out) plus torch's separate quantize ops; q * s checked
    against the float reference within e4m3's step (tol 0.08)."""
    sets, check = _fp8_sets(run, m, n, k, "row", with_bias=True)
    ref = F.gelu(_fp8_ref(*check[:4]) + check[4].float())

    def separate(a, b, sa, sb, bias):
        return _quantize_1x128(F.gelu(torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16) + bias))
    impls = {"heddle": lambda a, b, sa, sb, bias: heddle.scaled_mm(a, b, sa, sb, bias=bias, activation="gelu",
                                                                   out_dtype=torch.float8_e4m3fn, out_scale="1x128"),
             "scaled_mm_then_ops": separate}
    rec = {"suite": "fp8_fused", "case": f"fp8_fused-{m}x{n}x{k}-row-bias_gelu_quant1x128", "dtype": "e4m3", "B": 1,
           "M": m, "N": n, "K": k, "layout": "NT", "epilogue": "bias_gelu_quant1x128", "scaling": "row"}
    # the same epilogue on one hand schedule, q stored directly and through the TMA store (issue 32)
    stores, info = bench_fp8_variants.quant_store_impls(run, n, k)
    for label, why in info.items():
        if why.get("status") == "error":
            run.write({**rec, "impl": label, **why})
    impls.update(stores)
    run.measure(rec, impls, sets, check, ref, bench.matmul_flops(m, n, k), tol=8e-2, value=_dequantized,
                extra={lb: v for lb, v in info.items() if "config" in v})


def _fp8_block_sets(run, m, n, k):
    """DeepGEMM's layouts (torch's BlockWise1x128 x BlockWise128x128): a [M, K] e4m3 with scale_a [M, ceil(K/128)]
    (one per row and 128 of K, stored M-major as DeepGEMM and torch's CUDA op keep it), b [K, N] column-major
    with scale_b [ceil(K/128), ceil(N/128)] (one per 128 x 128 block), each block quantized with its own amax."""
    kb, nb = -(-k // 128), -(-n // 128)

    def one():
        x = bench.random_tensor((m, k), torch.bfloat16, run.dev).float()
        w = bench.random_tensor((n, k), torch.bfloat16, run.dev, scale=k ** -0.5).float()
        xp = F.pad(x, (0, kb * 128 - k)).reshape(m, kb, 128)
        sa = (xp.abs().amax(dim=2) / 448.0).clamp(min=1e-12)                                 # [M, kb]
        wp = F.pad(w, (0, kb * 128 - k, 0, nb * 128 - n)).reshape(nb, 128, kb, 128)
        sw = (wp.abs().amax(dim=(1, 3)) / 448.0).clamp(min=1e-12)                           # [nb, kb]
        a = (xp / sa.unsqueeze(2)).reshape(m, -1)[:, :k].to(torch.float8_e4m3fn)
        wq = (wp / sw[:, None, :, None]).reshape(nb * 128, -1)[:n, :k].to(torch.float8_e4m3fn)
        return [a, wq.t(), sa.t().contiguous().t(), sw.t()]   # scale_b [kb, nb], stride (1, kb)
    first = one()
    cnt = 1 if run.dry else bench.rotation_count(bench.set_bytes(first), bench.l2_bytes(run.dev),
                                                 max_total_bytes=4 << 30)
    return [first] + [one() for _ in range(cnt - 1)], one()


def _fp8_block_ref(a, b, sa, sb):
    m, k = a.shape
    n = b.shape[1]
    sa_k = sa.float().repeat_interleave(128, dim=1)[:, :k]                                    # [M, K]
    sb_kn = sb.float().repeat_interleave(128, dim=0)[:k].repeat_interleave(128, dim=1)[:, :n]  # [K, N]
    return (a.float() * sa_k) @ (b.float() * sb_kn)


def _deep_gemm(m, n):
    """DeepGEMM's own sm90 FP8 GEMM on the same inputs, when `import deep_gemm` works: (callable, None), or
    (None, the reason it does not). Its API: `fp8_gemm_nt((a, sfa), (b, sfb), d)` (later releases) or
    `gemm_fp8_fp8_bf16_nt((lhs, lhs_scales), (rhs, rhs_scales), out)` (the first), both with a [M, K] and b
    [N, K] K-major e4m3, sfa [M, ceil(K/128)] M-major (TMA-aligned: `get_col_major_tma_aligned_tensor`) and
    sfb [ceil(N/128), ceil(K/128)], into a preallocated bf16 [M, N]."""
    try:
        import deep_gemm
    except Exception as e:  # noqa: BLE001 - not installed, or no CUDA build: a clean skip with the reason
        return None, f"import deep_gemm failed: {type(e).__name__}: {str(e)[:200]}"
    gemm = getattr(deep_gemm, "fp8_gemm_nt", None) or getattr(deep_gemm, "gemm_fp8_fp8_bf16_nt", None)
    if gemm is None:
        return None, f"deep_gemm {getattr(deep_gemm, '__version__', '?')} has neither fp8_gemm_nt nor gemm_fp8_fp8_bf16_nt"
    align = getattr(deep_gemm, "get_col_major_tma_aligned_tensor", None) or (lambda x: x)
    scales = {}  # the scales in DeepGEMM's layout, made once per input set (a caller keeps them so): not timed

    def call(a, b, sa, sb):
        key = (sa.data_ptr(), sb.data_ptr())
        if key not in scales:
            scales[key] = (align(sa.contiguous()), sb.t().contiguous())
        sfa, sfb = scales[key]
        out = torch.empty(m, n, dtype=torch.bfloat16, device=a.device)
        gemm((a, sfa), (b.t(), sfb), out)  # b is [K, N] column-major: b.t() is DeepGEMM's K-major [N, K]
        return out
    return call, None


def fp8_block_case(run, m, n, k, suite="fp8_block"):
    """DeepGEMM-style block scales (docs/fp8.md "Block scales and promotion"): heddle.scaled_mm's block-scaled
    sm_90a kernel against torch._scaled_mm with the same (BlockWise1x128, BlockWise128x128) scales where torch
    runs them on the device, and against DeepGEMM itself where `import deep_gemm` works; a peer that cannot run
    is a clean skipped record with its reason."""
    sets, check = _fp8_block_sets(run, m, n, k)
    ref = _fp8_block_ref(*check)
    impls = {"heddle": lambda a, b, sa, sb: heddle.scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)}
    rec = {"suite": suite, "case": f"{suite}-{m}x{n}x{k}-1x128_128x128", "dtype": "e4m3", "B": 1, "M": m,
           "N": n, "K": k, "layout": "NT", "epilogue": None, "scaling": "block128"}

    def torch_blockwise(a, b, sa, sb):
        return torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
    try:
        torch_blockwise(*check)
        impls["torch_blockwise"] = torch_blockwise
    except Exception as e:  # noqa: BLE001 - torch has no blockwise scaled_mm here: recorded as skipped
        run.write({**rec, "impl": "torch_blockwise", "status": "skipped",
                   "reason": f"torch._scaled_mm refuses block scales here: {type(e).__name__}: {str(e)[:300]}"})
    dg, why = (None, "DeepGEMM runs on CUDA (sm_90a) only: not in --dry") if run.dry else _deep_gemm(m, n)
    if dg:
        impls["deep_gemm"] = dg
    else:
        run.write({**rec, "impl": "deep_gemm", "status": "skipped", "reason": why})
    run.measure(rec, impls, sets, check, ref, bench.matmul_flops(m, n, k))


# DeepGEMM's own normal-GEMM test shapes (deepseek-ai/DeepGEMM tests/generators.py, enumerate_normal:
# bf16_output_nk, the DeepSeek-V3 projections as (N, K)), at its forward M values 64, 128 (decode-sized, as in
# its first tests/test_core.py) and 4096 (prefill); 7168 x 2048 at M = 128 and 4096 is the suite fp8_block
DEEPGEMM_NK = [(2112, 7168), (24576, 1536), (7168, 16384), (4096, 7168), (7168, 2048)]
DEEPGEMM_M = [64, 128, 4096]


def bench_sms(run) -> int:
    return 132 if run.dry else torch.cuda.get_device_properties(0).multi_processor_count


VARIANTS = [
    ("auto", dict(), None),
    ("cooperative", dict(epilogue_layout="cooperative"), None),
    ("pingpong", dict(epilogue_layout="pingpong"), None),
    ("epilogue_role", dict(epilogue_layout="epilogue_role"), None),
    ("coop_direct_store", dict(epilogue_layout="cooperative"), lambda fd: fd.matmul_tensor.epilogue_store("direct")),
    ("coop_cluster2", dict(epilogue_layout="cooperative"), lambda fd: fd.matmul_tensor.cluster(2, "m")),
    ("cp_async_mma_sync", dict(tma=False), None),  # the sm_80 kernel family on the same device
]
# sm_100a (docs/blackwell.md "The TMA-store epilogue"): the tcgen05 kernel's automatic schedule with its epilogue
# warpgroup storing directly from the tcgen05.ld registers (auto_schedule's choice) and through the staged TMA store;
# the pair decides whether auto_schedule should take the TMA store
TCGEN05_STORE = [("tcgen05_direct", dict(), lambda fd: fd.matmul_tensor.epilogue_store("direct")),
                 ("tcgen05_tma", dict(), lambda fd: fd.matmul_tensor.epilogue_store("tma"))]
K_SHARE = [("no_k_share", dict(k_share="none"), None), ("split_k", dict(k_share="split_k"), None),
           ("stream_k", dict(k_share="stream_k"), None)]


def plan(dry):
    """(estimated seconds, label, callable) in priority order."""
    s = 256 if dry else 1
    big = 8192 // s if not dry else 64
    mid = 4096 // s if not dry else 64
    llm = [(16, 4096, 4096), (128, 4096, 4096), (4096, 4096, 4096), (16, 14336, 4096), (4096, 14336, 4096)]
    # FP8 (issue 32): the decode shape, then M >= 1024 where the target is >= 1.0x cuBLASLt
    fp8 = [(16, 4096, 4096), (4096, 4096, 4096), (4096, 14336, 4096)]
    # block-scaled (DeepGEMM's scales) on DeepSeek-V3-sized shapes: N = 7168, its hidden size
    fp8_block = [(128, 7168, 2048), (4096, 7168, 2048)]
    fp8_decode = [(16, 4096, 4096)]  # the decode variants (bench_fp8_variants.decode_variants)
    if dry:
        fp8_decode = [(16, 128, 1024)]  # 8 k tiles of 128: every split count builds
        llm = [(16, 64, 64)]
        fp8 = [(16, 64, 64), (64, 64, 128)]
        fp8_block = [(48, 144, 320)]
    deepgemm = [(m, n, k) for n, k in DEEPGEMM_NK for m in DEEPGEMM_M if (m, n, k) not in fp8_block]
    if dry:
        deepgemm = [(64, 144, 320)]
    return ([(8, "gemm 8192^3", lambda r: gemm_case(r, big, big, big))]
            + [(4, f"fused {m}x{n}x{k}", (lambda mm, nn, kk: lambda r: fused_case(r, mm, nn, kk))(m, n, k))
               for m, n, k in llm]
            + [(4, "gemm 4096^3 nt", lambda r: gemm_case(r, mid, mid, mid, trans_b=True))]
            + [(4, f"fp8 {m}x{n}x{k} {sc}", (lambda mm, nn, kk, ss: lambda r: fp8_case(r, mm, nn, kk, ss))(m, n, k, sc))
               for m, n, k in fp8 for sc in ("tensor", "row")]
            + [(4, f"fp8 fused {m}x{n}x{k}", (lambda mm, nn, kk: lambda r: fp8_fused_case(r, mm, nn, kk))(m, n, k))
               for m, n, k in fp8[1:]]
            + [(4, f"fp8 quant 1x128 {m}x{n}x{k}", (lambda mm, nn, kk: lambda r: fp8_quant_case(r, mm, nn, kk))(m, n, k))
               for m, n, k in fp8[1:]]
            + bench_grouped.plan(dry)
            + [(4, f"fp8 block {m}x{n}x{k}", (lambda mm, nn, kk: lambda r: fp8_block_case(r, mm, nn, kk))(m, n, k))
               for m, n, k in fp8_block]
            + bench_mx.plan(dry, _quantize_1x128, _dequantized)
            + [(8, f"fp8 block variants {m}x{n}x{k}",
                (lambda mm, nn, kk: lambda r: bench_fp8_variants.fp8_block_variant_case(
                    r, mm, nn, kk, _fp8_block_sets, bench_sms(r)))(m, n, k)) for m, n, k in fp8_block[-1:]]
            + [(6, f"fp8 decode variants {m}x{n}x{k}",
                (lambda mm, nn, kk: lambda r: bench_fp8_variants.fp8_decode_variant_case(
                    r, mm, nn, kk, _fp8_sets, bench_sms(r)))(m, n, k)) for m, n, k in fp8_decode]
            + [(12, "variants 4096^3", lambda r: variant_case(r, mid, mid, mid, VARIANTS))]
            + [(6, f"tcgen05 store {m}x{n}x{k}", (lambda mm, nn, kk: lambda r: variant_case(
                r, mm, nn, kk, TCGEN05_STORE, suite="tcgen05_store", only="sm_100a"))(m, n, k))
               for m, n, k in (llm if dry else [(128, mid, mid), (mid, mid, mid), (mid, 14336, mid)])]
            + [(10, "k-share 256x4096x8192", lambda r: variant_case(r, 256 if not dry else 16, mid, 2 * mid, K_SHARE))]
            + [(6, "batched 8 x 2048^3", lambda r: batched_case(r, 8, mid // 2, mid // 2, mid // 2))]
            # DeepGEMM's shapes after heddle's own variants: 13 cases x ~3 s, skipped first when the window is short
            + [(3, f"deepgemm {m}x{n}x{k}",
                (lambda mm, nn, kk: lambda r: fp8_block_case(r, mm, nn, kk, suite="fp8_deepgemm"))(m, n, k))
               for m, n, k in deepgemm]
            + [(15, "gemm 8192^3 + triton", lambda r: gemm_case(r, big, big, big, suite="square", triton_too=True))]
            + [(12, f"llm gemm {m}x{n}x{k} + triton",
                (lambda mm, nn, kk: lambda r: gemm_case(r, mm, nn, kk, suite="llm", trans_b=True, triton_too=True))(m, n, k))
               for m, n, k in (llm if dry else [(16, 4096, 4096), (128, 4096, 4096), (4096, 4096, 4096)])]
            + [(40, "fused 4096 + torch.compile",
                lambda r: fused_case(r, mid, mid, mid, compile_too=True))]
            + [(30, "fused 16x14336x4096 + torch.compile",
                lambda r: fused_case(r, 16, 14336 if not dry else 64, mid, compile_too=True))])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--deadline", type=float, default=0, help="epoch seconds; 0: 10 minutes from now")
    ap.add_argument("--dry", action="store_true")
    ap.add_argument("--cases", default="", help="comma-separated label prefixes: only those cases (a rerun's bench)")
    args = ap.parse_args(argv)
    picked = [c for c in args.cases.split(",") if c]
    run = Run(args.out, args.deadline or time.time() + 600, args.dry)
    if not args.dry and not torch.cuda.is_available():
        print("bench_quick: no CUDA device", file=sys.stderr)
        return 2
    run.write({"meta": meta(args.dry)})
    try:
        ceilings(run, 8192 if not args.dry else 64)
    except Exception as e:  # noqa: BLE001
        run.write({"ceilings_error": f"{type(e).__name__}: {e}"})
    for est, label, fn in plan(args.dry):
        if picked and not any(label.startswith(c) for c in picked):
            continue
        if run.left() < est:
            run.write({"skipped_case": label, "reason": f"{run.left():.0f} s left, needs ~{est} s"})
            continue
        t0 = time.time()
        try:
            fn(run)
        except Exception as e:  # noqa: BLE001 - one case's failure never stops the stage
            run.write({"case_error": label, "reason": f"{type(e).__name__}: {str(e)[:600]}"})
        print(f"bench_quick: {label}: {time.time() - t0:.1f} s", flush=True)
        if not args.dry:
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
