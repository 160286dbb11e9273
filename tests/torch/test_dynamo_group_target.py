"""torch.compile(backend="heddle"): which matmul groups form depends on the target the graph's heddle ops run on
(heddle/pytorch/group_op.py group_rewrites; the rule is C++'s TargetInfo::matmulGroup). sm_80: gated pairs and
merged q / k / v; sm_90a / sm_100a: gated pairs only (a group runs mma.sync where a single matmul gets TMA +
wgmma / tcgen05); AMD: no groups (the target refuses them). The device target is faked (group_op.graph_target);
the ops run on the CPU. options={'groups': False} turns groups off; a group op asked for a refusing target says
what to do."""
import pytest
import torch
import torch.nn as nn

import heddle
import heddle.dynamo as hd
from heddle import _C
from heddle.pytorch import group_op
from heddle.pytorch.dynamo_gated import GatedSpec, gated_op

from support.dynamo_models import GatedFFN, SelfAttention
pytestmark = pytest.mark.usefixtures("_fresh_dynamo")  # tests/torch/conftest.py

BF16 = torch.bfloat16


class Block(nn.Module):
    """Attention (q / k / v with biases on one input, two batched matmuls) then a SiLU-gated feed-forward (w1,
    w3, w2): 8 matmuls, each a heddle op unless grouped."""

    def __init__(self):
        super().__init__()
        self.attn, self.ffn = SelfAttention(64), GatedFFN(64, 96)

    def forward(self, x):
        return self.ffn(self.attn(x))


def _explain(monkeypatch, target, **options):
    if target is not None:
        monkeypatch.setattr(group_op, "graph_target", lambda gm: target)
    torch.manual_seed(0)
    m = Block().to(BF16).eval()
    x = torch.randn(2, 8, 64).to(BF16)
    with torch.no_grad():
        want = m(x)
        rep = hd.explain(m, x, fallback="eager", **options)
        got = torch.compile(m, backend="heddle", options={"fallback": "eager", **options})(x)
    scale = want.abs().max().item()
    torch.testing.assert_close(got.float(), want.float(), atol=3e-2 * scale, rtol=3e-2)
    return rep


def _kinds(rep):
    return sorted(op.split("_")[0] for op in rep.heddle_ops if op.split("_")[0] in ("gated", "merged"))


@pytest.mark.parametrize("target,kind", [("sm_80", "best"), ("sm_90a", "weaker"), ("sm_100a", "weaker"),
                                         ("gfx90a", "none"), ("gfx942", "none"), ("gfx1200", "none")])
def test_the_target_says_how_it_lowers_a_group(target, kind):
    assert _C.target_info(target)["matmul_group"] == kind


def test_sm80_and_cpu_form_gated_and_merged_ops(monkeypatch):
    for target in ("sm_80", None):
        rep = _explain(monkeypatch, target)
        assert _kinds(rep) == ["gated", "merged"], (target, rep.heddle_ops)
        assert len(rep.heddle_ops) == 8 - 1 - 2, rep.heddle_ops
        assert not rep.graph("inference").notes


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_hopper_and_blackwell_keep_the_gated_pair_but_no_merge(monkeypatch, target):
    rep = _explain(monkeypatch, target)
    assert _kinds(rep) == ["gated"], rep.heddle_ops
    assert len(rep.heddle_ops) == 8 - 1, rep.heddle_ops       # q, k, v: each its own op
    assert sum(op.endswith("_k64_n64_Bbf16r1_obf16") for op in rep.heddle_ops) == 3
    assert any(f"no merged groups on {target}" in n for n in rep.graph("inference").notes)
    assert f"note: no merged groups on {target}" in str(rep)


def test_amd_forms_no_group(monkeypatch):
    rep = _explain(monkeypatch, "gfx942")
    assert _kinds(rep) == [], rep.heddle_ops
    assert len(rep.heddle_ops) == 8, rep.heddle_ops   # every matmul its own op
    assert "no matmul groups on gfx942" in str(rep)


def test_the_groups_option_turns_groups_off(monkeypatch):
    rep = _explain(monkeypatch, "sm_80", groups=False)
    assert _kinds(rep) == [] and len(rep.heddle_ops) == 8, rep.heddle_ops
    assert "options={'groups': False}" in str(rep)


def test_a_group_op_on_a_refusing_target_says_what_to_do():
    op = gated_op(GatedSpec("bf16", 64, 96, True, "silu", "bf16"))
    with pytest.raises(heddle.ScheduleError, match=r"gated_bf16_silu_k64_n96_t_obf16: target gfx942 has no "
                                                   r"lowering for a matmul group.*options=\{'groups': False\}"):
        op.kernel("gfx942", 8, 8, 16, rtc=False)
    assert op.kernel("sm_80", 8, 8, 16, rtc=False).source   # the same op builds for an mma.sync target


def test_graph_target_reads_the_device_of_the_graph_inputs(monkeypatch):
    import heddle.core.runtime as rt
    from torch._subclasses.fake_tensor import FakeTensorMode
    g = torch.fx.Graph()
    p = g.placeholder("x")
    g.output(p)
    gm = torch.fx.GraphModule(nn.Module(), g)
    p.meta["val"] = torch.empty(2)
    assert group_op.graph_target(gm) is None                       # a CPU graph: today's behaviour
    with FakeTensorMode(allow_non_fake_inputs=True):
        try:
            p.meta["val"] = torch.empty(2, device="cuda")
        except (RuntimeError, AssertionError):
            pytest.skip("this torch cannot make a fake CUDA tensor")
    seen = []
    monkeypatch.setattr(rt, "target_for_device", lambda d: seen.append(d.type) or "gfx942")
    assert group_op.graph_target(gm) == "gfx942" and seen == ["cuda"]
    assert group_op.group_rewrites("gfx942")[:2] == (False, False)
