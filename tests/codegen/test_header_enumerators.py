"""The device headers' compile-time members are enumerators, not `static constexpr` data members (issue 31 item
4: memory per cached kernel). NVVM emits every constexpr data member a kernel instantiates as a .global object
(symbol, name, relocated constant-bank slot) though no instruction reads it; as enumerators the Hopper GEMM's
cubin drops from 67.5 to 63.2 KiB.

Checked here: no header declares such a member again, and for the Hopper GEMM (TMA + warp-specialized wgmma)
and the sm_80 automatic kernel, the source compiled with the headers as they are and with their enumerators
written back as `static constexpr` members (tools/cubin_compare.py as_members) has byte-identical machine code
(.text) and kernel parameter bank (.nv.constant0), with fewer data objects and a smaller cubin. Every printed
NVIDIA kernel of tests/test_printed_sources.py is compared the same way under `-m slow` (2.3 minutes on 2 cores),
and against a git revision's headers by `python3 tools/cubin_compare.py --before REV` (docs/perf.md)."""
import os
import re
import sys

import pytest

from support.env import requires_nvrtc
from heddle.api import MatmulSpec
from heddle.autotune import Config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import cubin_compare  # noqa: E402

HEADERS = cubin_compare.DEVICE_HEADERS
needs_headers = pytest.mark.skipif(not os.path.isdir(HEADERS), reason="needs the device headers of a source checkout")
# a data member: `static constexpr <type> name =` or `static constexpr <type> name;` (not a function: no `(` follows)
DATA_MEMBER = re.compile(r"static\s+constexpr\s+[\w:<>, ]+?\s+\w+\s*(=|;|\{)")


@needs_headers
def test_no_constexpr_data_members():
    found = []
    for name in sorted(os.listdir(HEADERS)):
        if name.endswith(".cuh"):
            for i, line in enumerate(cubin_compare.working_tree_headers(name).splitlines(), 1):
                if DATA_MEMBER.search(line):
                    found.append(f"{name}:{i}: {line.strip()}")
    assert not found, ("a device header declares a static constexpr data member; NVVM emits it as a .global object "
                       "in every cubin that instantiates it. Write it as an enumerator (`enum : int { kX = ... };`, "
                       "see heddle_types.cuh):\n" + "\n".join(found))


def test_as_members_restores_the_data_members():
    text = ("struct T {\n  enum : int { kA = 1, kB = kA * 2 };  // c\n  enum : bool { kOk = true };\n"
            "  enum : unsigned { kD = (1u << 4) |\n                    (2u << 7) };\n  enum E { kNotAMember = 3 };\n};")
    assert cubin_compare.as_members(text) == (
        "struct T {\n  static constexpr int kA = 1, kB = kA * 2;  // c\n  static constexpr bool kOk = true;\n"
        "  static constexpr unsigned kD = (1u << 4) |\n                    (2u << 7);\n  enum E { kNotAMember = 3 };\n};")


def _fusion():  # benchmarks/test_compile_bench.py's matmul: bf16 NT 4096^2 + bias + GELU
    return MatmulSpec(dtype="bf16", batched=False, batched_b=False, k=4096, n=4096, trans_a=False, trans_b=True,
                      bias=("bf16", 1), residual=None, activation="gelu", alpha=None, out_dtype="bf16").build_fusion()


def _hopper_gemm():
    fd = _fusion()
    Config(128, 256, 64, 8, 1, 4, -1, "tma_load", (("load", 1, 40), ("mma", 8, 232))).apply(fd)
    return fd.lower("sm_90a")


def _sm80_auto():
    fd = _fusion()
    fd.auto_schedule("sm_80", -1, 4096, 4096)
    return fd.lower("sm_80")


@requires_nvrtc
@needs_headers
@pytest.mark.parametrize("make", [_hopper_gemm, _sm80_auto], ids=["sm_90a_hopper_gemm", "sm_80_auto"])
def test_same_machine_code_fewer_data_objects(make):
    low = make()
    row = cubin_compare.compare_kernel(low, lambda name: cubin_compare.as_members(cubin_compare.working_tree_headers(
        name)))
    assert row["differs"] == [], f"{low.name}: sections differ between members and enumerators: {row['differs']}"
    assert row["after"]["text_bytes"] == row["before"]["text_bytes"] > 0
    assert row["after"]["data_objects"] < row["before"]["data_objects"], row
    assert row["after"]["cubin_bytes"] < row["before"]["cubin_bytes"], row


_NVIDIA_CASES = [c for c in cubin_compare.printed_cases() if not c[1].startswith("gfx")]  # AMD: hiprtc, not NVRTC


@pytest.mark.slow
@requires_nvrtc
@needs_headers
@pytest.mark.parametrize("name,target,make", _NVIDIA_CASES, ids=[c[0] for c in _NVIDIA_CASES])
def test_every_printed_kernel_same_machine_code(name, target, make):
    row = cubin_compare.compare_kernel(make(target).lower(target), lambda header: cubin_compare.as_members(
        cubin_compare.working_tree_headers(header)))
    assert row["differs"] == [], f"{name}: sections differ between members and enumerators: {row['differs']}"
    assert row["after"]["data_objects"] < row["before"]["data_objects"], row
