"""heddle.interpret: run the CUDA or HIP source heddle printed for a kernel on the CPU, as printed.

The exact source handed to NVRTC or hiprtc (sm_80, sm_90a; gfx90a, gfx942, gfx1200) is compiled by the
host C++ compiler (g++ or clang++) against heddle's execution runtime (src/heddle/interp/rt): every GPU
thread runs as its own fiber, so barriers, mbarrier waits and warp / wave collectives really block while
other threads go on; cp.async groups, TMA loads and stores, wgmma groups and AMD LDS DMA complete when a
scheduler decides (as late as the program allows, or at seeded random moments); every shared-memory
access, including the kernel's plain loads and stores, is checked for happens-before. The launch arguments come from the same code that launches on a GPU
(Kernel.prepare), with tensor maps in the runtime's own encoding.

    r = heddle.interpret(kernel, a, b, bias)              # CPU tensors, in the fusion's input order
    r.ok, r.output, r.races, r.deadlocks, r.async_misuse, r.errors, r.mismatches
    print(r.report())                                     # findings name printed-source lines and threads

`HEDDLE_INTERPRET=1` makes heddle.matmul, Kernel.op and the torch.compile backend run CPU tensors
through here (a slow debugging mode; findings raise heddle.HeddleError). docs/verification.md says when
to use heddle.simulate (the kernel IR, fast) and when interpret (the printed source).
"""
from __future__ import annotations

import json
import os
from typing import Dict, List, Optional, Sequence

from .. import _C
from . import inputs
from .errors import HeddleError, InputError

_TOL = {"f16": (1e-2, 1e-2), "bf16": (4e-2, 2e-2), "f32": (1e-3, 1e-3),
        # 8-bit outputs: the f32 sum may round to the neighbour of the float64 one (one step: 2^-3 relative for
        # e4m3, 2^-2 for e5m2), and a few subnormal quanta near zero
        "e4m3": (2.0 ** -7, 0.13), "e5m2": (2.0 ** -14, 0.26)}


def interpret_mode() -> bool:
    """True when HEDDLE_INTERPRET is set to something other than '' or '0'."""
    return os.environ.get("HEDDLE_INTERPRET", "0") not in ("", "0")


def interpret_target() -> str:
    """The target heddle.matmul lowers for under HEDDLE_INTERPRET=1 on CPU tensors (HEDDLE_INTERPRET_TARGET,
    default sm_90a: the warp-specialized TMA + wgmma path)."""
    return os.environ.get("HEDDLE_INTERPRET_TARGET", "sm_90a")


class InterpretResult:
    """Findings and output of one interpretation. `ok`: no finding and every output element within
    tolerance of the float64 reference (when one was computed)."""

    def __init__(self, name: str, schedule: str, seed: int, raw: dict, output, mismatches: List[str], library):
        self.kernel_name = name
        self.schedule = schedule
        self.seed = seed
        self.raw = raw
        self.output = output
        self.mismatches = mismatches
        self.library = library
        self.findings = [(f["kind"], f["text"]) for f in raw.get("findings", [])]
        self.counts: Dict[str, int] = dict(raw.get("counts", {}))

    def _of(self, kind: str) -> List[str]:
        return [t for k, t in self.findings if k == kind]

    races = property(lambda self: self._of("race"))
    deadlocks = property(lambda self: self._of("deadlock"))
    async_misuse = property(lambda self: self._of("async"))
    errors = property(lambda self: self._of("error"))

    @property
    def ok(self) -> bool:
        return not self.findings and not self.mismatches

    @property
    def ctas(self) -> int:
        return int(self.raw.get("ctas", 0))

    def report(self) -> str:
        sched = self.schedule if self.schedule == "adversarial" else f"random(seed={self.seed})"
        head = f"heddle.interpret {self.kernel_name} [{sched}], {self.ctas} CTA(s): "
        if self.ok:
            return head + "clean (no race, deadlock, async misuse or mismatch)"
        lines = [head + ", ".join(f"{n} {k}" for k, n in sorted(self.counts.items())) +
                 (f", {len(self.mismatches)} mismatch line(s)" if self.mismatches else "")]
        lines += [f"[{k}] {t}" for k, t in self.findings]
        lines += [f"[mismatch] {m}" for m in self.mismatches]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.report()


def _storage_span(t) -> int:
    if t.numel() == 0:
        return 0
    return (1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))) * t.element_size()


def _kernel_of(kernel, fusion):
    from .kernel import Kernel
    if isinstance(kernel, Kernel):
        return kernel
    lowered = kernel
    fus = fusion
    if fus is None:
        from . import verify
        fus = verify._V.fusion_of(lowered)
    return Kernel(fus, lowered, None, lowered.target, 8, 8)


