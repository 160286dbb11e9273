"""A hand-written probe of the block-scaled tcgen05 primitives of heddle_sm100.cuh (MmaSm100Mx: MXFP8,
MmaSm100Nvf4: NVFP4; docs/fp8.md "MX formats"), shared by tests/interp/test_tcgen05_mx_interpret.py (the CPU interpreter) and
tests/isa/test_tcgen05_mx_compile.py (NVRTC for sm_100a); and, at the end, the fused MXFP8 and NVFP4 kernels' fusions
(build_mx, build_nv), inputs (mx_tensors, nv_tensors) and protocol mutants (protocol_mutants and the assert_* helpers)
for tests/interp/test_tcgen05_mx_kernel_interpret.py, test_tcgen05_nvf4_kernel_interpret.py and the NVRTC tests.

The kernel is one CTA, one 128 x BN tile (k tiles of 128 elements), one operand stage: every thread copies the k tile of A and B into the
128-byte swizzled stage and the tile's scale chunks into shared memory, fence.proxy.async, a block barrier; thread
0 issues the scale copies (tcgen05.cp) and MMAs and commits them onto an mbarrier every thread waits for before
the stage is refilled; the accumulator is read with tcgen05.ld. The scales are laid out by torch's own
`to_blocked` (the cuBLAS layout torch._scaled_mm takes for MX formats); the reference is float64. SCALE_KT,
PROXY_FENCE, MBAR_WAIT, WAIT_FENCE and ISSUE_FENCE (the tcgen05.fence::after_thread_sync after the commit's wait
and before the copies and MMAs) are the spots the mutants change."""
import json

import pytest
import torch
import torch.nn.functional as F



