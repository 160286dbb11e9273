"""The catalogue kinds of source mutants (issue 28): one generator per protocol fact a printed kernel
relies on, registered into heddle.core.source_mutants.KINDS (opt-in: source_mutants(src, kinds=...)).
docs/verification.md gives each kind's kill rate per family and, for a survivor, why a GPU would not
misbehave either (or which interpreter item models it)."""
from __future__ import annotations

import re

from .source_mutant_classic import _calls, _code, _kind, _with_args


def _second_arg(lines, pattern: str, deltas, label: str, lowest: int = 1):
    """Each call matching `pattern` with a literal second argument N, that argument made N + d for each d
    in `deltas` (where at least `lowest`)."""
    for i, ln, m, args, end in _calls(lines, pattern):
        if len(args) > 1 and args[1].isdigit():
            n = int(args[1])
            for new in (n + d for d in deltas):
                if new >= lowest:
                    yield i, ln[:m.end()] + ", ".join([args[0], str(new)] + args[2:]) + ln[end:], \
                        f"{label} {args[0]}: {n} -> {new}"


@_kind("named_barrier_count")
def _named_barrier_count(lines):
    # bar.sync id, N with one warp fewer (the barrier opens early) or one more (it never opens)
    return _second_arg(lines, r"sm90::named_barrier\(", (-32, 32), "named_barrier count of id")


@_kind("named_barrier_id")
def _named_barrier_id(lines):
    # bar.sync id -> another id: one of the kernel's other ids if it has any (two groups then share one
    # barrier), else id + 1
    ids = sorted({a[0] for _, _, _, a, _ in _calls(lines, r"sm90::named_barrier\(") if a[0].isdigit()}, key=int)
    for i, ln, m, args, end in _calls(lines, r"sm90::named_barrier\("):
        if args[0].isdigit():
            others = [x for x in ids if x != args[0]]
            new = others[0] if others else str(int(args[0]) + 1)
            yield i, ln[:m.end()] + new + ", " + args[1] + ln[end:], f"named_barrier id {args[0]} -> {new}"


@_kind("grow_expect_tx")
def _grow_expect_tx(lines):
    return _second_arg(lines, r"sm90::mbar_arrive_expect_tx\(", (16,), "expect_tx of")


@_kind("init_count")
def _init_count(lines):
    return _second_arg(lines, r"sm90::mbar_init\(", (1, -1), "mbar_init count of")


_PRE_LOOP = re.compile(r"for \(int (\w+) = 0; \1 < (\d+); \+\+\1\)")


@_kind("pre_arrive_count")
def _pre_arrive_count(lines):
    # the loop of pre-arrives on the empty barriers (one per free stage) runs once fewer / once more
    for i, ln in enumerate(lines[:-1]):
        m = _PRE_LOOP.search(_code(ln))
        if m and "(pre-arrive)" in lines[i + 1]:
            n = int(m.group(2))
            for new in (n - 1, n + 1):
                yield i, ln[:m.start(2)] + str(new) + ln[m.end(2):], f"pre-arrives {n} -> {new} (line {i + 2})"


def _barrier_of(arg: str) -> str:
    m = re.match(r"\(*(\w+)", arg)
    return m.group(1) if m else arg


@_kind("flip_parity_role")
def _flip_parity_role(lines):
    # every wait of one role on one barrier array flipped together: the role's phase convention off by one
    groups = {}
    for i, ln, m, args, end in _calls(lines, r"sm90::mbar_wait\("):
        groups.setdefault(_barrier_of(args[0]), []).append((i, ln[:m.end()] + args[0] + ", (" + args[1] + ") ^ 1" + ln[end:]))
    for bar, edits in groups.items():
        if len(edits) > 1:  # one wait alone is flip_parity
            yield edits[0][0], dict(edits), f"every mbar_wait on {bar} ({len(edits)} lines) parity flipped"




