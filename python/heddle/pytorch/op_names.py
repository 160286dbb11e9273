"""Names of heddle's matmul ops that say everything about them, so a process that never built an op can
register it from its name alone (a torch.export program loaded in a fresh process: heddle/pytorch/matmul.py
installs a resolver on torch.ops.heddle).

    mm_<dtype>_<layout>_b<batched a><batched b>_k<K>_n<N>[_B<bias dtype>r<rank>][_C<row bias dtype>r<rank>]
       [_R<residual dtype>r<rank>]
       [_A<activation>][_a<alpha: the 16 hex digits of its float64 bits>][_S<saved dtype>]_o<output dtype>

_S: the op returns (output, pre-activation) -- the pre-activation alpha * (a @ b) + bias as a second
output in that dtype, for a backward that keeps it (training graphs).

e.g. mm_bf16_nt_b10_k64_n128_Bbf16r1_Agelutanh_obf16 is act = gelu(tanh) of a batched a @ b^T with a
[N] bf16 bias. No token contains '_', so decode() splits on it. Pure string work (the activation names: heddle.core.ops).
"""
from __future__ import annotations

import struct
from typing import Optional

from ..core.ops import ACTIVATIONS

_DTYPES = ("f16", "bf16", "f32")
_ACT_CODE = {a: a.replace("_", "") for a in ACTIVATIONS}  # gelu_tanh -> gelutanh: no '_' inside a token
_ACT_NAME = {v: k for k, v in _ACT_CODE.items()}


def encode(dtype, batched, batched_b, k, n, trans_a, trans_b, bias, residual, activation, alpha, out_dtype,
           saved=None, row_bias=None) -> str:
    parts = ["mm", dtype, ("t" if trans_a else "n") + ("t" if trans_b else "n"),
             f"b{int(batched)}{int(batched_b)}", f"k{int(k)}", f"n{int(n)}"]
    if bias is not None:
        parts.append(f"B{bias[0]}r{bias[1]}")
    if row_bias is not None:
        parts.append(f"C{row_bias[0]}r{row_bias[1]}")
    if residual is not None:
        parts.append(f"R{residual[0]}r{residual[1]}")
    if activation is not None:
        parts.append("A" + _ACT_CODE[activation])
    if alpha is not None:
        parts.append("a" + struct.pack(">d", float(alpha)).hex())
    if saved is not None:
        parts.append("S" + saved)
    parts.append("o" + out_dtype)
    return "_".join(parts)


def _operand(tok: str):
    dt, _, rank = tok[1:].partition("r")
    if dt not in _DTYPES or not rank.isdigit():
        raise ValueError(tok)
    return (dt, int(rank))


def decode(name: str) -> Optional[dict]:
    """The fields of MatmulSpec that `name` encodes, or None when it is no heddle matmul op name."""
    toks = name.split("_")
    try:
        if len(toks) < 7 or toks[0] != "mm" or toks[1] not in _DTYPES or toks[2] not in ("nn", "nt", "tn", "tt"):
            return None
        f = dict(dtype=toks[1], trans_a=toks[2][0] == "t", trans_b=toks[2][1] == "t", bias=None, residual=None,
                 activation=None, alpha=None, saved=None, row_bias=None)
        b, k, n = toks[3:6]
        if not (b[0] == "b" and b[1:] in ("00", "01", "10", "11") and k[0] == "k" and n[0] == "n"):
            return None
        f.update(batched=b[1] == "1", batched_b=b[2] == "1", k=int(k[1:]), n=int(n[1:]))
        for t in toks[6:-1]:
            if t[0] == "B":
                f["bias"] = _operand(t)
            elif t[0] == "C":
                f["row_bias"] = _operand(t)
            elif t[0] == "R":
                f["residual"] = _operand(t)
            elif t[0] == "A" and t[1:] in _ACT_NAME:
                f["activation"] = _ACT_NAME[t[1:]]
            elif t[0] == "a" and len(t) == 17:
                f["alpha"] = struct.unpack(">d", bytes.fromhex(t[1:]))[0]
            elif t[0] == "S" and t[1:] in _DTYPES:
                f["saved"] = t[1:]
            else:
                return None
        if toks[-1][0] != "o" or toks[-1][1:] not in _DTYPES:
            return None
        f["out_dtype"] = toks[-1][1:]
        return f
    except ValueError:
        return None
