"""Warm restarts of the torch.compile backend (heddle/pytorch/dynamo_cache.py, docs/torch.md "Caches"): a
second process replays the first one's compile through torch's AOTAutograd and FX graph caches, its heddle
ops register from their names and its reports come back from heddle's cache; heddle's cache entries never
reach inductor (nor inductor's heddle); the key covers every option that changes the rewrite; a corrupt or
missing report entry is a miss, never served."""
import json
import os
import subprocess
import sys

import torch

import heddle.dynamo as hd
from heddle.pytorch import dynamo_cache
from heddle.pytorch.dynamo import Options

from support.dynamo_defs import needs_cxx

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/: support.dynamo_models

PROBE = """
import json, sys, torch
sys.path.insert(0, {here!r})
from support.dynamo_models import GatedFFN, build
from torch._dynamo.utils import counters
backend = sys.argv[1]
if len(sys.argv) > 2:   # stands for an upgraded heddle: the same cache directories, another version
    import heddle.core.version
    heddle.core.version.__version__ = sys.argv[2]
model = build(GatedFFN)
x = torch.randn(3, 8, 64, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16).requires_grad_()
if backend == "heddle":
    import heddle.dynamo as hd
    backend = hd.heddle_backend
out = torch.compile(model, backend=backend)(x)
out.float().sum().backward()
ref = model(x.detach())
res = {{"err": (out.detach().float() - ref.float()).abs().max().item(),
        "aot_hit": counters["aot_autograd"]["autograd_cache_hit"]}}
if sys.argv[1] == "heddle":
    res["stats"] = dict(hd.stats)
    res["kinds"] = [r.kind for r in hd.reports]
    res["ops"] = [g.op for r in hd.reports for g in r.groups]
print(json.dumps(res))
"""


