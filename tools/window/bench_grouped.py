"""The grouped GEMM cases of the GPU window's bench stage (issue 33; docs/grouped.md "Benchmarks"), run by
bench_quick.py's plan: heddle.grouped_mm against torch._grouped_mm and a per-expert loop of torch.matmul on
mixture-of-experts shapes with a skewed routing; the gated FFN form silu(x @ W1_e) * (x @ W3_e) against
torch._grouped_mm twice plus silu * mul; the masked (decode) layout against a dense torch.bmm over the
padded slabs. bf16, ratios from one run; records of suites "grouped", "grouped_gated", "grouped_masked"
(benchmarks/report.py grouped_table)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

import heddle
from heddle import bench


def skewed_counts(experts: int, tokens: int, seed: int = 0) -> list:
    """Tokens per expert under a skewed routing: expert shares proportional to (rank + 1) ** -1.2 (a Zipf-like
    router: a few hot experts, a long tail that may get no token), in a shuffled expert order, summing to
    `tokens` exactly."""
    g = torch.Generator().manual_seed(seed)
    share = torch.arange(1, experts + 1, dtype=torch.float64) ** -1.2
    share = share[torch.randperm(experts, generator=g)]
    counts = torch.floor(share / share.sum() * tokens).long()
    counts[int(torch.argmax(share))] += tokens - int(counts.sum())
    return [int(c) for c in counts]


def _rotation(run, one):
    first = one()
    cnt = 1 if run.dry else bench.rotation_count(bench.set_bytes(first), bench.l2_bytes(run.dev),
                                                 max_total_bytes=4 << 30)
    return [first] + [one() for _ in range(cnt - 1)], one()


def _grouped_sets(run, counts, k, n, weights=1):
    """[x [T, K], w [E, K, N] (a transposed view of [E, N, K], nn.Linear weights per expert) x `weights`,
    offs int32 [E] (group ends on the device)] sets, and the group ends on the host."""
    e, t = len(counts), sum(counts)
    ends = torch.tensor(counts).cumsum(0).tolist()

    def one():
        x = bench.random_tensor((t, k), torch.bfloat16, run.dev)
        ws = [bench.random_tensor((e, n, k), torch.bfloat16, run.dev, scale=k ** -0.5).transpose(-1, -2)
              for _ in range(weights)]
        return [x] + ws + [torch.tensor(ends, dtype=torch.int32, device=run.dev)]
    sets, check = _rotation(run, one)
    return sets, check, ends


def _per_expert(x, w, ends):
    """x @ w[e] for each expert's rows, one torch.matmul per non-empty expert (host-known ends)."""
    out = x.new_empty((x.shape[0], w.shape[-1]))
    start = 0
    for e, end in enumerate(ends):
        if end > start:
            torch.matmul(x[start:end], w[e], out=out[start:end])
        start = end
    return out


def _rec(suite, case, counts, k, n, **kw):
    return {"suite": suite, "case": case, "dtype": "bf16", "B": len(counts), "M": sum(counts), "N": n, "K": k,
            "layout": "NT", "experts": len(counts), "max_group": max(counts),
            "empty_groups": sum(1 for c in counts if c == 0), "routing": "skewed", **kw}


def grouped_case(run, experts, tokens, k, n, seed=0):
    """heddle.grouped_mm vs torch._grouped_mm vs a per-expert loop of torch.matmul, x [T, K] @ w [E, K, N]."""
    counts = skewed_counts(experts, tokens, seed)
    sets, check, ends = _grouped_sets(run, counts, k, n)
    ref = _per_expert(check[0].float(), check[1].float(), ends)
    impls = {"heddle": lambda x, w, offs: heddle.grouped_mm(x, w, offs),
             "torch_grouped_mm": lambda x, w, offs: torch._grouped_mm(x, w, offs),
             "per_expert_loop": lambda x, w, offs: _per_expert(x, w, ends)}
    rec = _rec("grouped", f"grouped-e{experts}-{tokens}x{n}x{k}", counts, k, n, epilogue=None)
    run.measure(rec, impls, sets, check, ref, bench.matmul_flops(tokens, n, k))