@_kind("stage_modulo")
def _stage_modulo(lines):
    # the ring index `... % S)` of one barrier or stage access taken modulo S - 1 (a ring one stage short)
    for i, ln in enumerate(lines):
        code = _code(ln)
        if not re.search(r"mbar_(wait|arrive|arrive_expect_tx|arrive_cluster)\(|tma_load|sm100::commit\(|copy_(tile|part)_", code):
            continue
        for m in re.finditer(r"% (\d+)\)", code):
            before = code[:m.start()].rstrip()
            if re.search(r"/ \d+$", before):  # a parity `/ S % 2`, not a ring index
                continue
            s = int(m.group(1))
            if s > 1:
                yield i, ln[:m.start(1)] + str(s - 1) + ln[m.end(1):], f"ring index % {s} -> % {s - 1} (col {m.start()})"
                break  # one per line


_COORDS = {  # call -> indexes of its coordinate arguments a reviewer would get wrong
    r"sm90::tma_load_tile<[^(]*>\(": (2, 3),
    r"sm90::tma_load_tile_multicast<[^(]*>\(": (2, 3),
    r"sm90::tma_store_tile<[^(]*>\(": (1, 2),
}


@_kind("tma_coord")
def _tma_coord(lines):
    for pat, idx in _COORDS.items():
        for i, ln, m, args, end in _calls(lines, pat):
            for j in idx:
                if j < len(args):
                    new = list(args)
                    new[j] = f"({args[j]}) + 8"
                    yield i, ln[:m.end()] + ", ".join(new) + ln[end:], f"{m.group(0)[6:-1]} coordinate {args[j]} -> ({args[j]}) + 8"


@_kind("elect_mask")
def _elect_mask(lines):
    for i, ln in enumerate(lines):
        if "heddle::elect_one_sync()" in _code(ln):
            yield i, ln.replace("heddle::elect_one_sync()", "true", 1), "elect_one_sync() -> every lane"
            yield i, ln.replace("heddle::elect_one_sync()", "(heddle::elect_one_sync() || lane == 1)", 1), \
                "elect_one_sync() -> two lanes"


@_kind("multicast_mask")
def _multicast_mask(lines):
    for i, ln, m, args, end in _calls(lines, r"sm90::tma_load_tile_multicast<[^(]*>\("):
        if args[-1].isdigit():
            mask = int(args[-1])
            for b in range(8):
                if mask >> b & 1:
                    new = args[:-1] + [str(mask & ~(1 << b))]
                    yield i, ln[:m.end()] + ", ".join(new) + ln[end:], f"multicast mask {mask} -> {mask & ~(1 << b)}"


@_kind("remote_rank")
def _remote_rank(lines):
    for i, ln, m, args, end in _calls(lines, r"sm90::mbar_arrive_cluster\("):
        yield i, ln[:m.end()] + args[0] + ", crank" + ln[end:], f"mbar_arrive_cluster rank {args[1]} -> crank (itself)"
    for i, ln, m, args, end in _calls(lines, r"sm90::tma_load_tile_multicast<[^(]*>\("):
        new = args[:-2] + [f"1u - {args[-2]}", args[-1]]
        yield i, ln[:m.end()] + ", ".join(new) + ln[end:], f"multicast issuing rank {args[-2]} -> 1u - {args[-2]}"


@_kind("tile_stride")
def _tile_stride(lines):
    # one role's persistent tile walk strides by one CTA too many
    for i, ln in enumerate(lines):
        m = re.search(r"const int tile = (\w+) \+ tl \* (\w+);", _code(ln))
        if m:
            yield i, ln[:m.start(2)] + f"({m.group(2)} + 1)" + ln[m.end(2):], f"tile stride {m.group(2)} -> {m.group(2)} + 1"


@_kind("flag_count")
def _flag_count(lines):
    # a split-K / stream-K wait for N releases waits for one fewer / one more
    return _second_arg(lines, r"grid::wait_and_reset\(", (-1, 1), "wait_and_reset count of", 0)


