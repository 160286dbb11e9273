"""The classic source-mutant kinds of a printed kernel and the registry every kind joins
(heddle.core.source_mutants is the public face; source_mutant_kinds adds the catalogue of issue 28)."""
from __future__ import annotations

import re
from typing import Callable, Dict, Iterable, List, Tuple, Union

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
