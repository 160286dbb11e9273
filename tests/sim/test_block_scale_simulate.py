"""The kernel-IR simulator on the block-scaled sm_90a kernel (docs/fp8.md "Block scales and promotion"): the wgmma
accumulates each promotion interval into tmp, the promotion adds tmp * scale_a[m, kb] * scale_b[n/128, kb] into
acc at the points the kernel IR names. Clean with float64-right numbers (bf16 and e4m3 operands, a partial last
k-block and n-block, both schedules); a wrong promotion interval in the kernel IR (the opt-in mutant
promotion_interval) and the promotion's wait deleted are reported, and every sync mutant of the kernel is killed
but the deletions the promotion makes equivalent."""
import pytest

from heddle import verify
from support.block_scale_defs import block_scaled as fusion, block_scaled_inputs as tensors


@pytest.mark.parametrize("dtype,bk,promotion,k,bn", [("bf16", 64, None, 300, 64), ("bf16", 64, 64, 300, 64),
                                                      ("e4m3", 128, None, 304, 64),   # 8-bit: K a multiple of 16 (TMA)
                                                      ("bf16", 64, None, 300, 128)])  # the 128 x 128 tile
def test_block_scaled_kernel_simulates_clean(dtype, bk, promotion, k, bn):
    fd = fusion(K=k, dtype=dtype, bk=bk, promotion=promotion, bn=bn)   # N = 200: partial last n- and k-block
    low = fd.lower("sm_90a")
    for sched, seed in (("adversarial", 0), ("random", 3)):
        r = verify.simulate(low, tensors(fd, 70, seed=seed), sched, seed, fusion=fd)
        assert r.ok, f"{dtype} promotion {promotion} {sched}:\n{r.report()}"


@pytest.mark.parametrize("bn", [64, 128])
def test_a_wrong_promotion_interval_changes_the_numbers(bn):
    """Every 2 k-tiles of 64 (one 128-block) -> every 4: tmp carries blocks 0 and 1, both scaled with block 1's
    scales (which differ: 2^u per block), so the simulated D moves away from float64."""
    fd = fusion(bn=bn)
    low = fd.lower("sm_90a")
    ins = tensors(fd, 70)
    assert verify.simulate(low, ins, fusion=fd).ok
    (m,) = verify.mutants(low, kinds=["promotion_interval"])
    assert "promote every other interval" in m.description and "% 2" in m.description
    assert "promotion_interval" not in verify.mutation_kinds()   # opt-in: outside the kill rates
    r = verify.simulate(m.kernel(), ins, fusion=fd)
    assert not r.ok and "differ from the reference" in r.report(), r.report()


def test_the_promotions_wait_and_scale_block_are_checked():
    """The wgmma.wait_group(0) before the promotion deleted: the promotion reads tmp with wgmma groups in flight
    (async misuse), whatever the interleaving."""
    fd = fusion()
    low = fd.lower("sm_90a")
    ins = tensors(fd, 70)
    (m,) = [m for m in verify.mutants(low, kinds=["delete_sync"]) if "RAW tmp (wgmma -> promotion)" in m.description]
    r = verify.simulate(m.kernel(), ins, fusion=fd)
    assert not r.ok and "reads tmp while wgmma groups are in flight" in r.report(), r.report()


# the deletions the promotion makes equivalent (docs/fp8.md "Verification"; the interpreter tier's EQUIVALENT
# list for sm90_block, tests/support/mutation_defs.py): the ring's wait_group(keep) in the k loop, whose slot's
# wgmma the promotion's wait_group(0) has already retired (keep >= the interval's k-tiles), and the
# wait_group(0) after the k loop (the last k-tile promoted after its own) -- deleted or loosened by one
EQUIVALENT = {("delete_sync", "WAR sA, sB (wgmma -> tma)"), ("loosen_wait", "WAR sA, sB (wgmma -> tma)"),
              ("delete_sync", "RAW acc (wgmma -> epilogue)"), ("loosen_wait", "RAW acc (wgmma -> epilogue)")}


@pytest.mark.parametrize("dtype,bk,k", [("bf16", 64, 264), pytest.param("e4m3", 128, 272, marks=pytest.mark.slow)])
def test_every_sync_mutant_of_the_block_scaled_kernel_is_flagged_or_equivalent(dtype, bk, k):
    """The simulate tier's kill rate on the block-scaled kernel (sm90_fp8_block): every sync mutant the simulator
    lets through is one of the equivalent deletions above; the promotion's own wait is killed."""
    fd = fusion(N=72, K=k, dtype=dtype, bk=bk)
    low = fd.lower("sm_90a")
    report = verify.kill_rate(low, [tensors(fd, 70, seed=1)], fusion=fd)
    survivors = {(m.kind, next((w for _, w in EQUIVALENT if w in m.description), m.description))
                 for m in report.survivors}
    assert survivors <= EQUIVALENT, str(report)
    assert report.killed >= report.total - 4 and report.total > 20
    assert any("RAW tmp (wgmma -> promotion)" in m.description and v != "SURVIVED" for m, v in report.verdicts)