def _torch_to_blocked():
    """torch's own `to_blocked` (torch/testing/_internal/common_quantized.py), the scale layout torch._scaled_mm
    takes for MX formats: the function is read from the installed torch source and run alone (importing its module
    needs the test-only package expecttest)."""
    import ast
    import pathlib
    src = pathlib.Path(torch.__file__).parent / "testing" / "_internal" / "common_quantized.py"
    if not src.exists():
        pytest.skip("torch's common_quantized.py (to_blocked) is not installed")
    tree = ast.parse(src.read_text())
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "to_blocked"), None)
    if fn is None:
        pytest.skip("this torch has no to_blocked")
    scope = {"torch": torch, "ceil_div": lambda a, b: (a + b - 1) // b}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), str(src), "exec"), scope)
    return scope["to_blocked"]


to_blocked = _torch_to_blocked()

SOURCE = r"""
#include "heddle/heddle_types.cuh"
#include "heddle/heddle_math.cuh"
#include "heddle/heddle_copy.cuh"
#include "heddle/heddle_sm100.cuh"

using Mma = MX_MMA;
constexpr int kRowB = Mma::TileA::kRowBytes;  // bytes of a k tile's row: 128 (8-bit), 64 (packed e2m1)
constexpr int kTileSF = Mma::kScaleBytesA;    // scale bytes of a k tile per 128 rows: 512 (MXFP8), 1024 (NVFP4)
using U64 = unsigned long long;

extern "C" __global__ void __launch_bounds__(128, 1) mx_probe(const unsigned char* __restrict__ A,
    const unsigned char* __restrict__ B, const unsigned char* __restrict__ SA, const unsigned char* __restrict__ SB,
    float* __restrict__ D, int K) {
  extern __shared__ __align__(1024) unsigned char heddle_smem[];  // the name the interpreter binds
  unsigned char* sA = heddle_smem;                                  // 128 rows, swizzled
  unsigned char* sB = heddle_smem + 128 * kRowB;                    // MX_BN rows
  unsigned char* sSFA = sB + MX_BN * kRowB;                  // the k tile's scale chunks of A
  unsigned char* sSFB = sSFA + Mma::kScaleBytesA;            // and of B, per 128 rows
  unsigned long long* bar = reinterpret_cast<unsigned long long*>(sSFB + Mma::kScaleBytesB);
  unsigned* slot = reinterpret_cast<unsigned*>(bar + 1);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int nk = K / 128, kb = nk * kRowB;  // k tiles; bytes of an operand row
  if (warp == 0) {
    heddle::sm100::tmem_alloc(slot, MX_COLS);
    heddle::sm100::tmem_relinquish();
  }
  if (tid == 32) {
    heddle::sm90::mbar_init(bar, 1);
    heddle::sm90::fence_mbarrier_init_cluster();
  }
  heddle::sm100::fence_before();
  heddle::block_sync();
  heddle::sm100::fence_after();
  for (int kt = 0; kt < nk; ++kt) {
    // 8 bytes a thread (the swizzle moves 16-byte units, so 8 aligned bytes stay together)
    for (int i = tid; i < 128 * kRowB / 8; i += 128) {
      const int r = i / (kRowB / 8), c = i % (kRowB / 8) * 8;
      *reinterpret_cast<U64*>(sA + Mma::TileA::byte_offset(r, c)) =
          *reinterpret_cast<const U64*>(A + (long long)r * kb + kt * kRowB + c);
    }
    for (int i = tid; i < MX_BN * kRowB / 8; i += 128) {
      const int r = i / (kRowB / 8), c = i % (kRowB / 8) * 8;
      *reinterpret_cast<U64*>(sB + Mma::TileB::byte_offset(r, c)) =
          *reinterpret_cast<const U64*>(B + (long long)r * kb + kt * kRowB + c);
    }
    for (int i = tid; i < kTileSF / 8; i += 128)
      reinterpret_cast<U64*>(sSFA)[i] = *reinterpret_cast<const U64*>(SA + (long long)(SCALE_KT) * kTileSF + 8 * i);
    for (int i = tid; i < Mma::kScaleBytesB / 8; i += 128)
      reinterpret_cast<U64*>(sSFB)[i] = *reinterpret_cast<const U64*>(
          SB + (long long)(8 * i / kTileSF) * nk * kTileSF + (SCALE_KT) * kTileSF + 8 * i % kTileSF);
    PROXY_FENCE;
    heddle::block_sync();
    if (tid == 0) {
      ISSUE_FENCE;
      Mma::mma(slot[0], slot[0] + MX_BN, 0, 0, sA, sB, sSFA, sSFB, kt);
      heddle::sm100::commit(bar);
    }
    MBAR_WAIT;
    WAIT_FENCE;
  }
  const unsigned taddr = Mma::row_addr(slot[0], warp, 0);
  for (int c0 = 0; c0 < MX_BN; c0 += 32) {
    float v[32];
    heddle::sm100::tmem_load_32(taddr + c0, v);
    for (int j = 0; j < 32; ++j) D[(long long)(32 * warp + lane) * MX_BN + c0 + j] = v[j];
  }
  heddle::sm100::fence_before();
  heddle::block_sync();
  if (warp == 0) {
    heddle::sm100::fence_after();
    heddle::sm100::tmem_dealloc(slot[0], MX_COLS);
  }
}
"""
GOOD = {"SCALE_KT": "kt", "PROXY_FENCE": "heddle::sm90::fence_proxy_async()", "MBAR_WAIT":
        "heddle::sm90::mbar_wait(bar, kt % 2)", "WAIT_FENCE": "heddle::sm100::fence_after()",
        "ISSUE_FENCE": "heddle::sm100::fence_after()"}


def source(bn, fa, fb, **mutate):
    """fa == fb == "e2m1": NVFP4 (MmaSm100Nvf4); else MXFP8 with A / B formats fa / fb."""
    s = SOURCE
    for key, val in {**GOOD, **mutate}.items():
        s = s.replace(key, val)
    nvf4 = fa == "e2m1"
    mma = f"heddle::MmaSm100Nvf4<{bn}>" if nvf4 else f"heddle::MmaSm100Mx<{bn}, heddle::{fa}, heddle::{fb}>"
    cols = bn + (8 + bn // 16 if nvf4 else 4 + bn // 32)  # accumulator + one stage of scale columns
    cols = 256 if cols <= 256 else 512  # tcgen05.alloc takes a power of two
    return f"#define MX_BN {bn}\n#define MX_COLS {cols}\n#define MX_MMA {mma}\n" + s


def smem_bytes(bn, nvf4=False):
    row, sf = (64, 1024) if nvf4 else (128, 512)
    return (128 + bn) * row + sf * (1 + bn // 128) + 16


FMT = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
E2M1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=torch.float64)


def operands(bn, k, fa, fb, seed):
    """(bytes of A, bytes of B, scale codes of A [128, k/V], of B [bn, k/V], float64 A, float64 B, float64 scales
    A, B): MXFP8 (V = 32, ue8m0 codes 120 .. 134: 2^-7 .. 2^7) or NVFP4 (fa "e2m1": V = 16, two e2m1 codes a byte,
    element 2j in the low nibble, ue4m3 codes 0x28 .. 0x47: 2^-2 .. 3.75)."""
    g = torch.Generator().manual_seed(seed)
    if fa == "e2m1":
        ca, cb = (torch.randint(0, 16, (r, k), generator=g, dtype=torch.uint8) for r in (128, bn))
        pa, pb = ((c[:, 0::2] | (c[:, 1::2] << 4)).contiguous() for c in (ca, cb))
        sa, sb = (torch.randint(0x28, 0x48, (r, k // 16), generator=g, dtype=torch.uint8) for r in (128, bn))
        fsa, fsb = (s.view(torch.float8_e4m3fn).double() for s in (sa, sb))
        return pa, pb, sa, sb, E2M1[ca.long()], E2M1[cb.long()], fsa, fsb
    a = (torch.randn(128, k, generator=g) * 2).to(FMT[fa])
    b = (torch.randn(bn, k, generator=g) * 2).to(FMT[fb])
    sa = torch.randint(120, 135, (128, k // 32), generator=g, dtype=torch.uint8)
    sb = torch.randint(120, 135, (bn, k // 32), generator=g, dtype=torch.uint8)
    return (a.view(torch.uint8), b.view(torch.uint8), sa, sb, a.double(), b.double(), torch.exp2(sa.double() - 127),
            torch.exp2(sb.double() - 127))


def reference(a, b, sa, sb):
    """sum over k of (a * sa) (b * sb), each scale repeated over its block of K, in float64."""
    v = a.shape[1] // sa.shape[1]
    return (a * sa.repeat_interleave(v, dim=1)) @ (b * sb.repeat_interleave(v, dim=1)).T


def run(bn, k, fa, fb, seed=0, schedule="adversarial", **mutate):
    from heddle import _C
    pa, pb, sa, sb, a, b, fsa, fsb = operands(bn, k, fa, fb, seed)
    # torch's blocked layout: chunks (row block, k chunk) of 512 bytes, row blocks outer
    ba, bb = to_blocked(sa).contiguous(), to_blocked(sb).contiguous()
    d = torch.full((128, bn), float("nan"))
    lib = _C.interp.build(source(bn, fa, fb, **mutate), "mx_probe", "sm_100a")
    ins = [pa, pb, ba, bb]
    args = [("ptr", t.data_ptr()) for t in ins] + [("ptr", d.data_ptr()), ("i32", k)]
    regions = [(n, t.data_ptr(), t.numel(), False, 1) for n, t in zip(("A", "B", "SA", "SB"), ins)]
    regions.append(("D", d.data_ptr(), d.numel() * 4, True, 4))
    raw = json.loads(lib.run([1, 1, 1], [128, 1, 1], smem_bytes(bn, fa == "e2m1"), args,
                             ["A", "B", "SA", "SB", "D", "K"], regions, schedule, seed, 0, 20))
    return d, reference(a, b, fsa, fsb), raw


def findings(raw):
    return [(f["kind"], f["text"]) for f in raw.get("findings", [])]


def mx_definition(M="M", N=200, K=320, sa=None, sb=None, dtype="e4m3", trans_a=False, trans_b=True,
                  sdtype="e8m0", bdtype=None):
    """An mx32-scaled matmul (docs/fp8.md "MX formats"): a [M, K] (trans_a: [K, M]) @ b [N, K] (trans_b=False:
    [K, N]), e8m0 scales sa / sb [round_up(rows, 128), round_up(K/32, 4)] unless given; output bf16."""
    import heddle
    fd = heddle.Fusion()
    a = fd.input("a", dtype, [K, M] if trans_a else [M, K])
    b = fd.input("b", bdtype or dtype, [N, K] if trans_b else [K, N])
    kb = -(-K // 32 // 4) * 4 if isinstance(K, int) else "KB"
    def pad(rows, symbol):  # round_up(rows, 128); a symbolic row count takes a symbol of its own
        return -(-rows // 128) * 128 if isinstance(rows, int) else symbol
    s_a = fd.input("sa", sdtype, sa or [pad(M, "MP"), kb])
    s_b = fd.input("sb", sdtype, sb or [pad(N, "NP"), kb])
    mm = fd.matmul(a, b, trans_a=trans_a, trans_b=trans_b, scale_a=s_a, scale_b=s_b, scales="mx32")
    fd.output(mm.to("bf16"))
    return fd


def nv_definition(M="M", N=200, K=320, sa=None, sb=None, dtype="e2m1x2", sdtype="e4m3", kind="nv16"):
    """An nv16-scaled matmul (NVFP4, docs/fp8.md "MX formats"): a [M, K/2] @ b [N, K/2] e2m1x2 (trans_b), e4m3
    scales sa / sb [round_up(rows, 128), round_up(K/16, 4)] unless given; output bf16. kind="mx32" (with e8m0
    scales: mxf4_definition) is MXFP4, its scales [round_up(rows, 128), round_up(K/32, 4)]."""
    import heddle
    fd = heddle.Fusion()
    a = fd.input("a", dtype, [M, K // 2 if isinstance(K, int) else K])
    b = fd.input("b", dtype, [N, K // 2 if isinstance(K, int) else K])
    kb = -(-K // (64 if kind == "nv16" else 128)) * 4 if isinstance(K, int) else "KB"
    s_a = fd.input("sa", sdtype, sa or [-(-M // 128) * 128 if isinstance(M, int) else "MP", kb])
    s_b = fd.input("sb", sdtype, sb or [-(-N // 128) * 128, kb])
    mm = fd.matmul(a, b, trans_b=True, scale_a=s_a, scale_b=s_b, scales=kind)
    fd.output(mm.to("bf16"))
    return fd


def mxf4_definition(M="M", N=200, K=320, sa=None, sb=None, dtype="e2m1x2", sdtype="e8m0"):
    """An MXFP4 matmul (scales="mx32" with e2m1x2 operands, docs/fp8.md "MX formats"): a [M, K/2] @ b [N, K/2]
    e2m1x2 (trans_b), e8m0 scales sa / sb [round_up(rows, 128), round_up(K/32, 4)] unless given; output bf16."""
    return nv_definition(M, N, K, sa, sb, dtype, sdtype, kind="mx32")


def build_mx(fa="e4m3", fb="e4m3", n=200, k=320, bn=128, stages=2, acc_stages=1, epilogue="bias_gelu", out="bf16",
             auto=False, quant=None, residual=False, tma=None):
    """The fused MXFP8 kernel's fusion (lower/passes/mx_scale_ring.cpp, tcgen05_specialize): a [M, k] fa @ b [n, k]
    fb (trans_b) with e8m0 scales in torch's blocked layout, then the epilogue ("bias_gelu": gelu(y + bias bf16
    [n]); "bias": y + bias; None: y) cast to `out`; scheduled on the TMA + tcgen05 roles at 128 x bn x 128 with
    `stages` operand stages and `acc_stages` accumulator stages (auto: Fusion.auto_schedule('sm_100a')).
    quant=(fmt, group): instead of the cast, heddle.ops.quantize(y, fmt, group) with outputs q, then s (docs/fp8.md
    "Computed output scales"). residual: + res bf16 [M, n] after the bias. tma="bias" | "res": that epilogue operand
    cached with tma_load (its producer role on warp 2 and a ring of 2 stages, docs/blackwell.md)."""
    return _scaled_fusion((fa, fb), k, "e8m0", -(-k // 128) * 4, "mx32", 128, n, bn, stages, acc_stages, epilogue,
                          out, auto, quant, residual, tma)


def _scaled_fusion(fmts, kstored, sdtype, kp, kind, bk, n, bn, stages, acc_stages, epilogue, out, auto, quant=None,
                   residual=False, tma=None):
    """a [M, kstored] @ b [n, kstored] (trans_b) with `kind` scales [MP | round_up(n, 128), kp] of `sdtype`, the
    epilogue, the schedule (build_mx / build_nv)."""
    import heddle
    from support.tcgen05_defs import roles
    from support.wgmma_defs import schedule_sm90
    fd = heddle.Fusion()
    a = fd.input("a", fmts[0], ["M", kstored])
    b = fd.input("b", fmts[1], [n, kstored])
    sa = fd.input("sa", sdtype, ["MP", kp])
    sb = fd.input("sb", sdtype, [-(-n // 128) * 128, kp])
    y = fd.matmul(a, b, trans_b=True, scale_a=sa, scale_b=sb, scales=kind)
    extra = {}
    if epilogue:
        extra["bias"] = fd.input("bias", "bf16", [n])
        y = y + extra["bias"]
    if residual:
        extra["res"] = fd.input("res", "bf16", ["M", n])
        y = y + extra["res"]
    if epilogue == "bias_gelu":
        y = heddle.ops.gelu(y)
    if quant:
        for t in heddle.ops.quantize(y, quant[0], group=quant[1]):
            fd.output(t)
    else:
        fd.output(y.to(out))
    if auto:
        fd.auto_schedule("sm_100a")
    else:
        schedule_sm90(fd, a, b, bm=128, bn=bn, bk=bk, wgs=1, stages=stages, roles=roles(acc_stages))
    if tma:
        fd.cache_after(extra[tma], "tma_load").circular_buffer(2)
    return fd


def mx_tensors(fd, M, seed=0, codes=(120, 135)):
    """The inputs of build_mx's fusion for M rows: 8-bit operands (randn * 2 in their formats), ue8m0 scale codes in
    [codes[0], codes[1]) (default 120 .. 134: 2^-7 .. 2^7) per row and 32 of K laid out by torch's own to_blocked
    ([round_up(rows, 128), round_up(K/32, 4)], zero-padded), a bias of randn."""
    g = torch.Generator().manual_seed(seed)
    ins = {t.name: t for t in fd.inputs}
    K = ins["a"].shape[1]
    N = ins["b"].shape[0]
    a = (torch.randn(M, K, generator=g) * 2).to(getattr(torch, FMT_NAME[ins["a"].dtype]))
    b = (torch.randn(N, K, generator=g) * 2).to(getattr(torch, FMT_NAME[ins["b"].dtype]))

    def scales(rows):
        c = torch.randint(codes[0], codes[1], (rows, K // 32), generator=g, dtype=torch.uint8)
        return to_blocked(c).contiguous().view(-1, -(-K // 128) * 4).view(torch.float8_e8m0fnu)

    out = [a, b, scales(M), scales(N)]
    if "bias" in ins:
        out.append(torch.randn(N, generator=g).to(torch.bfloat16))
    if "res" in ins:
        out.append(torch.randn(M, N, generator=g).to(torch.bfloat16))
    return out


FMT_NAME = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def mx_quant_tensors(fd, M, seed=0):
    """mx_tensors for build_mx(..., quant=...) with the last column set up so that a column past N would show in a
    group's amax (the quantize epilogue's mask, docs/fp8.md "Computed output scales"): small scales (codes 118 ..
    121) everywhere but B's last row (code 133: 2^6), and a bias of 48 there. A column past N reads B's zero fill
    (acc 0) and the clamped bias: y = gelu(48) = 48, above every real value of the group but the last column's,
    which is gelu(acc + 48) with |acc| >> 48: near 0 on the rows where acc < -48."""
    g = torch.Generator().manual_seed(seed)
    ins = {t.name: t for t in fd.inputs}
    K, N = ins["a"].shape[1], ins["b"].shape[0]
    a = (torch.randn(M, K, generator=g) * 2).to(getattr(torch, FMT_NAME[ins["a"].dtype]))
    b = (torch.randn(N, K, generator=g) * 2).to(getattr(torch, FMT_NAME[ins["b"].dtype]))

    def blocked(c):
        return to_blocked(c).contiguous().view(-1, -(-K // 128) * 4).view(torch.float8_e8m0fnu)

    ca = torch.randint(118, 122, (M, K // 32), generator=g, dtype=torch.uint8)
    cb = torch.randint(118, 122, (N, K // 32), generator=g, dtype=torch.uint8)
    cb[N - 1] = 133
    bias = (torch.randn(N, generator=g) * 0.1).to(torch.bfloat16)
    bias[N - 1] = 48.0
    return [a, b, blocked(ca), blocked(cb), bias]


def build_nv(n=200, k=320, bn=128, stages=2, acc_stages=1, epilogue="bias_gelu", out="bf16", auto=False, quant=None,
             residual=False, tma=None):
    """The fused NVFP4 kernel's fusion (scales="nv16"; lower/passes/mx_scale_ring.cpp with two chunks a k tile,
    MmaSm100Nvf4 in the MMA role): a [M, k/2] @ b [n, k/2] e2m1x2 (trans_b; k elements of K) with e4m3 (ue4m3)
    scales in torch's blocked layout [round_up(rows, 128), round_up(k/16, 4)], then the epilogue as build_mx's;
    scheduled at 128 x bn x 64 stored bytes (128 e2m1) with `stages` operand stages (auto: Fusion.auto_schedule);
    quant, residual and tma as build_mx's."""
    return _scaled_fusion(("e2m1x2", "e2m1x2"), k // 2, "e4m3", -(-k // 64) * 4, "nv16", 64, n, bn, stages,
                          acc_stages, epilogue, out, auto, quant, residual, tma)


def build_mxf4(n=200, k=320, bn=128, stages=2, acc_stages=1, epilogue="bias_gelu", out="bf16", auto=False,
               quant=None, residual=False, tma=None):
    """The fused MXFP4 kernel's fusion (scales="mx32" with e2m1x2 operands; lower/passes/mx_scale_ring.cpp with one
    chunk a k tile, MmaSm100Mxf4 in the MMA role): a [M, k/2] @ b [n, k/2] e2m1x2 (trans_b) with e8m0 scales in
    torch's blocked layout [round_up(rows, 128), round_up(k/32, 4)], then the epilogue as build_mx's; scheduled at
    128 x bn x 64 stored bytes (128 e2m1) as build_nv's."""
    return _scaled_fusion(("e2m1x2", "e2m1x2"), k // 2, "e8m0", -(-k // 128) * 4, "mx32", 64, n, bn, stages,
                          acc_stages, epilogue, out, auto, quant, residual, tma)


def mxf4_tensors(fd, M, seed=0, codes=(122, 132)):
    """The inputs of build_mxf4's fusion for M rows: random e2m1 codes packed two a byte, ue8m0 scale codes in
    [codes[0], codes[1]) (default 122 .. 131: 2^-5 .. 2^4) per row and 32 of K laid out by torch's own to_blocked
    ([round_up(rows, 128), round_up(K/32, 4)], zero-padded), a bias of randn (and a residual of randn)."""
    g = torch.Generator().manual_seed(seed)
    ins = {t.name: t for t in fd.inputs}
    K = 2 * ins["a"].shape[1]
    N = ins["b"].shape[0]
    out = [_packed(g, M, K), _packed(g, N, K)]
    for r in (M, N):
        c = torch.randint(codes[0], codes[1], (r, K // 32), generator=g, dtype=torch.uint8)
        out.append(to_blocked(c).contiguous().view(-1, -(-K // 128) * 4).view(torch.float8_e8m0fnu))
    if "bias" in ins:
        out.append(torch.randn(N, generator=g).to(torch.bfloat16))
    if "res" in ins:
        out.append(torch.randn(M, N, generator=g).to(torch.bfloat16))
    return out


def nv_tensors(fd, M, seed=0, codes=(0x28, 0x48)):
    """The inputs of build_nv's fusion for M rows: random e2m1 codes packed two a byte (element 2j in the low
    nibble: torch.float4_e2m1fn_x2), ue4m3 scale codes in [codes[0], codes[1]) (default 0x28 .. 0x47: 2^-2 .. 3.75)
    per row and 16 of K laid out by torch's own to_blocked ([round_up(rows, 128), round_up(K/16, 4)], zero-padded),
    a bias of randn (and a residual of randn)."""
    g = torch.Generator().manual_seed(seed)
    ins = {t.name: t for t in fd.inputs}
    K = 2 * ins["a"].shape[1]
    N = ins["b"].shape[0]
    out = [_packed(g, M, K), _packed(g, N, K)]
    out += [_nv_blocked(torch.randint(codes[0], codes[1], (r, K // 16), generator=g, dtype=torch.uint8), K)
            for r in (M, N)]
    if "bias" in ins:
        out.append(torch.randn(N, generator=g).to(torch.bfloat16))
    if "res" in ins:
        out.append(torch.randn(M, N, generator=g).to(torch.bfloat16))
    return out


def _packed(g, rows, K):
    """rows x K random e2m1 codes packed two a byte (element 2j in the low nibble: torch.float4_e2m1fn_x2)."""
    c = torch.randint(0, 16, (rows, K), generator=g, dtype=torch.uint8)
    return (c[:, 0::2] | (c[:, 1::2] << 4)).contiguous().view(torch.float4_e2m1fn_x2)


def _nv_blocked(c, K):
    """ue4m3 scale codes [rows, K/16] in torch's blocked layout [round_up(rows, 128), round_up(K/16, 4)]."""
    return to_blocked(c).contiguous().view(-1, -(-K // 64) * 4).view(torch.float8_e4m3fn)


def nv_quant_tensors(fd, M, seed=0):
    """nv_tensors for build_nv(..., quant=...) set up as mx_quant_tensors is, so that a column past N would show in a
    group's amax: small scales (ue4m3 codes 0x18 .. 0x1f: 2^-4 .. 0.117) everywhere but B's last row (code 0x58:
    16), and a bias of 48 there. A column past N reads B's zero fill (acc 0) and the clamped bias: y = gelu(48) = 48,
    above every real value of the group but the last column's, gelu(acc + 48) with |acc| >> 48 (K = 320 e2m1
    products of about 8.6 mean square, scaled by 16 and 2^-4 .. 0.117: a std of about 150) -- near 0 on the rows
    where acc < -48."""
    g = torch.Generator().manual_seed(seed)
    ins = {t.name: t for t in fd.inputs}
    K, N = 2 * ins["a"].shape[1], ins["b"].shape[0]
    a, b = _packed(g, M, K), _packed(g, N, K)
    ca = torch.randint(0x18, 0x20, (M, K // 16), generator=g, dtype=torch.uint8)
    cb = torch.randint(0x18, 0x20, (N, K // 16), generator=g, dtype=torch.uint8)
    cb[N - 1] = 0x58
    bias = (torch.randn(N, generator=g) * 0.1).to(torch.bfloat16)
    bias[N - 1] = 48.0
    return [a, b, _nv_blocked(ca, K), _nv_blocked(cb, K), bias]


def fp4_within_f32_sum(fd, r, ts, out="bf16", block=16):
    """r's output of an fp4 block-scaled kernel (NVFP4 block 16, MXFP4 block 32) against the float64 reference: an f32
    sum of exactly scaled products (e2m1 x scale x e2m1 x scale is exact in f32 for the tests' scales), so at most K
    roundings of 2^-24 of the magnitudes' running sum, then the output format's one rounding (the reference's output
    is rounded too: one step of the format apart at a midpoint)."""
    import heddle
    assert r.ok, r.report()
    want = heddle.reference.evaluate(fd, ts, round_casts=False).double()
    got = r.output.double()
    assert not bool(torch.isnan(got).any())
    a, b, sa, sb = (heddle.reference.decode_e2m1x2(ts[0]).abs(), heddle.reference.decode_e2m1x2(ts[1]).abs(),
                    ts[2].double(), ts[3].double())
    mag = heddle.reference.mx_scaled_matmul(a, b.T, sa, sb, block=block)
    step = {"bf16": 2 ** -7, "f16": 2 ** -10, "f32": 2 ** -23}[out]
    bound = step * want.abs() + a.shape[1] * 2 ** -24 * 1.2 * mag + 1e-6
    assert bool(((got - want).abs() <= bound).all()), float(((got - want).abs() - bound).max())


def e2m1_value(codes):
    """e2m1 codes as float64 from the format's formula: sign bit 3, exponent bits 1-2 (bias 1), mantissa bit 0 (OCP MX
    v1.0 FP4 E2M1)."""
    c = codes.long()
    e, mant = (c >> 1) & 3, (c & 1).double()
    mag = torch.where(e == 0, mant * 0.5, torch.exp2(e.double() - 1) * (1 + mant * 0.5))
    return torch.where(c >= 8, -mag, mag)


def check_bf16(out, want):
    """A bf16 output against float64 within one bf16 rounding (plus 1e-5 of the largest value)."""
    assert out.dtype == torch.bfloat16 and out.shape == want.shape
    err = (out.double() - want).abs() - 2 ** -8 * want.abs()
    assert float(err.max()) <= 1e-5 * float(want.abs().max()), float((out.double() - want).abs().max())


def assert_scale_columns_lowered(k, step, bn, stages, per, cols, alloc):
    """A lowered block-scaled kernel k: tensor memory of `alloc` columns for `cols` needed (the accumulators and
    stages x per scale columns, named in the sync plan), the device step `step`<bn> in the source."""
    assert f"heddle::sm100::tmem_alloc(tmem_slot, {alloc});" in k.source
    plan = " ".join(e["mechanism"] for e in k.sync_plan)
    assert f" accumulator columns + {stages * per} MX scale columns ({stages} operand stages x {per})" in plan, plan
    assert f"using Mma = heddle::{step}<{bn}>;" in k.source
    assert cols <= alloc < 2 * cols


def assert_epilogue_operand_ring(k, tma):
    """The block-scaled kernel k with its `tma` ("bias" | "res") epilogue operand cached with tma_load: the scale
    chunks still ride the operand ring (two 3-D boxes), the operand has its own producer role and ring (tmE, fullE)
    and the sync plan's RAW edge to the epilogue."""
    assert k.source.count("heddle::sm90::tma_load_box<3>(") == 2
    assert f"&tmE, {'0' if tma == 'bias' else 'm0'}, n0, (fullE" in k.source
    assert f"RAW sE ({tma}) ({tma}_load -> epilogue)" in k.explain()


def source_line(src, text):
    """The one line of src holding text."""
    hits = [ln for ln in src.split("\n") if text in ln]
    assert len(hits) == 1, (text, hits)
    return hits[0]


def assert_protocol_mutant_caught(fd, k, ts, what, edit, tx):
    """The block-scaled kernel k with `edit` applied to its printed source (None: the full barrier's expect-tx,
    which must be `tx` bytes, one 512-byte chunk short) is caught by the interpreter on one SM: a finding, or
    numbers off the float64 reference by more than 1% of its largest value."""
    import re
    import heddle
    from heddle.interpret import _Mutated, interpret
    src = k.source
    if edit is None:
        ln = source_line(src, "mbar_arrive_expect_tx((full")
        n = int(re.search(r", (\d+)\);", ln).group(1))
        assert n == tx, n
        edit = lambda s: s.replace(ln, ln.replace(f", {n});", f", {n - 512});"))  # noqa: E731
    mutated = edit(src)
    assert mutated != src, what
    r = interpret(_Mutated(k, mutated), *ts, sms=1)
    if r.ok:
        want = heddle.reference.evaluate(fd, ts, round_casts=False).double()
        err = (r.output.double() - want).abs()
        assert float(err.max()) > 1e-2 * float(want.abs().max()), f"{what}: survived"


def stage0_scale_columns(s):
    """The MMA step copies into operand stage 0's scale columns whatever its stage (a mutant of the printed
    source: a tensor-memory write-after-read race on those columns)."""
    ln = source_line(s, "Mma::mma(")
    return s.replace(ln, ln.replace(", 0, (tl * ", ", 0, 0 * (tl * ", 1))


def no_scale_fence(s):
    """The tcgen05.fence::after_thread_sync after the full wait dropped (a mutant of the printed source)."""
    return s.replace(source_line(s, "WAR tmem scale columns"), "")


def assert_sync_mutants_caught(k, ts):
    """Every default sync mutant of k (deleted syncs, flipped parities, the expect-tx dropped or shrunk, swapped
    stages) caught by the interpreter on one SM."""
    from heddle.interpret import mutation_kill_rate
    res = mutation_kill_rate(k, *ts, sms=1)
    assert {"delete_sync", "flip_parity", "drop_expect_tx", "shrink_expect_tx", "swap_stage"} <= set(res["by_kind"])
    assert not res["survivors"], res["survivors"]


def protocol_mutants(rows):
    """The block-scaled kernel's protocol mutants of its printed source, as pytest params (what, edit): the scale
    chunks of the next k tile (A's; B's -m slow), stage 0's scale columns for every stage (-m slow), the fence after
    the full wait dropped, the expect-tx one chunk short (edit None: assert_protocol_mutant_caught's); rows: the
    scale rows of a k tile's box, 4 (MXFP8: one chunk) or 8 (NVFP4: two, plus A's box one chunk late, -m slow: the
    k tile's second chunk is the next one's first)."""
    def box(origin, ahead):
        return lambda s: s.replace(f", 0, kt * {rows}, {origin} / 128,", f", 0, kt * {rows} + {ahead}, {origin} / 128,")
    slow = [pytest.mark.slow]  # each mutant compiles the interpreter once: three run by default
    out = [pytest.param("A's scale chunks of the next k tile", box("m0", rows), id="next-k-tile-A"),
           pytest.param("B's scale chunks of the next k tile", box("n0", rows), id="next-k-tile-B", marks=slow),
           pytest.param("the MMA copies into stage 0's scale columns whatever the stage", stage0_scale_columns,
                        id="stage-0-columns", marks=slow),
           pytest.param("the fence after the full wait dropped", no_scale_fence, id="no-fence"),
           pytest.param("the expect-tx bytes one chunk short", None, id="expect-tx-short")]
    if rows == 8:
        out.insert(1, pytest.param("A's chunks one chunk late (the second chunk of a k tile is the next one's first)",
                                   box("m0", 4), id="second-chunk-A", marks=slow))
    return out


def scaled_mm_operands(m, k, n, fa=torch.float8_e4m3fn, fb=torch.float8_e4m3fn, seed=0, codes=(120, 135)):
    """heddle.scaled_mm's MX operands: a [M, K], b [K, N] column-major (w.t()), the raw e8m0 codes per row and 32 of K
    in [codes[0], codes[1]) (default 2^-7 .. 2^7), their blocked
    forms (1-D, as torch's to_blocked returns them), a bf16 bias."""
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(m, k, generator=g) * 2).to(fa)
    w = (torch.randn(n, k, generator=g) * 2).to(fb)
    ca = torch.randint(*codes, (m, k // 32), generator=g, dtype=torch.uint8)
    cb = torch.randint(*codes, (n, k // 32), generator=g, dtype=torch.uint8)
    sa, sb = (to_blocked(c).contiguous().view(torch.float8_e8m0fnu).flatten() for c in (ca, cb))
    return a, w.t(), ca, cb, sa, sb, torch.randn(n, generator=g).to(torch.bfloat16)


def scaled_mm_reference(a, b, ca, cb, bias):
    """gelu(sum_k a[m,k] 2^(ca[m,k/32]-127) b[k,n] 2^(cb[n,k/32]-127) + bias) in float64."""
    fa = torch.exp2(ca.double() - 127).repeat_interleave(32, dim=1)
    fb = torch.exp2(cb.double() - 127).repeat_interleave(32, dim=1)
    return F.gelu((a.double() * fa) @ (b.t().double() * fb).t() + bias.double())
