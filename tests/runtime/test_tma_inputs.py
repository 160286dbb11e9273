"""What TMA can take, and what heddle does with the rest: InputError naming the tensor and the rule
for a Hopper kernel, the cp.async schedule when heddle.matmul chooses; the host side of tensor maps
(dims, byte strides, boxes, swizzle) and the persistent grid, all checked without a GPU."""
import pytest
import torch

import heddle
from support.env import requires_nvrtc
from heddle import tma
from heddle.api import MatmulSpec, fused_matmul_op
from support.wgmma_defs import build


def bf(*shape):
    return torch.zeros(*shape, dtype=torch.bfloat16)


# --- the rules ----------------------------------------------------------------------------------

def test_tma_accepts_aligned_row_major_tensors():
    assert tma.tma_problem(bf(64, 128)) is None
    assert tma.tma_problem(bf(3, 64, 128)) is None
    assert tma.tma_problem(bf(64, 136)[:, :128]) is None  # padded rows: 272-byte stride


def test_tma_refuses_a_misaligned_base():
    t = bf(64, 129)[:, 1:]
    assert "base address" in tma.tma_problem(t) and "16-byte aligned" in tma.tma_problem(t)


def test_tma_refuses_strides_that_are_not_16_byte_multiples():
    why = tma.tma_problem(bf(64, 100)[:, :96])
    assert "stride along axis 0 is 100 elements = 200 bytes" in why and "multiple of 8" in why


def test_tma_refuses_a_last_stride_other_than_one():
    why = tma.tma_problem(bf(128, 64).t())
    assert "last axis has stride 64" in why and "last stride 1" in why


def test_tma_refuses_rank_above_five():
    assert "at most 5" in tma.tma_problem(bf(1, 1, 1, 1, 2, 8))


def test_tma_refuses_a_zero_stride():
    # an expand()ed operand: stride 0 is a multiple of 16 bytes, but cuTensorMapEncodeTiled refuses it
    why = tma.tma_problem(bf(1, 512).expand(200, 512))
    assert "stride along axis 0 is 0" in why and "expand()" in why and ".contiguous()" in why
    assert tma.tma_problem(bf(1, 512).expand(1, 512)) is None  # one row: its stride is never stepped
    from heddle.pytorch.matmul import _broadcast_batch
    assert _broadcast_batch([bf(1, 512).expand(200, 512), bf(512, 256)])  # heddle.matmul takes cp.async


# --- a compiled Hopper kernel -------------------------------------------------------------------

@pytest.fixture(scope="module")
def hopper_kernel():
    fd = build("coop", stages=4, prefetch=2, bm=128, bn=128, bk=64, n=256, k=512)
    return heddle.Kernel.build(fd, "sm_90a")


@requires_nvrtc
@pytest.mark.parametrize("make,rule", [
    (lambda: bf(200, 513)[:, 1:], "base address"),
    (lambda: bf(200, 520)[:, :512][:, :], None),
    (lambda: bf(200, 516)[:, :512], "not a multiple of 16"),
    (lambda: bf(512, 200).t(), "last axis has stride"),
])
def test_hopper_kernel_refuses_inputs_tma_cannot_take(hopper_kernel, monkeypatch, make, rule):
    monkeypatch.setattr(tma, "_encode", lambda *a, **k: b"\0" * 128)  # no driver here
    a = make()
    b, bias = bf(512, 256), bf(256)
    if rule is None:
        hopper_kernel.prepare([a, b, bias])  # 16-byte rows: fine
        return
    with pytest.raises(heddle.InputError) as ei:
        hopper_kernel.prepare([a, b, bias])
    msg = str(ei.value)
    assert "input 'a'" in msg and "TMA" in msg and rule in msg and "cp.async kernel" in msg


