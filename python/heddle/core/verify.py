"""Verification without a GPU: the CPU simulator of heddle's kernel IR, and sync mutation testing.

    import heddle
    from heddle import verify
    fd = ...; fd.auto_schedule("sm_80"); lowered = fd.lower("sm_80")   # or a heddle.Kernel
    r = verify.simulate(lowered, [a, b, bias], schedule="adversarial")
    assert r.ok, r.report()             # races, deadlocks, async misuse, numeric mismatches
    r = verify.simulate(lowered, [a, b, bias], schedule="random", seed=7)   # reproducible
    print(verify.kill_rate(lowered, [[a, b, bias]]))   # every sync mutant must be flagged

The simulator runs every thread of every CTA (or `ctas=[(x, y, z), ...]`) as its own interleavable
state machine over the kernel IR, tracks happens-before for every shared-memory element, models
cp.async groups and block barriers, and compares the output with heddle.reference.evaluate (float64
torch) unless `reference=` is given (a tensor) or disabled (`reference=False`). What it models and
what it does not: docs/verification.md.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

from .. import _C

_V = _C.verify
_TORCH_DT = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


class SimResult:
    """What one simulation found. Every list holds readable, de-duplicated messages."""

    def __init__(self, raw, out_shape=None):
        self._raw = raw
        self._out_shape = out_shape

    races = property(lambda self: list(self._raw.races))
    deadlocks = property(lambda self: list(self._raw.deadlocks))
    async_misuse = property(lambda self: list(self._raw.async_misuse))
    mismatches = property(lambda self: list(self._raw.mismatches))
    barrier_misuse = property(lambda self: list(self._raw.barrier_misuse))
    ok = property(lambda self: self._raw.ok)
    steps = property(lambda self: self._raw.steps)
    schedule = property(lambda self: self._raw.schedule)
    ctas = property(lambda self: self._raw.ctas)

    @property
    def findings(self) -> List[str]:
        """All messages, races first."""
        return self.races + self.deadlocks + self.async_misuse + self.mismatches + self.barrier_misuse

    @property
    def outputs(self):
        """Every simulated output (D, then D1, ... of a fusion with several) as float32 torch tensors (NaN
        where no simulated CTA wrote)."""
        import torch
        data = bytearray(self._raw.output_bytes)
        t = torch.frombuffer(data, dtype=torch.float32) if data else torch.empty(0)
        if not self._out_shape or not t.numel():
            return (t,)
        per = 1
        for s in self._out_shape:
            per *= s
        return tuple(t[i * per:(i + 1) * per].reshape(self._out_shape) for i in range(max(1, t.numel() // per)))

    @property
    def output(self):
        """The simulated output D as a float32 torch tensor (NaN where no simulated CTA wrote)."""
        return self.outputs[0]

    def report(self) -> str:
        return self._raw.report()

    def __repr__(self) -> str:
        return f"<SimResult {self.schedule}: {'ok' if self.ok else str(len(self.findings)) + ' finding(s)'}>"


@dataclasses.dataclass
class Mutant:
    """One sync mutation of a kernel: `kind` (delete_sync, loosen_wait, ...) at node `site`."""
    kind: str
    site: int
    description: str
    _of: object = dataclasses.field(repr=False, default=None)

    def kernel(self):
        """The mutated kernel (a LoweredKernel: simulate it, or read its .kernel_ir)."""
        return _V.apply_mutant(self._of, self.kind, self.site)


@dataclasses.dataclass
class KillReport:
    kernel: str
    total: int
    killed: int
    verdicts: List[Tuple[Mutant, str]]   # (mutant, first finding or "SURVIVED")

    @property
    def rate(self) -> float:
        return self.killed / self.total if self.total else 1.0

    @property
    def survivors(self) -> List[Mutant]:
        return [m for m, v in self.verdicts if v == "SURVIVED"]

    def __str__(self) -> str:
        lines = [f"{self.kernel}: kill rate {self.killed}/{self.total} ({100.0 * self.rate:.1f}%)"]
        for m, v in self.verdicts:
            lines.append(f"  {'SURVIVED' if v == 'SURVIVED' else 'killed  '} {m.description}"
                         + ("" if v == "SURVIVED" else f"\n             by: {v[:200]}"))
        return "\n".join(lines)


# --- preparing inputs ------------------------------------------------------------------------

def _lowered_and_fusion(kernel, fusion):
    lowered = getattr(kernel, "lowered", kernel)
    fus = fusion if fusion is not None else getattr(kernel, "fusion", None)
    if fus is None:
        fus = _V.fusion_of(lowered)
    return lowered, fus


def _f32_bytes(t) -> bytes:
    """The tensor's storage from its first element (strides honoured) as float32 bytes."""
    import torch
    t = t.detach().to("cpu")
    if t.numel() == 0:
        return b""
    if t.dtype == getattr(torch, "float4_e2m1fn_x2", None):  # packed FP4 pairs have no float32 conversion: their
        t = t.view(torch.uint8)  # byte codes (the simulator refuses the NVFP4 kernel by name, verify/simulate.cpp)
    span = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
    flat = torch.as_strided(t, (span,), (1,)).to(torch.float32).contiguous()
    try:
        return flat.numpy().tobytes()
    except Exception:  # torch without numpy
        import array
        return array.array("f", flat.tolist()).tobytes()


