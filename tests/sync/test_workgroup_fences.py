"""The AMD workgroup fences (docs/verification.md, "AMD workgroup fences"): an AMD barrier (s_barrier, the
GFX12 split s_barrier_signal / s_barrier_wait -1) orders execution only; LDS accesses are ordered through it
by the workgroup release fence before its signal and the acquire fence after its wait (LLVM AMDGPUUsage,
"Execution Barriers"; AMDGPUExecutionSynchronization). The printer puts both fences on the barrier's line;
the interpreter (interp/rt/hrt_workgroup_fences.cpp) and the kernel-IR simulator (verify/workgroup_fences.cpp) both
model the rule, so deleting any one fence -- from the printed source, or from the kernel IR -- is a race
that names the missing fence, under the deterministic adversarial schedule."""
import re

import pytest

from heddle import verify
from heddle.interpret import _Mutated, interpret
from support.interp_defs import amd, inputs, kernel, needs_cxx

# every AMD family: CDNA2 / CDNA3 with LDS DMA and with plain copies, GFX12 split barriers
FAMILIES = [("gfx90a", "async_lds", 3, 1, (2, 1)), ("gfx942", "async_lds", 2, 1, (1, 2)),
            ("gfx90a", "plain", 2, 1, (2, 1)), ("gfx942", "plain", 3, 2, (2, 2)),
            ("gfx1200", "plain", 2, 1, (2, 2)), ("gfx1200", "plain", 3, 2, (1, 2))]
IDS = [f"{t}-{k}-s{s}p{p}" for t, k, s, p, _ in FAMILIES]
FENCE = re.compile(r"heddle::fence_(release|acquire)_workgroup\(\);")


def family(target, kind, s, p, warps, n=72, k=None):
    fd = amd(kind=kind, stages=s, prefetch=p, warps=warps, n=n, k=k or 32 * (s + 1) + 8)
    return fd, kernel(fd, target)


def fence_mutants(source):
    """One mutant per fence statement of the printed source: that statement deleted (the rest of its line,
    the barrier, kept). Returns (line number, 'release' | 'acquire', the barrier's line, mutated source)."""
    lines = source.split("\n")
    out = []
    for i, ln in enumerate(lines):
        for m in FENCE.finditer(ln):
            cut = (ln[:m.start()] + ln[m.end():]).replace("  heddle::", " heddle::").rstrip()
            cut = re.sub(r"^(\s*) (heddle::)", r"\1\2", cut)
            out.append((i + 1, m.group(1), ln.strip(), "\n".join(lines[:i] + [cut] + lines[i + 1:])))
    return out


@needs_cxx
@pytest.mark.parametrize("case", FAMILIES, ids=IDS)
def test_every_family_prints_its_fences_and_interprets_clean(case):
    fd, k = family(*case)
    split = case[0] == "gfx1200"
    barrier = ("heddle::fence_release_workgroup(); heddle::barrier_signal();" if split else
               "heddle::fence_release_workgroup(); heddle::block_sync(); heddle::fence_acquire_workgroup();")
    assert barrier in k.source, k.source
    if split:
        assert "heddle::barrier_wait(); heddle::fence_acquire_workgroup();" in k.source
    ins = inputs(fd, 70, seed=3)  # ragged M and N (70, 72 against 64-wide tiles) and K (not a slab multiple)
    for sched, seed in (("adversarial", 0), ("random", 2)):
        r = interpret(k, *ins, schedule=sched, seed=seed)  # numbers against the float64 reference
        assert r.ok, f"{k.name} [{sched}]:\n{r.report()}"


@needs_cxx
@pytest.mark.parametrize("case", FAMILIES, ids=IDS)
def test_deleting_any_printed_fence_is_a_race_naming_it(case):
    fd, k = family(*case)
    ins = inputs(fd, 70, seed=3)
    mutants = fence_mutants(k.source)
    assert len(mutants) >= 2 and {kind for _, kind, _, _ in mutants} == {"release", "acquire"}
    for line, kind, text, src in mutants:
        assert src.count("fence_") == k.source.count("fence_") - 1 and src.count("heddle::") == k.source.count("heddle::") - 1
        r = interpret(_Mutated(k, src), *ins, max_findings=4)  # adversarial: deterministic
        assert r.races, f"the {kind} fence of line {line} (`{text}`) deleted, not caught:\n{r.report()}"
        assert f"missing {kind} fence" in r.races[0], r.races[0]
        again = interpret(_Mutated(k, src), *ins, max_findings=4)
        assert again.races == r.races  # the same verdict every run


