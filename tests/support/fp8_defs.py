"""FP8 fusions shared by the FP8 tests (issue 32; docs/fp8.md): e4m3 / e5m2 operands A [M, K] and B stored
[N, K] (matmul(a, b, trans_b=True): both K-major, as 8-bit wgmma and torch._scaled_mm take them), the scales
as epilogue operands applied to the f32 accumulator before every other epilogue op, an optional bf16 bias and
activation, and a 16-bit, f32 or 8-bit output (an 8-bit output: an optional output scale, then the satfinite
cast). The builders go through the public scheduling API; inputs() makes the matching torch tensors.

Scale kinds (SCALES): "none"; "tensor": scale_a and scale_b f32 [1]; "row": scale_a f32 [M, 1] (a row of A) and
scale_b f32 [1, N] (a column of B), the torch._scaled_mm layouts; "mixed": a per-row scale_a with a per-tensor
scale_b."""
import torch

import heddle

SCALES = ("none", "tensor", "row", "mixed")
TORCH = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "bf16": torch.bfloat16, "f16": torch.float16,
         "f32": torch.float32}


def fp8_fusion(n=200, k=1024, a_dtype="e4m3", b_dtype="e4m3", scale="tensor", bias=False, act=None, out="bf16",
               out_scale=False):
    """The FP8 GEMM of the scaled_mm family: (a @ b.T) * scale_a * scale_b [+ bias] [act] [* out_scale] -> out.
    Returns (fusion, a, b)."""
    if scale not in SCALES:
        raise ValueError(f"scale {scale!r}: one of {SCALES}")
    fd = heddle.Fusion()
    a = fd.input("a", a_dtype, ["M", k])
    b = fd.input("b", b_dtype, [n, k])
    y = fd.matmul(a, b, False, True)
    if scale in ("tensor", "row", "mixed"):
        y = y * fd.input("scale_a", "f32", [1] if scale == "tensor" else ["M", 1])
        y = y * fd.input("scale_b", "f32", [1, n] if scale == "row" else [1])
    if bias:
        y = y + fd.input("bias", "bf16", [n])
    if act:
        y = getattr(heddle.ops, act)(y)
    if out_scale:
        y = y * fd.input("scale_out", "f32", [1])
    fd.output(y.to(out))
    return fd, a, b


def fp8_schedule(fd, a, b, variant="coop", bm=128, bn=64, bk=128, stages=4, prefetch=2):
    """A hand schedule on sm_90a through the scheduling API: "pipeline" (TMA ring, one warpgroup computes),
    "coop" (load warp + 2 cooperative MMA warpgroups), "pingpong" (load warp + 2 warpgroups taking turns)."""
    wgs = 2 if variant == "coop" else 1
    mm = fd.schedule()
    mm.split("m", bm).split("n", bn).split("k", bk).split("m.i", bm // (4 * wgs))
    mm.parallelize("m.o", "BIDy").parallelize("n.o", "BIDx").parallelize("m.i.o", "warp")
    mm.reorder(["m.o", "n.o", "k.o", "m.i.o", "m.i.i", "n.i", "k.i"])
    for t in (a, b):
        fd.cache_after(t, "tma_load").circular_buffer(stages, prefetch)
    if variant != "pipeline":
        mm.warp_specialize({"load": {"warps": 1, "registers": 40},
                            "mma": {"warpgroups": 2, "registers": 232}})
    return mm


def fp8_values(shape, dtype, gen, spread=1.0):
    """Random values exactly representable in `dtype` (an 8-bit float), with a wide spread of exponents."""
    x = torch.randn(shape, generator=gen) * spread
    return x.to(TORCH[dtype])


def inputs(fd, M, seed=0):
    """Torch tensors for fd's inputs in order: 8-bit operands, positive f32 scales, a bf16 bias."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for t in fd.inputs:
        shape = [M if s == "M" else s for s in t.shape]
        if t.dtype in ("e4m3", "e5m2"):
            out.append(fp8_values(shape, t.dtype, g))
        elif t.name.startswith("scale"):
            out.append((torch.rand(shape, generator=g) * 1.5 + 0.25).to(torch.float32))
        else:
            out.append((torch.randn(shape, generator=g) * 0.5).to(TORCH[t.dtype]))
    return out