class _Prepared:
    def __init__(self, scalars, tensors, reference, out_shape):
        self.scalars, self.tensors, self.reference, self.out_shape = scalars, tensors, reference, out_shape


def _prepare(lowered, fus, inputs, reference) -> _Prepared:
    names = [t.name for t in fus.inputs]
    if inputs is None:
        inputs = ()
    if isinstance(inputs, dict):
        by_name = dict(inputs)
        ordered = [by_name[n] for n in names]
    else:
        ordered = list(inputs)
        if len(ordered) != len(names):
            raise _C.InputError(f"{lowered.name}: expected {len(names)} tensors ({', '.join(names)}), got {len(ordered)}")
        by_name = dict(zip(names, ordered))
    mexpr = next((e for e in fus.exprs() if e["op"] == "matmul"), None)
    scalars: Dict[str, int] = {}
    tensors: Dict[str, bytes] = {}
    out_shape = None
    if mexpr is None:
        return _Prepared(scalars, tensors, None, None)
    from .inputs import matmul_geometry
    g = matmul_geometry(fus, by_name)
    a, b, M, N = g.a, g.b, g.M, g.N
    out_shape = g.out_shape
    genv = g.env
    lowered.check_launch(genv)
    scalars.update(genv)
    scalars["ldd"] = N
    scalars["batch_stride_d"] = M * N
    for name, kind, _, tensor in lowered.params:
        if name == "A":
            tensors["A"] = _f32_bytes(a)
        elif name == "B":
            tensors["B"] = _f32_bytes(b)
        elif name == "lda":
            scalars["lda"] = a.stride(-2)
        elif name == "ldb":
            scalars["ldb"] = b.stride(-2)
        elif name == "batch_stride_a":
            scalars[name] = a.stride(0)
        elif name == "batch_stride_b":
            scalars[name] = b.stride(0) if b.dim() == 3 else 0
        elif name in ("scale_a", "scale_b") and kind == "ptr":  # a block-scaled matmul's scales (MmaPromote)
            tensors[name] = _f32_bytes(by_name[tensor])
        elif name == "tmSA":  # block scales' scale_a through the ring: its M-major storage [ceil(K/128), M], ld M
            tensors["scale_a"] = _f32_bytes(by_name[tensor].t().contiguous())
        elif name.startswith("E_") and kind == "ptr":
            tensors[name] = _f32_bytes(by_name[tensor])
        elif name[:1] == "B" and name[1:].isdigit() and kind == "ptr":  # a matmul group's further B
            tensors[name] = _f32_bytes(by_name[tensor])
            scalars["ldb" + name[1:]] = by_name[tensor].stride(-2)
        elif name.startswith("E_"):
            tname, ax = name[2:].rsplit("_s", 1)
            scalars[name] = by_name[tname].stride(int(ax))
        elif name == "num_ctas":  # persistent Hopper kernels: CTAs that walk the tiles (heddle.tma)
            from .tma import simulated_ctas
            scalars[name] = simulated_ctas(lowered, genv)
    ref_bytes = None
    if reference is None:
        from .reference import evaluate
        reference = evaluate(fus, ordered)
    if reference is not False:
        import torch
        # several outputs: D, D1, ... one after the other (the simulator checks each); one tensor: D alone
        refs = reference if isinstance(reference, tuple) else (reference,)
        ref_bytes = b"".join(_f32_bytes(r.detach().to("cpu").reshape(out_shape).to(torch.float32).contiguous())
                             for r in refs)
    return _Prepared(scalars, tensors, ref_bytes, out_shape)


def _run(lowered, prep: _Prepared, schedule, seed, ctas, max_steps, stop_at_first_error, atol, rtol, max_reports):
    raw = _V.simulate(lowered, prep.scalars, prep.tensors, prep.reference, schedule, int(seed),
                      [tuple(c) for c in (ctas or [])], int(max_steps), bool(stop_at_first_error),
                      -1.0 if atol is None else float(atol), -1.0 if rtol is None else float(rtol), int(max_reports))
    return SimResult(raw, prep.out_shape)


