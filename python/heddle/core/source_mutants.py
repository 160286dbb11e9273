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
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

_SYNC_LINE = re.compile(
    r"heddle::(block_sync\(\)|cp_async_commit\(\)|cp_async_wait<\d+>\(\)|sm90::mbar_wait\(|sm90::mbar_arrive\(|"
    r"sm90::mbar_arrive_expect_tx\(|sm90::named_barrier\(|sm90::fence_proxy_async\(\)|sm90::bulk_commit\(\)|"
    r"sm90::bulk_wait_read<\d+>\(\)|sm90::mbar_init\(|grid::release\(|grid::wait_and_reset\(|"
    r"wait_vmcnt<\d+>\(\)|barrier_signal\(\)|barrier_wait\(\)|sm100::commit\(|sm100::tmem_alloc\(|sm100::tmem_dealloc\(|"
    r"barrier_(?:init|join|signal|signal_isfirst|wait)<[\d, ]+>\(\)|barrier_leave\(\)|sm90::mbar_arrive_cluster\(|"
    r"sm90::fence_mbarrier_init_cluster\(\)|sm90::cluster_sync\(\))|"
    r"\b\w+\.(wait<\d+>\(\)|commit\(\));")
_SPLIT = re.compile(r"heddle::barrier_(signal|wait)(?:<\d+>)?\(\);")  # split (-1) or named (gfx1250)


class SourceMutant:
    """One edit of a printed source: `kind`, the 1-based `line` (the first line it changes), a readable
    `what`, the edited `source`."""

    def __init__(self, kind: str, line: int, what: str, source: str):
        self.kind, self.line, self.what, self.source = kind, line, what, source

    def __repr__(self) -> str:
        return f"SourceMutant({self.kind} line {self.line}: {self.what})"


# A generator takes the printed lines and yields (index, edit, what): edit is the new text of line
# `index`, or {index: text} for an edit of several lines.
Edit = Tuple[int, Union[str, Dict[int, str]], str]
KINDS: List[Tuple[str, bool, Callable[[List[str]], Iterable[Edit]]]] = []
MULTI_LINE = {"move_split", "flip_parity_role", "setmaxnreg_move"}  # kinds that change more than one line


def _kind(name: str, default: bool = False):
    def reg(fn):
        KINDS.append((name, default, fn))
        return fn
    return reg


def _code(ln: str) -> str:
    return ln.split("//")[0]


def _args_of(text: str, start: int):
    """(args, end) of the call whose '(' is at text[start]: top-level comma-separated argument strings."""
    depth, cur, args = 0, "", []
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "(":
            depth += 1
            if depth == 1:
                continue
        elif ch == ")":
            depth -= 1
            if depth == 0:
                args.append(cur.strip())
                return args, i
        if depth == 1 and ch == ",":
            args.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return args, len(text)


def _calls(lines: List[str], pattern: str):
    """(i, line, match, args, end) for each call matching `pattern` (ending at its '(')."""
    for i, ln in enumerate(lines):
        m = re.search(pattern, _code(ln))
        if m:
            args, end = _args_of(ln, m.end() - 1)
            yield i, ln, m, args, end


def _with_args(ln: str, m, args: List[str], end: int) -> str:
    return ln[:m.end()] + ", ".join(args) + ln[end:]


def _plain_statement(line: str) -> bool:
    """A one-line statement (no block boundary, not a sync op itself) that a sync line may move across."""
    code = _code(line).strip()
    return code.endswith(";") and not any(ch in code for ch in "{}") and not _SYNC_LINE.search(code) \
        and not code.startswith(("return", "break", "continue"))


# --- the classic kinds (default) --------------------------------------------------------------------

@_kind("delete_sync", True)
def _delete_sync(lines):
    for i, ln in enumerate(lines):
        if _SYNC_LINE.search(_code(ln)):
            yield i, "", _code(ln).strip()


@_kind("loosen_wait", True)
def _loosen_wait(lines):
    for i, ln in enumerate(lines):
        for m in re.finditer(r"(cp_async_wait|\bwait|bulk_wait_read|wait_vmcnt)<(\d+)>", _code(ln)):
            n = int(m.group(2))
            yield i, ln[:m.start(2)] + str(n + 1) + ln[m.end(2):], f"{m.group(1)}<{n}> -> <{n + 1}>"


@_kind("flip_parity", True)
def _flip_parity(lines):
    for i, ln, m, args, end in _calls(lines, r"sm90::mbar_wait\("):
        yield i, ln[:m.end()] + args[0] + ", (" + args[1] + ") ^ 1" + ln[end:], \
            f"mbar_wait({args[0]}, ...) parity {args[1]} -> ({args[1]}) ^ 1"


