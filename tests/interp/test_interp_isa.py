"""The device headers' code and the interpreter's ISA model, checked together on the host: two hand-written
kernels (tests/interp/isa_checks.cu for sm_90a, tests/interp/isa_checks_amd.cu for gfx942) are compiled as
heddle compiles a printed kernel for the interpreter and run one scenario per launch.

These are the checks of the former host emulation of the headers (a third build of every primitive, now
retired), run through the interpreter's model of each instruction instead: the software f16 / bf16
conversions of heddle_types.cuh (the interpreter's path) against torch for every 16-bit pattern and a sweep
of binary32 values with every rounding tie; SmemTile's swizzle (a bijection, 16-byte chunks kept whole,
ldmatrix phases free of bank conflicts); the epilogue activations; and the misuse the interpreter must refuse:
a divergent or non-uniform ldmatrix, a misaligned ldmatrix row, an out-of-bounds or oversized cp.async, a
copy_tile told of rows the tensor does not have, a wgmma whose threads disagree, and on AMD a non-uniform
M0, a divergent MFMA and an LDS DMA outside every tensor. (The GEMMs through the device code are the
printed kernels' runs in test_interpret_kernels.py / test_interpret_amd.py; the ISA tables themselves are
the self-tests of test_interp_ptx.py / test_interp_amdgcn.py.)"""
import json
import math
from pathlib import Path

import pytest
import torch

import heddle
from support.interp_defs import needs_cxx

pytestmark = needs_cxx
HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def cuda_lib():
    return heddle._C.interp.build((HERE / "isa_checks.cu").read_text(), "isa_checks", "sm_90a")


@pytest.fixture(scope="module")
def amd_lib():
    return heddle._C.interp.build((HERE / "isa_checks_amd.cu").read_text(), "isa_checks_amd", "gfx942")


def run(lib, scenario, inp, nout, threads=32, smem=32768, tmap=None):
    """(findings as (kind, text), out) of one launch of one CTA; `tmap` (CUDA only: the `tm` parameter) and
    its tensor, or a zero map."""
    out = torch.zeros(nout, dtype=inp.dtype)
    regions = [("in", inp.data_ptr(), inp.numel() * 4, False, 4), ("out", out.data_ptr(), out.numel() * 4, True, 4)]
    args = [("i32", scenario), ("ptr", inp), ("ptr", out), ("i32", inp.numel())]
    names = ["scenario", "in", "out", "n"]
    if lib.kernel_name == "isa_checks":
        tm, tensor = tmap if tmap else (bytes(128), None)
        args.append(("bytes", tm))
        names.append("tm")
        if tensor is not None:
            regions.append(("tensor", tensor.data_ptr(), tensor.numel() * tensor.element_size(), False, 4))
    raw = lib.run([1, 1, 1], [threads, 1, 1], smem, args, names, regions)
    return [(f["kind"], f["text"]) for f in json.loads(raw).get("findings", [])], out


def f32_of(words):
    return words.view(torch.float32)


def test_widening_every_16_bit_pattern(cuda_lib):
    h = torch.arange(65536, dtype=torch.int32)
    findings, out = run(cuda_lib, 0, h, 2 * 65536, threads=256)
    assert not findings, findings
    got16 = f32_of(out[0::2].contiguous())
    ref16 = h.to(torch.int16).view(torch.float16).float()
    nan = torch.isnan(ref16)
    assert torch.equal(torch.isnan(got16), nan)
    assert torch.equal(got16[~nan].view(torch.int32), ref16[~nan].view(torch.int32))  # bit-exact, signed zeros too
    assert torch.equal(out[1::2], h << 16)  # bf16 is the upper half of a binary32


def narrowing_inputs():
    """A sweep of binary32 patterns, every near-tie around each f16 and bf16 value, the f16 subnormal ties."""
    sweep = torch.arange(0, 1 << 32, 4093, dtype=torch.int64)
    f16_bits = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.float16).float().view(torch.int32)
    f16_bits = f16_bits.to(torch.int64) & 0xFFFFFFFF
    b = torch.arange(65536, dtype=torch.int64) << 16
    d = torch.arange(-2, 3, dtype=torch.int64)
    ties = [(f16_bits[:, None] + 0x1000 + d).flatten(), (f16_bits[:, None] - 0x1000 + d).flatten(),
            (b[:, None] + 0x8000 + d).flatten(), (b[:, None] + d).flatten()]
    subnormal_ties = torch.tensor([math.ldexp(k, -25) for k in range(1, 4096, 2)], dtype=torch.float32)
    extra = torch.tensor([65519.0, 65520.0, 1.25], dtype=torch.float32)
    words = torch.cat([sweep, *ties]) & 0xFFFFFFFF
    words = torch.where(words >= 1 << 31, words - (1 << 32), words).to(torch.int32)
    return torch.cat([words, subnormal_ties.view(torch.int32), extra.view(torch.int32)])