# --- public API ------------------------------------------------------------------------------

def simulate(kernel, inputs: Union[Sequence, Dict, None] = (), schedule: str = "adversarial", seed: int = 0,
             reference=None, *, fusion=None, scalars: Optional[Dict[str, int]] = None,
             ctas: Optional[Iterable[Tuple[int, int, int]]] = None,
             max_steps: int = 50_000_000, stop_at_first_error: bool = False, atol: Optional[float] = None,
             rtol: Optional[float] = None, max_reports: int = 12) -> SimResult:
    """Run `kernel` (a heddle.Kernel or LoweredKernel) on the CPU with `inputs` (CPU torch tensors in
    the fusion's input order, or a dict by input name).

    schedule: "adversarial" (producers run ahead, async copies land as late as legal) or "random"
    (seeded by `seed`; the same seed replays the same interleaving). reference: the expected output
    (default: heddle.reference.evaluate in float64; False: no numeric check). ctas: block indices to
    simulate (default: the whole grid). scalars: extra integer bindings (e.g. {"N": 5} for the trip
    count of a hand-built kernel)."""
    lowered, fus = _lowered_and_fusion(kernel, fusion)
    prep = _prepare(lowered, fus, inputs, reference)
    prep.scalars.update(scalars or {})
    return _run(lowered, prep, schedule, seed, ctas, max_steps, stop_at_first_error, atol, rtol, max_reports)


def mutants(kernel, kinds: Optional[Sequence[str]] = None) -> List[Mutant]:
    """Every sync mutant of `kernel`: each sync op deleted, each cp.async.wait_group loosened by one, ...
    (mutation_kinds()). kinds: only these kinds, which may name an opt-in kind outside kill rates
    ("unguard_sync": a guard around sync ops dropped)."""
    lowered = getattr(kernel, "lowered", kernel)
    return [Mutant(d["kind"], d["site"], d["description"], lowered)
            for d in _V.mutants(lowered, None if kinds is None else list(kinds))]


def mutation_kinds() -> List[str]:
    return list(_V.mutation_kinds())


def kill_rate(kernel, cases: Sequence, schedules: Sequence[Tuple[str, int]] = (("adversarial", 0), ("random", 1)),
              *, fusion=None, references: Optional[Sequence] = None, scalars: Optional[Sequence[Dict]] = None,
              max_steps: int = 20_000_000) -> KillReport:
    """Simulate every mutant of `kernel` on each input case (a list of tensors, or None for a
    hand-built kernel; `scalars[i]` adds integer bindings to case i) under each (schedule, seed)
    until something flags it. The unmutated kernel must simulate clean first."""
    lowered, fus = _lowered_and_fusion(kernel, fusion)
    preps = [_prepare(lowered, fus, c, references[i] if references else None) for i, c in enumerate(cases)]
    for i, p in enumerate(preps):
        p.scalars.update((scalars[i] if scalars else None) or {})
    for p in preps:
        base = _run(lowered, p, "adversarial", 0, None, max_steps, False, None, None, 12)
        if not base.ok:
            raise _C.HeddleError(f"{lowered.name}: the unmutated kernel does not simulate clean, so a kill rate "
                                 f"means nothing:\n{base.report()}")
    verdicts = []
    for m in mutants(lowered):
        mk = m.kernel()
        verdict = "SURVIVED"
        for p in preps:
            for sched, seed in schedules:
                r = _run(mk, p, sched, seed, None, max_steps, True, None, None, 4)
                if not r.ok:
                    verdict = r.findings[0]
                    break
            if verdict != "SURVIVED":
                break
        verdicts.append((m, verdict))
    killed = sum(v != "SURVIVED" for _, v in verdicts)
    return KillReport(lowered.name, len(verdicts), killed, verdicts)


def tiny_kernel(program: list, threads: int = 64, stages: int = 2, rows: int = 8, cols: int = 8,
                name: str = "tiny"):
    """A hand-built kernel for planted-bug tests, with exactly the syncs written (no planner):
    program items ("loop", var, start, stop, stage, [...]), ("if", lhs, "<"|"<="|"==", rhs, [...], [...]),
    ("write"|"read", buffer, stage, mapping[, async]), ("commit",), ("barrier",), ("wait", n)."""
    return _V.tiny_kernel(list(program), threads, stages, rows, cols, name)


__all__ = ["simulate", "mutants", "mutation_kinds", "kill_rate", "tiny_kernel", "SimResult", "Mutant", "KillReport"]
