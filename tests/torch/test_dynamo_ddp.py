"""heddle-compiled models under torch.distributed DistributedDataParallel: 2 processes on CPU with the
gloo backend. Each rank trains one step of the compiled DDP model and of the eager DDP model from the
same weights on its own batch; gradients (all-reduced by DDP) match eager and are equal across ranks,
and the matmuls ran as heddle ops. DDP's graph splitting at bucket boundaries (dynamo's DDPOptimizer)
is exercised with tiny buckets.
"""
import os
import sys

import pytest
import torch
import torch.distributed as dist

WORLD = 2


def _worker(rank, store_path, out_dir):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: support
    import heddle.dynamo as hd
    from heddle.dynamo import heddle_backend
    from torch.nn.parallel import DistributedDataParallel as DDP
    from support.dynamo_models import MLP, build

    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=WORLD)
    try:
        torch.manual_seed(0)
        eager = build(MLP, dtype=torch.float32, d=256, h=1024)   # 1 MB weights: two 1 MB buckets
        model = build(MLP, dtype=torch.float32, d=256, h=1024)
        model.load_state_dict(eager.state_dict())
        g = torch.Generator().manual_seed(10 + rank)
        x = torch.randn(2, 8, 256, generator=g)

        def step(m):
            m(x).square().mean().backward()
            return {n[n.index("fc"):]: p.grad.clone() for n, p in m.named_parameters()}

        ref = step(DDP(_Bf16(eager)))
        hd.reset_stats()
        compiled = torch.compile(DDP(_Bf16(model), bucket_cap_mb=1), backend=heddle_backend,
                                 options={"fallback": "eager"})
        got = step(compiled)
        torch.save({"ref": ref, "got": got, "stats": dict(hd.stats)}, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


class _Bf16(torch.nn.Module):
    """The MLP computed in bfloat16 (so its matmuls are heddle's), parameters kept in float32 for DDP."""

    def __init__(self, mlp):
        super().__init__()
        self.fc1, self.fc2 = mlp.fc1, mlp.fc2

    def forward(self, x):
        bf = torch.bfloat16
        h = torch.nn.functional.gelu(torch.nn.functional.linear(x.to(bf), self.fc1.weight.to(bf), self.fc1.bias.to(bf)))
        return torch.nn.functional.linear(h, self.fc2.weight.to(bf), self.fc2.bias.to(bf)).float()


@pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="torch.distributed with gloo")
def test_ddp_two_processes_gloo(tmp_path):
    import torch.multiprocessing as mp
    mp.spawn(_worker, args=(str(tmp_path / "store"), str(tmp_path)), nprocs=WORLD, join=True)
    results = [torch.load(tmp_path / f"rank{r}.pt") for r in range(WORLD)]
    for r in results:
        assert r["stats"]["heddle_ops"] >= 2 and r["stats"]["matmuls_left"] == 0, r["stats"]
        assert r["stats"]["graphs"] >= 2, r["stats"]       # DDPOptimizer split the graph at a bucket
        assert set(r["got"]) == set(r["ref"]) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
        for name, want in r["ref"].items():
            torch.testing.assert_close(r["got"][name], want, atol=3e-2 * want.abs().max().item(), rtol=3e-2,
                                       msg=name)
    for name, g0 in results[0]["got"].items():   # all-reduced: the same on every rank
        torch.testing.assert_close(results[1]["got"][name], g0, atol=0, rtol=0, msg=name)
