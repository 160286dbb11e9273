"""The schedule of an MXFP8 matmul (scales="mx32", docs/fp8.md "MX formats", schedule/mx_scales.cpp): targets without
the block-scaled tcgen05 MMA, transposed operands and promotion(k) refused by name; the sm_100a tiling (k tile 128,
n tile 128 or 256, the scale columns of every operand stage in tensor memory beside the accumulators) and the
automatic schedule; the lowering still refused by name. CPU only."""
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
    assert "block-scaled tcgen05 kernel" in schedule_error(definition(), "sm_100a")


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


@pytest.mark.parametrize("kw", [dict(bn=256, acc_stages=1), dict(bn=128, acc_stages=2, stages=6), dict(bn=128)])
def test_tilings_that_fit_reach_the_kernel(kw):
    # one accumulator stage of 256 + 48 scale columns fits (alloc 512); 2 x 128 + 6 x 8 = 304 fits too
    msg = lower_error(mx_tiling(**kw))
    assert "block-scaled tcgen05 kernel (scale chunks in the operand ring, tcgen05.cp into tensor memory) is not " \
           "lowered yet" in msg, msg


@pytest.mark.parametrize("N,bn", [(512, 256), (200, 128)])
def test_automatic_schedule(N, bn):
    fd = definition(N=N, K=512)
    fd.auto_schedule("sm_100a")
    assert f"n.i{{{bn}}}, k.i(r){{128}}]" in fd.matmul_tensor.domain, fd.matmul_tensor.domain
    assert "not lowered yet" in lower_error(fd)  # every rule above passed
