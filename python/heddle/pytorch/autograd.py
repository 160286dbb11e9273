"""Autograd formulas for heddle's matmul ops, so `heddle.matmul` trains in eager mode too.

The torch.compile backend does not need these: it inserts heddle ops into the forward and backward
graphs *after* aot_autograd has differentiated the model, and the backward matmuls it finds (dgrad,
wgrad) become heddle ops themselves. Here, for direct calls of heddle.matmul on tensors that require
grad, the backward is written with torch ops:

    y = act(alpha * (A @ B) + bias) + residual        (A = a or a^T, B = b or b^T)
    dz = act'(z) * dy   (z recomputed: alpha * (A @ B) + bias, in float32)
    dA = alpha * dz @ B^T,  dB = alpha * A^T @ dz  (summed over the batch when b is shared)
    dbias = sum of dz over rows,  drow_bias ([M, 1], added with the bias) = sum of dz over columns,
    dresidual = dy
    (an op that also returns the pre-activation z, MatmulSpec.saved: dz gains that output's gradient)

Matmuls run in the operands' dtype (accumulating in float32, as torch's own backward does); the
pointwise parts in float32. Gradients come back in each input's dtype.

Kernel.op (a compiled fusion of any epilogue) gets a generic formula: the backward re-evaluates the
fusion with torch in float32 (heddle.reference.evaluate, differentiable) and differentiates it.
"""
from __future__ import annotations

import torch

from ..core.reference import _UNARY

_ACT = _UNARY  # the reference evaluator's element functions (heddle/core/reference.py)


def register_matmul_autograd(fm, op) -> None:
    """Give the torch op of FusedMatmul `fm` its backward."""
    spec = fm.spec
    n_bias = (1 if spec.bias is not None else 0) + (1 if spec.row_bias is not None else 0)
    i_row = 2 + n_bias - 1 if spec.row_bias is not None else None   # the row bias follows the bias

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, grad, grad_pre=None):
        saved = ctx.saved_tensors
        a, b = saved[0], saved[1]
        bias = saved[2] if spec.bias is not None else None
        row_bias = saved[i_row] if i_row is not None else None
        residual = saved[2 + n_bias] if spec.residual is not None else None
        need = ctx.needs_input_grad
        A = a.transpose(-1, -2) if spec.trans_a else a
        B = b.transpose(-1, -2) if spec.trans_b else b
        gf = grad.float()
        if spec.activation is not None:
            z = torch.matmul(A, B).float()
            if spec.alpha is not None:
                z = z * spec.alpha
            if bias is not None:
                z = z + bias.float()
            if row_bias is not None:
                z = z + row_bias.float()
            with torch.enable_grad():
                zz = z.detach().requires_grad_(True)
                dz, = torch.autograd.grad(_ACT[spec.activation](zz), zz, gf)
        else:
            dz = gf
        if grad_pre is not None:  # the op also returned z (spec.saved): its gradient joins dz
            dz = dz + grad_pre.float()
        dmm = dz * spec.alpha if spec.alpha is not None else dz
        dmm_lp = dmm.to(a.dtype)
        grads = [None] * len(saved)
        if need[0]:
            da = torch.matmul(dmm_lp, B.transpose(-1, -2))                    # [.., M, K]
            grads[0] = (da.transpose(-1, -2) if spec.trans_a else da).to(a.dtype)
        if need[1]:
            db = torch.matmul(A.transpose(-1, -2), dmm_lp)                    # [.., K, N]
            if db.dim() == 3 and b.dim() == 2:
                db = db.float().sum(0)
            grads[1] = (db.transpose(-1, -2) if spec.trans_b else db).to(b.dtype)
        if bias is not None and need[2]:
            grads[2] = dz.reshape(-1, dz.shape[-1]).sum(0).reshape(bias.shape).to(bias.dtype)
        if row_bias is not None and need[i_row]:   # summed over the columns it was broadcast across
            grads[i_row] = dz.sum(-1, keepdim=True).reshape(row_bias.shape).to(row_bias.dtype)
        if residual is not None and need[2 + n_bias]:
            grads[2 + n_bias] = gf.to(residual.dtype)
        return tuple(grads)

    op.register_autograd(backward, setup_context=setup_context)


def register_fusion_autograd(fusion, op) -> None:
    """Give Kernel.op's torch op (any fusion) its backward: torch autograd through the fusion re-evaluated
    in float32 with torch ops."""
    from ..core.reference import evaluate

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, *grads):  # one gradient per output of the fusion
        saved = ctx.saved_tensors
        need = ctx.needs_input_grad
        with torch.enable_grad():
            xs = [t.detach().float().requires_grad_(n) for t, n in zip(saved, need)]
            ys = evaluate(fusion, xs, compute_dtype=torch.float32, round_casts=False)
            ys = ys if isinstance(ys, tuple) else (ys,)
            pairs = [(y.float(), g.float()) for y, g in zip(ys, grads) if g is not None]
            wrt = [x for x in xs if x.requires_grad]
            gs = iter(torch.autograd.grad([y for y, _ in pairs], wrt, [g for _, g in pairs], allow_unused=True)
                      if wrt and pairs else [None] * len(wrt))
        out = []
        for t, n in zip(saved, need):
            g = next(gs) if n else None
            out.append(None if g is None else g.to(t.dtype))
        return tuple(out)

    op.register_autograd(backward, setup_context=setup_context)
