"""heddle-compiled models under FSDP2 (torch.distributed.fsdp.fully_shard): 2 processes on CPU with the
gloo backend. Each rank trains one step of the compiled sharded model and of the eager sharded model
from the same weights on its own batch; the gradients (reduce-scattered by FSDP, each rank holding its
shard) gathered to full tensors match eager and are equal across ranks, and the matmuls ran as heddle ops.
"""
import os

import pytest
import torch
import torch.distributed as dist

WORLD = 2


class _Block(torch.nn.Module):
    """Linear -> GELU -> Linear computed in bfloat16 (so its matmuls are heddle's), parameters in float32."""

    def __init__(self, d=64, h=128):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(d, h), torch.nn.Linear(h, d)

    def forward(self, x):
        bf, F = torch.bfloat16, torch.nn.functional
        h = F.gelu(F.linear(x.to(bf), self.fc1.weight.to(bf), self.fc1.bias.to(bf)))
        return x + F.linear(h, self.fc2.weight.to(bf), self.fc2.bias.to(bf)).float()


def _sharded(seed):
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(seed)
    model = torch.nn.Sequential(_Block(), _Block())
    for block in model:
        fully_shard(block)
    fully_shard(model)
    return model


def _worker(rank, store_path, out_dir):
    import heddle.dynamo as hd
    from heddle.dynamo import heddle_backend

    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=WORLD)
    try:
        x = torch.randn(2, 8, 64, generator=torch.Generator().manual_seed(10 + rank))

        def step(m, run=None):
            (run or m)(x).square().mean().backward()
            return {n: p.grad.full_tensor() for n, p in m.named_parameters()}

        ref = step(_sharded(0))
        hd.reset_stats()
        model = _sharded(0)
        sharded = type(model.state_dict()["0.fc1.weight"]).__name__
        got = step(model, torch.compile(model, backend=heddle_backend, options={"fallback": "eager"}))
        torch.save({"ref": ref, "got": got, "stats": dict(hd.stats), "param_type": sharded},
                   os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="torch.distributed with gloo")
def test_fsdp2_two_processes_gloo(tmp_path):
    pytest.importorskip("torch.distributed.fsdp", reason="FSDP2 (fully_shard)")
    from torch.distributed.fsdp import fully_shard  # noqa: F401 -- torch >= 2.6 exports FSDP2 here
    import torch.multiprocessing as mp
    mp.spawn(_worker, args=(str(tmp_path / "store"), str(tmp_path)), nprocs=WORLD, join=True)
    results = [torch.load(tmp_path / f"rank{r}.pt") for r in range(WORLD)]
    for r in results:
        assert r["param_type"] == "DTensor"                  # the parameters are sharded
        assert r["stats"]["heddle_ops"] >= 4 and r["stats"]["matmuls_left"] == 0, r["stats"]
        assert set(r["got"]) == set(r["ref"]) and len(r["ref"]) == 8
        for name, want in r["ref"].items():
            torch.testing.assert_close(r["got"][name], want, atol=3e-2 * want.abs().max().item(), rtol=3e-2,
                                       msg=name)
    for name, g0 in results[0]["got"].items():   # reduced: the same full gradient on every rank
        torch.testing.assert_close(results[1]["got"][name], g0, atol=0, rtol=0, msg=name)
