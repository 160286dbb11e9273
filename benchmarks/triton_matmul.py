"""The Triton matmul heddle is compared with: written for the benchmark and tuned the way a Triton
user would tune it, so the comparison is with Triton at its ordinary best, not a strawman.

* grouped program order (GROUP_M rows of tiles share B columns in L2), fp32 accumulation,
  `tl.dot` (wgmma on Hopper through Triton's own pipeliner, `num_stages` deep);
* its own `triton.autotune` over tile shapes, warps and stages keyed on (M, N, K, B's layout),
  pruned by problem size (no 256-row tiles for 16-row problems); decode-sized tiles for small M;
* masks only where needed: EVEN_K drops the k masks, rows/columns wrap (`% M`) on loads and are
  masked on the store, so ragged sizes are handled;
* any layout through strides (NN, NT as for nn.Linear weights), batched with a shared or batched B.

`available` is False when triton cannot be imported; the benchmarks then skip the Triton column.
"""
from __future__ import annotations

try:
    import triton
    import triton.language as tl
    available = True
except ImportError:  # pragma: no cover - depends on the machine
    triton = None
    tl = None
    available = False


def _configs():
    c = triton.Config
    out = []
    # (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_stages, num_warps)
    for bm, bn, bk, st, nw in [
        # large tiles for compute-bound shapes (Hopper: 2 consumer warpgroups, deep pipelines)
        (128, 256, 64, 3, 8), (256, 128, 64, 3, 8), (128, 256, 64, 4, 8), (128, 128, 64, 4, 4),
        (128, 128, 64, 3, 8), (128, 128, 32, 4, 4), (64, 256, 32, 4, 4), (128, 64, 64, 4, 4),
        (64, 128, 64, 4, 4), (128, 64, 32, 4, 4), (64, 64, 64, 5, 4),
        # small M (decode): few rows, long k tiles, memory-bound
        (16, 64, 128, 5, 4), (16, 128, 128, 4, 4), (32, 64, 128, 5, 4), (32, 128, 64, 4, 4), (64, 64, 128, 4, 4),
    ]:
        out.append(c({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_stages=st, num_warps=nw))
    return out


def _prune(configs, named_args, **kwargs):
    """Drop tiles far larger than the problem: autotuning them costs time and never wins."""
    M, N = named_args["M"], named_args["N"]
    mcap = max(16, 1 << (max(1, M) - 1).bit_length())
    ncap = max(64, 1 << (max(1, N) - 1).bit_length())
    kept = [c for c in configs if c.kwargs["BLOCK_M"] <= mcap and c.kwargs["BLOCK_N"] <= ncap]
    if M > 256:  # decode tiles only for decode shapes
        kept = [c for c in kept if c.kwargs["BLOCK_M"] >= 64] or kept
    return kept or [min(configs, key=lambda c: c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"])]


if available:
    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                      stride_ab, stride_am, stride_ak,
                      stride_bb, stride_bk, stride_bn,
                      stride_cb, stride_cm, stride_cn,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr, EVEN_K: tl.constexpr):
        pid = tl.program_id(0)
        bid = tl.program_id(1).to(tl.int64)
        num_pid_m = tl.cdiv(M, BLOCK_M)
        num_pid_n = tl.cdiv(N, BLOCK_N)
        num_pid_in_group = GROUP_M * num_pid_n
        group_id = pid // num_pid_in_group
        first_pid_m = group_id * GROUP_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
        pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
        pid_n = (pid % num_pid_in_group) // group_size_m

        offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + bid * stride_ab + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = b_ptr + bid * stride_bb + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            if EVEN_K:
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
            else:
                a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
                b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        c = acc.to(c_ptr.dtype.element_ty)
        offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + bid * stride_cb + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
        tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))

    matmul_autotuned = triton.autotune(
        configs=_configs(), key=["M", "N", "K", "stride_bk", "stride_bn"],
        prune_configs_by={"early_config_prune": _prune},
    )(triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})(matmul_kernel))


def _args(a, b, trans_b: bool):
    import torch
    if a.dim() not in (2, 3) or b.dim() not in (2, 3):
        raise ValueError("triton matmul: operands of rank 2 or 3")
    batched = a.dim() == 3
    batch = a.shape[0] if batched else 1
    M, K = a.shape[-2], a.shape[-1]
    N = b.shape[-2] if trans_b else b.shape[-1]
    if (b.shape[-1] if trans_b else b.shape[-2]) != K:
        raise ValueError(f"triton matmul: K mismatch {a.shape} x {b.shape} (trans_b={trans_b})")
    c = torch.empty((batch, M, N) if batched else (M, N), dtype=a.dtype, device=a.device)
    sab = a.stride(0) if batched else 0
    sbb = b.stride(0) if b.dim() == 3 else 0
    sbk, sbn = (b.stride(-1), b.stride(-2)) if trans_b else (b.stride(-2), b.stride(-1))
    scb = c.stride(0) if batched else 0
    return c, (a, b, c, M, N, K, sab, a.stride(-2), a.stride(-1), sbb, sbk, sbn, scb, c.stride(-2), c.stride(-1)), batch


def matmul(a, b, trans_b: bool = False):
    """a @ b (a @ b.T with trans_b), bf16/fp16 in and out, fp32 accumulation, autotuned."""
    if not available:
        raise RuntimeError("triton is not importable")
    c, args, batch = _args(a, b, trans_b)
    M, N = args[3], args[4]
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]), batch)  # noqa: E731
    matmul_autotuned[grid](*args)
    return c


def matmul_with(a, b, trans_b: bool = False, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8, num_warps=4,
                num_stages=3):
    """One fixed config, no autotuning (tests, including TRITON_INTERPRET=1 on a CPU)."""
    if not available:
        raise RuntimeError("triton is not importable")
    c, args, batch = _args(a, b, trans_b)
    M, N, K = args[3], args[4], args[5]
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N), batch)
    matmul_kernel[grid](*args, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,
                        EVEN_K=K % BLOCK_K == 0, num_warps=num_warps, num_stages=num_stages)
    return c


def best_config(a, b, trans_b: bool = False) -> str:
    """The config Triton's autotuner chose for this problem (after a call), for the report."""
    if not available:
        return ""
    cfg = getattr(matmul_autotuned, "best_config", None)
    if cfg is None:
        return ""
    kw = cfg.kwargs
    return (f"{kw.get('BLOCK_M')}x{kw.get('BLOCK_N')}x{kw.get('BLOCK_K')} w{cfg.num_warps} s{cfg.num_stages}")
