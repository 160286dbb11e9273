"""M-aware kernel choice (python/heddle/pytorch/matmul.py over schedule/wgmma_auto_schedule.cpp and autoSplitK): heddle.matmul
keeps M a run-time argument and compiles one kernel per M bucket (<= 64, <= 128, <= 256, larger) on first
use; small M gets 64-row tiles and split-K when the tiles fill less than half the SMs. Deterministic and
printable (FusedMatmul.describe); HEDDLE_AUTOTUNE=1 overrides it per bucket (tests/tuning/test_autotune.py)."""
import torch

import heddle
from heddle.api import DEFAULT_SMS, fused_matmul_op, m_bucket
from support.env import requires_nvrtc
from support.bucket_defs import spec
from support.interp_defs import needs_cxx


def test_buckets():
    assert [m_bucket(m) for m in (0, 1, 64, 65, 128, 129, 256, 257, 100000, -1)] == \
        [64, 64, 64, 128, 128, 256, 256, -1, -1, -1]


def test_decode_shapes_get_64_row_tiles_and_split_k_on_sm90():
    fm = fused_matmul_op(spec())
    lines = fm.describe("sm_90a", sms=132).split("\n")
    assert [ln.split(":")[0] for ln in lines] == ["M <= 64", "M <= 128", "M <= 256", "M > 256"]
    # 4096 columns: 32 tiles of 128 on 132 SMs -> 4 splits (K = 4096: 16 k-tiles per split)
    assert "tile 64x128x64" in lines[0] and "split_k(4)" in lines[0] and lines[0].split(": ")[1].endswith("_sk4_ev2")
    assert "tile 128x128x64" in lines[1] and "split_k(4)" in lines[1]
    assert "tile 128x256x64" in lines[2] and "split_k(4)" in lines[2]  # 2 x 16 tiles
    # the persistent warp-specialized kernel; the bias + GELU epilogue: ping-pong MMA warpgroups (128x128 tiles)
    assert "split_k" not in lines[3] and "_ws2pp_40_232" in lines[3] and "tile 128x128x64" in lines[3]
    assert "epilogue: ping-pong MMA warpgroups: one's epilogue overlaps the other's mainloop" in lines[3]
    assert fm.describe("sm_90a", sms=132) == "\n".join(lines)  # deterministic


def test_split_k_only_when_tiles_leave_sms_idle():
    wide = fused_matmul_op(spec(n=11008))
    lines = wide.describe("sm_90a", sms=132).split("\n")
    assert "split_k" not in lines[0]  # 172 tiles of 64x128 fill 132 SMs
    assert "split_k" not in fused_matmul_op(spec(n=4096)).describe("sm_90a", sms=32).split("\n")[1]  # 32 tiles, 32 SMs
    short_k = fused_matmul_op(spec(k=256)).describe("sm_90a", sms=132).split("\n")
    assert "split_k" not in short_k[0]  # 4 k-tiles: each split would keep fewer than 4
    sm80 = fused_matmul_op(spec()).describe("sm_80", sms=108).split("\n")
    assert "split_k(3)" in sm80[0] and "split_k" not in sm80[3]  # 32 tiles of 64x128 on 108 SMs


def test_kernels_are_kept_per_sm_count(monkeypatch):
    """The split-K choice depends on the SM count, so a kernel made for one count is never served for another
    (FusedMatmul.kernel's cache key holds it)."""
    fm = fused_matmul_op(spec(n=4096, k=4096, activation="relu"))
    many = fm.kernel("sm_90a", 8, 8, 16, rtc=False, sms=132)
    few = fm.kernel("sm_90a", 8, 8, 16, rtc=False, sms=32)
    assert many.lowered.split_k == 4 and few.lowered.split_k == 1  # 32 tiles of 64x128: 132 SMs split, 32 do not
    assert fm.kernel("sm_90a", 8, 8, 16, rtc=False, sms=132) is many and fm.kernel("sm_90a", 8, 8, 20, rtc=False,
                                                                                     sms=32) is few
    import heddle.pytorch.matmul as hm
    monkeypatch.setattr(hm, "_sm_count", lambda: 32)  # sms=0: the current device's count (here: stands in)
    assert fm.kernel("sm_90a", 8, 8, 16, rtc=False) is few


def test_auto_schedule_without_sms_never_splits():
    fd = spec().build_fusion()
    fd.auto_schedule("sm_90a", 16, 4096, 4096)
    assert fd.matmul_tensor._tv.splits == 1
    fd = spec().build_fusion()
    fd.auto_schedule("sm_90a", 16, 4096, 4096, sms=132)
    assert fd.matmul_tensor._tv.splits == 4


@needs_cxx
def test_matmul_compiles_once_per_bucket_and_runs_split_k(monkeypatch):
    monkeypatch.setenv("HEDDLE_INTERPRET", "1")
    monkeypatch.setenv("HEDDLE_INTERPRET_TARGET", "sm_90a")
    g = torch.Generator().manual_seed(0)
    w = (torch.randn(128, 512, generator=g) * 0.1).bfloat16()
    b = torch.randn(128, generator=g).bfloat16()
    fm = fused_matmul_op(spec(n=128, k=512))
    before = fm.compiles
    for m in (3, 50):  # one bucket: one kernel
        x = (torch.randn(m, 512, generator=g) * 0.1).bfloat16()
        y = heddle.matmul(x, w, bias=b, activation="gelu", trans_b=True)
        ref = torch.nn.functional.gelu(x.float() @ w.float().T + b.float())
        assert torch.allclose(y.float(), ref, atol=4e-2, rtol=2e-2)
    assert fm.compiles == before + 1
    k = fm.kernel("sm_90a", 8, 8, 3, rtc=False, sms=DEFAULT_SMS)
    assert k.name.endswith("_sk2") and k.lowered.split_k == 2  # 1 tile, 8 k-tiles: 2 splits of 4


@requires_nvrtc
def test_bucket_kernels_compile_without_spills():
    # what heddle.matmul launches for x[M, 4096] @ W^T on an H100 (132 SMs), per bucket, through NVRTC
    fm = fused_matmul_op(spec())
    for m, tail in ((16, "_sk4"), (100, "_sk4"), (200, "_sk4")):
        k = fm.kernel("sm_90a", 8, 8, m, sms=132)
        st = k.stats
        assert k.name.endswith(tail) and st.spill_stores == 0 and st.spill_loads == 0 and st.stack_frame == 0, \
            (k.name, k.ptxas)
        assert "ld.acquire.gpu.global.b32" in k.ptx and "wgmma.mma_async" in k.ptx


def test_setting_k_share_drops_the_eager_plans():
    """The eager plan table is keyed by the call signature only: a new k_share must not keep launching the
    kernels chosen under the old one."""
    fm = fused_matmul_op(spec(n=4096, k=4096, activation="relu"))
    cleared = []

    class Table:
        def clear(self):
            cleared.append(True)
    fm._eager = Table()
    assert fm.k_share == "auto"
    fm.k_share = "none"
    assert fm.k_share == "none" and cleared == [True]
    assert fused_matmul_op(spec(n=2048, k=4096)).k_share == "auto"  # per op, not per class
