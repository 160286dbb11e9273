"""The interpreter's model of thread-block clusters (src/heddle/interp/rt/hrt_cluster.cpp, multicast TMA in
hrt_async.cpp): the CTAs of a cluster run together under one scheduler, %cluster_ctarank / mapa / remote
mbarrier arrivals / fence.mbarrier_init / barrier.cluster / cp.async.bulk.tensor .multicast::cluster follow
the PTX ISA. A hand-written two-CTA kernel (tests/interp/cluster_multicast.cu: the multicast protocol the
sm_90a kernel is to use) runs clean with float64-right numbers under both schedules, and each source
mutant of the protocol is reported: the peer's release missing, expect_tx not counting the peer's
multicast half, the init fence missing, the cluster barrier before exit missing."""
import json
from pathlib import Path

import pytest
import torch

import heddle
from support.env import requires_nvrtc
from support.interp_defs import needs_cxx

SRC = (Path(__file__).parent / "cluster_multicast.cu").read_text()
KT, CLUSTERS = 5, 3          # an odd number of k-tiles (more than the 2 stages), three clusters of two
SMEM = 2 * (16 * 32 + 32) * 4 + 4 * 8

pytestmark = needs_cxx


def _mutate(tag, new):
    lines = [l for l in SRC.splitlines() if f"MUTANT:{tag}" in l]
    assert len(lines) == 1, tag
    return SRC.replace(lines[0], new)


MUTANTS = {
    # the producer counts only its own consumers and the peer's consumers do not release
    "peer_release": _mutate("peer_count", "      heddle::sm90::mbar_init(&empty[s], 32);").replace(
        [l for l in SRC.splitlines() if "MUTANT:peer_release" in l][0], ""),
    "expect_tx": _mutate("expect_tx", "        heddle::sm90::mbar_arrive_expect_tx(&full[s], (8 * 32 + 16) * 4);"),
    "init_fence": _mutate("init_fence", ""),
    "exit_barrier": _mutate("exit_barrier", ""),
}


@pytest.fixture(scope="module")
def inputs():
    g = torch.Generator().manual_seed(3)
    S = torch.randn(KT * 16, 32, generator=g)
    W = torch.randn(2 * CLUSTERS, KT * 16, generator=g)
    return S, W


def run(src, inputs, schedule="adversarial", seed=0, cluster=2):
    S, W = inputs
    out = torch.full((2 * CLUSTERS, 32), float("nan"))
    enc = heddle._C.interp.encode_tensor_map_tiled
    tmS = enc(7, S.data_ptr(), [32, KT * 16], [32 * 4], [32, 8], [1, 1])
    tmW = enc(7, W.data_ptr(), [KT * 16, 2 * CLUSTERS], [KT * 16 * 4], [16, 1], [1, 1])
    lib = heddle._C.interp.build(src, "cluster_multicast", "sm_90a")
    args = [("ptr", S), ("ptr", W), ("ptr", out), ("i32", KT), ("bytes", tmS), ("bytes", tmW)]
    regions = [("S", S.data_ptr(), S.numel() * 4, False, 4), ("W", W.data_ptr(), W.numel() * 4, False, 4),
               ("out", out.data_ptr(), out.numel() * 4, True, 4)]
    raw = lib.run([2 * CLUSTERS, 1, 1], [64, 1, 1], SMEM, args, ["S", "W", "out", "KT", "tmS", "tmW"], regions,
                  schedule, seed, cluster=cluster)
    report = json.loads(raw)
    return report, out


def findings(report):
    return [(f["kind"], f["text"]) for f in report.get("findings", [])]


@pytest.mark.parametrize("schedule,seed", [("adversarial", 0), ("random", 1), ("random", 2)])
def test_cluster_kernel_runs_clean_with_right_numbers(inputs, schedule, seed):
    report, out = run(SRC, inputs, schedule, seed)
    assert findings(report) == []
    S, W = inputs
    ref = W.double() @ S.double()
    assert torch.allclose(out.double(), ref, rtol=1e-5, atol=1e-5), (out.double() - ref).abs().max()


def test_without_a_cluster_launch_the_peer_does_not_exist(inputs):
    report, _ = run(SRC, inputs, cluster=1)
    assert any("ctaMask 0x3 names a CTA rank beyond the cluster's 1 CTA(s)" in t for _, t in findings(report))


def test_cluster_launches_the_interpreter_cannot_run_are_refused(inputs):
    for cluster in (3, 4):  # grid.x = 6: 4 does not divide it; 3 is above HRT_MAX_CLUSTER
        with pytest.raises(heddle.HeddleError, match="clusters of at most 2 along x"):
            run(SRC, inputs, cluster=cluster)


@pytest.mark.parametrize("mutant,kind,text", [
    ("peer_release", "race", "write-after-read race"),  # the peer's multicast overwrites a slot being read
    ("expect_tx", "async", "landed after its mbarrier phase"),
    ("init_fence", "race", "fence.mbarrier_init"),
    ("exit_barrier", "error", "which has exited"),
])
def test_protocol_mutants_are_reported(inputs, mutant, kind, text):
    hits = []
    for schedule, seed in (("adversarial", 0), ("random", 1), ("random", 2), ("random", 3)):
        report, _ = run(MUTANTS[mutant], inputs, schedule, seed)
        hits += [t for k, t in findings(report) if k == kind and text in t]
        if hits:
            break
    assert hits, f"mutant {mutant} not reported"


@requires_nvrtc
def test_the_cluster_primitives_compile_for_sm90a():
    """The same source through NVRTC: the device header's inline PTX for clusters (mapa, the remote arrive,
    fence.mbarrier_init, barrier.cluster, multicast TMA) is accepted by ptxas for sm_90a, without spills."""
    r = heddle._C.runtime.compile(SRC, "cluster_multicast.cu", "sm_90a", isolate=True)
    st = r.stats
    assert st.spill_stores == 0 and st.spill_loads == 0 and st.stack_frame == 0, r.ptxas
    for ins in ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster",
                "mapa.shared::cluster.u32", "mbarrier.arrive.release.cluster.shared::cluster.b64",
                "fence.mbarrier_init.release.cluster", "barrier.cluster.arrive.release.aligned",
                "barrier.cluster.wait.acquire.aligned", "%cluster_ctarank"):
        assert ins in r.ptx, ins
