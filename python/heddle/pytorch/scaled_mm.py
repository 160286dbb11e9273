"""heddle.scaled_mm: 8-bit float (FP8) GEMMs with their scales, in torch._scaled_mm's conventions.

    out = cast(act((a @ b) * scale_a * scale_b + bias) * scale_result, out_dtype)

a [M, K] row-major and b [K, N] column-major (b.t() contiguous: a Linear weight [N, K] passes as w.t()),
both float8_e4m3fn or float8_e5m2 (they may mix); scale_a / scale_b float32, per tensor (one element), per
row of a ([M, 1]) / per column of b ([1, N]), or DeepGEMM's blocks (torch's BlockWise1x128 x BlockWise128x128:
scale_a [M, ceil(K/128)], scale_b [ceil(K/128), ceil(N/128)], applied inside the k loop with promotion, on
sm_90a's wgmma kernel only); bias [N]; out_dtype bf16, f16, f32 or an 8-bit float
(then multiplied by scale_result, cuBLASLt's D scale as torch's CUDA op applies it, and cast with saturation), or an
8-bit float with a computed output scale (out_scale="1x128" | "row": heddle.ops.quantize in the epilogue, the call
returns (out, scale) with scale f32 [M, ceil(N/128)] or [M, 1]; out_scale="mx32": an MX-format output, scale
torch.float8_e8m0fnu per row and 32 columns in torch's blocked layout [round_up(M, 128), round_up(N/32, 4)], the next
MX call's scale_a; N a multiple of 32; the sm_100a tcgen05 kernels only). MX scales (MXFP8: scale_a and scale_b
torch.float8_e8m0fnu in torch's blocked layout, round_up(rows, 128) * round_up(K/32, 4) bytes each, K a multiple of
32) select the sm_100a block-scaled tcgen05 kernel (scales="mx32", docs/fp8.md "MX formats"; with an 8-bit out_dtype
only with out_scale); NVFP4 likewise (scales="nv16", an 8-bit out_dtype also only with out_scale):
a and b torch.float4_e2m1fn_x2 (two e2m1 a byte: a [M, K/2] row-major, b [K/2, N] column-major, torch's b_packed.t()),
scale_a and scale_b torch.float8_e4m3fn (ue4m3) in the blocked layout, round_up(rows, 128) * round_up(K/16, 4) bytes each,
K a multiple of 32 (K/2 of 16: torch's rule); MXFP4 likewise (scales="mx32" with e2m1x2 operands): the NVFP4 operands
with torch.float8_e8m0fnu scales per 32 of K, round_up(rows, 128) * round_up(K/32, 4) bytes each (torch's convention:
e8m0 scales mean block 32). The layout and the alignment
(K and N multiples of 16) are torch's CUDA rules, checked here on every device.

Each signature is one fusion (the 8-bit matmul, the scales and the epilogue in its epilogue) and one torch
custom op, torch.ops.heddle.smm_..., with a fake implementation: FusedMatmul's launch path on CUDA
tensors, the printed kernel under HEDDLE_INTERPRET=1 on CPU tensors (an FP8-capable target: sm_90a unless
HEDDLE_INTERPRET_TARGET names another), else the fusion evaluated with torch. No backward: FP8 training
is out of scope (docs/fp8.md, "Python and torch").

Eager calls take heddle.matmul's path (docs/fp8.md "Eager calls"): a repeated plain call is one C++ call through
scaled_mm's front (_calls, a CallTable keyed by the whole call); any other runs every check (scaled_spec), then the
op's plan table and implementation without the custom-op layer when nothing is traced, compiled, in a mode or
differentiated, else the custom op.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Dict, Optional

import torch

from .. import _C
from ..core import inputs
from ..core.errors import InputError
from ..core.fusion import Fusion, ops_unary
from ..core.ops import ACTIVATIONS, quantize
from ..core.tma import m_major_scales
from .custom_ops import register_op
from .matmul import FusedMatmul, _dynamo_compiling, _modes_active, call_table, eager_call_ok

FLOAT8 = {torch.float8_e4m3fn: "e4m3", torch.float8_e5m2: "e5m2"}
FP4 = getattr(torch, "float4_e2m1fn_x2", None)  # NVFP4's and MXFP4's packed operands (two e2m1 a byte)
OPERANDS = {**FLOAT8, **({FP4: "e2m1x2"} if FP4 is not None else {})}
OUT_DTYPES = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32", **FLOAT8}
_TORCH = {v: k for k, v in OUT_DTYPES.items()}
_BIAS = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32"}
BLOCK = 128  # the block of DeepGEMM's scales (ir/block_scales.cpp kScaleBlock)
# out_scale -> heddle.ops.quantize's group; "mx32": an MX-format output (e8m0 per 32 columns, blocked; docs/fp8.md)
OUT_SCALES = {"1x128": BLOCK, "row": "row", "mx32": "mx32"}
OUT_SCALE_CODE = {"1x128": "G128", "row": "Grow", "mx32": "Gmx32"}  # its token in the op's name
ALIGN = 16  # K and N multiples of 16: torch._scaled_mm's rule on CUDA (cuBLASLt), heddle's on every device
_W = "heddle.scaled_mm"


@dataclass(frozen=True)
class ScaledMatmulSpec:
    """One scaled_mm signature. row_a: scale_a is [M, 1] (else one element); col_b: scale_b is [1, N];
    block: 128-block scales (scale_a [M, ceil(K/128)], scale_b [ceil(N/128), ceil(K/128)] as the op takes it: the
    transpose of torch's [ceil(K/128), ceil(N/128)]), row_a and col_b False."""
    dtype_a: str
    dtype_b: str
    k: int
    n: int
    row_a: bool
    col_b: bool
    bias: Optional[str]          # dtype of the [N] bias
    activation: Optional[str]
    out_dtype: str
    scale_result: bool = False   # an 8-bit output multiplied by a one-element scale_result before the cast
    block: bool = False          # DeepGEMM's 1x128 (a) x 128x128 (b) block scales
    out_scale: Optional[str] = None  # "1x128" | "row" | "mx32": the 8-bit output quantized with a computed scale
    mx: bool = False             # MXFP8 / MXFP4 (e2m1x2 operands): e8m0 scales per 32 of K, blocked (scales="mx32")
    nv: bool = False             # NVFP4: e2m1x2 operands (k: bytes a row), e4m3 scales per 16 of K, blocked (nv16)

    # what FusedMatmul reads of a spec: a 2-D a and b^T ([N, K], K-major) operand, one output
    batched = False
    batched_b = False
    trans_a = False
    trans_b = True
    saved = None

    def op_name(self) -> str:
        parts = ["smm", self.dtype_a + self.dtype_b, f"k{self.k}", f"n{self.n}",
                 "sbb" if self.block else "smx" if self.mx else "snv" if self.nv else
                 "s" + ("r" if self.row_a else "t") + ("c" if self.col_b else "t")]
        if self.bias is not None:
            parts.append("B" + self.bias)
        if self.activation is not None:
            parts.append("A" + self.activation.replace("_", ""))
        if self.scale_result:
            parts.append("Q")
        if self.out_scale is not None:
            parts.append(OUT_SCALE_CODE[self.out_scale])
        parts.append("o" + self.out_dtype)
        return "_".join(parts)

    def build_fusion(self) -> Fusion:
        fd = Fusion()
        a = fd.input("a", self.dtype_a, ["M", self.k])
        b = fd.input("b", self.dtype_b, [self.n, self.k])  # b^T: torch's column-major b, K-major
        if self.mx:  # the tensor core applies them per 32 of K (docs/fp8.md "MX formats"; MXFP4: K = 2k elements)
            kp = mx_columns(2 * self.k if self.dtype_a == "e2m1x2" else self.k)
            y = fd.matmul(a, b, False, True, scale_a=fd.input("scale_a", "e8m0", ["MP", kp]),
                          scale_b=fd.input("scale_b", "e8m0", [-(-self.n // BLOCK) * BLOCK, kp]), scales="mx32")
        elif self.nv:  # NVFP4: the tensor core applies them per 16 of K (K = 2k elements)
            kp = nv_columns(self.k)
            y = fd.matmul(a, b, False, True, scale_a=fd.input("scale_a", "e4m3", ["MP", kp]),
                          scale_b=fd.input("scale_b", "e4m3", [-(-self.n // BLOCK) * BLOCK, kp]), scales="nv16")
        elif self.block:  # the scales act inside the k loop (docs/fp8.md "Block scales and promotion")
            kb = -(-self.k // BLOCK)
            y = fd.matmul(a, b, False, True, scale_a=fd.input("scale_a", "f32", ["M", kb]),
                          scale_b=fd.input("scale_b", "f32", [-(-self.n // BLOCK), kb]))
        else:
            y = fd.matmul(a, b, False, True)
            y = y * fd.input("scale_a", "f32", ["M", 1] if self.row_a else [1])
            y = y * fd.input("scale_b", "f32", [1, self.n] if self.col_b else [1])
        if self.bias is not None:
            y = y + fd.input("bias", self.bias, [self.n])
        if self.activation is not None:
            y = ops_unary(self.activation, y)
        if self.scale_result:
            # torch's CUDA op multiplies (cuBLASLt D scale); its CPU op divides (pytorch/pytorch#190449)
            y = y * fd.input("scale_result", "f32", [1])
        if self.out_scale is not None:  # docs/fp8.md "Computed output scales": q, then its scale
            q, s = quantize(y, self.out_dtype, group=OUT_SCALES[self.out_scale])
            fd.output(q)
            fd.output(s)
            return fd
        fd.output(y.to(self.out_dtype))
        return fd

    def scale_shape(self, m):
        """The computed scale's shape for M rows: [M, ceil(N/128)] (1x128), [M, 1] (row) or [round_up(M, 128),
        round_up(N/32, 4)] (mx32)."""
        if self.out_scale == "mx32":
            return (-(-m // 128) * 128, mx_columns(self.n))
        return (m, 1) if self.out_scale == "row" else (m, -(-self.n // BLOCK))

    def scale_dtype(self):
        """The computed scale's dtype: float32, or e8m0 codes for an MX-format output."""
        return torch.float8_e8m0fnu if self.out_scale == "mx32" else torch.float32


class FusedScaledMatmul(FusedMatmul):
    """A scaled_mm signature: FusedMatmul's kernels, buckets and launch path, its own op (no backward)."""

    def _make_op(self):
        names = [t.name for t in self.fusion.inputs]
        op = register_op(self.spec.op_name(), names, self.run, self.fake,
                         outputs=1 if self.spec.out_scale is None else 2)
        op.register_autograd(_no_backward, setup_context=lambda ctx, inputs, output: None)
        return op

    @FusedMatmul.k_share.setter
    def k_share(self, mode: str):
        FusedMatmul.k_share.fset(self, mode)
        _calls.clear()  # scaled_mm's front holds this op's plans too

    @FusedMatmul.epilogue_layout.setter
    def epilogue_layout(self, layout: str):
        FusedMatmul.epilogue_layout.fset(self, layout)
        _calls.clear()

    def interpret_target(self) -> str:
        # the block-scaled kernel is wgmma's; the computed output scale lowers on wgmma and tcgen05 (docs/fp8.md);
        # MX scales have sm_100a's block-scaled tcgen05.mma only (HEDDLE_INTERPRET_TARGET when it has tcgen05)
        if self.spec.mx or self.spec.nv or self.spec.out_scale == "mx32":  # an MX-format output: tcgen05 only
            from ..core.interpret import interpret_target
            t = interpret_target()
            return t if _C.target_info(t)["tcgen05"] else "sm_100a"
        return interpret_target_fp8(wgmma_only=self.spec.block)

    def run(self, tensors):
        return super().run(self.kernel_tensors(tensors))

    def kernel_tensors(self, tensors):
        """The op's tensors as its kernel reads them: a block scale_a M-major, M padded to a multiple of 4 (the
        same tensor when it already is: torch's BlockWise1x128 scale_a with M % 4 == 0; else a copy)."""
        if not self.spec.block:
            return tensors
        tensors = list(tensors)
        tensors[2] = m_major_scales(tensors[2])
        return tensors

    def eager(self, tensors):
        """A plain eager call's output on the kernel's tensors (kernel_tensors) without the op layer
        (FusedMatmul.planned, else FusedMatmul.full when eager_call_ok: what the op's implementation would do),
        or None: the caller goes through the op."""
        out = self.planned(tensors)
        if out is None and eager_call_ok(tensors, "cuda" if tensors[0].is_cuda else "cpu"):
            out = self.full(tensors)
            if isinstance(out, list):  # the interpreter's outputs (out, scale): the op returns a tuple
                out = tuple(out)
        return out

    def fake(self, tensors):
        inputs.same_device(_W, [t.name for t in self.fusion.inputs], tensors)
        a = tensors[0]
        out = a.new_empty((a.shape[0], self.spec.n), dtype=_TORCH[self.spec.out_dtype])
        if self.spec.out_scale is None:
            return out
        return out, a.new_empty(self.spec.scale_shape(a.shape[0]), dtype=self.spec.scale_dtype())


def _no_backward(ctx, grad):
    raise InputError(f"{_W}: no backward (FP8 training is out of scope, docs/fp8.md); detach the inputs or "
                     "compute the gradient in bf16 with heddle.matmul")


def interpret_target_fp8(wgmma_only: bool = False) -> str:
    """The target scaled_mm interprets for: HEDDLE_INTERPRET_TARGET when it has an FP8 tensor-core instruction
    (wgmma, tcgen05: schedule/operand_types.cpp; wgmma_only: the block-scaled kernel, which is wgmma's,
    schedule/block_scales.cpp), else sm_90a (the default, and where sm_80 refuses FP8)."""
    from ..core.interpret import interpret_target
    t = interpret_target()
    info = _C.target_info(t)
    return t if info["wgmma"] or (info["tcgen05"] and not wgmma_only) else "sm_90a"


def resolve(name: str) -> bool:
    """Register torch.ops.heddle.<name> from a scaled_mm op's name (torch.export.load in a fresh process: the
    resolver of heddle/pytorch/resolver.py); False when it names none."""
    spec = decode(name)
    if spec is None or spec.op_name() != name:
        return False
    scaled_op(spec).op  # registered on first use (FusedMatmul.op): now
    return True


def decode(name: str) -> Optional[ScaledMatmulSpec]:
    """The spec ScaledMatmulSpec.op_name() wrote as `name`, or None."""
    toks = name.split("_")
    half = len(toks[1]) // 2 if len(toks) > 1 else 0  # two formats: e4m3e5m2, e2m1x2e2m1x2
    if len(toks) < 6 or toks[0] != "smm" or toks[1][:half] not in _FORMATS or toks[1][half:] not in _FORMATS:
        return None
    k, n, s, out = toks[2], toks[3], toks[4], toks[-1]
    scales_ok = s in ("sbb", "smx", "snv") or (len(s) == 3 and s[0] == "s" and s[1] in ("r", "t") and s[2] in ("c", "t"))
    if k[:1] != "k" or not k[1:].isdigit() or n[:1] != "n" or not n[1:].isdigit() or not scales_ok \
            or out[:1] != "o" or out[1:] not in _TORCH:
        return None
    f = dict(bias=None, activation=None, scale_result=False, out_scale=None)
    acts = {a.replace("_", ""): a for a in ACTIVATIONS}
    for t in toks[5:-1]:
        if t[:1] == "B" and t[1:] in _BIAS.values():
            f["bias"] = t[1:]
        elif t[:1] == "A" and t[1:] in acts:
            f["activation"] = acts[t[1:]]
        elif t == "Q":
            f["scale_result"] = True
        elif t in _OUT_SCALE_NAME:
            f["out_scale"] = _OUT_SCALE_NAME[t]
        else:
            return None
    return ScaledMatmulSpec(toks[1][:half], toks[1][half:], int(k[1:]), int(n[1:]), s[1] == "r", s[2] == "c",
                            out_dtype=out[1:], block=s == "sbb", mx=s == "smx", nv=s == "snv", **f)


_FORMATS = ("e4m3", "e5m2", "e2m1x2")
_OUT_SCALE_NAME = {v: k for k, v in OUT_SCALE_CODE.items()}
_ops: Dict[ScaledMatmulSpec, FusedScaledMatmul] = {}
_lock = threading.Lock()


def scaled_op(spec: ScaledMatmulSpec) -> FusedScaledMatmul:
    fm = _ops.get(spec)
    if fm is None:
        with _lock:
            fm = _ops.get(spec)
            if fm is None:
                fm = _ops[spec] = FusedScaledMatmul(spec)
    return fm


def scaled_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
              bias: Optional[torch.Tensor] = None, scale_result: Optional[torch.Tensor] = None,
              out_dtype: Optional[torch.dtype] = torch.bfloat16, use_fast_accum: bool = False, *,
              activation: Optional[str] = None, out_scale: Optional[str] = None):
    """torch._scaled_mm(a, b, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum) as one heddle
    kernel, in torch's argument order (positional or keyword; torch names a and b self and mat2). One
    difference: out_dtype defaults to torch.bfloat16 (None gives a's dtype, torch's default).
    activation (relu | gelu | gelu_tanh | silu | sigmoid | tanh) is applied after the bias. use_fast_accum
    (a bool) is accepted for torch's signature and changes nothing: heddle's kernels accumulate as their
    schedule does (docs/fp8.md "use_fast_accum"). out_scale="1x128" | "row" with an 8-bit out_dtype: the
    output is quantized with a scale computed from its values (amax per row and 128 columns, or per row:
    docs/fp8.md "Computed output scales") and the call returns (out, scale), scale float32 [M, ceil(N/128)]
    or [M, 1]. out_scale="mx32": an MX-format output (docs/fp8.md "MX formats"), scale torch.float8_e8m0fnu per
    row and 32 columns in torch's blocked layout [round_up(M, 128), round_up(N/32, 4)], the next MX call's
    scale_a (N a multiple of 32; the sm_100a tcgen05 kernels)."""
    if not _dynamo_compiling():
        # a plain eager call like an earlier planned one (the same arguments, the same tensor signatures): one C++
        # call, CallTable.run (mode and grad rules, signature, lookup, output, launch); else None: the checks below
        out = _front(a, b, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum, activation, out_scale)
        if out is not None:
            return out
    spec, args = scaled_spec(a, b, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum, activation,
                             out_scale)
    fm = scaled_op(spec)
    if not (torch.compiler.is_compiling() or _modes_active()):
        tensors = fm.kernel_tensors(args)
        out = fm.eager(tensors)  # heddle.matmul's eager path: no op layer for a plain call
        if out is not None:
            # keyed by the whole call when it launched through a plan whose tensors are the call's at their
            # addresses (b.t(), a reshaped scale: views; a copied scale is not, so such a call stays here)
            _calls.adopt((a, b, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum, activation,
                          out_scale), fm._eager, tensors, _pick(spec))
            return out
    return getattr(torch.ops.heddle, spec.op_name())(*args)  # the resolver registers it (FusedMatmul.op)


def _pick(spec: ScaledMatmulSpec):
    """The position in scaled_mm's call (a, b, scale_a, scale_b, bias, scale_result, out_dtype, ...) of each of
    the op's tensors (a, b^T, scale_a, scale_b[, bias][, scale_result])."""
    return (0, 1, 2, 3) + ((4,) if spec.bias is not None else ()) + ((5,) if spec.scale_result else ())


_calls = call_table()  # scaled_mm's front (docs/runtime.md "Eager calls"), a table of its own
_front = _calls.fast_run


def scaled_spec(a, b, scale_a, scale_b, bias=None, scale_result=None, out_dtype=torch.bfloat16, use_fast_accum=False,
                activation=None, out_scale=None):
    """The checks of every scaled_mm call (InputError naming the argument), then (its spec, the op's tensors).
    The arguments are scaled_mm's, in its (torch._scaled_mm's) order."""
    for name, t in (("a", a), ("b", b), ("scale_a", scale_a), ("scale_b", scale_b), ("bias", bias),
                    ("scale_result", scale_result)):
        if t is not None and not isinstance(t, torch.Tensor):
            raise InputError(f"{_W}: '{name}' is a {type(t).__name__}, not a torch.Tensor")
    fp4 = FP4 is not None and (a.dtype == FP4 or b.dtype == FP4)
    for name, t in (("a", a), ("b", b)):
        if t.dtype not in FLOAT8 and not (fp4 and t.dtype == FP4):
            raise InputError(f"{_W}: '{name}' has dtype {t.dtype}; scaled_mm takes torch.float8_e4m3fn or "
                             "torch.float8_e5m2 operands, or torch.float4_e2m1fn_x2 ones (NVFP4 / MXFP4, both operands) "
                             f"(quantize it first; bf16 operands: heddle.matmul)")
        if fp4 and t.dtype != FP4:
            raise InputError(f"{_W}: '{name}' is {t.dtype} but the other operand is torch.float4_e2m1fn_x2; NVFP4 "
                             "and MXFP4 take both operands packed e2m1 (two a byte)")
        if t.dim() != 2:
            raise InputError(f"{_W}: '{name}' has shape {tuple(t.shape)}; scaled_mm takes 2-D operands")
    (m, k), (kb, n) = a.shape, b.shape
    if k != kb:
        raise InputError(f"{_W}: a is [{m}, {k}] but b is [{kb}, {n}]: a gives K={k}, b gives K={kb}")
    if fp4 and (k % ALIGN or n % ALIGN):  # k: bytes a row, K = 2k e2m1
        raise InputError(f"{_W}: K={2 * k} (a [{m}, {k}] packed e2m1) and N={n}: K/2 and N must be multiples of "
                         f"{ALIGN} (torch._scaled_mm's rule); pad the operands with zeros")
    if k % ALIGN or n % ALIGN:
        raise InputError(f"{_W}: K={k} and N={n} must be multiples of {ALIGN} (torch._scaled_mm's rule); pad "
                         "the operands with zeros")
    if m > 1 and k > 1 and a.stride(1) != 1:
        raise InputError(f"{_W}: a must be row-major (strides {tuple(a.stride())}); pass a.contiguous()")
    if k > 1 and n > 1 and b.stride(0) != 1:
        raise InputError(f"{_W}: b must be column-major (strides {tuple(b.stride())}): pass w.t() of a "
                         "contiguous [N, K] weight, or b.t().contiguous().t()")
    if out_dtype is None:
        out_dtype = a.dtype
    if out_dtype not in OUT_DTYPES:
        raise InputError(f"{_W}: out_dtype={out_dtype} is not supported; use torch.bfloat16, torch.float16, "
                         "torch.float32, torch.float8_e4m3fn or torch.float8_e5m2")
    nv = _nv_scales(scale_a, scale_b, m, k, n, out_dtype, out_scale, fp4)
    mx = not nv and _mx_scales(scale_a, scale_b, m, 2 * k if fp4 else k, n, out_dtype, out_scale, fp4)
    block = not (mx or nv) and _block_scales(scale_a, scale_b, m, k, n)
    row_a = not (mx or nv or block) and _scale_kind("scale_a", scale_a, "[M, 1]", (m, 1))
    col_b = not (mx or nv or block) and _scale_kind("scale_b", scale_b, "[1, N]", (1, n))
    if bias is not None:
        if bias.dtype not in _BIAS or tuple(bias.shape) != (n,):
            raise InputError(f"{_W}: 'bias' is {bias.dtype} {list(bias.shape)}; it must be a [{n}] (N) bfloat16, "
                             "float16 or float32 tensor")
    if activation is not None and activation not in ACTIVATIONS:
        raise InputError(f"{_W}: activation '{activation}' is not one of {', '.join(ACTIVATIONS)}")
    if not isinstance(use_fast_accum, bool):
        raise InputError(f"{_W}: use_fast_accum={use_fast_accum!r} must be True or False (torch._scaled_mm's bool; "
                         "heddle accumulates as the kernel's schedule does either way: docs/fp8.md \"use_fast_accum\")")
    fp8_out = out_dtype in FLOAT8
    if scale_result is not None and fp8_out and (scale_result.numel() != 1 or scale_result.dtype != torch.float32):
        raise InputError(f"{_W}: 'scale_result' is {scale_result.dtype} {list(scale_result.shape)}; it must be a "
                         "one-element float32 tensor")
    use_result = scale_result is not None and fp8_out  # torch ignores scale_result for a 16/32-bit output
    _check_out_scale(out_scale, out_dtype, fp8_out, scale_result, block, n)
    spec = ScaledMatmulSpec(OPERANDS[a.dtype], OPERANDS[b.dtype], int(k), int(n), row_a, col_b,
                            None if bias is None else _BIAS[bias.dtype], activation, OUT_DTYPES[out_dtype],
                            use_result, block, out_scale, mx, nv)
    if mx or nv:  # torch's blocked bytes (any shape of that many elements, contiguous) as the fusion's 2-D views
        kp = nv_columns(k) if nv else mx_columns(2 * k if fp4 else k)
        args = [a, b.t(), scale_a.reshape(-1, kp), scale_b.reshape(-1, kp)]
    elif block:  # scale_a as given (the op brings it M-major: run), scale_b [nb, kb] row-major (copied where strided)
        args = [a, b.t(), scale_a, scale_b.t().contiguous()]
    else:
        args = [a, b.t(), scale_a if row_a else scale_a.reshape(1), scale_b if col_b else scale_b.reshape(1)]
    if bias is not None:
        args.append(bias)
    if use_result:
        args.append(scale_result.reshape(1))
    return spec, args


def mx_columns(k: int) -> int:
    """The blocked MX scale tensor's columns: round_up(K/32, 4) (torch's to_blocked pads K/32 to 4)."""
    return -(-(k // 32) // 4) * 4


def nv_columns(k: int) -> int:
    """NVFP4's blocked scale columns for k bytes a row (K = 2k e2m1): round_up(K/16, 4)."""
    return -(-(2 * k // 16) // 4) * 4


def _nv_scales(scale_a, scale_b, m, k: int, n: int, out_dtype, out_scale, fp4: bool) -> bool:
    """True for NVFP4 (e2m1x2 operands: both scales torch.float8_e4m3fn in torch's blocked layout, round_up(rows,
    128) * round_up(K/16, 4) bytes, contiguous: torch/_meta_registrations.py's _check_scaled_mm_sizes); InputError
    naming the scale or option otherwise, and for an 8-bit output without out_scale (out_scale's own rules:
    _check_out_scale). False for e8m0 scales (MXFP4: _mx_scales takes them, and names one beside an e4m3 one)."""
    if not fp4:
        return False
    e8 = getattr(torch, "float8_e8m0fnu", None)
    if e8 is not None and e8 in (scale_a.dtype, scale_b.dtype):
        return False
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s.dtype != torch.float8_e4m3fn:
            raise InputError(f"{_W}: '{name}' has dtype {s.dtype}; NVFP4 (torch.float4_e2m1fn_x2 operands) takes "
                             "torch.float8_e4m3fn scales per 16 of K in torch's blocked layout (MXFP4: "
                             "torch.float8_e8m0fnu scales per 32 of K)")
    if out_scale is None and out_dtype in FLOAT8:
        raise InputError(f"{_W}: out_dtype={out_dtype} with NVFP4 operands is not built without out_scale (the sm_100a "
                         "NVFP4 kernel stores an 8-bit output only as the q of a computed scale, docs/fp8.md "
                         "\"Computed output scales\"); pass out_scale='1x128' or 'row', or out_dtype=torch.bfloat16, "
                         "torch.float16 or torch.float32")
    kp = nv_columns(k)
    want = {"scale_a": (m, -(-m // BLOCK) * BLOCK * kp, scale_a), "scale_b": (n, -(-n // BLOCK) * BLOCK * kp, scale_b)}
    for name, (rows, count, t) in want.items():
        if t.numel() != count:
            raise InputError(f"{_W}: '{name}' has {t.numel()} e4m3 scales ({list(t.shape)}); NVFP4 scales in torch's "
                             f"blocked layout (to_blocked) are round_up({rows}, 128) * round_up(K/16, 4) = {count} "
                             f"(K = {2 * k})")
        if not t.is_contiguous():
            raise InputError(f"{_W}: '{name}' (NVFP4 scales) has strides {tuple(t.stride())}; the kernel copies its "
                             "512-byte chunks by TMA from the contiguous blocked bytes: pass it contiguous")
    return True


def _mx_scales(scale_a, scale_b, m, k: int, n: int, out_dtype, out_scale, fp4: bool = False) -> bool:
    """True for MX scales (both torch.float8_e8m0fnu; k: elements of K; fp4: e2m1x2 operands, MXFP4); InputError
    naming the scale or option for one e8m0 scale beside
    another kind, a wrong element count, a strided scale, K not a multiple of 32, an 8-bit output without out_scale
    (the sm_100a kernel stores 8 bits only as the q of a computed scale; out_scale's own rules: _check_out_scale)."""
    e8 = getattr(torch, "float8_e8m0fnu", None)
    is_a, is_b = scale_a.dtype == e8, scale_b.dtype == e8
    if not (is_a or is_b):
        return False
    if not (is_a and is_b):
        name, other = ("scale_a", "scale_b") if is_a else ("scale_b", "scale_a")
        raise InputError(f"{_W}: '{name}' is torch.float8_e8m0fnu (MX scales) but '{other}' is "
                         f"{(scale_b if is_a else scale_a).dtype}; {'MXFP4' if fp4 else 'MXFP8'} takes both scales "
                         "e8m0 in torch's blocked layout")
    if k % 32:
        raise InputError(f"{_W}: K={k} is not a multiple of 32; an MXFP8 scale covers 32 elements of K: pad K with "
                         f"zeros to {-(-k // 32) * 32}")
    kp = mx_columns(k)
    for name, s, rows in (("scale_a", scale_a, m), ("scale_b", scale_b, n)):
        want = -(-rows // BLOCK) * BLOCK * kp
        if s.numel() != want:
            raise InputError(f"{_W}: '{name}' has {s.numel()} e8m0 scales ({list(s.shape)}); MX scales in torch's "
                             f"blocked layout (to_blocked) are round_up({rows}, 128) * round_up(K/32, 4) = {want}")
        if not s.is_contiguous():
            raise InputError(f"{_W}: '{name}' is not contiguous (strides {tuple(s.stride())}); pass the blocked "
                             "scales contiguous")
    if out_scale is None and out_dtype in FLOAT8:
        raise InputError(f"{_W}: out_dtype={out_dtype} with MX scales is not built without out_scale (the sm_100a "
                         "block-scaled kernel stores an 8-bit output only as the q of a computed scale, docs/fp8.md "
                         "\"Computed output scales\"); pass out_scale='1x128' or 'row', or out_dtype=torch.bfloat16, "
                         "torch.float16 or torch.float32")
    return True


def block_shapes(m, k: int, n: int):
    """torch's (BlockWise1x128, BlockWise128x128) scale shapes: scale_a [M, ceil(K/128)], scale_b [ceil(K/128),
    ceil(N/128)] (torch/_meta_registrations.py, meta_scaled_mm; DeepGEMM's activation and weight scales)."""
    kb = -(-k // BLOCK)
    return (m, kb), (kb, -(-n // BLOCK))


def _block_scales(scale_a, scale_b, m, k: int, n: int) -> bool:
    """True for 128-block scales (torch's BlockWise1x128 a, BlockWise128x128 b); InputError naming the scale
    for torch's other blockwise forms and for a block scale beside a per-tensor / per-row one. One-element and
    [1, N] scale_b shapes are per tensor / per column (with K <= 128 and a per-row scale_a, the same numbers)."""
    want_a, want_b = block_shapes(m, k, n)
    sa, sb = tuple(scale_a.shape), tuple(scale_b.shape)
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s.dtype != torch.float32:
            raise InputError(f"{_W}: '{name}' has dtype {s.dtype}; scales are torch.float32")
    if scale_b.numel() == 1 or sb == (1, n):
        if scale_a.dim() == 2 and sa == want_a and want_a[1] > 1:
            raise InputError(f"{_W}: 'scale_a' is 1x128 blocks {list(sa)} but 'scale_b' is {list(sb)} (per tensor / "
                             f"per column); block scales pair it with 128x128 blocks of b: scale_b {list(want_b)} "
                             "(ceil(K/128), ceil(N/128))")
        return False
    if sb == want_b:
        if sa != want_a:
            raise InputError(f"{_W}: 'scale_b' is 128x128 blocks {list(sb)}, so 'scale_a' must be 1x128 blocks "
                             f"[M, ceil(K/128)] = {list(want_a)}; got {list(sa)}")
        return True
    if sb == (want_b[0], n) and want_b[0] > 1:
        raise InputError(f"{_W}: 'scale_b' {list(sb)} is 1x128 blocks of b (BlockWise1x128); heddle's block-scaled "
                         f"kernel takes b's scales per 128x128 block (BlockWise128x128): scale_b {list(want_b)}")
    if sa == want_a and want_a[1] > 1:
        raise InputError(f"{_W}: 'scale_a' is 1x128 blocks {list(sa)}, so 'scale_b' must be 128x128 blocks "
                         f"[ceil(K/128), ceil(N/128)] = {list(want_b)}; got {list(sb)}")
    return False  # _scale_kind says what is wrong with it


def _scale_kind(name: str, s, form: str, shape) -> bool:
    """True for a per-row (per-column) scale of `shape`, False for one per tensor; InputError otherwise."""
    if s.dtype != torch.float32:
        raise InputError(f"{_W}: '{name}' has dtype {s.dtype}; scales are torch.float32")
    if tuple(s.shape) == tuple(shape):
        return True  # ([1, 1] for a one-row operand: per row and per tensor give the same numbers)
    if s.numel() == 1:
        return False
    raise InputError(f"{_W}: '{name}' has shape {list(s.shape)}; a scale is one element (per tensor) or "
                     f"{form} = {list(shape)} (per row of a / per column of b), or 128-block scales: scale_a "
                     "[M, ceil(K/128)] with scale_b [ceil(K/128), ceil(N/128)] (docs/fp8.md)")


def _check_out_scale(out_scale, out_dtype, fp8_out: bool, scale_result, block: bool, n: int) -> None:
    """out_scale's rules, each an InputError naming the option: a known value, an 8-bit out_dtype, no
    scale_result (the computed scale replaces it), no 128-block input scales (the block-scaled kernel's n tile
    of 64 would split a group: the rule of the quantize epilogue, docs/fp8.md; refused on every device alike)."""
    if out_scale is None:
        return
    if not isinstance(out_scale, str) or out_scale not in OUT_SCALES:
        raise InputError(f"{_W}: out_scale={out_scale!r} is not supported; use out_scale='1x128' (one scale per "
                         "row and 128 columns, [M, ceil(N/128)]), out_scale='row' ([M, 1]) or out_scale='mx32' "
                         "(e8m0 per row and 32 columns, torch's blocked layout: the next MX call's scale_a)")
    if not fp8_out:
        raise InputError(f"{_W}: out_scale={out_scale!r} quantizes the output with a computed scale, which needs "
                         f"an 8-bit out_dtype; got out_dtype={out_dtype}: pass out_dtype=torch.float8_e4m3fn or "
                         "torch.float8_e5m2, or drop out_scale")
    if scale_result is not None:
        raise InputError(f"{_W}: out_scale={out_scale!r} computes the output's scale, so 'scale_result' (a given "
                         "one) cannot apply too; drop scale_result or out_scale")
    if out_scale == "mx32" and n % 32:
        raise InputError(f"{_W}: out_scale='mx32' needs N a multiple of 32 (an e8m0 scale covers 32 columns, and N "
                         f"is the next MX call's K); N={n}: pad b with zero columns to {-(-n // 32) * 32}")
    if block:
        raise InputError(f"{_W}: out_scale={out_scale!r} with 128-block scales is not built (the block-scaled "
                         "kernel's n tile of 64 splits a group of 128 output columns); pass per-tensor or per-row "
                         "scale_a / scale_b, or quantize the bf16 output separately")