def _mx_q_atol(k, dtype: str, atol):
    """The absolute tolerance of an MX-format output's q (docs/fp8.md "MX formats"): its block's amax lands in
    [2^emax, 2^(emax+1)), so the f32 sum's rounding against float64 is an absolute error relative to 2^(emax+1) --
    2^-16 of it (e4m3: 2^-7, the default; e5m2: 1, where the default 2^-14 assumes values near 1)."""
    if atol is not None or not getattr(k, "_mx_outs", None) or dtype not in ("e4m3", "e5m2"):
        return atol
    from .reference import MX_EMAX
    return 2.0 ** (MX_EMAX[dtype] + 1 - 16)


def _compare(out, ref, dtype: str, atol, rtol, limit: int = 8) -> List[str]:
    import torch
    if dtype == "e8m0":  # an MX-format output's scale (docs/fp8.md "MX formats"): its codes exactly, padding included
        o = out.detach().view(torch.uint8).to(torch.float64)
        r = ref.detach().to(torch.float8_e8m0fnu).view(torch.uint8).to(torch.float64).reshape(o.shape)
        atol = rtol = 0.0
    else:
        o = out.detach().to(torch.float64)
        r = ref.detach().to(torch.float64).reshape(o.shape)
        d_atol, d_rtol = _TOL.get(dtype, (1e-2, 1e-2))
        atol = d_atol if atol is None else atol
        rtol = d_rtol if rtol is None else rtol
    bad = ~((o - r).abs() <= atol + rtol * r.abs())
    bad &= ~(torch.isnan(o) & torch.isnan(r))
    n = int(bad.sum())
    if not n:
        return []
    idx = bad.nonzero()[:limit]
    lines = [f"{n} of {o.numel()} output elements differ from the float64 reference (atol {atol}, rtol {rtol})"]
    for i in idx:
        at = tuple(int(x) for x in i)
        got = float(o[at])
        lines.append(f"  at {at}: got {got!r}{' (never written)' if got != got and r[at] == r[at] else ''}, "
                     f"expected {float(r[at])!r}")
    return lines


def interpret(kernel, *tensors, schedule: str = "adversarial", seed: int = 0, reference=None, fusion=None,
              sms: Optional[int] = None, ctas: Optional[Sequence[int]] = None, max_events: int = 0,
              max_findings: int = 20, stop_at_first: bool = False, atol: Optional[float] = None,
              rtol: Optional[float] = None, workers: int = 1, registers: Optional[int] = None,
              tensor_map_encoder=None) -> InterpretResult:
    """Run `kernel` (a heddle.Kernel, or a lowered kernel from Fusion.lower) on CPU `tensors` by
    compiling its printed source for the host. schedule: "adversarial" (deterministic: each thread runs
    until it blocks, asynchronous work lands as late as allowed) or "random" (seeded). reference: the
    expected output (default heddle.reference.evaluate in float64; False: no numeric check). sms: the SM
    count a persistent kernel's grid stands for (default the device's, else 132): fewer SMs give each CTA
    more tiles. ctas: linear CTA indices to run (default all). workers: how many CTAs run at once (one
    OS thread each, every CTA's threads still fibers; default 1: one after another, deterministic). registers:
    the per-thread register count at entry that setmaxnreg's pool is made of (default: ptxas's count for a
    compiled heddle.Kernel, else the __launch_bounds__ cap 65536 / threads). tensor_map_encoder: encodes the
    launch's tensor maps (default the interpreter's; source_mutants.MapMutant wraps it). Raises RuntimeUnavailable without a host
    C++ compiler, InputError for inputs the kernel cannot take (the same checks as a GPU launch)."""
    import torch
    k = _kernel_of(kernel, fusion)
    lowered = k.lowered
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor):
            raise InputError(f"interpret: argument {i} is a {type(t).__name__}, not a torch.Tensor")
    tensors = tuple(inputs.materialize([t.detach().cpu() for t in tensors]))  # what a launch reads (negative bits)
    k.bind(tensors)
    result, grid, args = k.prepare(tensors, tensor_map_encoder=tensor_map_encoder or _C.interp.encode_tensor_map_tiled,
                                     sms=sms)
    outs = result if isinstance(result, tuple) else (result,)  # a fusion's outputs, in order (D, D1, ...)
    out = outs[0]
    for o in outs:
        if o.is_floating_point():
            o.fill_(float("nan"))  # an element the kernel never writes shows up as a mismatch
    names = [p[0] for p in lowered.params]
    regions = [(n, t.data_ptr(), _storage_span(t), False, t.element_size())
               for (n, _, _), t in zip(k._inputs, tensors) if t.numel()]
    regions += [("output" if i == 0 else f"output {i}", o.data_ptr(), _storage_span(o), True, o.element_size())
                for i, o in enumerate(outs)]
    if lowered.needs_workspace:  # split-K / stream-K workspace: written more than once per element by design (elem_bytes 0)
        from .inputs import MatmulGeometry
        env = MatmulGeometry(k._matmul_expr, {n: t for (n, _, _), t in zip(k._inputs, tensors)}).env
        ws, flags = k.workspace(out.device, env)  # the pair prepare passed (kept per device)
        regions += [("workspace", ws.data_ptr(), _storage_span(ws), True, 0),
                    ("flags", flags.data_ptr(), _storage_span(flags), True, 0)]
    lib = _C.interp.build(lowered.source, lowered.name, lowered.rtc_arch)
    grid3 = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
    if out.numel() == 0:
        raw = {"ctas": 0, "findings": [], "counts": {}}
    else:
        text = lib.run(list(grid3), [int(lowered.threads), 1, 1], int(lowered.smem_bytes), args, names, regions,
                       schedule, int(seed), int(max_events), int(max_findings), [int(c) for c in (ctas or [])],
                       bool(stop_at_first), max(1, int(workers)), int(lowered.cluster), _entry_registers(k, registers))
        raw = json.loads(text)
    mismatches: List[str] = []
    if reference is not False and not ctas and out.numel():
        if reference is None:
            from .reference import evaluate
            reference = evaluate(k.fusion, list(tensors))
        refs = reference if isinstance(reference, tuple) else (reference,)
        if len(refs) != len(outs):
            raise InputError(f"interpret: the fusion has {len(outs)} outputs but the reference gives {len(refs)}; "
                             "pass a tuple with one tensor per output")
        for i, (o, r, decl) in enumerate(zip(outs, refs, k._outs)):
            lines = _compare(o, r, decl.dtype, _mx_q_atol(k, decl.dtype, atol), rtol)
            mismatches += [f"output {decl.name}: {m}" for m in lines[:1]] + lines[1:] if len(outs) > 1 else lines
    return InterpretResult(lowered.name, schedule, int(seed), raw, result, mismatches, lib)


