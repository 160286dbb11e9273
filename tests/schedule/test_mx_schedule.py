"""The schedule of an MXFP8 matmul (scales="mx32", docs/fp8.md "MX formats", schedule/mx_scales.cpp): targets without
the block-scaled tcgen05 MMA, transposed operands and promotion(k) refused by name; the sm_100a tiling (k tile 128,
n tile 128 or 256, the scale columns of every operand stage in tensor memory beside the accumulators) and the
automatic schedule; what the fused kernel does not build (stream-K, a TMA-loaded epilogue operand, clusters) refused
by name, and the tilings that fit lowered with their tensor-memory allocation. CPU only."""
import pytest

import heddle
from support.mx_defs import mx_definition as definition


def schedule_error(fd, target):
    with pytest.raises(heddle.ScheduleError) as e:
        fd.auto_schedule(target).validate(target)
    return str(e.value)


def test_schedule_rules():
    fd = definition()
    msg = schedule_error(fd, "sm_90a")
    assert f"mx32-scaled matmul {fd.matmul_tensor.name}: mx32 (MXFP8) scales are applied by sm_100a's " \
        "block-scaled tcgen05.mma" in msg and "target sm_90a has no block-scaled MMA" in msg, msg
    assert "target sm_80 has no 8-bit float tensor-core instruction" in schedule_error(definition(), "sm_80")
    assert "operand a is stored [K, M] (trans_a=True)" in schedule_error(definition(trans_a=True), "sm_100a")
    assert "operand b is stored [K, N] (trans_b=False)" in schedule_error(definition(trans_b=False), "sm_100a")
    fd = definition()
    fd.matmul_tensor.promotion(64)
    assert "promotion(64) on mx32-scaled matmul" in schedule_error(fd, "sm_100a")
    definition().auto_schedule("sm_100a").validate("sm_100a")  # lowered: no refusal left on sm_100a


def lower_error(fd):
    with pytest.raises(heddle.ScheduleError) as e:
        fd.lower("sm_100a")
    return str(e.value)


def mx_tiling(bn=128, bk=128, stages=4, acc_stages=0, N=512):
    from support.tcgen05_defs import roles
    from support.wgmma_defs import schedule_sm90
    fd = definition(N=N, K=512)
    a, b = fd.inputs[0], fd.inputs[1]
    schedule_sm90(fd, a, b, bm=128, bn=bn, bk=bk, wgs=1, stages=stages, roles=roles(acc_stages))
    return fd


@pytest.mark.parametrize("kw,want", [
    (dict(bk=64), "k tile 64; the MXFP8 step (MmaSm100Mx) takes k tiles of 128"),
    (dict(bn=64), "n tile 64; B's scales come in chunks of 128 rows of B"),
    (dict(bn=192), "n tile 192; B's scales come in chunks of 128 rows of B"),
    # 2 x 256 accumulator columns and 4 x (4 + 8) scale columns: more than tensor memory's 512
    (dict(bn=256, acc_stages=2), "2 accumulator stages of 256 columns and 48 MX scale columns (4 operand stages) "
                                 "exceed the 512 tensor-memory columns of sm_100a; use stages=1 or a smaller n tile "
                                 "(or fewer operand stages)"),
])
def test_tcgen05_tiling_rules(kw, want):
    msg = lower_error(mx_tiling(**kw))
    assert want in msg, msg


@pytest.mark.parametrize("kw,cols,alloc", [
    (dict(bn=256, acc_stages=1), 256 + 4 * 12, 512),       # one accumulator stage of 256 + 4 x (4 + 8) scale columns
    (dict(bn=128, acc_stages=2, stages=6), 256 + 6 * 8, 512),  # 2 x 128 + 6 x (4 + 4)
    (dict(bn=128), 256 + 4 * 8, 512),                      # the default: two accumulator stages where they fit
    (dict(bn=128, acc_stages=1, stages=2), 128 + 2 * 8, 256),
])
def test_tilings_that_fit_are_lowered(kw, cols, alloc):
    k = mx_tiling(**kw).lower("sm_100a")
    assert f"heddle::sm100::tmem_alloc(tmem_slot, {alloc});" in k.source
    plan = " ".join(e["mechanism"] for e in k.sync_plan)
    assert f" accumulator columns + {kw.get('stages', 4) * (4 + kw['bn'] // 32)} MX scale columns " \
        f"({kw.get('stages', 4)} operand stages x {4 + kw['bn'] // 32})" in plan, plan
    assert f"using Mma = heddle::MmaSm100Mx<{kw['bn']}, T, heddle::e4m3>;" in k.source, k.source[:2000]
    assert cols <= alloc < 2 * cols  # the power of two tcgen05.alloc takes above the sum


@pytest.mark.parametrize("N,bn", [(512, 256), (200, 128)])
def test_automatic_schedule(N, bn):
    fd = definition(N=N, K=512)
    fd.auto_schedule("sm_100a")
    assert f"n.i{{{bn}}}, k.i(r){{128}}]" in fd.matmul_tensor.domain, fd.matmul_tensor.domain
    assert f"MmaSm100Mx<{bn}, T, heddle::e4m3>" in fd.lower("sm_100a").source


def test_what_the_kernel_does_not_build_is_refused_by_name():
    fd = mx_tiling()
    fd.matmul_tensor.stream_k(8)
    assert "stream_k(T4): target sm_100a has no grid-level flags" in lower_error(fd)
    fd = mx_tiling()
    fd.matmul_tensor.cluster(2, "m")
    assert "the sm_100a tcgen05 kernel does not take clusters" in lower_error(fd)


def test_a_tma_loaded_bias_gets_its_producer_role_and_ring():
    # the bias / residual producer role (warp 2) and its ring sit beside the operand ring that carries the chunks
    from support.mx_defs import build_mx
    low = build_mx("e4m3", "e4m3", n=256, k=256, bn=128, stages=2, acc_stages=1, epilogue="bias",
                   tma="bias").lower("sm_100a")
    assert "tmE" in low.source and "tmSFA" in low.source and "tmSFB" in low.source
    assert "ring sA, sB, sSFA, sSFB: 2 stages" in low.sync_summary
    assert "bias ring sE: 2 stage(s), TMA by role 'bias_load' (warp 2) -> epilogue" in low.sync_summary


def test_a_tma_loaded_residual_that_does_not_fit_names_the_buffers():
    # 2 x 50688 bytes of operand stages (A, B and the scale chunks of a 128 x 256 x 128 tile) and a 2-stage ring of
    # 128 x 256 bf16 residual tiles pass sm_100a's 232448 bytes: the error lists the buffers, sE among them
    from support.mx_defs import build_mx
    fd = build_mx("e4m3", "e4m3", n=512, k=256, bn=256, stages=2, acc_stages=1, epilogue="bias", residual=True,
                  tma="res")
    err = lower_error(fd)
    assert "shared memory: the kernel needs" in err and "sE: 131072 bytes" in err and "sSFB: 2048 bytes" in err
