"""Source-level mutants of a printed kernel: the edits a reviewer would break it with (docs/verification.md,
"Source-level mutation testing"), for heddle.interpret to catch.

Each kind is one small generator over the printed lines, registered in KINDS. The classic kinds (the
first eight: DEFAULT_KINDS) are what source_mutants(source) gives by default; the catalogue kinds of
issue 28 (every protocol fact a kernel relies on: barrier counts and ids, expect_tx sizes, mbarrier
init and pre-arrive counts, parity, stage modulo, coordinates, elect, multicast, tile stride, split-K
flags, setmaxnreg, fences, tensor-memory reuse) are opt-in: named in `kinds`, or kinds="all". Tensor-map
fields changed on the host only are not text edits: map_mutants(kernel) gives MapMutants, applied by
the tensor-map encoder at the launch (heddle.interpret's `tensor_map_encoder`).
tools/mutation_table.py runs the campaign over every family and writes the kill table.
"""
from __future__ import annotations

import re
from typing import List, Tuple

from .source_mutant_classic import KINDS, MULTI_LINE, SourceMutant, _code  # noqa: F401  (the registry; re-exported)
from . import source_mutant_kinds  # noqa: E402,F401  (registers the catalogue kinds of issue 28)
from . import source_mutant_fp8  # noqa: E402,F401  (registers the FP8 kinds of issue 32)

DEFAULT_KINDS = tuple(k for k, d, _ in KINDS if d)

ALL_KINDS = tuple(k for k, _, _ in KINDS)


def kinds_of(kinds) -> Tuple[str, ...]:
    """The kinds `kinds` selects: None -> DEFAULT_KINDS, "all" -> every kind, else the names given."""
    if kinds is None:
        return DEFAULT_KINDS
    if kinds == "all":
        return ALL_KINDS + tuple(MAP_KINDS)
    return tuple(kinds)


def source_mutants(source: str, kinds=None) -> List[SourceMutant]:
    """Mutants of a printed kernel made by editing its text, as a reviewer would break it, in line order
    (on one line, in KINDS order). By default the classic kinds: each sync line deleted; each cp.async /
    wgmma / bulk wait / AMD vmcnt wait loosened by one; each mbarrier wait's parity flipped; each
    expect_tx dropped (a plain arrive) or shrunk by half; each smem stage of a TMA load or a copy moved
    to the next stage; each grid flag a split-K release or wait names moved to the next flag; each GFX12
    split-barrier signal (and gfx1250 named-barrier signal) moved up past the statement before it and
    each wait moved down past the statement after it. kinds: see kinds_of (the catalogue kinds,
    docs/verification.md). Every mutant of a correct kernel must be caught by interpret (race, deadlock,
    async misuse, error or wrong numbers) unless docs/verification.md says why a GPU would not misbehave
    either. (A wait made stricter, vmcnt - 1, is not a bug: tightened_waits gives those, which must run clean.)"""
    want = set(kinds_of(kinds))
    lines = source.split("\n")
    edits = []
    for order, (kind, _, gen) in enumerate(KINDS):
        if kind in want:
            edits += [(i, order, n, kind, e, what) for n, (i, e, what) in enumerate(gen(lines))]
    out: List[SourceMutant] = []
    for i, _, _, kind, e, what in sorted(edits, key=lambda x: x[:3]):
        new = lines[:]
        for j, text in (e.items() if isinstance(e, dict) else ((i, e),)):
            new[j] = text
        out.append(SourceMutant(kind, i + 1, what, "\n".join(new)))
    return out


def tightened_waits(source: str) -> List[SourceMutant]:
    """Each AMD vmcnt / cp.async wait made stricter by one (N -> N-1): waiting for more is always correct,
    so these equivalent mutants must interpret clean (no false alarm from a stronger wait)."""
    lines = source.split("\n")
    out: List[SourceMutant] = []
    for i, ln in enumerate(lines):
        for m in re.finditer(r"(cp_async_wait|wait_vmcnt)<(\d+)>", _code(ln)):
            n = int(m.group(2))
            if n > 0:
                new = ln[:m.start(2)] + str(n - 1) + ln[m.end(2):]
                out.append(SourceMutant("tighten_wait", i + 1, f"{m.group(1)}<{n}> -> <{n - 1}>",
                                        "\n".join(lines[:i] + [new] + lines[i + 1:])))
    return out


