"""Helpers shared by the Blackwell (sm_100a) tests: the tcgen05 kernel's schedule through the public API."""
import heddle
from support.wgmma_defs import schedule_sm90
from support.matmul_defs import LAYOUTS, matmul_fusion


def roles(acc_stages=0, regs=(0, 0)):
    load = {"warps": 1, "registers": regs[0]} if regs[0] else 1
    epi = {"warps": 4}
    if acc_stages:
        epi["stages"] = acc_stages
    if regs[1]:
        epi["registers"] = regs[1]
    return {"load": load, "mma": 1, "epilogue": epi}


def build(stages=4, acc_stages=2, bn=128, bk=64, layout="NN", dtype="bf16", regs=(0, 0), n=1024, k=4096,
          epilogue="bias_gelu", m="M"):
    """A matmul scheduled for the sm_100a tcgen05 kernel (tile 128 x bn x bk)."""
    fd, a, b = matmul_fusion(m=m, n=n, k=k, dtype=dtype, layout=layout, epilogue=epilogue)
    schedule_sm90(fd, a, b, bm=128, bn=bn, bk=bk, wgs=1, stages=stages, roles=roles(acc_stages, regs))
    return fd



def build_epi(operands=("bias",), tma="bias", e_stages=2, stages=3, acc_stages=2, bn=64, bk=16, n=72, k=104,
              dtype="bf16", layout="NN", regs=(0, 0)):
    """gelu(a @ b [+ bias[N]] [+ res[M, N]]) for the sm_100a tcgen05 kernel with operand `tma` cached with
    tma_load (its producer role on warp 2 loads it per tile into a ring of e_stages stages; None: no cache)."""
    ta, tb = LAYOUTS[layout]
    fd = heddle.Fusion()
    a = fd.input("a", dtype, [k, "M"] if ta else ["M", k])
    b = fd.input("b", dtype, [n, k] if tb else [k, n])
    y = fd.matmul(a, b, ta, tb)
    extra = {}
    for name in operands:
        extra[name] = fd.input(name, dtype, [n] if name == "bias" else ["M", n])
        y = y + extra[name]
    fd.output(heddle.ops.gelu(y).to(dtype))
    schedule_sm90(fd, a, b, bm=128, bn=bn, bk=bk, wgs=1, stages=stages, roles=roles(acc_stages, regs))
    if tma:
        fd.cache_after(extra[tma], "tma_load").circular_buffer(e_stages)
    return fd


def build_fp8(fmt_a="e4m3", fmt_b="e4m3", scales="row", bias=True, stages=3, acc_stages=2, bn=64, bk=128, n=72,
              k=208, out="bf16"):
    """gelu((a @ b^T) * scales [+ bias]) with 8-bit operands for the sm_100a tcgen05 kernel (kind::f8f6f4): a [M, K]
    and b [N, K], both K-major (torch._scaled_mm's layouts), f32 scales applied to the accumulator in the
    epilogue -- "tensor": scale_a [1] and scale_b [1]; "row": scale_a [M, 1] (per row of a) and scale_b [1, N]
    (per column of b); None: no scales -- a bf16 bias [N] and a bf16 (or `out`) output."""
    fd = heddle.Fusion()
    a = fd.input("a", fmt_a, ["M", k])
    b = fd.input("b", fmt_b, [n, k])
    y = fd.matmul(a, b, False, True)
    if scales == "tensor":
        y = y * fd.input("scale_a", "f32", [1]) * fd.input("scale_b", "f32", [1])
    elif scales == "row":
        y = y * fd.input("scale_a", "f32", ["M", 1]) * fd.input("scale_b", "f32", [1, n])
    if bias:
        y = y + fd.input("bias", "bf16", [n])
    fd.output(heddle.ops.gelu(y).to(out))
    schedule_sm90(fd, a, b, bm=128, bn=bn, bk=bk, wgs=1, stages=stages, roles=roles(acc_stages))
    return fd