@needs_cxx
def test_the_acquire_message_names_the_wait_line():
    fd, k = family("gfx1200", "plain", 2, 1, (2, 2))
    line, kind, text, src = next(m for m in fence_mutants(k.source) if m[1] == "acquire")
    r = interpret(_Mutated(k, src), *inputs(fd, 64, seed=1), max_findings=2)
    assert "heddle::barrier_wait();" in r.races[0] and "no workgroup acquire fence" in r.races[0], r.races[0]


HAND = """#include "heddle/heddle_types.cuh"
#include "heddle/heddle_hip_copy.cuh"
#ifndef __align__
#define __align__(n) __attribute__((aligned(n)))
#endif
extern "C" __global__ void fx_kernel(const float* __restrict__ X, float* __restrict__ D) {
  extern __shared__ __align__(16) unsigned char heddle_smem[];
  float* st = reinterpret_cast<float*>(heddle_smem);
  const int tid = threadIdx.x;
  st[tid] = X[tid];
SYNC
  D[tid] = st[(tid + 64) % 128];
}
"""


def run_hand(sync, target="gfx942"):
    """Two wave64 waves exchange LDS slots across `sync`; the interpreter's verdict (adversarial schedule)."""
    import json
    import torch
    from heddle import _C
    from heddle.interpret import InterpretResult
    lib = _C.interp.build(HAND.replace("SYNC", sync), "fx_kernel", target)
    x, d = torch.arange(128, dtype=torch.float32), torch.full((128,), float("nan"))
    regions = [("X", x.data_ptr(), 512, False, 4), ("D", d.data_ptr(), 512, True, 4)]
    text = lib.run([1, 1, 1], [128, 1, 1], 1024, [("ptr", x.data_ptr()), ("ptr", d.data_ptr())], ["X", "D"], regions,
                   "adversarial", 0, 0, 4, [], False, 1)
    return InterpretResult("fx_kernel", "adversarial", 0, json.loads(text), d, [], lib), x


@needs_cxx
def test_hip_syncthreads_carries_its_fences():
    # HIP's __syncthreads is release fence, s_barrier, acquire fence: clean with the exchanged values ...
    r, x = run_hand("  __syncthreads();")
    assert r.ok and r.output.tolist() == x[(torch_arange(128) + 64) % 128].tolist(), r.report()
    # ... the bare s_barrier (the header's heddle::block_sync()) orders execution only: a race naming the fence
    r, _ = run_hand("  heddle::block_sync();")
    assert r.races and "missing release fence" in r.races[0], r.report()
    r, _ = run_hand("  heddle::fence_release_workgroup(); heddle::block_sync();")
    assert r.races and "missing acquire fence" in r.races[0], r.report()
    r, _ = run_hand("  heddle::fence_release_workgroup(); heddle::block_sync(); heddle::fence_acquire_workgroup();")
    assert r.ok, r.report()


def torch_arange(n):
    import torch
    return torch.arange(n)


# --- the same rule in the kernel-IR simulator ---------------------------------------------------------------

def lowered(target, kind, s, p, warps):
    return amd(kind=kind, stages=s, prefetch=p, warps=warps, n=64, k=32 * (s + 1), epilogue="none").lower(target)


@pytest.mark.parametrize("case", FAMILIES, ids=IDS)
def test_simulator_flags_every_dropped_fence(case):
    l = lowered(*case)
    import torch
    g = torch.Generator().manual_seed(1)
    ins = [torch.randn(70, 32 * (case[2] + 1), generator=g).half(), torch.randn(32 * (case[2] + 1), 64, generator=g).half()]
    assert verify.simulate(l, ins).ok
    muts = verify.mutants(l, ["drop_release_fence", "drop_acquire_fence"])
    assert {m.kind for m in muts} == {"drop_release_fence", "drop_acquire_fence"}
    for m in muts:
        r = verify.simulate(m.kernel(), ins)
        want = "release fence" if m.kind == "drop_release_fence" else "acquire fence after it is missing"
        assert r.races and any(want in x for x in r.races), f"{m.description}:\n{r.report()}"