def gated_case(run, experts, tokens, k, n, seed=0):
    """The gated MoE FFN's first half, silu(x @ W1_e) * (x @ W3_e): heddle.grouped_mm_gated (one kernel, two
    accumulators, the product in the epilogue) against torch._grouped_mm twice plus silu * mul."""
    counts = skewed_counts(experts, tokens, seed)
    sets, check, ends = _grouped_sets(run, counts, k, n, weights=2)
    x, w1, w3 = (t.float() for t in check[:3])
    ref = F.silu(_per_expert(x, w1, ends)) * _per_expert(x, w3, ends)

    def torch_gated(x, w1, w3, offs):
        return F.silu(torch._grouped_mm(x, w1, offs)) * torch._grouped_mm(x, w3, offs)
    rec = _rec("grouped_gated", f"grouped_gated-e{experts}-{tokens}x{n}x{k}", counts, k, n, epilogue="silu_mul",
               fused=True)
    impls = {"heddle": lambda x, w1, w3, offs: heddle.grouped_mm_gated(x, w1, w3, offs, activation="silu"),
             "torch_grouped_mm": torch_gated}
    run.measure(rec, impls, sets, check, ref,
                2 * bench.matmul_flops(tokens, n, k))


def masked_case(run, experts, max_tokens, k, n, seed=0):
    """The masked (decode) layout x [E, max_tokens, K] with skewed row counts: heddle.grouped_mm_masked against
    torch.bmm over the whole padded slabs (what a dense batched GEMM computes); checked on the counted rows."""
    counts = [min(c, max_tokens) for c in skewed_counts(experts, experts * max_tokens // 2, seed)]
    cnt = torch.tensor(counts, dtype=torch.int32)
    mask = (torch.arange(max_tokens)[None, :] < cnt[:, None]).to(run.dev)[..., None]

    def one():
        x = bench.random_tensor((experts, max_tokens, k), torch.bfloat16, run.dev)
        w = bench.random_tensor((experts, n, k), torch.bfloat16, run.dev, scale=k ** -0.5).transpose(-1, -2)
        return [x, w, cnt.to(run.dev)]
    sets, check = _rotation(run, one)
    ref = torch.where(mask, torch.bmm(check[0].float(), check[1].float()), 0)
    # the padding rows are undefined in heddle's output and computed in bmm's: both zeroed, by the same op
    impls = {"heddle": lambda x, w, c: torch.where(mask, heddle.grouped_mm_masked(x, w, c), 0),
             "torch_bmm_padded": lambda x, w, c: torch.where(mask, torch.bmm(x, w), 0)}
    rec = _rec("grouped_masked", f"grouped_masked-e{experts}-{max_tokens}x{n}x{k}", counts, k, n, epilogue=None,
               max_tokens=max_tokens)
    run.measure(rec, impls, sets, check, ref, bench.matmul_flops(sum(counts), n, k))


def plan(dry):
    """(estimated seconds, label, callable) of the grouped cases, for bench_quick.plan. MoE shapes: Mixtral's
    8 experts at K = 4096, N = 14336 (and the down projection K = 14336, N = 4096), 64 experts at
    K = N = 4096; tokens 128 .. 16384."""
    if dry:
        grouped = [(8, 100, 64, 64)]
        gated = [(4, 50, 64, 64)]
        masked = [(4, 16, 64, 64)]
    else:
        grouped = [(8, 128, 4096, 14336), (8, 2048, 4096, 14336), (8, 16384, 4096, 14336), (8, 4096, 14336, 4096),
                   (64, 1024, 4096, 4096), (64, 16384, 4096, 4096)]
        gated = [(8, 512, 4096, 14336), (8, 8192, 4096, 14336), (64, 8192, 4096, 4096)]
        masked = [(8, 256, 4096, 14336), (64, 128, 4096, 4096)]
    return ([(5, f"grouped e{e} {t}x{n}x{k}", (lambda *a: lambda r: grouped_case(r, *a))(e, t, k, n))
             for e, t, k, n in grouped]
            + [(6, f"grouped gated e{e} {t}x{n}x{k}", (lambda *a: lambda r: gated_case(r, *a))(e, t, k, n))
               for e, t, k, n in gated]
            + [(4, f"grouped masked e{e} {t}x{n}x{k}", (lambda *a: lambda r: masked_case(r, *a))(e, t, k, n))
               for e, t, k, n in masked])