@requires_nvrtc
def test_hopper_kernel_refuses_an_expanded_operand(hopper_kernel, monkeypatch):
    a, b, bias = bf(1, 512).expand(200, 512), bf(512, 256), bf(256)
    encode = heddle._C.interp.encode_tensor_map_tiled  # the interpreter's encoder, which follows the driver
    with pytest.raises(heddle.InputError) as ei:
        hopper_kernel.prepare([a, b, bias], tensor_map_encoder=encode)
    msg = str(ei.value)
    assert "input 'a'" in msg and "stride along axis 0 is 0" in msg and ".contiguous()" in msg
    monkeypatch.setattr(tma, "check_operands", lambda *a: None)  # past the input check: the encoder refuses it
    with pytest.raises(Exception, match=r"globalStrides\[0\] = 0"):
        hopper_kernel.prepare([a, b, bias], tensor_map_encoder=encode)


@requires_nvrtc
def test_tensor_maps_and_persistent_grid_on_the_host(hopper_kernel, monkeypatch):
    calls = []
    monkeypatch.setattr(tma, "_encode", lambda t, es, dt, rows, cols, ld, bc, br, sw, batch=0, bs=0, l2_promotion=0, box_depth=1,
                        what="": calls.append((dt, rows, cols, ld, bc, br, sw, what)) or b"\1" * 128)
    a, b, bias = bf(1000, 512), bf(512, 256), bf(256)
    out, grid, args = hopper_kernel.prepare([a, b, bias])
    # A [M][K] (K-major, 64-wide k tile: one 128-byte-swizzled box of 64 x 128 rows), B [K][N]
    # (N-major: 64-element boxes of the 64 k rows); each named for the driver's error (DriverError)
    name = hopper_kernel.name
    assert calls == [("bf16", 1000, 512, 512, 64, 128, 128, f"operand A (input 'a') of kernel {name} (tensor map tmA)"),
                     ("bf16", 512, 256, 256, 64, 64, 128, f"operand B (input 'b') of kernel {name} (tensor map tmB)")]
    names = [p[0] for p in hopper_kernel.lowered.params]
    assert args[names.index("tmA")] == ("bytes", b"\1" * 128)
    tiles = 8 * 2
    assert args[names.index("num_ctas")] == ("i32", min(tiles, 132)) and grid == (min(tiles, 132), 1, 1)
    assert out.shape == (1000, 256)


@requires_nvrtc
def test_tensor_maps_ask_for_l2_promotion(hopper_kernel):
    # the encoder's own arguments (as cuTensorMapEncodeTiled gets them) and the encoded descriptor
    seen = []

    def encoder(*args, **kw):
        seen.append(kw)
        return heddle._C.interp.encode_tensor_map_tiled(*args, **kw)

    assert [(m["param"], m["l2_promotion"]) for m in hopper_kernel.lowered.tensor_maps] == [("tmA", 256), ("tmB", 256)]
    _, _, args = hopper_kernel.prepare([bf(1000, 512), bf(512, 256), bf(256)], tensor_map_encoder=encoder)
    assert [kw["l2_promotion"] for kw in seen] == [3, 3]  # CU_TENSOR_MAP_L2_PROMOTION_L2_256B
    names = [p[0] for p in hopper_kernel.lowered.params]
    for p in ("tmA", "tmB"):
        kind, desc = args[names.index(p)]
        assert kind == "bytes" and desc[10] == 3  # the interpreter's TensorMap keeps it at byte 10 (hrt_ptx.h)


@requires_nvrtc
def test_stored_output_map_asks_for_no_l2_promotion():
    fd = build("3role", stages=3, prefetch=1, bm=64, bn=64, bk=64, n=128, k=256, layout="NT")
    k = heddle.Kernel.build(fd, "sm_90a")
    assert {m["param"]: m["l2_promotion"] for m in k.lowered.tensor_maps} == {"tmA": 256, "tmB": 256, "tmD": 0}


@requires_nvrtc
def test_tma_store_output_rule(monkeypatch):
    monkeypatch.setattr(tma, "_encode", lambda *a, **k: b"\0" * 128)
    fd = build("3role", stages=3, prefetch=1, bm=64, bn=64, bk=64, n=100, k=256, layout="NT")  # b: [N][K]
    k = heddle.Kernel.build(fd, "sm_90a")
    with pytest.raises(heddle.InputError, match=r"output 0 of .*TMA.*N=100 gives 200"):
        k.prepare([bf(64, 256), bf(100, 256), bf(100)])


# --- automatic choice -----------------------------------------------------------------------------