def redundant_fence_mutants(survivors):
    """The simulator mutants deleting the two tcgen05 fences that order nothing the block barriers do not:
    tcgen05.alloc and tcgen05.dealloc are synchronous (PTX ISA 9.7.16.6.1), so the fence::before_thread_sync
    before the barrier that hands out the tensor-memory address and the fence::after_thread_sync before the
    dealloc are redundant, and their deletion equivalent (tests/interp/test_tcgen05_ordering.py)."""
    return [m for m in survivors if m.kind == "delete_sync" and
            ("publish tmem_slot" in m.description or "acquire teardown" in m.description)]


def build_tma_store(stages=2, acc_stages=2, bn=128, bk=16, n=200, k=40, layout="NN", dtype="bf16", out=None,
                    epilogue="bias_gelu"):
    """build(...) with epilogue_store("tma"): the epilogue warpgroup stages its tile through shared memory and
    stores it by TMA (docs/blackwell.md "The TMA-store epilogue"); out: the output dtype when not `dtype`."""
    if out is None:
        fd = build(stages=stages, acc_stages=acc_stages, bn=bn, bk=bk, n=n, k=k, layout=layout, dtype=dtype,
                   epilogue=epilogue)
    else:  # gelu(a @ b + bias) in `out`
        ta, tb = LAYOUTS[layout]
        fd = heddle.Fusion()
        a = fd.input("a", dtype, [k, "M"] if ta else ["M", k])
        b = fd.input("b", dtype, [n, k] if tb else [k, n])
        y = fd.matmul(a, b, ta, tb) + fd.input("bias", dtype, [n])
        fd.output(heddle.ops.gelu(y).to(out))
        schedule_sm90(fd, a, b, bm=128, bn=bn, bk=bk, wgs=1, stages=stages, roles=roles(acc_stages))
    fd.matmul_tensor.epilogue_store("tma")
    return fd


def tma_store_mutants(source):
    """The tcgen05 TMA-store epilogue's own mutants of a printed kernel (heddle SourceMutants):
    - stage_swizzle: each stage_16 write at the unswizzled spot (column c -> c ^ (lr % 8) * 16 bytes: the 16-byte
      unit the 128-byte swizzle would not have moved);
    - early_release: the accumulator stage's fence::before_thread_sync + accEmpty arrive moved before the tile's
      last chunk (before its tcgen05.ld of the stage)."""
    import re
    from heddle.core.source_mutant_classic import SourceMutant
    lines = source.split("\n")
    out = []
    call = re.compile(r"stage_16<heddle::sm90::TmaTile<\d+, (\d+), heddle::(\w+)>>\(slot, lr, ([^,]+), y \+ u\)")
    for i, ln in enumerate(lines):
        m = call.search(ln)
        if m:
            per = 16 // {"bf16": 2, "f16": 2, "f32": 4, "e4m3": 1, "e5m2": 1}[m.group(2)]
            new = ln[:m.start(3)] + f"({m.group(3)}) ^ ((lr & 7) * {per})" + ln[m.end(3):]
            out.append(SourceMutant("stage_swizzle", i + 1, "stage_16 writes its 16 bytes without the 128-byte swizzle",
                                    "\n".join(lines[:i] + [new] + lines[i + 1:])))
    rel = [i for i, ln in enumerate(lines) if "fence_before();" in ln and "WAR tmem acc (epilogue -> mma)" in ln]
    for i in rel:
        if "accEmpty" not in lines[i + 1]:
            continue
        last = max(j for j in range(i) if "// epilogue store -> sD[" in lines[j])
        moved = lines[:last] + lines[i:i + 2] + lines[last:i] + lines[i + 2:]
        out.append(SourceMutant("early_release", i + 1, "accEmpty released before the tile's last chunk of tcgen05.ld",
                                "\n".join(moved)))
    return out