@_kind("setmaxnreg_value")
def _setmaxnreg_value(lines):
    for i, ln in enumerate(lines):
        m = re.search(r"setmaxnreg_(inc|dec)<(\d+)>", _code(ln))
        if m:
            n = int(m.group(2))
            yield i, ln[:m.start(2)] + str(n + 8) + ln[m.end(2):], f"setmaxnreg_{m.group(1)} {n} -> {n + 8}"


@_kind("setmaxnreg_move")
def _setmaxnreg_move(lines):
    # the setmaxnreg moved into the block that follows it (a subset of its warpgroup, or every iteration)
    for i, ln in enumerate(lines):
        if re.search(r"setmaxnreg_(inc|dec)<\d+>", _code(ln)):
            j = i + 1
            while j < len(lines) and lines[j].strip().startswith("//"):
                j += 1
            if j < len(lines) and _code(lines[j]).rstrip().endswith("{"):
                edit = {k: lines[k + 1] for k in range(i, j)}
                edit[j] = lines[i]
                yield i, edit, f"{_code(ln).strip()} moved into `{_code(lines[j]).strip()}`"


_FENCES = re.compile(r"heddle::sm100::fence_(before|after)\(\);|\b\w+\.fence\(\);")


@_kind("delete_fence")
def _delete_fence(lines):
    # fences delete_sync leaves alone: tcgen05 before/after_thread_sync, wgmma.fence
    for i, ln in enumerate(lines):
        if _FENCES.search(_code(ln)):
            yield i, "", _code(ln).strip()


_FENCE_SWAP = {
    "heddle::sm90::fence_proxy_async();": "heddle::sm90::fence_mbarrier_init_cluster();",
    "heddle::sm90::fence_mbarrier_init_cluster();": "heddle::sm90::fence_proxy_async();",
    "heddle::sm100::fence_before();": "heddle::sm100::fence_after();",
    "heddle::sm100::fence_after();": "heddle::sm100::fence_before();",
}


@_kind("fence_kind")
def _fence_kind(lines):
    for i, ln in enumerate(lines):
        for old, new in _FENCE_SWAP.items():
            if old in _code(ln):
                yield i, ln.replace(old, new, 1), f"{old} -> {new}"


_AMD_FENCES = ("heddle::fence_release_workgroup();", "heddle::fence_acquire_workgroup();")


@_kind("amd_fence")
def _amd_fence(lines):
    # each workgroup release / acquire fence the HIP printer puts on a barrier's line, deleted alone (the
    # barrier stays): an AMD barrier orders execution only, the fences order LDS (docs/verification.md)
    for i, ln in enumerate(lines):
        code = _code(ln)
        for fence in _AMD_FENCES:
            at = code.find(fence)
            if at >= 0:
                before, after = ln[:at], ln[at + len(fence):]
                edited = before + after.lstrip(" ") if not before.strip() else before.rstrip(" ") + after
                yield i, edited, f"{fence} deleted"


@_kind("tmem_stage")
def _tmem_stage(lines):
    # the tensor-memory accumulator stage one side uses moved to the other stage (reuse while in use)
    for i, ln in enumerate(lines):
        m = re.search(r"(Mma::mma\(tmem_slot\[0\], |Mma::row_addr\(tmem_slot\[0\], warp, )(tl % (\d+))", _code(ln))
        if m:
            s = m.group(3)
            yield i, ln[:m.start(2)] + f"(tl + 1) % {s}" + ln[m.end(2):], f"tensor-memory stage tl % {s} -> (tl + 1) % {s}"




_PROMOTE = r"\w+\.promote\("


