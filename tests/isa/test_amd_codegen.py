"""AMD code generation (docs/sync-cases.md cases 14-16, ISA side): the HIP source of the auto-scheduled matmul, hiprtc
compiling it for gfx90a, and clang-19 compiling it to assembly for gfx90a, gfx942 and gfx1200, where
the tests read the ISA: matrix-core instructions, LDS DMA, the s_waitcnt vmcnt the planner placed before
each s_barrier (CDNA), s_barrier_signal / s_barrier_wait (GFX12), and the barriers per main-loop
iteration. Skipped with the reason when hiprtc or clang-19 (Debian: libamdhip64-dev, clang-19) is
missing; nothing here needs an AMD GPU."""
import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from heddle import _C
from support.matmul_defs import matmul_fusion

DEVICE_DIR = Path(__file__).resolve().parents[2] / "src" / "heddle" / "codegen" / "device"
CLANG = shutil.which("clang-19")
HIP_RUNTIME_H = "/usr/include/hip/hip_runtime.h"
OBJDUMP = shutil.which("llvm-objdump-19") or ("/usr/lib/llvm-19/bin/llvm-objdump"
                                              if os.path.exists("/usr/lib/llvm-19/bin/llvm-objdump") else None)
MMA = {"gfx90a": r"v_mfma_f32_16x16x16_?(bf16_1k|bf16|f16)", "gfx942": r"v_mfma_f32_16x16x16_(bf16|f16)",
       "gfx1200": r"v_wmma_f32_16x16x16_(bf16|f16)"}

needs_clang = pytest.mark.skipif(not CLANG or not os.path.exists(HIP_RUNTIME_H),
                                 reason="clang-19 and the HIP headers are needed (apt-get install clang-19 "
                                        "libamdhip64-dev)")


def hiprtc_missing():
    try:
        return None if _C.runtime.hiprtc_available() else "hiprtc not found (apt-get install libamdhip64-dev)"
    except Exception as e:  # pragma: no cover
        return str(e)


@functools.lru_cache(maxsize=None)
def lowered(target, dtype="f16", layout="NN", epilogue="bias_gelu"):
    fd, a, b = matmul_fusion(dtype=dtype, layout=layout, epilogue=epilogue)
    fd.auto_schedule(target)
    return fd.lower(target)


def planned_main_wait(l):
    """The vmcnt the planner placed in the main loop (None without LDS DMA)."""
    main = next(n for n in l.structure if n["kind"] == "for" and n["stage"] == "main")
    waits = [n["arg"] for n in main["body"] if n["kind"] == "sync" and n["sync"] == "s_waitcnt vmcnt"]
    return waits[0] if waits else None


