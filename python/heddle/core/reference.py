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
       "e5m2": torch.float8_e5m2}


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


# Fusion.quantize (docs/fp8.md "Computed output scales"): the largest finite value of each 8-bit format and
# the floor of the amax (DeepGEMM's per_token_cast_to_fp8 clamps it at 1e-4)
FP8_MAX = {"e4m3": 448.0, "e5m2": 57344.0}
QUANT_EPS = 1e-4


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
    env = {t.name: x.to(compute_dtype) for t, x in zip(fusion.inputs, tensors)}
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
            r = torch.matmul(a, b) if e.get("scales") is None else block_scaled_matmul(
                a, b, env[e["scale_a"]], env[e["scale_b"]], e["scale_a"], e["scale_b"])
        elif op in _BINARY:
            if e["scalar"] is not None:
                s = torch.tensor(e["scalar"], dtype=compute_dtype, device=ins[0].device)
                r = _BINARY[op](s, ins[0]) if e["scalar_on_left"] else _BINARY[op](ins[0], s)
            else:
                r = _BINARY[op](ins[0], ins[1])
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
