"""The block-scaled (MX / NVFP4) cases of the GPU window's bench stage (issue 32; docs/fp8.md "MX formats"), run by
bench_quick.py's plan on an sm_100a device: heddle.scaled_mm's block-scaled tcgen05 kernels against torch's own
block-scaled `torch._scaled_mm` (cuBLASLt) on the same inputs, in torch's layouts -- a [M, K] row-major, b [K, N]
column-major (an nn.Linear weight's transpose), each scale tensor one byte per row and block of K in torch's
blocked layout (`to_blocked` below). Formats (FORMATS): MXFP8 (e4m3 data, e8m0 scales per 32 of K), NVFP4 (e2m1
data two a byte, e4m3 scales per 16 of K) and MXFP4 (e2m1 data, e8m0 scales per 32 of K). On another device each case is one skipped record saying so.

The inputs are quantized from random bf16 with each block's own amax, the way a quantizer would make them: MX takes
the OCP convention's shared exponent floor(log2(amax)) - emax (torchao's default; emax 8 for e4m3, 2 for e2m1),
NVFP4 the e4m3 scale amax / 6 rounded to nearest, the values rounded to nearest representable. The float64 reference multiplies the decoded
values by the unblocked scales, so a wrong blocked layout fails both implementations' validation.
Records: suites "mxfp8", "nvfp4", "mxfp4" (benchmarks/report.py fp8_table, peer "torch_scaled_mm"); the fused layer
(dequantize, bias, GELU, the computed 1 x 128 e4m3 output scale in the epilogue; for MXFP8 also the MX-format
output, e8m0 per 32 columns) in suites "<format>_fused" (peer "scaled_mm_then_ops": torch's block-scaled _scaled_mm, then the separate ops)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

import heddle
from heddle import bench

E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # the e2m1 magnitudes of codes 0..7 (OCP MX v1.0, table 5)


def to_blocked(s: torch.Tensor) -> torch.Tensor:
    """torch._scaled_mm's blocked scale layout (cuBLAS's): s [rows, cols] of one byte per row and block of K,
    zero-padded to [round_up(rows, 128), round_up(cols, 4)], then each 128 x 4 tile stored as 32 rows of 16 bytes
    (byte (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4), tiles in row-major order; flattened."""
    rows, cols = s.shape
    rb, cb = -(-rows // 128), -(-cols // 4)
    p = s.new_zeros((rb * 128, cb * 4))
    p[:rows, :cols] = s
    tiles = p.view(rb, 128, cb, 4).permute(0, 2, 1, 3)                  # [rb, cb, 128, 4]
    return tiles.reshape(-1, 4, 32, 4).transpose(1, 2).reshape(-1).contiguous()


def _mx8_quant(x: torch.Tensor):
    """x [R, K] f32 (K a multiple of 32) -> (e4m3 [R, K], e8m0 codes uint8 [R, K/32], decoded scales f32)."""
    r, k = x.shape
    blocks = x.view(r, k // 32, 32)
    amax = blocks.abs().amax(-1)
    e = torch.floor(torch.log2(amax.clamp(min=2.0 ** -126))) - 8     # 448 = 1.75 * 2^8: emax 8
    e = e.clamp(-127, 127)
    scale = torch.exp2(e)
    q = (blocks / scale[..., None]).clamp(-448, 448).to(torch.float8_e4m3fn).view(r, k)
    return q, (e + 127).to(torch.uint8), scale


def _e2m1_codes(v: torch.Tensor) -> torch.Tensor:
    """Round-to-nearest e2m1 codes (sign in bit 3) of v, saturating at 6."""
    mags = torch.tensor(E2M1, device=v.device)
    idx = (v.abs()[..., None] - mags).abs().argmin(-1)
    return (idx | ((v < 0).to(idx.dtype) << 3)).to(torch.uint8)


def _pack(codes: torch.Tensor) -> torch.Tensor:
    """e2m1 codes [R, K] as torch.float4_e2m1fn_x2 [R, K/2], element 2j in the low nibble."""
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).contiguous().view(torch.float4_e2m1fn_x2)


def _e2m1_values(codes: torch.Tensor) -> torch.Tensor:
    mags = torch.tensor(E2M1, device=codes.device)
    return mags[(codes & 7).long()] * torch.where(codes >= 8, -1.0, 1.0)


def _mx4_quant(x: torch.Tensor):
    """x [R, K] f32 (K a multiple of 32) -> (e2m1x2 [R, K/2], e8m0 codes uint8 [R, K/32], decoded scales f32,
    decoded values f32 [R, K]): the shared exponent floor(log2(amax)) - 2 (6 = 1.5 * 2^2), values saturating at 6."""
    r, k = x.shape
    blocks = x.view(r, k // 32, 32)
    e = (torch.floor(torch.log2(blocks.abs().amax(-1).clamp(min=2.0 ** -126))) - 2).clamp(-127, 127)
    scale = torch.exp2(e)
    codes = _e2m1_codes(blocks / scale[..., None]).view(r, k)
    return _pack(codes), (e + 127).to(torch.uint8), scale, _e2m1_values(codes)


def _nv4_quant(x: torch.Tensor):
    """x [R, K] f32 (K a multiple of 32) -> (e2m1x2 [R, K/2], e4m3 scales [R, K/16], decoded scales f32,
    decoded values f32 [R, K])."""
    r, k = x.shape
    blocks = x.view(r, k // 16, 16)
    s8 = (blocks.abs().amax(-1) / 6.0).clamp(min=2.0 ** -9).to(torch.float8_e4m3fn)  # e4m3 subnormals down to 2^-9
    scale = s8.float()
    codes = _e2m1_codes(blocks / scale[..., None]).view(r, k)
    return _pack(codes), s8, scale, _e2m1_values(codes)


def _operand(fmt, x):
    """(data, blocked scale bytes, float64 dequantized value) of one operand x [R, K] in format fmt."""
    if fmt == "mxfp8":
        q, codes, scale = _mx8_quant(x)
        deq = q.double().view(x.shape[0], -1, 32) * scale.double()[..., None]
        return q, to_blocked(codes).view(torch.float8_e8m0fnu), deq.view(x.shape)
    if fmt == "mxfp4":
        packed, codes, scale, vals = _mx4_quant(x)
        deq = vals.double().view(x.shape[0], -1, 32) * scale.double()[..., None]
        return packed, to_blocked(codes).view(torch.float8_e8m0fnu), deq.view(x.shape)
    packed, s8, scale, vals = _nv4_quant(x)
    deq = vals.double().view(x.shape[0], -1, 16) * scale.double()[..., None]
    return packed, to_blocked(s8.view(torch.uint8)).view(torch.float8_e4m3fn), deq.view(x.shape)


def _sets(run, fmt, m, n, k, with_bias=False):
    refs = []

    def one():
        x = bench.random_tensor((m, k), torch.bfloat16, run.dev).float()
        w = bench.random_tensor((n, k), torch.bfloat16, run.dev, scale=k ** -0.5).float()
        a, sa, da = _operand(fmt, x)
        b, sb, db = _operand(fmt, w)
        refs.append((da, db))
        bias = [bench.random_tensor((n,), torch.bfloat16, run.dev)] if with_bias else []
        return [a, b.t(), sa, sb] + bias   # b [K, N] (fp4: [K/2, N]) column-major, torch's b.t()
    first = one()
    cnt = 1 if run.dry else bench.rotation_count(bench.set_bytes(first), bench.l2_bytes(run.dev),
                                                 max_total_bytes=4 << 30)
    sets = [first] + [one() for _ in range(cnt - 1)]
    check = one()
    da, db = refs[-1]
    return sets, check, (da @ db.t()).float()


# suite -> the record's "scaling" (the format: MXFP8 and MXFP4 share heddle's scale kind mx32): MXFP8 e4m3 data with
# e8m0 scales per 32 of K; NVFP4 e2m1 data with e4m3 scales per 16 of K; MXFP4 e2m1 data with e8m0 scales per 32 of K
FORMATS = {"mxfp8": "mxfp8", "nvfp4": "nvfp4", "mxfp4": "mxfp4"}


def mx_case(run, fmt, m, n, k):
    """heddle.scaled_mm (the block-scaled tcgen05 kernel of `fmt`) against torch._scaled_mm with the same blocked
    scales, bf16 out; on a device without tcgen05 block scaling, one skipped record."""
    rec = {"suite": fmt, "case": f"{fmt}-{m}x{n}x{k}", "dtype": fmt, "B": 1, "M": m, "N": n, "K": k,
           "layout": "NT", "epilogue": None, "scaling": FORMATS[fmt]}
    target = "sm_100a" if run.dry else heddle.runtime.target_for_device()
    if target != "sm_100a":
        run.write({**rec, "impl": "heddle", "status": "skipped",
                   "reason": f"the block-scaled kernels are sm_100a's (tcgen05 block scaling); this device is {target}"})
        return
    sets, check, ref = _sets(run, fmt, m, n, k)
    impls = {"heddle": lambda a, b, sa, sb: heddle.scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)}

    def torch_mm(a, b, sa, sb):
        return torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
    try:
        if not run.dry:  # torch's CPU _scaled_mm has no block scales: the dry run checks heddle's side only
            torch_mm(*check)
            impls["torch_scaled_mm"] = torch_mm
    except Exception as e:  # noqa: BLE001 - this torch / cuBLASLt has no such _scaled_mm: recorded as skipped
        run.write({**rec, "impl": "torch_scaled_mm", "status": "skipped",
                   "reason": f"torch._scaled_mm refuses {fmt} here: {type(e).__name__}: {str(e)[:300]}"})
    run.measure(rec, impls, sets, check, ref, bench.matmul_flops(m, n, k))


def mx_quantize(y: torch.Tensor):
    """torch's separate ops for an MX-format output (what heddle's out_scale="mx32" computes, docs/fp8.md "An
    MX-format output"): per row and 32 columns the FLOOR shared exponent of the amax, q = satfinite(y / 2^e) in e4m3,
    the e8m0 codes in the blocked layout. (q [M, N], s e8m0 [round_up(M, 128) * round_up(N/32, 4)])."""
    q, codes, _ = _mx8_quant(y.float())
    return q, to_blocked(codes).view(torch.float8_e8m0fnu)


def mx_dequantized(out):
    q, s = out
    m, n = q.shape
    codes = heddle.reference.unblock_mx_scales(s.view(torch.uint8), m, n // 32).float()
    return q.float() * torch.exp2(codes - 127).repeat_interleave(32, dim=1)


def mx_quant_case(run, fmt, m, n, k, out_scale, quantize, dequantized):
    """A block-scaled layer's whole epilogue in one kernel: the block-scaled product, bias, GELU, then the output's
    e4m3 quantize with a computed scale -- per row and 128 columns (out_scale="1x128", f32 s) or the MX-format
    output (out_scale="mx32": e8m0 per row and 32 columns, blocked: the next MXFP8 layer's operand) -- returning
    (q, s), against torch's block-scaled _scaled_mm (bf16 out) plus the separate ops (`quantize`); q * s
    (`dequantized`) checked against the float reference within e4m3's step (tol 0.08)."""
    suite = f"{fmt}_fused"
    rec = {"suite": suite, "case": f"{suite}-{m}x{n}x{k}-bias_gelu_quant{out_scale}", "dtype": fmt, "B": 1, "M": m,
           "N": n, "K": k, "layout": "NT", "epilogue": f"bias_gelu_quant{out_scale}", "scaling": FORMATS[fmt]}
    target = "sm_100a" if run.dry else heddle.runtime.target_for_device()
    if target != "sm_100a":
        run.write({**rec, "impl": "heddle", "status": "skipped",
                   "reason": f"the block-scaled kernels are sm_100a's (tcgen05 block scaling); this device is {target}"})
        return
    sets, check, prod = _sets(run, fmt, m, n, k, with_bias=True)
    ref = F.gelu(prod + check[4].float())
    impls = {"heddle": lambda a, b, sa, sb, bias: heddle.scaled_mm(a, b, sa, sb, bias=bias, activation="gelu",
                                                                   out_dtype=torch.float8_e4m3fn, out_scale=out_scale)}

    def separate(a, b, sa, sb, bias):
        return quantize(F.gelu(torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16) + bias))
    if not run.dry:  # torch's CPU _scaled_mm has no block scales
        impls["scaled_mm_then_ops"] = separate
    run.measure(rec, impls, sets, check, ref, bench.matmul_flops(m, n, k), tol=8e-2, value=dequantized)


def plan(dry, quantize_1x128, dequantized):
    """(estimated seconds, label, callable) of the block-scaled cases, for bench_quick.plan: the decode, mid and
    prefill sizes of a 4096-wide layer and its 14336-wide FFN projection."""
    shapes = [(16, 64, 128), (130, 208, 320)] if dry else [(128, 4096, 4096), (4096, 4096, 4096),
                                                           (4096, 14336, 4096), (16, 4096, 4096)]
    fused = [(130, 224, 320)] if dry else [(4096, 4096, 4096), (4096, 14336, 4096)]
    return ([(4, f"{fmt} {m}x{n}x{k}", (lambda f, mm, nn, kk: lambda r: mx_case(r, f, mm, nn, kk))(fmt, m, n, k))
             for fmt in FORMATS for m, n, k in shapes]
            + [(4, f"{fmt} fused {m}x{n}x{k}", (lambda f, mm, nn, kk: lambda r: mx_quant_case(
                r, f, mm, nn, kk, "1x128", quantize_1x128, dequantized))(fmt, m, n, k))
               for fmt in FORMATS for m, n, k in fused]
            # the MX-format output: an MXFP8 layer whose output is the next MXFP8 layer's operand
            + [(4, f"mxfp8 mx-out {m}x{n}x{k}", (lambda mm, nn, kk: lambda r: mx_quant_case(
                r, "mxfp8", mm, nn, kk, "mx32", mx_quantize, mx_dequantized))(m, n, k)) for m, n, k in fused])