def test_narrowing_rounds_to_nearest_even(cuda_lib):
    words = narrowing_inputs()
    findings, out = run(cuda_lib, 1, words, 2 * words.numel(), threads=256)
    assert not findings, findings
    x = f32_of(words)
    nan = torch.isnan(x)
    for got, dtype in ((out[0::2], torch.float16), (out[1::2], torch.bfloat16)):
        got = got.to(torch.int16).view(dtype)
        want = x.to(dtype)
        assert torch.isnan(got[nan]).all(), f"{dtype}: NaN not kept"
        bad = (got[~nan].view(torch.int16) != want[~nan].view(torch.int16)).nonzero().flatten()
        assert bad.numel() == 0, [(hex(int(words[~nan][i]) & 0xFFFFFFFF), float(x[~nan][i])) for i in bad[:8]]
    assert int(out[0::2][-3]) == 0x7BFF and int(out[0::2][-2]) == 0x7C00, "f16 overflow: 65519 -> max, 65520 -> inf"


FP8 = ((torch.float8_e4m3fn, 448.0), (torch.float8_e5m2, 57344.0))  # (torch dtype, largest finite value)


def test_fp8_widening_every_8_bit_pattern(cuda_lib):
    """cvt.rn.f16x2.{e4m3x2,e5m2x2} (the interpreter's model, through heddle_types.cuh) against torch's float8
    dtypes for all 256 codes of each format: bit-exact values, signed zeros, NaN where torch has NaN."""
    codes = torch.arange(256, dtype=torch.int32)
    findings, out = run(cuda_lib, 4, codes, 2 * 256, threads=64)
    assert not findings, findings
    for got, (dtype, _) in zip((out[0::2], out[1::2]), FP8):
        got = f32_of(got.contiguous())
        want = codes.to(torch.uint8).view(dtype).float()
        nan = torch.isnan(want)
        assert torch.equal(torch.isnan(got), nan), dtype
        assert torch.equal(got[~nan].view(torch.int32), want[~nan].view(torch.int32)), dtype


def fp8_narrowing_inputs():
    """Every fp8 value of both formats and the midpoints between neighbours (the ties), nudged one f32 ulp
    either way; a sweep of binary32 patterns; the overflow edge, infinities and NaN."""
    vals = []
    for dtype, _ in FP8:
        v = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype).float()
        v = v[torch.isfinite(v)].unique()
        mid = (v[1:] + v[:-1]) / 2  # exact in f32
        vals += [v, mid, torch.nextafter(mid, torch.full_like(mid, math.inf)),
                 torch.nextafter(mid, torch.full_like(mid, -math.inf))]
    sweep = torch.arange(0, 1 << 32, 65521, dtype=torch.int64)
    sweep = torch.where(sweep >= 1 << 31, sweep - (1 << 32), sweep).to(torch.int32).view(torch.float32)
    edge = torch.tensor([448.0, 464.0, 480.0, 1e6, 57344.0, 61440.0, 1e30, math.inf, -math.inf, math.nan])
    return torch.cat([*vals, sweep, edge, -edge]).contiguous()


def test_fp8_narrowing_rounds_to_nearest_even_and_saturates(cuda_lib):
    """cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 against torch's RNE conversion inside each format's range; beyond
    it (infinities included) the largest finite value with the sign (.satfinite), where torch gives NaN (e4m3)
    or inf (e5m2); NaN stays NaN."""
    x = fp8_narrowing_inputs()
    findings, out = run(cuda_lib, 5, x.view(torch.int32), 2 * x.numel(), threads=256)
    assert not findings, findings
    nan = torch.isnan(x)
    for got, (dtype, largest) in zip((out[0::2], out[1::2]), FP8):
        got = got.to(torch.uint8).view(dtype).float()
        assert torch.isnan(got[nan]).all(), f"{dtype}: NaN not kept"
        inside = ~nan & (x.abs() <= largest)
        want = x[inside].to(dtype).float()
        bad = (got[inside] != want).nonzero().flatten()
        assert bad.numel() == 0, [(float(x[inside][i]), float(got[inside][i]), float(want[i])) for i in bad[:8]]
        big = ~nan & (x.abs() > largest)
        # beyond the largest value RNE may still round down to it (inside half an ulp): satfinite clamps the rest
        assert torch.equal(got[big], torch.copysign(torch.full_like(x[big], largest), x[big])), dtype


def test_smem_tile_swizzle(cuda_lib):
    findings, out = run(cuda_lib, 2, torch.zeros(4, dtype=torch.int32), 4)
    assert not findings, findings
    assert out[1] == 18 and out[0] == 0, f"{int(out[0])} failed checks over {int(out[1])} tiles"
    d = (int(out[3]) << 32) | (int(out[2]) & 0xFFFFFFFF)  # make_desc(0x12340, 0x800, 0x400, 1): the ISA's fields
    assert (d & 0x3FFF, (d >> 16) & 0x3FFF, (d >> 32) & 0x3FFF, (d >> 49) & 7, d >> 62) == (0x1234, 0x80, 0x40, 0, 1)