def _run(backend, tmp_path, *args):
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
           "HEDDLE_CACHE_DIR": str(tmp_path / "heddle")}
    r = subprocess.run([sys.executable, "-c", PROBE.format(here=TESTS), backend, *args], capture_output=True,
                       text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@needs_cxx
def test_a_second_process_replays_the_compile(tmp_path, monkeypatch):
    cold = _run("heddle", tmp_path)
    assert cold["aot_hit"] == 0 and cold["stats"]["cache_misses"] == 1 and cold["stats"]["cache_hits"] == 0
    assert cold["kinds"] == ["forward", "backward"] and cold["ops"] and cold["err"] < 0.1
    entries = os.listdir(tmp_path / "heddle" / "dynamo")
    assert len(entries) == 1 and entries[0].endswith(".reports")

    warm = _run("heddle", tmp_path)    # replayed: no rewrite, the ops resolve by name, same reports
    assert warm["aot_hit"] == 1 and warm["stats"]["cache_hits"] == 1 and warm["stats"]["cache_misses"] == 0
    assert warm["kinds"] == cold["kinds"] and warm["ops"] == cold["ops"] and warm["err"] < 0.1

    # inductor in the same directories does not get heddle's entry (cache_key_tag differs)
    assert _run("inductor", tmp_path)["aot_hit"] == 0

    # another heddle version in the same directories is never served this one's compile: the rewrite runs
    # again (its own key, a second report entry); the first version's entry stays for it
    upgraded = _run("heddle", tmp_path, "999.0-upgraded")
    assert upgraded["aot_hit"] == 0 and upgraded["stats"]["cache_misses"] == 1
    assert upgraded["stats"]["cache_hits"] == 0 and upgraded["ops"] == cold["ops"] and upgraded["err"] < 0.1
    assert len(os.listdir(tmp_path / "heddle" / "dynamo")) == 2

    # a corrupt report entry is a miss: compiled again with the AOTAutograd cache off, so the rewrite runs
    path = tmp_path / "heddle" / "dynamo" / entries[0]
    data = path.read_bytes()
    path.write_bytes(data[:-10] + bytes(b ^ 0xFF for b in data[-10:]))
    again = _run("heddle", tmp_path)
    assert again["stats"]["cache_hits"] == 0 and again["stats"]["cache_misses"] == 1
    assert again["kinds"] == cold["kinds"] and again["ops"] == cold["ops"] and again["err"] < 0.1
    monkeypatch.setenv("HEDDLE_CACHE_DIR", str(tmp_path / "heddle"))   # and its entry was written whole again
    assert [r.kind for r in dynamo_cache.load_reports(entries[0][:-len(".reports")])] == cold["kinds"]


def _gm():
    return torch.fx.symbolic_trace(lambda x, w: torch.nn.functional.linear(x, w).relu())


def _inputs(dtype=torch.bfloat16):
    return [torch.randn(4, 8, dtype=dtype), torch.randn(16, 8, dtype=dtype)]


def test_key_is_stable_and_covers_what_changes_the_rewrite(monkeypatch):
    key = dynamo_cache.graph_key(_gm(), _inputs(), Options(), None)
    assert key == dynamo_cache.graph_key(_gm(), _inputs(), Options(), None)
    other = [dynamo_cache.graph_key(_gm(), _inputs(torch.float16), Options(), None),
             dynamo_cache.graph_key(_gm(), _inputs(), Options(fuse=False), None),
             dynamo_cache.graph_key(_gm(), _inputs(), Options(groups=False), None),
             dynamo_cache.graph_key(_gm(), _inputs(), Options(inductor={"max_autotune": True}), None),
             dynamo_cache.graph_key(_gm(), _inputs(), Options(), "reduce-overhead"),
             dynamo_cache.graph_key(_gm(), [_inputs()[0].requires_grad_(), _inputs()[1]], Options(), None)]
    with torch.no_grad():
        other.append(dynamo_cache.graph_key(_gm(), _inputs(), Options(), None))
    monkeypatch.setenv("HEDDLE_SOMETHING", "1")
    other.append(dynamo_cache.graph_key(_gm(), _inputs(), Options(), None))
    assert len({key, *other}) == len(other) + 1


def test_key_covers_heddle_version_and_the_rewrite_source(monkeypatch, tmp_path):
    """The fingerprint in every key: heddle's version and the source of heddle/pytorch/*.py (what the rewrite
    emits), so an upgrade or an edited rewrite never replays an older compile."""
    import shutil
    import heddle.core.version as version
    key = dynamo_cache.graph_key(_gm(), _inputs(), Options(), None)
    dynamo_cache.fingerprint.cache_clear()
    try:
        monkeypatch.setattr(version, "__version__", version.__version__ + "+other")
        assert dynamo_cache.graph_key(_gm(), _inputs(), Options(), None) != key
    finally:
        monkeypatch.undo()
        dynamo_cache.fingerprint.cache_clear()
    assert dynamo_cache.graph_key(_gm(), _inputs(), Options(), None) == key
    here = os.path.dirname(dynamo_cache.__file__)
    v = version.__version__
    assert dynamo_cache.source_fingerprint(v, here) == dynamo_cache.fingerprint()
    copy = shutil.copytree(here, tmp_path / "pytorch", ignore=shutil.ignore_patterns("__pycache__"))
    assert dynamo_cache.source_fingerprint(v, str(copy)) == dynamo_cache.fingerprint()
    with open(copy / "dynamo_fuse.py", "a") as f:   # an edited rewrite
        f.write("\n")
    assert dynamo_cache.source_fingerprint(v, str(copy)) != dynamo_cache.fingerprint()


def test_report_entries_round_trip_and_corrupt_ones_are_misses(tmp_path, monkeypatch):
    monkeypatch.setenv("HEDDLE_CACHE_DIR", str(tmp_path))
    hd.reset_stats()
    with torch.no_grad():
        hd.explain(torch.nn.Linear(8, 16).to(torch.bfloat16), torch.randn(4, 8, dtype=torch.bfloat16),
                   fallback="eager")
    reports = list(hd.reports)
    assert reports and dynamo_cache.save_reports("k" * 64, reports)
    back = dynamo_cache.load_reports("k" * 64)
    assert [str(r) for r in back] == [str(r) for r in reports]
    assert dynamo_cache.load_reports("j" * 64) is None                         # no entry
    path = tmp_path / "dynamo" / ("k" * 64 + ".reports")
    data = path.read_bytes()
    for bad in (data[:len(data) // 2], data[:-1] + bytes([data[-1] ^ 1]), b"junk", b""):
        path.write_bytes(bad)
        assert dynamo_cache.load_reports("k" * 64) is None
    (tmp_path / "dynamo" / ("j" * 64 + ".reports")).write_bytes(data)          # another key's entry
    assert dynamo_cache.load_reports("j" * 64) is None