# --- tensor maps changed on the host only -------------------------------------------------------------

class MapMutant:
    """A tensor map whose description the host changes at the launch (the printed source untouched):
    `kind`, the map parameter `param`, a readable `what`, and `edit(args) -> args` over the encoder's
    arguments (data_type, address, dims, strides, box, element_strides, interleave, swizzle, l2, oob)."""

    def __init__(self, kind: str, param: str, index: int, what: str, edit):
        self.kind, self.param, self.index, self.what, self.edit = kind, param, index, what, edit
        self.line = 0

    def encoder(self, base):
        """A tensor-map encoder that applies the edit to the map of parameter `param` (the index-th map
        the launch encodes) and encodes the others as `base` does."""
        seen = [0]

        def encode(dt, address, dims, strides, box, elem, interleave=0, swizzle=0, l2_promotion=0, oob_fill=0):
            a = [dt, address, list(dims), list(strides), list(box), list(elem), interleave, swizzle, l2_promotion,
                 oob_fill]
            if seen[0] == self.index:
                a = self.edit(a)
            seen[0] += 1
            return base(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9])
        return encode

    def __repr__(self) -> str:
        return f"MapMutant({self.kind} {self.param}: {self.what})"


def _set(i, f):
    def edit(a):
        a = list(a)
        a[i] = f(a[i])
        return a
    return edit


def _first(f):
    return lambda v: [f(v[0])] + list(v[1:])


def _second(f):
    return lambda v: [v[0], f(v[1])] + list(v[2:])


# another element size: FLOAT16 (6) / BFLOAT16 (9) -> FLOAT32 (7), FLOAT32 -> FLOAT16 (f16 <-> bf16 would be no
# edit at all for TMA, which copies bits: the type only sizes the elements and picks the NaN fill pattern)
_RESIZE_DT = {6: 7, 9: 7, 7: 6, 0: 6}  # CU_TENSOR_MAP_DATA_TYPE_*: UINT8 (e4m3 / e5m2) -> FLOAT16
MAP_KINDS = {  # kind -> [(what, edit)]
    "map_box": [("box rows halved", _set(4, _second(lambda b: max(1, b // 2)))),
                ("box columns halved", _set(4, _first(lambda b: max(1, b // 2))))],
    "map_dims": [("rows + 8 (the host says the tensor is longer)", _set(2, _second(lambda d: d + 8))),
                 ("columns - 8", _set(2, _first(lambda d: max(1, d - 8))))],
    "map_stride": [("row stride + 16 bytes", _set(3, _first(lambda s: s + 16)))],
    "map_swizzle": [("swizzle mode + 1 (mod 4)", _set(7, lambda s: (s + 1) % 4))],
    "map_dtype": [("element type of another size (16 <-> 32 bits, 8 -> 16)", _set(0, lambda d: _RESIZE_DT.get(d, d)))],
    "map_oob_fill": [("out-of-bounds fill NaN instead of zero", _set(9, lambda o: 1 - o))],
    "map_l2": [("L2 promotion changed", _set(8, lambda p: (p + 1) % 4))],
}


def map_mutants(kernel, kinds=None) -> List[MapMutant]:
    """The host-only tensor-map mutants of a heddle.Kernel (one per map parameter and field edit)."""
    want = set(kinds_of(kinds))
    maps = getattr(kernel.lowered, "tensor_maps", None) or []
    out = []
    for idx, m in enumerate(maps):
        for kind, edits in MAP_KINDS.items():
            if kind in want:
                out += [MapMutant(kind, m["param"], idx, f"{m['param']}: {what}", e) for what, e in edits]
    return out
