"""Source mutants of the grouped matmul's tile walk (issue 33; the printed walk of
codegen CLikePrinter::groupedWalk, docs/grouped.md), registered into heddle.core.source_mutants.KINDS
(opt-in: source_mutants(src, kinds=[...]) or kinds="all"). Each breaks one fact the walk relies on:

  group_walk_bound   the boundary predicates: a CTA's m tile tested inclusively against its group's tiles
                     (it takes the next group's first tile: two CTAs write the same rows, one with the wrong
                     expert), the tile count rounded down (a group's last partial tile is never computed), the
                     group's end row one further (the epilogue stores one row of the next group)
  group_walk_offset  the offset index: the group end read from offs[e + 1] / offs[e - 1] (the neighbour's
                     end; at the ends, a read outside offs), the expert whose weights B points at off by one
                     (the sm_90a and sm_100a kernels: the expert coordinate of B's 3-D TMA load)
  masked_rows        the masked layout's row bound (CLikePrinter::maskedRows): the expert's count ignored (the
                     padding rows stored), not clamped to the slab (a count past max_tokens stores into the
                     next expert's slab), one row further, or read from the neighbour's count counts[e ^ 1]
"""
from __future__ import annotations

import re

from .source_mutant_classic import _code, _kind

# the masked layout's row bound, as CLikePrinter::maskedRows prints it
_MASKED = r"const int M = counts\[batch_idx\] < max_tokens \? counts\[batch_idx\] : max_tokens;"

_EDITS = {
    "group_walk_bound": [
        (r"< before \+ tiles\)", "<= before + tiles)", "m tile < the groups' tiles -> <="),
        (r"\(end - start \+ (\d+) - 1\) / (\d+)", r"(end - start) / \2", "the group's tile count rounded down"),
        (r"const int M = g_end;", "const int M = g_end + 1;", "the group's end row + 1"),
    ],
    "group_walk_offset": [
        (r"= offs\[e\];", "= offs[e + 1];", "group end offs[e] -> offs[e + 1]"),
        (r"= offs\[e\];", "= offs[e - 1];", "group end offs[e] -> offs[e - 1]"),
        (r"B \+= \(long long\)batch_idx \*", "B += (long long)(batch_idx ^ 1) *", "the expert's weights w[e] -> w[e ^ 1]"),
        (r"(&tmB, [^;]*?), batch_idx, ", r"\1, (batch_idx ^ 1), ", "w[e]'s TMA coordinate e -> e ^ 1 (sm_90a)"),
    ],
    "masked_rows": [
        (_MASKED, "const int M = max_tokens;", "the expert's row count ignored"),
        (_MASKED, "const int M = counts[batch_idx];", "the row count not clamped to max_tokens"),
        (_MASKED, "const int M = (counts[batch_idx] < max_tokens ? counts[batch_idx] : max_tokens) + 1;",
         "the row bound + 1"),
        (_MASKED, "const int M = counts[batch_idx ^ 1] < max_tokens ? counts[batch_idx ^ 1] : max_tokens;",
         "the count of expert e ^ 1"),
    ],
}


def _edits(kind):
    def gen(lines):
        for i, ln in enumerate(lines):
            code = _code(ln)
            for pattern, repl, what in _EDITS[kind]:
                m = re.search(pattern, code)
                if m:
                    yield i, ln[:m.start()] + m.expand(repl) + ln[m.end():], f"grouped walk: {what}"
    return gen


for _name in _EDITS:
    _kind(_name)(_edits(_name))
