"""Evaluate a Fusion with torch (float64 by default): the numerics reference for tests and the
CPU implementation of heddle's torch ops."""
from __future__ import annotations

import torch

from .errors import InputError

_UNARY = {
    "relu": torch.relu,
    "gelu": lambda x: torch.nn.functional.gelu(x),
    "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "silu": torch.nn.functional.silu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "neg": torch.neg,
}
_BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}
_DT = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "e4m3": torch.float8_e4m3fn,
       "e5m2": torch.float8_e5m2, "e8m0": torch.float8_e8m0fnu}


def grouped_reference(x, w, offs, trans_b: bool = False):
    """A grouped matmul in x's dtype, one expert at a time: rows offs[e-1] .. offs[e] of x (offs[-1] = 0) times
    w[e] (w[e].T with trans_b); rows past offs[-1] are zero, as torch._grouped_mm leaves them undefined
    (heddle's kernel does not write them: docs/grouped.md)."""
    out = x.new_zeros((x.shape[0], w.shape[-2] if trans_b else w.shape[-1]))
    start = 0
    for e, end in enumerate(int(v) for v in offs.tolist()):
        if end > start:
            we = w[e].transpose(-1, -2) if trans_b else w[e]
            out[start:end] = x[start:end] @ we.to(x.dtype)
        start = max(start, end)
    return out


def masked_reference(x, w, counts, trans_b: bool = False):
    """The masked layout in x's dtype, one expert at a time: rows r < counts[e] of x[e] [max_tokens, K] times w[e]
    (w[e].T with trans_b); the padding rows are NaN: heddle's kernel does not store them (docs/grouped.md), and
    the interpreter's NaN-filled output matches a NaN reference element there, while a stored one shows."""
    out = x.new_full((x.shape[0], x.shape[1], w.shape[-2] if trans_b else w.shape[-1]), float("nan"))
    for e, c in enumerate(min(max(int(v), 0), x.shape[1]) for v in counts.tolist()):
        we = w[e].transpose(-1, -2) if trans_b else w[e]
        out[e, :c] = x[e, :c] @ we.to(x.dtype)
    return out


def _rows_of_experts(t, offs, rows: int):
    """An [E, N] per-expert operand as [rows, N]: row r is t[e] for the group e holding r (zero past the groups)."""
    out = t.new_zeros((rows, t.shape[1]))
    start = 0
    for e, end in enumerate(int(v) for v in offs.tolist()):
        out[start:end] = t[e]
        start = max(start, end)
    return out