# scenario 20 + i of isa_checks.cu: TmaTile<rows, cols, dtype>
TMA_TILES = [(64, 64, torch.float16), (128, 64, torch.bfloat16), (256, 64, torch.float16), (64, 32, torch.float16),
             (128, 16, torch.bfloat16), (64, 128, torch.float16), (16, 256, torch.bfloat16), (32, 192, torch.float16),
             (128, 128, torch.float32), (64, 64, torch.float32), (8, 64, torch.float16)]
CU_DTYPE = {torch.float16: 6, torch.bfloat16: 9, torch.float32: 7}  # CUtensorMapDataType
CU_SWIZZLE = {32: 1, 64: 2, 128: 3}


@pytest.mark.parametrize("i", range(len(TMA_TILES)), ids=[f"{r}x{c}_{str(d)[6:]}" for r, c, d in TMA_TILES])
def test_tma_tile_offsets_are_where_tma_puts_elements(cuda_lib, i):
    rows, cols, dtype = TMA_TILES[i]
    esize = torch.tensor([], dtype=dtype).element_size()
    swizzle = min(cols * esize, 128)
    bits = torch.arange(rows * cols, dtype=torch.int32).view(rows, cols) * 7 + 1  # distinct, no NaN patterns
    tensor = bits.to(torch.int16 if esize == 2 else torch.int32)
    tm = heddle._C.interp.encode_tensor_map_tiled(CU_DTYPE[dtype], tensor.data_ptr(), [cols, rows], [cols * esize],
                                                  [swizzle // esize, rows], [1, 1], swizzle=CU_SWIZZLE[swizzle])
    findings, out = run(cuda_lib, 20 + i, torch.zeros(4, dtype=torch.int32), rows * cols, smem=rows * cols * esize + 64,
                        tmap=(tm, tensor))
    assert not findings, findings
    want = (bits & 0xFFFF) if esize == 2 else bits
    assert torch.equal(out.view(rows, cols), want), (out.view(rows, cols) != want).nonzero()[:8].tolist()


def test_activations(cuda_lib):
    xs = [-30.0, -6.0, -2.5, -1.0, -0.3, 0.0, 1e-3, 0.5, 1.0, 2.0, 7.0, 30.0]
    special = [float("nan"), -200.0, 200.0]
    words = torch.tensor(xs + special, dtype=torch.float32).view(torch.int32)
    findings, out = run(cuda_lib, 3, words, 6 * words.numel())
    assert not findings, findings
    y = f32_of(out).view(-1, 6).double()
    for i, x in enumerate(xs):
        refs = [max(x, 0.0), 0.5 * x * (1 + math.erf(x / math.sqrt(2))),
                0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
                1 / (1 + math.exp(-x)), x / (1 + math.exp(-x)), math.tanh(x)]
        for j, ref in enumerate(refs):
            assert abs(float(y[i, j]) - ref) <= 2e-6 * (1 + abs(ref)), (x, ["relu", "gelu_erf", "gelu_tanh",
                                                                              "sigmoid", "silu", "tanh"][j])
    n = len(xs)
    assert math.isnan(y[n, 0]), "relu(NaN) must be NaN"
    assert y[n + 1, 4] == 0.0 and y[n + 1, 3] == 0.0 and y[n + 2, 3] == 1.0, "silu / sigmoid saturation"


MISUSE = {  # scenario: (threads, words of `in`, finding kind, words the finding must hold)
    "ldmatrix_divergence": (10, 32, 64, "deadlock", "ldmatrix.x4 (a collective: "),
    "ldmatrix_nonuniform": (11, 32, 64, "error", "divergent collective: thread 3"),
    "ldmatrix_misaligned": (12, 32, 64, "error", "is not 16-byte aligned"),
    "cp_async_oob": (13, 32, 66, "error", "outside every tensor of the launch"),
    "cp_async_src_size": (14, 32, 64, "error", "src-size 12 outside [0, 8]"),
    "copy_tile_oob": (15, 32, 32, "error", "outside every tensor of the launch"),
    "wgmma_nonuniform": (16, 128, 64, "error", "pass different descriptors or operands"),
}


@pytest.mark.parametrize("name", sorted(MISUSE))
def test_misuse_is_refused(cuda_lib, name):
    scenario, threads, n, kind, words = MISUSE[name]
    findings, _ = run(cuda_lib, scenario, torch.zeros(n, dtype=torch.int32), 128, threads=threads)
    assert any(k == kind and words in text for k, text in findings), findings


AMD_MISUSE = {
    "nonuniform_m0": (0, "error", "pass different M0 values"),
    "divergence": (1, "deadlock", "v_mfma_f32_16x16x16_f16 (a collective: "),
    "dma_oob": (2, "error", "outside every tensor of the launch"),
}


@pytest.mark.parametrize("name", sorted(AMD_MISUSE))
def test_amd_misuse_is_refused(amd_lib, name):
    scenario, kind, words = AMD_MISUSE[name]
    findings, _ = run(amd_lib, scenario, torch.zeros(256), 64, threads=64, smem=4096)
    assert any(k == kind and words in text for k, text in findings), findings
