"""Run-time input checks shared by every way a fusion runs: the CUDA/HIP kernel, the CPU reference
(torch op on CPU tensors), the interpreter and the torch op's fake implementation. One place, so the
CPU and the GPU apply the same rules and raise the same heddle.InputError.

  bind(where, decls, tensors)     count, type, device (one device, meta included), dtype, rank, sizes
  check(where, decls, mexpr, ts)  bind + the matmul operands' layout (rows contiguous)
  zero_size_result(fusion, g, ts) M, N or batch = 0: an empty result; K = 0: zeros through the epilogue
  materialize(tensors)            tensors whose memory is not their value made plain (before any kernel reads it)
  check_memory(where, decls, ts)  InputError for such a tensor (the last guard before an address is taken)
"""
from __future__ import annotations

from typing import Dict, Sequence

from .errors import InputError

DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2",
          "e8m0": "float8_e8m0fnu", "e2m1x2": "float4_e2m1fn_x2",
          "i32": "int32"}  # i32: group ends; e8m0: MX scales; e2m1x2: NVFP4 operands


def same_device(where: str, names: Sequence[str], tensors) -> None:
    """All tensors on one device. A meta (or CPU) tensor among CUDA ones would make torch route the op
    to its fake implementation and return uninitialised memory."""
    first = None
    for name, t in zip(names, tensors):
        dev = getattr(t, "device", None)
        if first is None:
            first = (name, dev)
        elif dev != first[1]:
            raise InputError(f"{where}: input '{name}' is on {dev} but input '{first[0]}' is on {first[1]}; "
                             "move all inputs to one device (meta tensors cannot mix with real ones)")


def materialize(tensors):
    """`tensors` with every tensor whose memory does not hold its value made plain, for a kernel that reads
    memory: torch's negative bit resolved (torch._neg_view, x.conj().imag: the memory holds -x) and a
    ZeroTensor (torch._efficientzerotensor: no memory at all) made real zeros. Torch's dispatcher does this
    for a custom op's implementation; heddle's eager paths skip it, so each calls this before its checks.
    The conjugate bit needs no resolving: torch sets it on complex tensors only, which no check accepts.
    `tensors` itself when nothing needs it (the usual case); non-tensors pass through (the checks name them)."""
    import torch
    if not any(isinstance(t, torch.Tensor) and (t.is_neg() or t._is_zerotensor()) for t in tensors):
        return tensors
    return [_plain(t) if isinstance(t, torch.Tensor) else t for t in tensors]


def _plain(t):
    import torch
    if t._is_zerotensor():
        return torch.zeros(t.shape, dtype=t.dtype, device=t.device)
    return t.resolve_neg()  # itself when the bit is not set


def check_memory(where: str, decls, tensors) -> None:
    """InputError for an input whose memory does not hold its value (see materialize): the guard of the one
    place that takes tensors' addresses (Kernel.prepare), for a caller that did not materialize them."""
    for (name, _, _), t in zip(decls, tensors):
        if t.is_neg():
            raise InputError(f"{where}: input '{name}' has torch's negative bit (a torch._neg_view, or the imaginary "
                             f"part of a conjugate): its memory holds -{name}, which a kernel would read; call "
                             f"{name}.resolve_neg() first (heddle.matmul, Kernel.__call__ and Kernel.op do this)")
        if t._is_zerotensor():
            raise InputError(f"{where}: input '{name}' is a ZeroTensor (torch._efficientzerotensor) with no memory "
                             f"for a kernel to read; pass torch.zeros({list(t.shape)}, dtype={t.dtype}) instead")


