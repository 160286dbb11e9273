"""The benchmark problems (issue 8): squares, LLM projections, batched, ragged, fused epilogues.

Each case has an id used in pytest ids, in the JSON and in the report. `quick` marks the subset run
by `pytest benchmarks --bench-quick` (one GPU call of a few minutes).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Case:
    suite: str                  # square | llm | batched | ragged | fused
    m: int
    n: int
    k: int
    batch: int = 1
    trans_b: bool = False       # b stored [N, K] (an nn.Linear weight)
    batched_b: bool = True      # batched problems: B has a batch axis too (False: one B shared)
    epilogue: Optional[str] = None   # fused: bias_gelu | bias_silu_residual
    quick: bool = False

    @property
    def id(self) -> str:
        s = f"{self.suite}-{self.m}x{self.n}x{self.k}"
        if self.batch > 1:
            s += f"-b{self.batch}" + ("" if self.batched_b else "-sharedB")
        if self.trans_b:
            s += "-nt"
        if self.epilogue:
            s += f"-{self.epilogue}"
        return s

    @property
    def layout(self) -> str:
        return "NT" if self.trans_b else "NN"

    @property
    def flops(self) -> float:
        return 2.0 * self.batch * self.m * self.n * self.k


SQUARES = [Case("square", s, s, s, quick=s in (1024, 4096, 8192)) for s in (512, 1024, 2048, 3072, 4096, 6144, 8192)]

# nn.Linear shapes of 7B-70B models: y[M, N] = x[M, K] @ W[N, K]^T
LLM_NK = [(4096, 4096), (14336, 4096), (4096, 14336), (28672, 8192), (8192, 28672)]
LLM = [Case("llm", m, n, k, trans_b=True, quick=(m in (16, 4096) and (n, k) == (14336, 4096)))
       for (n, k) in LLM_NK for m in (16, 128, 1024, 4096, 16384)]

BATCHED = [
    Case("batched", 2048, 2048, 2048, batch=8, quick=True),
    Case("batched", 1024, 1024, 128, batch=64),          # attention-like: short K
    Case("batched", 512, 512, 512, batch=128),
    Case("batched", 4096, 4096, 4096, batch=4, batched_b=False),   # one weight shared by the batch
]

# sizes that are not multiples of any tile; N and K stay multiples of 8 where a real model's would be
RAGGED = [
    Case("ragged", 1000, 1000, 1000),
    Case("ragged", 4095, 4097, 4096, quick=True),        # N odd: 2-byte-aligned rows, synchronous-copy path
    Case("ragged", 3000, 5000, 2000),
    Case("ragged", 127, 4096, 4096),
    Case("ragged", 8191, 8192, 8192),
]

GEMM = SQUARES + LLM + BATCHED + RAGGED

FUSED = [Case("fused", m, n, k, trans_b=True, epilogue=e, quick=(m, n, e) == (4096, 4096, "bias_gelu"))
         for e in ("bias_gelu", "bias_silu_residual")
         for (m, n, k) in [(128, 4096, 4096), (1024, 4096, 4096), (4096, 4096, 4096), (4096, 14336, 4096),
                           (16384, 4096, 4096)]]

DTYPES = ["bf16", "fp16"]
