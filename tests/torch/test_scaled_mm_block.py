"""heddle.scaled_mm with DeepGEMM's 128-block scales (torch's BlockWise1x128 x BlockWise128x128: scale_a
[M, ceil(K/128)], scale_b [ceil(K/128), ceil(N/128)]) and their torch.compile capture from torch._scaled_mm and
torch.nn.functional.scaled_mm: the printed block-scaled sm_90a kernel interpreted on CPU tensors against float64
on ragged shapes (a partial last k-block and n-block), each wrong scale an InputError naming it, the op's name,
the automatic schedule's tile (docs/fp8.md "Block scales and promotion", "Python and torch")."""
import pytest
import torch
import torch.nn.functional as F

import heddle
import heddle.dynamo as hd
from heddle.core.errors import InputError
from heddle.core.reference import block_scaled_matmul
from heddle.pytorch import scaled_mm as smm
from support.dynamo_defs import scaled_decision

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


def _operands(m, k, n, da=E4M3, db=E4M3, seed=0):
    """a [M, K], b [K, N] column-major, and block scales 2^u (u in -3..3) in torch's shapes, so that a scale
    taken from the wrong block changes the numbers."""
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(m, k, generator=g) * 2).to(da)
    b = (torch.randn(n, k, generator=g) * 2).to(db).t()
    kb, nb = -(-k // 128), -(-n // 128)
    sa = torch.exp2(torch.randint(-3, 4, (m, kb), generator=g).float())
    sb = torch.exp2(torch.randint(-3, 4, (kb, nb), generator=g).float())
    return a, b, sa, sb


def _reference(a, b, sa, sb, bias=None):
    """float64: sum over k-blocks of the block products times sa[m, kb] * sb[kb, n // 128] (heddle's reference
    takes scale_b as [ceil(N/128), ceil(K/128)], the transpose of torch's)."""
    y = block_scaled_matmul(a.double(), b.double(), sa.double(), sb.double().t())
    return y if bias is None else y + bias.double()


def _close(out, ref, bits=8):
    err = (out.double() - ref).abs().max().item()
    assert err <= ref.abs().max().item() * 2.0 ** -bits + 1e-6, err


def test_block_scaled_reference_is_the_blockwise_sum():
    """The float64 reference written out element by element for one (m, n)."""
    a, b, sa, sb = _operands(3, 272, 144)
    ref = _reference(a, b, sa, sb)
    m, n = 2, 130   # n in the second 128-column block
    want = sum(float(a[m, k].float()) * float(b[k, n].float()) * float(sa[m, k // 128]) * float(sb[k // 128, n // 128])
               for k in range(272))
    assert abs(ref[m, n].item() - want) <= 1e-9 * max(1.0, abs(want))


def test_block_scales_make_a_block_spec_and_op_name():
    a, b, sa, sb = _operands(40, 320, 144)
    spec, args = smm.scaled_spec(a, b, sa, sb, torch.randn(144, dtype=torch.bfloat16), activation="gelu")
    assert spec.block and not spec.row_a and not spec.col_b
    assert spec.op_name() == "smm_e4m3e4m3_k320_n144_sbb_Bbf16_Agelu_obf16"
    assert smm.decode(spec.op_name()) == spec
    # the op takes scale_b as [ceil(N/128), ceil(K/128)], contiguous: heddle's block128 layout
    assert tuple(args[3].shape) == (2, 3) and args[3].is_contiguous() and torch.equal(args[3], sb.t())
    assert args[2] is sa  # scale_a as given: the op brings it M-major (its TMA map's layout) where it is not
    fd = spec.build_fusion()
    assert "block128 scales scale_a, scale_b" in str(fd)


def test_the_op_takes_torchs_m_major_scale_a_without_a_copy(monkeypatch):
    """torch's BlockWise1x128 scale_a is M-major: with M a multiple of 4 it reaches the kernel as it is; a
    row-major one is copied M-major (M padded to 4) by the op (docs/fp8.md "The scales' path")."""
    seen = []
    monkeypatch.setattr(smm.FusedMatmul, "full", lambda self, tensors: seen.append(tensors[2]) or
                        torch.zeros(tensors[0].shape[0], 144, dtype=torch.bfloat16))
    a, b, sa, sb = _operands(40, 320, 144)
    m_major = sa.t().contiguous().t()
    heddle.scaled_mm(a, b, m_major, sb, out_dtype=torch.bfloat16)
    assert seen[-1] is m_major
    heddle.scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)  # row-major: an M-major copy
    assert seen[-1].stride() == (1, 40) and torch.equal(seen[-1], sa)


def test_automatic_schedule_takes_the_block_scaled_tile():
    """heddle.matmul's automatic sm_90a schedule on a block-scaled matmul: cooperative MMA warpgroups with bn = 64
    (acc and tmp, 32 + 32 accumulators per thread), bk = 128 for 8-bit operands, no k sharing even where the
    tiles leave SMs idle."""
    a, b, sa, sb = _operands(16, 4096, 512)
    spec, _ = smm.scaled_spec(a, b, sa, sb)
    fm = smm.scaled_op(spec)
    for bucket, bm in ((64, 64), (-1, 128)):
        low = fm.schedule("sm_90a", 8, 8, bucket, sms=132).lower("sm_90a", 8, 8)
        assert (low.tile["bm"], low.tile["bn"], low.tile["bk"]) == (bm, 64, 128), low.tile
        assert "_bs128p128" in low.name and "ws2coop" in low.name and "acc.promote(" in low.source
    fd = spec.build_fusion()
    with pytest.raises(heddle.ScheduleError, match="epilogue_layout = 'pingpong' is not built with block scales"):
        fd.auto_schedule("sm_90a", -1, 512, 4096, epilogue_layout="pingpong")


@pytest.mark.parametrize("m,k,n,db,out", [(40, 320, 144, E4M3, torch.bfloat16),   # partial last k- and n-block
                                          (72, 256, 64, E5M2, torch.float32)])    # e4m3 x e5m2, two full k-blocks
def test_block_scaled_mm_interprets_against_float64(monkeypatch, m, k, n, db, out):
    """HEDDLE_INTERPRET=1: the printed block-scaled kernel runs on the CPU (sm_90a), against float64."""
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    a, b, sa, sb = _operands(m, k, n, db=db)
    bias = torch.randn(n, dtype=torch.bfloat16)
    # DeepGEMM keeps scale_a M-major (stride (1, M)); heddle.scaled_mm makes it contiguous
    y = heddle.scaled_mm(a, b, sa.t().contiguous().t(), sb, bias=bias, out_dtype=out)
    assert y.dtype == out and y.shape == (m, n)
    _close(y, _reference(a, b, sa, sb, bias), bits=8 if out == torch.bfloat16 else 20)
    (fm,) = [f for s, f in smm._ops.items() if s.block and s.k == k and s.n == n and s.dtype_b == smm.FLOAT8[db]
             and s.out_dtype == smm.OUT_DTYPES[out] and s.bias == "bf16"]
    assert {key[0] for key in fm.kernels} == {"sm_90a"}
    # a wrong block: the numbers move (the scales are not all equal)
    wrong = heddle.scaled_mm(a, b, sa.roll(1, dims=1), sb, bias=bias, out_dtype=out)
    assert (wrong.double() - y.double()).abs().max() > 1e-2


def test_block_scaled_mm_without_interpreter_evaluates_the_fusion(monkeypatch):
    monkeypatch.delenv("HEDDLE_INTERPRET", raising=False)
    a, b, sa, sb = _operands(24, 384, 208)
    _close(heddle.scaled_mm(a, b, sa, sb, out_dtype=torch.float32), _reference(a, b, sa, sb), bits=20)


def test_interpreted_target_of_block_scales(monkeypatch):
    """The block-scaled kernel is wgmma's: HEDDLE_INTERPRET_TARGET=sm_100a (tcgen05) still interprets sm_90a."""
    monkeypatch.setenv("HEDDLE_INTERPRET_TARGET", "sm_100a")
    assert smm.interpret_target_fp8() == "sm_100a" and smm.interpret_target_fp8(wgmma_only=True) == "sm_90a"


def _args(**over):
    a, b, sa, sb = _operands(32, 256, 144)
    args = dict(a=a, b=b, scale_a=sa, scale_b=sb)
    args.update(over)
    return args


@pytest.mark.parametrize("over,match", [
    (dict(scale_a=torch.ones(32, 3)), r"'scale_b' is 128x128 blocks \[2, 2\], so 'scale_a' must be 1x128 blocks "
                                      r"\[M, ceil\(K/128\)\] = \[32, 2\]; got \[32, 3\]"),
    (dict(scale_a=torch.ones(32, 1)), r"'scale_a' must be 1x128 blocks .* got \[32, 1\]"),
    (dict(scale_b=torch.ones(2, 144)), r"'scale_b' \[2, 144\] is 1x128 blocks of b \(BlockWise1x128\)"),
    (dict(scale_b=torch.ones(1, 144)), r"'scale_a' is 1x128 blocks \[32, 2\] but 'scale_b' is \[1, 144\]"),
    (dict(scale_b=torch.tensor(1.0)), r"'scale_a' is 1x128 blocks \[32, 2\] but 'scale_b' is \[\]"),
    (dict(scale_b=torch.ones(2, 3)), r"'scale_a' is 1x128 blocks \[32, 2\], so 'scale_b' must be 128x128 blocks "
                                     r"\[ceil\(K/128\), ceil\(N/128\)\] = \[2, 2\]; got \[2, 3\]"),
    (dict(scale_a=torch.ones(32, 5), scale_b=torch.ones(2, 3)),
     r"'scale_a' has shape \[32, 5\].*or 128-block scales: scale_a \[M, ceil\(K/128\)\] with scale_b"),
    (dict(scale_b=torch.ones(2, 2, dtype=torch.bfloat16)), r"'scale_b' has dtype torch.bfloat16; scales are "
                                                           r"torch.float32"),
])
def test_block_scale_errors_name_the_scale(over, match):
    with pytest.raises(InputError, match=match):
        heddle.scaled_mm(**_args(**over))


@pytest.mark.usefixtures("_fresh_dynamo")
def test_compile_captures_block_scaled_scaled_mm(monkeypatch):
    """torch._scaled_mm with (BlockWise1x128, BlockWise128x128) scales + bias + relu: one heddle op, its printed
    kernel interpreted (torch's CPU op has no block scales, so the graph runs only through heddle)."""
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    a, b, sa, sb = _operands(40, 320, 144)
    bias = torch.randn(144, dtype=torch.bfloat16)

    def f(a, b, sa, sb, bias):
        return torch.relu(torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16) + bias)
    out = torch.compile(f, backend="heddle", options={"fallback": "eager"})(a, b, sa, sb, bias)
    _close(out, torch.relu(_reference(a, b, sa, sb, bias)))
    ex = hd.explain(f, a, b, sa, sb, bias, fallback="eager")
    assert ex.heddle_ops == ["smm_e4m3e4m3_k320_n144_sbb_Bbf16_Arelu_obf16"]


@pytest.mark.usefixtures("_fresh_dynamo")
@pytest.mark.skipif(not hasattr(F, "scaled_mm"), reason="torch.nn.functional.scaled_mm is newer than this torch")
def test_compile_captures_functional_blockwise_scaled_mm(monkeypatch):
    """F.scaled_mm's BlockWise1x128 / BlockWise128x128 recipes in their _scaled_mm_v2 layouts (scale_a stride
    (1, M), scale_b [round_up(K/128, 4), N/128] stride (1, rows)): the padded rows sliced off in the graph."""
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    a, b, sa, sb = _operands(48, 256, 128)
    sa_v2 = sa.t().contiguous().t()
    pad = torch.full((4, 1), 1e3)
    pad[:2] = sb
    sb_v2 = pad.t().contiguous().t()    # [4, 1]: rows 2 and 3 are padding (never read)
    ST = F.ScalingType

    def f(a, b, sa, sb):
        return F.scaled_mm(a, b, sa, ST.BlockWise1x128, sb, ST.BlockWise128x128, output_dtype=torch.float32)
    out = torch.compile(f, backend="heddle", options={"fallback": "eager"})(a, b, sa_v2, sb_v2)
    _close(out, _reference(a, b, sa, sb), bits=20)
    ex = hd.explain(f, a, b, sa_v2, sb_v2, fallback="eager")
    assert ex.heddle_ops == ["smm_e4m3e4m3_k256_n128_sbb_of32"]


@pytest.mark.skipif(not hasattr(F, "scaled_mm"), reason="torch.nn.functional.scaled_mm is newer than this torch")
def test_capture_leaves_other_blockwise_recipes_to_torch():
    """BlockWise1x128 for both operands (torch's meta accepts it: scale_b [N, K/128] stride (1, N); torch's CPU op
    runs none of the blockwise recipes, so the graph is traced with fake tensors) is not heddle's kernel: the node
    stays with torch, the reason names the recipes heddle takes."""
    from torch.fx.experimental.proxy_tensor import make_fx
    a, b, sa, _ = _operands(32, 256, 128)
    ST = F.ScalingType
    gm = make_fx(lambda a, b, sa, sb: F.scaled_mm(a, b, sa, ST.BlockWise1x128, sb, ST.BlockWise1x128,
                                                  output_dtype=torch.bfloat16),
                 tracing_mode="fake")(a, b, sa.t().contiguous().t(), torch.ones(2, 128).t())
    d, graph = scaled_decision(gm, "sm_90a", "_scaled_mm_v2")
    assert d.status == "not fused" and "BlockWise1x128 for a with BlockWise128x128 for b" in d.reason, d.reason
    assert not [n for n in graph.nodes if "heddle" in str(n.target)]


@pytest.mark.parametrize("target,fused", [("sm_90a", True), ("sm_100a", False)])
def test_capture_of_block_scales_follows_the_target(target, fused):
    """A CUDA graph for sm_100a keeps torch's blockwise _scaled_mm: the block-scaled kernel is wgmma's."""
    from torch.fx.experimental.proxy_tensor import make_fx
    a, b, sa, sb = _operands(32, 256, 144)
    d, _ = scaled_decision(make_fx(lambda a, b, sa, sb: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16),
                                   tracing_mode="fake")(a, b, sa, sb), target)
    if fused:
        assert d.status == "fused" and "smm_e4m3e4m3_k256_n144_sbb_obf16" in d.reason
    else:
        assert d.status == "not fused" and "target sm_100a has none" in d.reason, d.reason