@_kind("shift_flag", True)
def _shift_flag(lines):
    for i, ln in enumerate(lines):
        m = re.search(r"grid::(release|wait_and_reset)\(flags \+ ", _code(ln))
        if m:
            at = ln.index("(", m.start())
            args, _ = _args_of(ln, at)
            yield i, ln[:at + 1] + "(" + args[0] + ") + 1" + ln[at + 1 + len(args[0]):], \
                f"{m.group(1)}({args[0]}) -> ({args[0]}) + 1"


@_kind("drop_expect_tx", True)
def _drop_expect_tx(lines):
    for i, ln, m, args, end in _calls(lines, r"sm90::mbar_arrive_expect_tx\("):
        yield i, ln[:m.start()] + "sm90::mbar_arrive(" + args[0] + ln[end:], \
            f"arrive.expect_tx({args[0]}, {args[1]}) -> arrive"


@_kind("shrink_expect_tx", True)
def _shrink_expect_tx(lines):
    for i, ln, m, args, end in _calls(lines, r"sm90::mbar_arrive_expect_tx\("):
        if args[1].isdigit():
            half = int(args[1]) // 2
            yield i, ln[:m.end()] + args[0] + ", " + str(half) + ln[end:], f"expect_tx {args[1]} -> {half}"


@_kind("move_split", True)
def _move_split(lines):
    for i, ln in enumerate(lines):
        m = _SPLIT.search(_code(ln))
        if m:  # move the signal up / the wait down past its neighbouring statement
            j = i - 1 if m.group(1) == "signal" else i + 1
            if 0 <= j < len(lines) and _plain_statement(lines[j]):
                yield i, {i: lines[j], j: lines[i]}, \
                    f"barrier_{m.group(1)} moved {'above' if j < i else 'below'} `{lines[j].strip()}`"


_STAGED = r"(tma_load_tile<[^>]*>>?|tma_load_plain<[^>]*>|copy_(?:tile|part)_(?:async|sync)<[^>]*>)\((\w+) \+ \("


@_kind("swap_stage", True)
def _swap_stage(lines):
    for i, ln in enumerate(lines):
        code = _code(ln)
        m = re.search(_STAGED, code)
        if not m:
            continue
        # sA + (STAGE) * ELEMS -> sA + ((STAGE) + 1) % S * ELEMS, S read off the printed "% S)" of the index
        s = re.search(r"% (\d+)\) \* \d+", code[m.end():])
        if s:
            args, _ = _args_of(ln, ln.index("(", m.start() + len(m.group(1))))
            pm = re.match(r"(\w+) \+ \((.*)\) \* (\d+)$", args[0])
            if pm:
                new_ptr = f"{pm.group(1)} + (({pm.group(2)}) + 1) % {s.group(1)} * {pm.group(3)}"
                yield i, ln.replace(args[0], new_ptr, 1), f"{args[0]} -> {new_ptr}"


DEFAULT_KINDS = tuple(k for k, d, _ in KINDS if d)

from . import source_mutant_kinds  # noqa: E402,F401  (registers the catalogue kinds of issue 28)

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
_RESIZE_DT = {6: 7, 9: 7, 7: 6}
MAP_KINDS = {  # kind -> [(what, edit)]
    "map_box": [("box rows halved", _set(4, _second(lambda b: max(1, b // 2)))),
                ("box columns halved", _set(4, _first(lambda b: max(1, b // 2))))],
    "map_dims": [("rows + 8 (the host says the tensor is longer)", _set(2, _second(lambda d: d + 8))),
                 ("columns - 8", _set(2, _first(lambda d: max(1, d - 8))))],
    "map_stride": [("row stride + 16 bytes", _set(3, _first(lambda s: s + 16)))],
    "map_swizzle": [("swizzle mode + 1 (mod 4)", _set(7, lambda s: (s + 1) % 4))],
    "map_dtype": [("element type of another size (16 <-> 32 bits)", _set(0, lambda d: _RESIZE_DT.get(d, d)))],
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


def mutation_kill_rate(kernel, *tensors, fusion=None, sms: Optional[int] = None, kinds=None,
                       schedules=(("adversarial", 0), ("random", 1)), where=None, max_events: int = 5_000_000) -> dict:
    """Interprets every mutant of `kernel` on `tensors` (the unmutated kernel must be clean first);
    returns {'total', 'killed', 'survivors': [mutant], 'by_kind': {kind: (killed, total)}}. kinds: see
    kinds_of (map_* kinds give MapMutants); where: only mutants for which where(mutant) holds."""
    from .errors import HeddleError
    from .interpret import _kernel_of, _Mutated, interpret
    from .. import _C
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