def bind(where: str, decls, tensors) -> Dict[str, int]:
    """Check `tensors` against the declared inputs [(name, dtype, shape)] and bind the symbolic sizes."""
    import torch
    if len(tensors) != len(decls):
        names = ", ".join(n for n, _, _ in decls)
        raise InputError(f"{where}: expected {len(decls)} tensors ({names}), got {len(tensors)}")
    for (name, _, _), t in zip(decls, tensors):
        if not isinstance(t, torch.Tensor):
            raise InputError(f"input '{name}': expected a torch.Tensor, got {type(t).__name__}")
    same_device(where, [n for n, _, _ in decls], tensors)
    env: Dict[str, int] = {}
    for (name, dt, shape), t in zip(decls, tensors):
        want = getattr(torch, DTYPES[dt])
        if t.dtype != want:
            raise InputError(f"input '{name}': dtype {t.dtype} but the fusion declares {want}; "
                             f"cast it with .to({want}) or define the fusion with that dtype")
        if t.dim() != len(shape):
            raise InputError(f"input '{name}': rank {t.dim()} (shape {list(t.shape)}) but the fusion declares "
                             f"{len(shape)} axes {shape}")
        for ax, (want_s, got) in enumerate(zip(shape, t.shape)):
            if isinstance(want_s, str):
                if env.setdefault(want_s, got) != got:
                    raise InputError(f"input '{name}' axis {ax}: size {got} but symbol {want_s} is already "
                                     f"bound to {env[want_s]} by an earlier input")
            elif want_s != got:
                raise InputError(f"input '{name}' axis {ax}: size {got} but the fusion declares {want_s} "
                                 "(no broadcasting: pass the full shape)")
    return env


