"""The ptxas -v report's parser (runtime/cuda/ptxas_report.cpp): plain scans since a disk-cache hit runs it in
every warm process, checked against Python's `re` with the std::regex patterns they replaced (leftmost match)."""
import re

import pytest

from support.env import rt


REPORT = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k_one' for 'sm_90a'
ptxas info    : Function properties for k_one
ptxas         .     416 bytes stack frame, 532 bytes spill stores, 528 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 4096 bytes smem, 400 bytes cmem[0]
ptxas info    : Function properties for _Z6helperPf
ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Compiling entry function 'k_two' for 'sm_90a'
ptxas info    : Function properties for k_two
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers, 128 bytes smem, 364 bytes cmem[0]
ptxas warning : For profile sm_90a adjusting per thread register count of 16 to lower bound of 24
"""


def _oracle(log):
    """The parser's numbers by the std::regex patterns it used before, in Python's re (leftmost match)."""
    kernels, props, st = [], None, dict(registers=0, spill_stores=0, spill_loads=0, stack_frame=0, smem=0)

    def num(pat, line):
        m = re.search(pat, line)
        return int(m.group(1)) if m else -1
    for line in log.splitlines():
        if not line.startswith("ptxas"):
            continue
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            kernels.append(dict(name=m.group(1), registers=0, spill_stores=0, spill_loads=0, stack_frame=0, smem=0))
            continue
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            props = m.group(1)
            continue
        named = [k for k in kernels if k["name"] == props]
        stack = num(r"(\d+) bytes stack frame", line)
        if stack >= 0:
            stores, loads = max(0, num(r"(\d+) bytes spill stores", line)), max(0, num(r"(\d+) bytes spill loads", line))
            st["spill_stores"] += stores
            st["spill_loads"] += loads
            st["stack_frame"] = max(st["stack_frame"], stack)
            if named:
                named[0].update(stack_frame=stack, spill_stores=stores, spill_loads=loads)
            continue
        regs = num(r"Used (\d+) registers", line)
        if regs >= 0:
            smem = max(0, num(r"(\d+) bytes smem", line))
            st["registers"], st["smem"] = max(st["registers"], regs), max(st["smem"], smem)
            k = named[0] if named else (kernels[-1] if kernels else None)
            if k:
                k.update(registers=regs, smem=smem)
    return st, kernels


@pytest.mark.parametrize("log", [
    REPORT,
    REPORT.replace("416 bytes", "x416 bytes").replace("Used 40", "Used  40"),   # near misses
    "ptxas info    : Function properties for \nptxas info    : Used registers, 1 bytes smem\n",
    "ptxas info    : Compiling entry function '' for 'sm_80'\nptxas info    : Compiling entry function 'k\n",
    "ptxas info    : Used 7 registers, Used 9 registers, 12 bytes smem 3 bytes smem\n",
])
def test_the_report_parser_finds_what_the_regex_patterns_found(log):
    st = rt.parse_ptxas(log)
    want, kernels = _oracle(log)
    assert {k: getattr(st, k) for k in want} == want
    assert st.kernels == kernels