def block_scaled_matmul(a, b, scale_a, scale_b, name_a: str = "scale_a", name_b: str = "scale_b",
                        promotion: int = 128):
    """DeepGEMM-style block scales (docs/fp8.md "Block scales and promotion"), a [M, K] @ b [K, N]:
    sum over k-blocks kb of (a[:, kb] @ b[kb, :]) * scale_a[m, kb] * scale_b[n // 128, kb], each block's
    product computed in the dtype of `a` (float64 for the reference), in chunks of `promotion` elements of K
    (a divisor of 128) added one by one, as the kernel promotes them. Wrong scale shapes: InputError naming
    the scale tensor and the shape it needs."""
    M, K = a.shape[-2], a.shape[-1]
    N = b.shape[-1]
    kb, nb = -(-K // 128), -(-N // 128)
    for name, s, want in ((name_a, scale_a, (M, kb)), (name_b, scale_b, (nb, kb))):
        if tuple(s.shape) != want:
            raise InputError(f"block scales: {name} has shape {list(s.shape)}, but M={M}, N={N}, K={K} need "
                             f"{name} {list(want)} (ceil of K and N over 128)")
    if 128 % promotion:
        raise ValueError(f"promotion {promotion} must divide 128")
    sb = scale_b.repeat_interleave(128, dim=0)[:N]  # [N, kb]: the scale of column n's block
    out = torch.zeros((M, N), dtype=a.dtype, device=a.device)
    for k0 in range(0, K, promotion):
        blk = k0 // 128
        part = a[:, k0:k0 + promotion] @ b[k0:k0 + promotion, :]
        out = out + part * scale_a[:, blk:blk + 1] * sb[:, blk].unsqueeze(0)
    return out


_MX_BLOCK = {"mx32": 32, "nv16": 16}  # elements of K per scale: MXFP8, NVFP4
# e2m1 (OCP MX v1.0 "FP4 (E2M1)"; PTX ISA 9.7.16.10.4.6): sign bit 3, exponent bits 1-2 (bias 1), mantissa bit 0;
# the magnitudes of codes 0-7
_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def decode_e2m1x2(x, dtype=torch.float64):
    """Packed FP4 pairs (torch.float4_e2m1fn_x2, [..., K/2]) as values [..., K]: element 2j is the low nibble of byte
    j, 2j + 1 the high one (torch's packing; docs/fp8.md "MX formats" says what a GPU run must confirm)."""
    b = x.view(torch.uint8).to(torch.int64)
    nib = torch.stack((b & 0xF, b >> 4), dim=-1).reshape(*b.shape[:-1], b.shape[-1] * 2)
    mag = torch.tensor(_E2M1, dtype=dtype, device=x.device)[nib & 7]
    return torch.where(nib >= 8, -mag, mag)


def unblock_mx_scales(s, rows: int, k_blocks: int, name: str = "scale"):
    """The [rows, k_blocks] scale matrix of an MX scale tensor in torch's blocked layout (docs/fp8.md "MX
    formats"; torch.testing._internal.common_quantized.to_blocked, the cuBLAS block scaling factors layout):
    [round_up(rows, 128), round_up(k_blocks, 4)] (or flat) cut in 128 x 4 blocks of 512 contiguous bytes, row
    blocks outer; inside a block, byte r0*16 + r1*4 + c holds row r1*32 + r0, k block c. InputError naming
    `name` when its element count is not the padded one."""
    rb, cb = -(-rows // 128), -(-k_blocks // 4)
    if s.numel() != rb * 128 * cb * 4:
        raise InputError(f"MX scales: {name} has {s.numel()} elements (shape {list(s.shape)}), but {rows} rows by "
                         f"{k_blocks} k blocks need [{rb * 128}, {cb * 4}] in torch's blocked layout "
                         f"(round_up(rows, 128) x round_up(K/32, 4))")
    full = s.reshape(rb, cb, 32, 4, 4).permute(0, 3, 2, 1, 4).reshape(rb * 128, cb * 4)  # [r1, r0] -> row
    return full[:rows, :k_blocks]


def mx_scaled_matmul(a, b, scale_a, scale_b, name_a: str = "scale_a", name_b: str = "scale_b", block: int = 32):
    """MXFP8 (scales "mx32", block 32) or NVFP4 ("nv16", block 16; a, b decoded from e2m1x2 first), docs/fp8.md "MX
    formats": a [M, K] @ b [K, N] with one scale per row of a and
    `block` elements of K, one per column of b and `block` of K, both in torch's blocked layout (their values:
    the e8m0 powers of two): sum over k of a[m, k] * sa[m, k // block] * b[k, n] * sb[n, k // block], in the
    dtype of `a` (float64 for the reference: products of 8-bit floats and powers of two are exact there)."""
    M, K = a.shape[-2], a.shape[-1]
    N = b.shape[-1]
    if K % block:
        raise InputError(f"MX scales: K = {K} is not a multiple of the scale block {block}")
    for name, s in ((name_a, scale_a), (name_b, scale_b)):
        if bool((s < 0).any()):  # a NaN code (e8m0 0xFF) gives NaN products, as in the OCP MX text
            raise InputError(f"MX scales: {name} holds a negative scale; MX / NVFP4 scales are unsigned (ue8m0, "
                             "ue4m3: e4m3 codes with the sign bit clear)")
    sa = unblock_mx_scales(scale_a, M, K // block, name_a).to(a.dtype).repeat_interleave(block, dim=1)
    sb = unblock_mx_scales(scale_b, N, K // block, name_b).to(a.dtype).repeat_interleave(block, dim=1)
    return (a * sa) @ (b * sb.transpose(0, 1))
# Fusion.quantize (docs/fp8.md "Computed output scales"): the largest finite value of each 8-bit format and
# the floor of the amax (DeepGEMM's per_token_cast_to_fp8 clamps it at 1e-4)
FP8_MAX = {"e4m3": 448.0, "e5m2": 57344.0}
QUANT_EPS = 1e-4


# An MX-format output (quantize group "mx32", docs/fp8.md "MX formats"): emax, the exponent of the element format's
# largest power of two (OCP MX v1.0 section 6.3: 448 = 1.75 * 2^8, 57344 = 1.75 * 2^15)
MX_EMAX = {"e4m3": 8, "e5m2": 15}


def mx_codes(y, fmt: str):
    """The e8m0 codes [M, N/32] (int64) of an MX-format output of y [M, N]: per row and 32 columns, the OCP MX v1.0
    shared exponent floor(log2 amax) - emax (the "minimally supported" conversion, section 6.3; torchao's to_mx
    ScaleCalculationMode.FLOOR), clamped to [-127, 127], plus 127; an all-zero block gives code 0. Written from
    the formula (frexp of the float64 amax), not from the kernel's exponent-field reading."""
    m, n = y.shape
    if n % 32:
        raise InputError(f"MX-format output: N = {n} is not a multiple of 32")
    amax = y.abs().reshape(m, n // 32, 32).amax(dim=-1)
    _, ex = torch.frexp(amax)  # amax = f * 2^ex, f in [0.5, 1): floor(log2 amax) = ex - 1
    e = torch.where(amax > 0, ex.to(torch.int64) - 1 - MX_EMAX[fmt], torch.full_like(ex, -127, dtype=torch.int64))
    return e.clamp(-127, 127) + 127


def block_mx_scales(codes):
    """codes [rows, k_blocks] in torch's blocked layout [round_up(rows, 128), round_up(k_blocks, 4)] (the inverse
    of unblock_mx_scales; padding code 0), as the float64 values 2^(code - 127)."""
    rows, kb = codes.shape
    rb, cb = -(-rows // 128), -(-kb // 4)
    full = torch.zeros(rb * 128, cb * 4, dtype=torch.int64)
    full[:rows, :kb] = codes
    blocked = full.reshape(rb, 4, 32, cb, 4).permute(0, 3, 2, 1, 4).reshape(rb * 128, cb * 4)  # row r1*32+r0
    return torch.pow(2.0, (blocked - 127).to(torch.float64))


def _groups(n: int, group: int) -> int:
    return 1 if group == 0 else -(-n // group)


def quantize_scale(y, fmt: str, group: int, round_f32: bool = True):
    """s[..., j] = max(amax |y[..., group j]|, 1e-4) / max_finite(fmt) over groups of `group` elements of the
    last axis (0: the whole axis); a partial last group takes the columns inside N only. Rounded to f32
    (the scale is an f32 tensor) when round_f32 is set."""
    n = y.shape[-1]
    g = n if group == 0 else group
    pad = _groups(n, group) * g - n
    a = torch.nn.functional.pad(y.abs(), (0, pad)) if pad else y.abs()  # |y| >= 0: zeros never raise the amax
    amax = a.reshape(*y.shape[:-1], -1, g).amax(dim=-1)
    s = amax.clamp(min=QUANT_EPS) / FP8_MAX[fmt]
    return s.to(torch.float32).to(y.dtype) if round_f32 else s


def quantize_values(y, s, fmt: str, group: int, round_casts: bool = True):
    """q[..., n] = satfinite(y[..., n] / s[..., n // group]) in fmt (0: one scale per row): the quotient
    clamped to +-max_finite (PTX cvt.rn.satfinite), then rounded to fmt when round_casts is set."""
    n = y.shape[-1]
    per_col = s.expand(*y.shape[:-1], n) if group == 0 else s.repeat_interleave(group, dim=-1)[..., :n]
    v = (y / per_col).clamp(-FP8_MAX[fmt], FP8_MAX[fmt])
    return v.to(_DT[fmt]).to(y.dtype) if round_casts else v


def evaluate(fusion, tensors, compute_dtype=torch.float64, round_casts: bool = True):
    """Run the fusion's expressions in `compute_dtype`; casts round through their dtype when
    round_casts is set. Returns the output tensor in the output's dtype; a fusion with several outputs
    (e.g. the pre-activation a backward keeps, then the activation) returns them as a tuple, in order."""
    env = {t.name: decode_e2m1x2(x, compute_dtype) if t.dtype == "e2m1x2" else x.to(compute_dtype)
           for t, x in zip(fusion.inputs, tensors)}
    for t in fusion.inputs:
        if t.per_expert:  # [E, N] -> [T, N]: each row its expert's row (the group ends follow the inputs)
            env[t.name] = _rows_of_experts(env[t.name], tensors[len(fusion.inputs)], tensors[0].shape[0])
    for e in fusion.exprs():
        ins = [env[n] for n in e["inputs"]]
        op = e["op"]
        if op == "matmul" and e.get("group_masked"):  # after the fusion's inputs come the row counts
            r = masked_reference(ins[0], ins[1], tensors[len(fusion.inputs)], e["trans_b"])
        elif op == "matmul" and e.get("group_offsets"):  # after the fusion's inputs come the group ends
            r = grouped_reference(ins[0], ins[1], tensors[len(fusion.inputs)], e["trans_b"])
        elif op == "matmul":
            a, b = ins
            if e["trans_a"]:
                a = a.transpose(-1, -2)
            if e["trans_b"]:
                b = b.transpose(-1, -2)
            if e.get("scales") is None:
                r = torch.matmul(a, b)
            else:
                sa, sb = env[e["scale_a"]], env[e["scale_b"]]
                if e["scales"] in _MX_BLOCK:
                    r = mx_scaled_matmul(a, b, sa, sb, e["scale_a"], e["scale_b"], _MX_BLOCK[e["scales"]])
                else:
                    r = block_scaled_matmul(a, b, sa, sb, e["scale_a"], e["scale_b"])
        elif op in _BINARY:
            if e["scalar"] is not None:
                s = torch.tensor(e["scalar"], dtype=compute_dtype, device=ins[0].device)
                r = _BINARY[op](s, ins[0]) if e["scalar_on_left"] else _BINARY[op](ins[0], s)
            else:
                r = _BINARY[op](ins[0], ins[1])
        elif op == "amax_scale" and e["group"] == "mx32":
            r = block_mx_scales(mx_codes(ins[0], e["cast"])).to(compute_dtype)
        elif op == "quantize" and e["group"] == "mx32":
            m, n = ins[0].shape
            per_col = unblock_mx_scales(ins[1], m, n // 32).repeat_interleave(32, dim=1)
            r = quantize_values(ins[0], per_col, e["cast"], 1, round_casts)
        elif op == "amax_scale":
            r = quantize_scale(ins[0], e["cast"], e["group"], round_casts)
        elif op == "quantize":
            r = quantize_values(ins[0], ins[1], e["cast"], e["group"], round_casts)
        elif op == "cast":
            r = ins[0].to(_DT[e["cast"]]).to(compute_dtype) if round_casts else ins[0]
        else:
            r = _UNARY[op](ins[0])
        env[e["output"]] = r
    outs = tuple(env[o.name].to(_DT[o.dtype]) for o in fusion.outputs)
    return outs[0] if len(outs) == 1 else outs