@functools.lru_cache(maxsize=None)
def assembly(target, dtype="f16", layout="NN"):
    import tempfile
    d = Path(tempfile.mkdtemp(prefix="heddle_amd_isa_"))
    (d / "heddle").mkdir()
    for h in DEVICE_DIR.glob("*.cuh"):
        shutil.copy(h, d / "heddle" / h.name)
    src = d / "kernel.hip"
    src.write_text(lowered(target, dtype, layout).source)
    out = d / "kernel.s"
    cmd = [CLANG, "-x", "hip", f"--offload-arch={target}", "--cuda-device-only", "-nogpulib", "-O3", "-S",
           "-include", "hip/hip_runtime.h", "-I", str(d), str(src), "-o", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"clang-19 failed for {target}:\n{res.stderr[-4000:]}"
    return out.read_text()


def loops(asm):
    """Loop header name -> the instruction lines of the blocks LLVM annotates as its members."""
    out, cur = {}, None
    for line in asm.splitlines():
        head = re.match(r"^(\.LBB\d+_\d+):.*Loop Header", line)
        member = re.search(r"in Loop: Header=(BB\d+_\d+)", line)
        if head:
            cur = head.group(1)[1:]
        elif re.match(r"^(\.LBB\d+_\d+:|; %bb\.\d+:)", line):
            cur = member.group(1) if member else None
        elif cur and line.startswith("\t"):
            out.setdefault(cur, []).append(line.strip())
    return out


def main_loop(asm, target):
    cands = [body for body in loops(asm).values() if any(re.search(r"\bs_barrier", x) for x in body)]
    return max(cands, key=lambda body: sum(bool(re.match(MMA[target], x)) for x in body))


def test_hip_source_spells_the_plan():
    cdna = lowered("gfx90a")
    src = cdna.source
    assert '#include "heddle/heddle_hip_copy.cuh"' in src and '#include "heddle/heddle_hip_mma.cuh"' in src
    assert "heddle::MmaAmd<128, 128, 32, 2, 2, true, false, T, 64>" in src
    assert "heddle::copy_tile_async<128, 32, 2, 256>" in src  # LDS DMA: one dword (2 x f16) per chunk
    assert "cp_async" not in src and "heddle_mma_sm80" not in src and "#include <" not in src
    assert f"heddle::wait_vmcnt<{planned_main_wait(cdna)}>();" in src and "heddle::block_sync();" in src
    gfx12 = lowered("gfx1200").source
    main = gfx12[gfx12.index("// main loop"):gfx12.index("// epilogue loop")]
    calls = [re.search(r"(barrier_signal|\.step|barrier_wait)\(", x) for x in main.splitlines()]
    assert [c.group(1) for c in calls if c] == ["barrier_signal", ".step", "barrier_wait"], main  # printer keeps them apart
    assert "heddle::MmaAmd<128, 128, 32, 2, 4, true, false, T, 32>" in gfx12
    assert "heddle::copy_tile_sync<" in gfx12 and "wait_vmcnt" not in gfx12
    assert "heddle::barrier_signal();" in gfx12 and "heddle::barrier_wait();" in gfx12
    assert "heddle::block_sync();" not in gfx12


def test_lds_dma_waits_count_dwords_per_stage():
    l = lowered("gfx90a")  # 3 stages, prefetch 2: one stage (16 DMA ops per thread) stays in flight
    assert planned_main_wait(l) == (128 * 32 // 2 + 32 * 128 // 2) // 256
    assert l.barriers_per_main_iteration == 1
    assert "s_waitcnt vmcnt(16): the producing LDS DMA ops must land before the barrier publishes them" in l.explain()


@pytest.mark.skipif(hiprtc_missing() is not None, reason=str(hiprtc_missing()))
def test_hiprtc_compiles_the_matmul_for_gfx90a():
    for dtype in ("f16", "bf16"):
        l = lowered("gfx90a", dtype)
        r = _C.runtime.compile_hip(l.source, l.name, "gfx90a")
        assert r.cubin[:4] == b"\x7fELF" and r.arch == "gfx90a" and "hiprtc" in r.nvrtc_version
        if not OBJDUMP:
            continue
        with open(Path(os.environ.get("TMPDIR", "/tmp")) / f"heddle_{l.name}.co", "wb") as f:
            f.write(r.cubin)
        dis = subprocess.run([OBJDUMP, "-d", "--mcpu=gfx90a", f.name], capture_output=True, text=True).stdout
        assert re.search(MMA["gfx90a"], dis)
        assert re.search(r"buffer_load_dword .* lds", dis)
        assert len(re.findall(r"\bs_barrier\b", dis)) == 3  # before, in and after the main loop
        assert not re.search(r"\bscratch_(load|store)|buffer_store_dword", dis)  # accumulators stay in registers


@needs_clang
@pytest.mark.parametrize("target,dtype,layout", [("gfx90a", "f16", "NN"), ("gfx90a", "bf16", "TN"),
                                                 ("gfx942", "f16", "NN"), ("gfx942", "bf16", "NT"),
                                                 ("gfx1200", "f16", "NN"), ("gfx1200", "bf16", "TT")])
def test_clang_isa(target, dtype, layout):
    asm = assembly(target, dtype, layout)
    l = lowered(target, dtype, layout)
    assert re.search(r"ScratchSize: 0\b", asm), "accumulators spilled to scratch"
    assert re.search(r"\t" + MMA[target], asm)
    body = main_loop(asm, target)
    mma = [x for x in body if re.match(MMA[target], x)]
    assert mma and all(dtype in x for x in mma)
    if target == "gfx1200":  # split barrier: one signal and one wait per iteration, in that order
        sig = [i for i, x in enumerate(body) if x.startswith("s_barrier_signal")]
        wait = [i for i, x in enumerate(body) if x.startswith("s_barrier_wait")]
        assert len(sig) == len(wait) == l.barriers_per_main_iteration == 1 and sig[0] < wait[0]
        # the split overlaps: this iteration's WMMAs (and their LDS reads) issue between the halves
        between = body[sig[0] + 1:wait[0]]
        assert sum(bool(re.match(MMA[target], x)) for x in between) >= 1, between
        assert any(x.startswith("ds_load") for x in between), between
        assert not any(re.match(r"s_barrier\b", x) for x in body)
        assert not any("lds" in x and x.startswith("buffer_load") for x in asm.splitlines())  # no LDS DMA on GFX12
    else:  # s_barrier with the planner's s_waitcnt vmcnt before it
        bars = [i for i, x in enumerate(body) if re.match(r"s_barrier\b", x)]
        assert len(bars) == l.barriers_per_main_iteration == 1
        assert "s_barrier_signal" not in asm
        waits = [re.search(r"vmcnt\((\d+)\)", x) for x in body[:bars[0]] if x.startswith("s_waitcnt")]
        waits = [int(w.group(1)) for w in waits if w]
        assert waits and waits[-1] == planned_main_wait(l), (waits[-3:], planned_main_wait(l))
        dma = [x for x in body if x.startswith("buffer_load_dword") and x.endswith(" lds")]
        assert len(dma) == planned_main_wait(l)  # one stage of DMA per iteration: what the wait lets fly