class MatmulGeometry:
    """Sizes of a fusion's matmul read off its operand tensors (shared by launch and simulation)."""

    def __init__(self, mexpr, by_name):
        self.a_name, self.b_name = mexpr["inputs"]
        self.a, self.b = by_name[self.a_name], by_name[self.b_name]
        ta, tb = mexpr["trans_a"], mexpr["trans_b"]
        a, b = self.a, self.b
        self.M = a.shape[-1] if ta else a.shape[-2]
        self.K = a.shape[-2] if ta else a.shape[-1]
        self.N = b.shape[-2] if tb else b.shape[-1]
        self.batched = a.dim() == 3
        self.batch = a.shape[0] if self.batched else 1
        self.out_shape = (self.batch, self.M, self.N) if self.batched else (self.M, self.N)
        self.env = {"M": self.M, "N": self.N, "K": self.K, "batch": self.batch}
        if mexpr.get("group_offsets"):  # a grouped matmul: T rows in all, E experts (lower/build/grouped_walk.h)
            self.env.update(tokens=self.M, E=b.shape[0])
        for nm, t in ((self.a_name, a), (self.b_name, b)):
            if t.stride(-1) != 1 and t.shape[-1] > 1:
                raise InputError(f"input '{nm}': its last axis has stride {t.stride(-1)}; heddle reads rows "
                                 "contiguously — call .contiguous() or declare the operand transposed "
                                 "(trans_a/trans_b)")
        if mexpr.get("scales") in ("mx32", "nv16"):
            self._check_mx_scales(mexpr, by_name)
        elif mexpr.get("scales"):
            self._check_block_scales(mexpr, by_name)

    def _check_mx_scales(self, mexpr, by_name):
        """mx32 scales (docs/fp8.md "MX formats"; nv16 likewise per 16 of K; e2m1x2 operands (NVFP4, MXFP4) count K in
        e2m1 elements, two a byte):
        K a multiple of 32, scale_a [round_up(M, 128), round_up(K/32,
        4)] and scale_b [round_up(N, 128), round_up(K/32, 4)] e8m0 in torch's blocked layout, contiguous and
        16-byte aligned (the kernel copies 512-byte chunks of them by TMA: PTX ISA "cp.async.bulk" takes 16-byte
        aligned addresses and sizes, as CCCL's cuda::ptx notes repeat) -- a symbolic size binds any extent, so the
        relations to M, N and K are checked here."""
        fp4 = str(self.a.dtype) == "torch.float4_e2m1fn_x2"  # NVFP4 / MXFP4: K / 2 bytes a row
        blk, k = (16 if mexpr["scales"] == "nv16" else 32), (2 * self.K if fp4 else self.K)
        if k % blk:
            raise InputError(f"input '{self.a_name}': K = {k} is not a multiple of {blk}; a block scale covers {blk} "
                             f"elements of K: pad K with zeros to {-(-k // blk) * blk}")
        kb = -(-k // (4 * blk)) * 4
        for which, rows in (("scale_a", self.M), ("scale_b", self.N)):
            nm = mexpr[which]
            t = by_name[nm]
            want = (-(-rows // 128) * 128, kb)
            if tuple(t.shape) != want:
                raise InputError(f"input '{nm}' ({which}): shape {list(t.shape)}, but M={self.M}, N={self.N}, "
                                 f"K={k} need {which} {list(want)} ({mexpr['scales']} scales in torch's blocked "
                                 f"layout: round_up(rows, 128) x round_up(K/{blk}, 4); torch's "
                                 "to_blocked(s).view(...))")
            if not t.is_contiguous() or t.data_ptr() % 16:
                raise InputError(f"input '{nm}' ({which}): strides {list(t.stride())}, address "
                                 f"{t.data_ptr() % 16} mod 16; the kernel copies MX scales in 512-byte chunks "
                                 "of a contiguous, 16-byte aligned tensor — call .contiguous() (or .clone())")

    def _check_block_scales(self, mexpr, by_name):
        """block128 scales (docs/fp8.md): scale_a [M, ceil(K/128)] M-major (the TMA map of its ring slots),
        scale_b [ceil(N/128), ceil(K/128)] rows contiguous (the kernel indexes it row-major) -- a symbolic block
        count binds any size, so the relation to K and N is checked here."""
        kb, nb = -(-self.K // 128), -(-self.N // 128)
        for which, want in (("scale_a", (self.M, kb)), ("scale_b", (nb, kb))):
            nm = mexpr[which]
            t = by_name[nm]
            if tuple(t.shape) != want:
                raise InputError(f"input '{nm}' ({which}): shape {list(t.shape)}, but M={self.M}, N={self.N}, "
                                 f"K={self.K} need {which} {list(want)} (block128 scales: ceil of K and N over 128)")
            if which == "scale_a":  # through the operand ring: the TMA map's M-major storage (heddle.tma)
                from .tma import scale_a_layout_problem
                why = scale_a_layout_problem(t)
                if why:
                    raise InputError(f"input '{nm}' (scale_a): the kernel loads it by TMA from its M-major layout, "
                                     f"but {why}; pass heddle.tma.m_major_scales({nm}) (M-major, M padded to a "
                                     "multiple of 4: torch's BlockWise1x128 layout, DeepGEMM's TMA-aligned one)")
                continue
            # (the row stride of a one-row scale is never used: torch calls [1, kb] with strides (1, 1) contiguous)
            if t.dim() == 2 and t.shape[1] > 1 and (t.stride(1) != 1 or (t.shape[0] > 1 and t.stride(0) != t.shape[1])):
                raise InputError(f"input '{nm}' ({which}): strides {list(t.stride())}; the kernel reads block scales "
                                 "as a contiguous row-major [rows, ceil(K/128)] array — call .contiguous()")


def matmul_expr(fusion) -> dict:
    return next(e for e in fusion.exprs() if e["op"] == "matmul")


def launch_decls(fusion):
    """What a launch of the fusion takes, [(name, dtype, shape)]: its inputs, then a grouped matmul's int32
    group ends [E] (E: the expert axis of its weights; docs/grouped.md)."""
    decls = [(t.name, t.dtype, t.shape) for t in fusion.inputs]
    e = matmul_expr(fusion)
    if e.get("group_offsets"):
        w = next(shape for name, _, shape in decls if name == e["inputs"][1])
        decls.append((e["group_offsets"], "i32", [w[0]]))
    return decls


def matmul_geometry(fusion, by_name) -> MatmulGeometry:
    return MatmulGeometry(matmul_expr(fusion), by_name)


def check(where: str, decls, mexpr, tensors) -> MatmulGeometry:
    """Every rule an input must meet whichever way the fusion runs (layouts a compiled kernel's vector
    width adds are checked by Kernel.prepare); the matmul's sizes, for the launch."""
    bind(where, decls, tensors)
    return MatmulGeometry(mexpr, {n: t for (n, _, _), t in zip(decls, tensors)})


def zero_size_result(fusion, g: MatmulGeometry, tensors):
    """Like torch: M, N or batch = 0 gives an empty output; K = 0 gives alpha*0 + bias through the
    activation plus the residual. Computed with torch on the inputs' device, no kernel launched.
    None when every size is positive."""
    if g.M and g.N and g.K and g.batch:
        return None
    import torch
    from .reference import evaluate
    return evaluate(fusion, tensors, compute_dtype=torch.float32)
