"""PTX data semantics of the CPU interpreter (src/heddle/interp/rt/hrt_ptx.h), checked on the host.

tests/interp/ptx_selftest*.cpp (the harness, numbers, mma.sync and ldmatrix; wgmma; TMA; tcgen05) are
compiled into one program with the host C++ compiler and run once; it checks the
numbers, the mma.m16n8k16 fragment tables and arithmetic, ldmatrix, wgmma (descriptors, canonical
swizzled layouts, D fragment), TMA (tensor-map validation, swizzled/partial loads and stores) and the
sm_100a tcgen05 data semantics of hrt_ptx_tcgen05.h (instruction and shared-memory descriptors, tensor
memory allocation, tcgen05.mma kind::f16 and kind::f8f6f4 M=128 into tensor memory, tcgen05.ld 32x32b; and
hrt_ptx_tcgen05_mx.h's tcgen05.cp 32x128b.warpx4 and block-scaled kind::mxf8f6f4 / kind::mxf4nvf4 / kind::mxf4)
against expectations transcribed from the PTX ISA / CUDA documents, printing ``ok <name>`` per check.
No GPU and no heddle build are needed.
"""

import pytest

from support.selftest_defs import ROOT, run_selftest

SRCS = sorted((ROOT / "tests" / "interp").glob("ptx_selftest*.cpp"))
HEADER = ROOT / "src" / "heddle" / "interp" / "rt" / "hrt_ptx.h"

# one entry per check the self-test prints as "ok <name>"
EXPECTED = (
    ["numbers", "mma_m16n8k16_tables", "mma_m16n8k16_f16", "mma_m16n8k16_bf16"]
    + [f"ldmatrix_x{n}{t}" for n in (1, 2, 4) for t in ("", "_trans")]
    + ["wgmma_d_layout"]
    + [
        f"wgmma_{ty}_n{n}_{lay}"
        for ty in ("f16", "bf16")
        for n in (64, 128, 256)
        for lay in ("kmajor_sw128", "kmajor_sw64", "kmajor_sw32", "mnmajor_sw128")
    ]
    + [
        f"wgmma_{ty}_{case}"
        for ty in ("f16", "bf16")
        for case in (
            "n128_kmajor_none",
            "n128_mnmajor_none",
            "n128_mnmajor_sw64",
            "n64_mnmajor_sw32",
            "n96_a_kmajor_sw128_b_mnmajor_sw128",
        )
    ]
    + [
        "wgmma_isa_example_mn_none_bf16",
        "wgmma_isa_example_mn_sw32_bf16",
        "wgmma_isa_example_mn_sw64_bf16",
        "wgmma_errors",
        "wgmma_e4m3_e4m3_n64_kmajor_sw128",
        "wgmma_e5m2_e4m3_n128_kmajor_sw128",
        "wgmma_e4m3_e5m2_n256_kmajor_sw128",
        "wgmma_e5m2_e5m2_n64_kmajor_sw128",
        "wgmma_f8_errors",
        "tma_encode_rejects",
        "tma_load_swizzle_none",
        "tma_load_swizzle_32B",
        "tma_load_swizzle_64B",
        "tma_load_swizzle_128B",
        "tma_load_swizzle_128B_narrow_inner",
        "tma_load_3d_batched_128B",
        "tma_load_element_stride",
        "tma_store_swizzle_none",
        "tma_store_swizzle_32B",
        "tma_store_swizzle_64B",
        "tma_store_swizzle_128B",
        "tma_store_swizzle_128B_interior",
    ]
    + [
        "tcgen05_idesc",
        "tcgen05_smem_desc",
        "tcgen05_alloc",
        "tcgen05_mma_bf16_n256_kmajor_sw128",
        "tcgen05_mma_f16_n128_kmajor_sw64",
        "tcgen05_mma_bf16_n16_kmajor_sw32",
        "tcgen05_mma_bf16_n128_a_mnmajor_b_kmajor_sw128",
        "tcgen05_mma_f16_n64_mnmajor_none_neg_a",
        "tcgen05_mma_errors",
        "tcgen05_idesc_f8f6f4",
        "tcgen05_mma_f8f6f4_e4m3_n64_sw128",
        "tcgen05_mma_f8f6f4_e5m2_n128_sw64",
        "tcgen05_mma_f8f6f4_e4m3_e5m2_n16_sw32",
        "tcgen05_idesc_mxf8f6f4",
        "tcgen05_cp_32x128b_warpx4",
        "tcgen05_mma_mxf8f6f4_e4m3_n128",
        "tcgen05_mma_mxf8f6f4_e5m2_e4m3_n256",
        "tcgen05_mma_mxf8f6f4_errors",
        "tcgen05_idesc_mxf4nvf4",
        "tcgen05_mma_mxf4nvf4_n128",
        "tcgen05_mma_mxf4nvf4_n64",
        "tcgen05_idesc_mxf4",
        "tcgen05_mma_mxf4_n128",
        "tcgen05_mma_mxf4_n256",
        "tcgen05_mma_mxf4_ids_both_0",
    ]
)


@pytest.fixture(scope="module")
def selftest(tmp_path_factory):
    return run_selftest(tmp_path_factory, "ptx_selftest", SRCS)


def test_selftest_exit_code(selftest):
    run, _ = selftest
    failures = "\n".join(line for line in run.stdout.splitlines() if line.startswith("FAIL"))
    assert run.returncode == 0, f"ptx_selftest failed (rc={run.returncode}):\n{failures}\n{run.stderr}"


def test_selftest_reports_no_unknown_checks(selftest):
    _, ok = selftest
    assert ok <= set(EXPECTED), f"self-test printed checks this file does not list: {sorted(ok - set(EXPECTED))}"


@pytest.mark.parametrize("name", EXPECTED)
def test_check(selftest, name):
    run, ok = selftest
    if name not in ok:
        detail = "\n".join(line for line in run.stdout.splitlines() if line.startswith(f"FAIL {name}:"))
        pytest.fail(f"check {name} did not pass:\n{detail or '(not printed)'}")


def test_header_uses_only_standard_headers():
    includes = [line.strip() for line in HEADER.read_text().splitlines() if line.strip().startswith("#include")]
    # hrt_fp8.h: the 8-bit formats the FP8 wgmma decodes; the own headers are header-only, standard headers only
    own = ('#include "hrt_ptx.h"', '#include "hrt_fp8.h"')
    assert includes and all(inc.startswith("#include <") or inc == own[1] for inc in includes), includes
    for name in ("hrt_ptx_tcgen05.h", "hrt_fp8.h"):
        lines = HEADER.with_name(name).read_text().splitlines()
        includes = [line.strip() for line in lines if line.strip().startswith("#include")]
        assert includes and all(inc.startswith("#include <") or inc in own for inc in includes), (name, includes)