@_kind("promotion")
def _promotion(lines):
    # a block-scaled matmul's promotion (docs/fp8.md "Block scales and promotion"): acc.promote(tmp, sa, sb, M, N,
    # kblocks, m0, n0, kb, first, warp, lane) then tmp.zero(). The wgmma wait before it deleted (the promotion
    # reads accumulators in flight), the scale block moved to the next one (the wrong scale index; clamped, so it
    # stays in bounds), the tile's first promotion adding onto the registers instead of starting them, and the
    # reset of tmp deleted (scale-d not reset: the next interval accumulates onto this one's products)
    for i, ln, m, args, end in _calls(lines, _PROMOTE):
        if len(args) == 12:
            if i > 0 and re.match(r"\s*\w+\.wait<\d+>\(\);", lines[i - 1]):
                yield i - 1, "", f"{_code(lines[i - 1]).strip()} before the promotion deleted"
            kb, kbs = args[8], args[5]
            nxt = args[:8] + [f"min({kb} + 1, {kbs} - 1)"] + args[9:]
            yield i, _with_args(ln, m, nxt, end), f"promotion scale block {kb} -> the next"
            yield i, _with_args(ln, m, args[:9] + ["0"] + args[10:], end), f"promotion first ({args[9]}) -> 0"
            j = i + 1
            if j < len(lines) and re.match(r"\s*\w+\.zero\(\);", lines[j]):
                yield j, "", f"{lines[j].strip().split(';')[0]} after the promotion deleted (scale-d not reset)"



_SCALE_SLOT = re.compile(r"(\w+) \+ \(\((.*?)\) % (\d+)\) \* (\d+)")


@_kind("scale_ring")
def _scale_ring(lines):
    # block scales through the operand ring (docs/fp8.md "The scales' path"): the load role's TMA of scale_a
    # into the slot (tma_load_plain<1, BM>(sSA + ..., &tmSA, ...)) beside A and B, the promotion reading
    # acc.promote(tmp, sSA + (g % s) * BM, ...) before the k-tile's release. The slot's scale bytes dropped from
    # the full barrier's expect-tx (the phase may complete before the scales land), the promotion reading the
    # next item's slot (the wrong stage: not landed, or another k-block's scales), and the release moved
    # before the promotion (the producer may refill the slot the promotion is about to read)
    loads = [(i, int(m.group(1))) for i, ln in enumerate(lines)
             for m in [re.search(r"tma_load_plain<1, (\d+)>\(\w+ \+ .*&tmSA,", _code(ln))] if m]
    for i, bm in loads:
        for j in range(i - 1, max(-1, i - 6), -1):
            calls = list(_calls([lines[j]], r"sm90::mbar_arrive_expect_tx\("))
            if calls:
                _, ln, m, args, end = calls[0]
                if len(args) > 1 and args[1].isdigit() and int(args[1]) > 4 * bm:
                    yield j, ln[:m.end()] + ", ".join([args[0], str(int(args[1]) - 4 * bm)] + args[2:]) + ln[end:], \
                        f"expect_tx {args[1]} -> {int(args[1]) - 4 * bm} (the scale_a slot's {4 * bm} bytes missing)"
                break
    for i, ln, m, args, end in _calls(lines, _PROMOTE):
        s = _SCALE_SLOT.fullmatch(args[1]) if len(args) == 12 else None
        if not s:
            continue
        moved = f"{s.group(1)} + ((({s.group(2)}) + 1) % {s.group(3)}) * {s.group(4)}"
        yield i, _with_args(ln, m, args[:1] + [moved] + args[2:], end), \
            f"promotion reads scale_a slot ({s.group(2)}) + 1 (the wrong stage)"
        start = i - 1 if i > 0 and re.match(r"\s*\w+\.wait<0>\(\);", lines[i - 1]) else i
        if start > 0 and _code(lines[start - 1]).strip().startswith("if ("):
            start -= 1
        for r in range(i + 1, min(len(lines), i + 6)):
            if "(promotion -> load)" in lines[r] and "mbar_arrive(" in lines[r]:
                indent = lines[start][:len(lines[start]) - len(lines[start].lstrip())]
                yield start, {start: indent + lines[r].strip() + "\n" + lines[start], r: ""}, \
                    "the k-tile's release moved before the promotion that reads its scale_a slot"
                break
