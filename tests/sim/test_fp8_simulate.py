"""The kernel-IR simulator on the sm_90a FP8 kernels (docs/fp8.md): clean under the adversarial and a random
schedule, with numbers within the output format's tolerance of float64, for every scale kind, e4m3 / e5m2
mixes and 8-bit outputs (the simulator rounds them as cvt.rn.satfinite does, verify/numeric.cpp)."""
import pytest

from heddle import verify
from support.fp8_defs import fp8_fusion, fp8_schedule, inputs


@pytest.mark.parametrize("variant,ab,scale,out", [
    ("coop", ("e4m3", "e4m3"), "row", "e4m3"),
    ("pingpong", ("e5m2", "e4m3"), "tensor", "bf16"),
    ("pipeline", ("e4m3", "e5m2"), "mixed", "e5m2"),
    ("coop", ("e5m2", "e5m2"), "none", "f32"),
])
def test_fp8_kernels_simulate_clean(variant, ab, scale, out):
    fd, a, b = fp8_fusion(n=72, k=528, a_dtype=ab[0], b_dtype=ab[1], scale=scale, bias=True, act="gelu", out=out,
                          out_scale=out in ("e4m3", "e5m2"))
    fp8_schedule(fd, a, b, variant=variant, bm=128 if variant == "coop" else 64)
    low = fd.lower("sm_90a")
    for i, M in enumerate((200, 77)):
        for sched, seed in (("adversarial", 0), ("random", i + 1)):
            r = verify.simulate(low, inputs(fd, M, seed=M), sched, seed)
            assert r.ok, f"{variant} {ab} {scale} M={M} {sched}:\n{r.report()}"