def test_auto_schedule_picks_tma_and_roles_on_sm90a():
    from support.matmul_defs import matmul_fusion
    fd, a, b = matmul_fusion(n=4096, k=4096, dtype="bf16")
    fd.auto_schedule("sm_90a", -1, 4096, 4096, epilogue_layout="cooperative")
    low = fd.lower("sm_90a")
    assert low.tensor_maps and "_ws2coop_40_232" in low.name and "128x256x64" in low.name
    fd, a, b = matmul_fusion(n=4096, k=4096, dtype="bf16")
    fd.auto_schedule("sm_90a", 32, 4096, 4096)  # decode-like M: one warpgroup, 64-row tiles
    assert "64x" in fd.lower("sm_90a").name
    fd, a, b = matmul_fusion(n=4096, k=4096, dtype="bf16")
    fd.auto_schedule("sm_90a", -1, 4096, 4096, tma=False)  # operands TMA cannot take: cp.async
    low = fd.lower("sm_90a")
    assert not low.tensor_maps and "cp_async" in low.name


def test_auto_schedule_sm80_unchanged():
    from support.matmul_defs import matmul_fusion
    fd, a, b = matmul_fusion(n=256, k=256)
    fd.auto_schedule("sm_80")
    assert "cp_async" in fd.lower("sm_80").name


@requires_nvrtc
def test_heddle_matmul_routes_by_alignment():
    spec = MatmulSpec(dtype="bf16", batched=False, batched_b=False, k=512, n=256, trans_a=False, trans_b=False,
                      bias=None, residual=None, activation=None, alpha=None, out_dtype="bf16")
    fm = fused_matmul_op(spec)
    k_tma = fm.kernel("sm_90a", 8, 8)
    assert k_tma.lowered.tensor_maps and "sm90" in k_tma.name
    k_cp = fm.kernel("sm_90a", 4, 8)  # a row stride that is not a multiple of 8 elements
    assert not k_cp.lowered.tensor_maps and "cp_async" in k_cp.name


def test_batched_auto_schedule_uses_the_warp_specialized_batch_walk():
    # the persistent walk covers batch x m-tiles x n-tiles (tests/lower/test_role_pipeline_batched.py): every map is 3-D
    from support.matmul_defs import matmul_fusion
    fd, a, b = matmul_fusion(n=256, k=512, dtype="bf16", batched=True)
    fd.auto_schedule("sm_90a", -1, 256, 512)
    low = fd.lower("sm_90a")
    assert "_ws2coop_" in low.name and low.tile["batch_walk"]
    assert [m["param"] for m in low.tensor_maps] == ["tmA", "tmB", "tmD"]
    assert all(m["batched"] for m in low.tensor_maps)


def test_block_scales_take_scale_a_m_major():
    """The block-scaled kernel's scale_a [M, ceil(K/128)] is the M-major storage of its TMA map (ring slots,
    lower/passes/block_scale_ring.cpp): torch's BlockWise1x128 layout passes as it is, anything else is
    copied by tma.m_major_scales (M padded to a multiple of 4) and refused at launch by name."""
    sa = torch.rand(8, 3).t().contiguous().t()  # M-major, M = 8: torch's layout
    assert tma.scale_a_layout_problem(sa) is None and tma.m_major_scales(sa) is sa
    rm = torch.rand(70, 3)  # row-major; M = 70 pads to 72
    mm = tma.m_major_scales(rm)
    assert mm.stride() == (1, 72) and torch.equal(mm, rm)
    assert "not M-major" in tma.scale_a_layout_problem(rm)
    assert "k-block stride is 70" in tma.scale_a_layout_problem(rm.t().contiguous().t())
    from heddle.interpret import interpret
    from support.block_scale_defs import block_scaled, block_scaled_inputs
    fd = block_scaled(N=72, K=264)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    args = block_scaled_inputs(fd, 70)
    args[2] = args[2].contiguous()  # row-major scale_a
    with pytest.raises(heddle.InputError, match=r"input 'sa' \(scale_a\): the kernel loads it by TMA from its "
                                                r"M-major layout, but it is not M-major .*m_major_scales\(sa\)"):
        interpret(k, *args)  # refused with the launch's checks, before the source is compiled