def run_checked(kernel, tensors):
    """HEDDLE_INTERPRET=1: the interpreted output, or HeddleError with the report when anything was found."""
    r = interpret(kernel, *tensors, reference=False)
    if r.findings:
        raise HeddleError("HEDDLE_INTERPRET: " + r.report())
    return r.output


def _entry_registers(k, registers: Optional[int]) -> int:
    """Registers per thread at entry for the interpreter's setmaxnreg pool: as given, else ptxas's count of a
    compiled CUDA kernel, else 0 (the runtime takes the __launch_bounds__ cap)."""
    if registers is not None:
        return int(registers)
    binary = getattr(k, "binary", None)
    if binary is None or not k.lowered.compiler_report:
        return 0
    return int(k.stats.registers)


# --- source-level mutation testing (heddle.core.source_mutants; re-exported here) ---------------------

from .source_mutants import MapMutant, SourceMutant, map_mutants, source_mutants, tightened_waits  # noqa: E402,F401


class _LoweredWithSource:
    """A lowered kernel whose printed source is replaced (source mutants, the printer-bug switch)."""

    def __init__(self, lowered, source: str):
        self._lowered, self.source = lowered, source

    def __getattr__(self, name):
        return getattr(self._lowered, name)


def _Mutated(kernel, source: str):
    from .kernel import Kernel
    return Kernel(kernel.fusion, _LoweredWithSource(kernel.lowered, source), None, kernel.target, *kernel.vec)


def mutation_kill_rate(kernel, *tensors, fusion=None, sms: Optional[int] = None, kinds=None,
                       schedules=(("adversarial", 0), ("random", 1)), where=None, max_events: int = 5_000_000) -> dict:
    """Interprets every mutant of `kernel` on `tensors` (the unmutated kernel must be clean first);
    returns {'total', 'killed', 'survivors': [mutant], 'by_kind': {kind: (killed, total)}}. kinds: see
    kinds_of (map_* kinds give MapMutants); where: only mutants for which where(mutant) holds."""
    k = _kernel_of(kernel, fusion)
    base = interpret(k, *tensors, sms=sms)
    if not base.ok:
        raise HeddleError("mutation_kill_rate: the unmutated kernel is not clean:\n" + base.report())
    res = {"total": 0, "killed": 0, "survivors": [], "by_kind": {}}
    mutants = source_mutants(k.lowered.source, kinds) + map_mutants(k, kinds)
    for mu in mutants:
        if where is not None and not where(mu):
            continue
        killed = False
        for sched, seed in schedules:
            kw = dict(sms=sms, schedule=sched, seed=seed, max_findings=2, stop_at_first=True, max_events=max_events)
            try:
                if isinstance(mu, MapMutant):
                    r = interpret(k, *tensors, tensor_map_encoder=mu.encoder(_C.interp.encode_tensor_map_tiled), **kw)
                else:
                    r = interpret(_Mutated(k, mu.source), *tensors, **kw)
                killed = not r.ok
            except HeddleError:
                killed = True  # the host compiler, the encoder or the launch refused the mutant
            if killed:
                break
        res["total"] += 1
        kk, tt = res["by_kind"].get(mu.kind, (0, 0))
        res["by_kind"][mu.kind] = (kk + int(killed), tt + 1)
        if killed:
            res["killed"] += 1
        else:
            res["survivors"].append(mu)
    return res
