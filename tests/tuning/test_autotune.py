"""heddle.autotune on a CPU: the target-driven config space, pruning by what the target can hold
(shared memory through lowering's ScheduleError, registers through the ptxas report), persistence
per (problem, config) so that adding a config tunes only that config, selection with an injected
timer, the HEDDLE_AUTOTUNE switch in heddle.matmul, the progress bar and the printable choice."""
import json
import os

import pytest
import torch

import heddle
from support.env import requires_nvrtc
from heddle import autotune as at
from heddle.api import MatmulSpec, fused_matmul_op
from heddle.bench import ValidationError

N, K = 256, 512


def spec(n=N, k=K, activation="gelu"):
    return MatmulSpec(dtype="bf16", batched=False, batched_b=False, k=k, n=n, trans_a=False, trans_b=True,
                      bias=("bf16", 1), residual=None, activation=activation, alpha=None, out_dtype="bf16")


C1 = at.Config(64, 64, 32, 2, 2, 2)
C2 = at.Config(64, 64, 32, 2, 2, 3)
C3 = at.Config(64, 128, 32, 2, 2, 2)
C4 = at.Config(128, 64, 32, 2, 2, 3, 1)


class FakeTimer:
    """ms = table[config] (default: by tile area and stages); records what it was asked to time."""
    device_name = "fake-gpu"

    def __init__(self, table=None, fail=None):
        self.table = table or {}
        self.fail = fail or {}
        self.calls = []

    def __call__(self, kernel, config, problem):
        assert isinstance(kernel, heddle.Kernel) and kernel.target
        self.calls.append(config.key)
        if config.key in self.fail:
            raise self.fail[config.key]
        return self.table.get(config.key, 1.0 / (config.bm * config.bn * config.stages))


@pytest.fixture
def store(tmp_path):
    return at.Store(str(tmp_path / "autotune.json"))


# --- configs and the space ---------------------------------------------------------------------

def test_config_key_text_and_round_trip():
    c = at.Config(128, 256, 64, 8, 1, 4, -1, "tma_load", (("load", 1, 40), ("mma", 8, 232)))
    assert c.key == "128x256x64_w8x1_s4p-1_tma_load_load1r40-mma8r232"
    assert at.Config.from_dict(json.loads(json.dumps(c.to_dict()))) == c
    assert c.loads_in_flight == 4 and at.Config(64, 64, 32, 2, 2, 4, 1).loads_in_flight == 2
    assert "roles load: 1 warps @ 40 regs" in str(c) and "tile 128x256x64" in str(c)
    w = at.Config(128, 128, 64, 4, 1, 4, -1, "tma_load", war="block_sync")
    assert w.key.endswith("_war-block_sync") and at.Config.from_dict(w.to_dict()) == w


def test_space_follows_the_target():
    p = at.Problem(4096, 4096, 4096)
    sm80 = at.config_space("sm_80", p)
    assert sm80 and {c.load for c in sm80} == {"cp_async"} and not any(c.roles for c in sm80)
    assert {c.stages for c in sm80} >= {2, 3, 4, 5} and {c.bk for c in sm80} == {32, 64}
    assert any(c.prefetch >= 0 for c in sm80)                                 # prefetch is tuned too
    sm90 = at.config_space("sm_90a", p)
    assert {c.load for c in sm90} == {"cp_async", "tma_load"}
    ws = [c for c in sm90 if c.roles]
    assert ws and all(c.warps_n == 1 for c in ws)                              # warpgroups split m
    assert len({tuple(r for _, _, r in c.roles) for c in ws}) > 1             # register budgets vary
    gfx = at.config_space("gfx942", p)
    assert gfx and {c.load for c in gfx} == {"plain"}
    small = at.config_space("sm_80", at.Problem(16, 4096, 4096))
    assert any(c.bm == 16 for c in small) and not any(c.bm == 16 for c in sm80)
    assert len(set(sm90)) == len(sm90)


def test_register_space_extends_and_replaces(monkeypatch):
    monkeypatch.setattr(at, "_spaces", list(at._spaces))
    extra = at.Config(64, 64, 16, 2, 2, 2)
    at.register_space("mine", lambda ti, p: [extra] if ti["name"] == "sm_80" else [])
    assert "mine" in at.space_names()
    assert extra in at.config_space("sm_80", at.Problem(64, 64, 64)) and \
        extra not in at.config_space("sm_90a", at.Problem(64, 64, 64), names=["mine"])
    at.register_space("mine", lambda ti, p: [])
    assert at.space_names().count("mine") == 1
    assert at.config_space("sm_80", at.Problem(64, 64, 64), names=["mine"]) == []


def test_static_pruning():
    p = at.Problem(1000, 4096, 64)
    assert at.static_prune(at.Config(128, 128, 32, 2, 2, 4), p) is None  # 2 k-tiles, 4 stages: runs
    assert at.static_prune(at.Config(128, 128, 32, 2, 2, 2), p) is None
    assert "more than twice M=16" in at.static_prune(at.Config(128, 128, 32, 2, 2, 2), at.Problem(16, 4096, 4096))
    assert "accumulators need 256 registers" in at.static_prune(at.Config(128, 128, 32, 1, 2, 2), p)
    roles = (("load", 1, 40), ("mma", 4, 168))
    assert "budget of 168" in at.static_prune(at.Config(128, 256, 64, 4, 1, 2, -1, "tma_load", roles),
                                              at.Problem(1000, 4096, 4096))
    assert at.m_bucket(1) == 16 and at.m_bucket(1000) == 1024 and at.m_bucket(1024) == 1024
    assert at.m_bucket(10 ** 6) == 16384


def test_lowering_prunes_configs_the_target_cannot_hold(store):
    # 128x256x64 tiles over 5 stages need 240 KiB of shared memory: over sm_80's 163 KiB and
    # sm_90a's 227 KiB, so lowering rejects them before NVRTC is ever asked (2x4 warps: the
    # accumulators fit, so the shared-memory rule is the one that refuses)
    big = at.Config(128, 256, 64, 2, 4, 5)
    res = at.tune(spec(), "sm_80", 4096, N, K, space=[big], store=store, progress=False)
    (c,) = res.candidates
    assert c.status == "pruned" and "shared memory" in c.reason and "166912" in c.reason
    assert res.compiled_now == [] and res.best is None
    res90 = at.tune(spec(), "sm_90a", 4096, N, K, space=[big], store=store, progress=False)
    assert res90.candidates[0].status == "pruned" and "232448" in res90.candidates[0].reason
    # warp specialization on a target without it: pruned with lowering's reason, not an exception
    ws = at.Config(128, 128, 64, 4, 1, 3, -1, "tma_load", (("load", 1, 40), ("mma", 4, 232)))
    r80 = at.tune(spec(), "sm_80", 4096, N, K, space=[ws], store=store, progress=False)
    assert r80.candidates[0].status == "pruned" and "tma_load" in r80.candidates[0].reason
    assert "shared memory over the target's limit" in str(res)
    stored = store.entries(res.key)
    assert stored[big.key]["status"] == "pruned"


# --- with NVRTC --------------------------------------------------------------------------------

@requires_nvrtc
def test_spilling_configs_are_dropped(store):
    # one warp holding a 96x64 accumulator tile: 192 registers of accumulators alone, ptxas spills
    spill = at.Config(96, 64, 32, 1, 1, 3)
    assert at.static_prune(spill, at.Problem(4096, N, K)) is None
    t = FakeTimer()
    res = at.tune(spec(), "sm_80", 4096, N, K, space=[spill, C1], timer=t, store=store, progress=False)
    bad, good = res.candidates
    assert bad.status == "spills" and "spill" in bad.reason and bad.registers == 255
    assert good.status == "ok" and t.calls == [C1.key]                      # the spilling config is never timed
    assert res.best == C1


@requires_nvrtc
def test_choice_persistence_and_retuning_only_new_configs(store, capsys):
    t = FakeTimer({C1.key: 0.30, C2.key: 0.20})
    res = at.tune(spec(), "sm_80", 1024, N, K, space=[C1, C2], timer=t, store=store, progress=False)
    assert sorted(t.calls) == sorted([C1.key, C2.key]) and res.best == C2
    assert sorted(res.compiled_now) == sorted([C1.key, C2.key])
    assert res.best_candidate.ms == 0.20
    assert os.path.exists(store.path)
    doc = json.load(open(store.path))
    entries = doc["problems"][res.key]["configs"]
    assert entries[C2.key]["status"] == "ok" and entries[C2.key]["ms"] == 0.20 and entries[C2.key]["source"]
    assert "fake-gpu" in doc["problems"][res.key]["describe"]

    # same problem again: nothing compiled, nothing timed, same choice
    t2 = FakeTimer({C1.key: 9.0, C2.key: 9.0})
    again = at.tune(spec(), "sm_80", 1024, N, K, space=[C1, C2], timer=t2, store=store, progress=False)
    assert t2.calls == [] and again.compiled_now == [] and again.best == C2
    assert all(c.reused for c in again.candidates)
    assert isinstance(again.kernel, heddle.Kernel) and "64x64x32" in again.kernel.name  # compiled on demand

    # a new config is tuned alone
    t3 = FakeTimer({C3.key: 0.10})
    more = at.tune(spec(), "sm_80", 1024, N, K, space=[C1, C2, C3], timer=t3, store=store, progress=False)
    assert t3.calls == [C3.key] and more.compiled_now == [C3.key] and more.best == C3

    # a config whose generated code changed (stored hash differs) is re-tuned, the others are not
    doc = json.load(open(store.path))
    doc["problems"][res.key]["configs"][C1.key]["source"] = "0" * 16
    json.dump(doc, open(store.path, "w"))
    t4 = FakeTimer({C1.key: 0.3})
    at.tune(spec(), "sm_80", 1024, N, K, space=[C1, C2, C3], timer=t4, store=store, progress=False)
    assert t4.calls == [C1.key]

    # another problem (M, epilogue, device) is another key
    other = at.tune(spec(activation="silu"), "sm_80", 1024, N, K, space=[C1], timer=FakeTimer(), store=store,
                    progress=False)
    assert other.key != res.key
    assert at.tune(spec(), "sm_80", 2048, N, K, space=[C1], timer=None, store=store, progress=False).key != res.key
    assert len(store.problems()) == 3

    # the chosen config is printable, in the result and from the command line
    text = str(more)
    assert "chosen: tile 64x128x32" in text and C3.key in text and "0.1000 ms" in text
    assert at.main(["--store", store.path, "--all"]) == 0
    out = capsys.readouterr().out
    assert "best: tile 64x128x32" in out and C1.key in out

    # retune=True ignores the store
    t5 = FakeTimer()
    at.tune(spec(), "sm_80", 1024, N, K, space=[C1, C2], timer=t5, store=store, progress=False, retune=True)
    assert sorted(t5.calls) == sorted([C1.key, C2.key])


@requires_nvrtc
def test_wrong_results_and_launch_errors_drop_candidates(store):
    t = FakeTimer({C1.key: 0.5}, fail={C2.key: ValidationError("relative error 0.3 exceeds 0.01"),
                                       C3.key: RuntimeError("CUDA_ERROR_LAUNCH_FAILED")})
    res = at.tune(spec(), "sm_80", 1024, N, K, space=[C1, C2, C3], timer=t, store=store, progress=False)
    st = {c.config.key: c for c in res.candidates}
    assert st[C2.key].status == "wrong" and "relative error" in st[C2.key].reason
    assert st[C3.key].status == "launch_error" and "LAUNCH_FAILED" in st[C3.key].reason
    assert res.best == C1
    # verdicts persist: a wrong kernel is not re-run until its code changes
    t2 = FakeTimer()
    at.tune(spec(), "sm_80", 1024, N, K, space=[C1, C2, C3], timer=t2, store=store, progress=False)
    assert t2.calls == []


@requires_nvrtc
def test_compile_only_without_a_timer(store):
    res = at.tune(spec(), "sm_80", 1024, N, K, space=[C1, C2], timer=None, store=store, progress=False)
    assert [c.status for c in res.candidates] == ["compiled", "compiled"] and res.best is None
    assert all(c.registers for c in res.candidates)
    assert "not timed" in str(res)
    with pytest.raises(RuntimeError, match="nothing to choose"):
        res.kernel
    again = at.tune(spec(), "sm_80", 1024, N, K, space=[C1, C2], timer=None, store=store, progress=False)
    assert again.compiled_now == []                                         # compiles persist too


@requires_nvrtc
def test_progress_bar_on_stderr(store, capsys, monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_tqdm(name, *a, **k):
        if name == "tqdm":
            raise ImportError("no tqdm here")
        return real_import(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_tqdm)
    at.tune(spec(), "sm_80", 1024, N, K, space=[C1, C2], timer=FakeTimer(), store=store, progress=True, workers=1)
    err = capsys.readouterr().err
    assert "heddle.autotune compile [" in err and "2/2" in err and "heddle.autotune time [" in err
    at.tune(spec(), "sm_80", 1024, N, K, space=[C1, C2], timer=FakeTimer(), store=store, progress=False)
    assert capsys.readouterr().err == ""


# --- HEDDLE_AUTOTUNE and heddle.matmul ---------------------------------------------------------

def test_switch_parsing(monkeypatch, capsys):
    for v, want in [("1", True), ("true", True), ("ON", True), ("0", False), ("", False), ("off", False)]:
        monkeypatch.setenv("HEDDLE_AUTOTUNE", v)
        assert at.enabled() is want
    monkeypatch.delenv("HEDDLE_AUTOTUNE")
    assert at.enabled() is False
    monkeypatch.setenv("HEDDLE_AUTOTUNE", "maybe")
    assert at.enabled() is False
    assert "not 0 or 1" in capsys.readouterr().err


def test_switch_off_uses_the_automatic_schedule(monkeypatch):
    monkeypatch.delenv("HEDDLE_AUTOTUNE", raising=False)
    called = []
    monkeypatch.setattr(at, "matmul_kernel", lambda *a, **k: called.append(a))
    fm = fused_matmul_op(spec())
    sentinel = object()
    monkeypatch.setattr(fm, "kernel", lambda *a, **k: sentinel)
    x, w = torch.randn(100, K).bfloat16(), torch.randn(N, K).bfloat16()
    assert fm.kernel_for([x, w, torch.randn(N).bfloat16()], "sm_80") is sentinel and called == []


@requires_nvrtc
def test_heddle_matmul_honours_the_switch(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("HEDDLE_AUTOTUNE", "1")
    monkeypatch.setenv("HEDDLE_AUTOTUNE_STORE", str(tmp_path / "store.json"))
    monkeypatch.setattr(at, "_chosen", {})
    timer = FakeTimer({C1.key: 0.4, C4.key: 0.1})
    monkeypatch.setattr(at, "default_timer", lambda build, problem: timer)
    monkeypatch.setattr(at, "config_space", lambda target, problem, names=None: [C1, C4])
    fm = fused_matmul_op(spec())
    x, w, b = torch.randn(1000, K).bfloat16(), torch.randn(N, K).bfloat16(), torch.randn(N).bfloat16()
    k = fm.kernel_for([x, w, b], "sm_80")
    assert "128x64x32" in k.name and "s3p1" in k.name                      # C4, the faster one
    assert sorted(timer.calls) == sorted([C1.key, C4.key])
    assert "heddle.autotune:" in capsys.readouterr().err                  # the choice is announced
    # the same M bucket (1000 and 700 -> 1024) reuses the choice without tuning again
    assert fm.kernel_for([x[:700], w, b], "sm_80") is k and len(timer.calls) == 2
    (problem, config, ms), = at.chosen()
    assert "M=1024" in problem and "tile 128x64x32" in config and ms == 0.1
    at.print_chosen()
    assert "tile 128x64x32" in capsys.readouterr().out
    # CPU tensors still compute through the torch reference path, tuned or not
    y = heddle.matmul(x[:4], w, bias=b, activation="gelu", trans_b=True)
    assert y.shape == (4, N)


@requires_nvrtc
def test_matmul_kernel_falls_back_when_nothing_is_timed(monkeypatch, tmp_path):
    monkeypatch.setattr(at, "_chosen", {})
    fm = fused_matmul_op(spec())
    k = at.matmul_kernel(fm, "sm_80", 8, 8, 300, timer=None, store=at.Store(str(tmp_path / "s.json")),
                         progress=False, space=[C1])
    assert k is fm.kernel("sm_80", 8, 8)                                   # the automatic schedule
    # layouts that need synchronous copies are not tuned
    assert at.matmul_kernel(fm, "sm_80", 1, 8, 300, timer=FakeTimer(), space=[C1]) is fm.kernel("sm_80", 1, 8)


# --- the store ---------------------------------------------------------------------------------

def test_store_default_path_and_env(monkeypatch, tmp_path):
    monkeypatch.delenv("HEDDLE_AUTOTUNE_STORE", raising=False)
    monkeypatch.setenv("HEDDLE_CACHE_DIR", str(tmp_path / "cache"))
    heddle._C.runtime.set_cache_dir(None)
    assert at.Store().path == str(tmp_path / "cache" / "autotune.json")
    monkeypatch.setenv("HEDDLE_AUTOTUNE_STORE", str(tmp_path / "x.json"))
    assert at.Store().path == str(tmp_path / "x.json")


def test_store_merges_writers_and_survives_corruption(tmp_path, capsys):
    path = str(tmp_path / "s.json")
    a, b = at.Store(path), at.Store(path)
    a.put("k1", "one", {"c1": {"status": "ok", "ms": 1.0}})
    b.put("k2", "two", {"c2": {"status": "ok", "ms": 2.0}})
    a.put("k1", "one", {"c3": {"status": "pruned"}})
    assert set(a.problems()) == {"k1", "k2"} and set(a.entries("k1")) == {"c1", "c3"}
    assert not [f for f in os.listdir(tmp_path) if ".tmp." in f]
    with open(path, "w") as f:
        f.write("{not json")
    assert a.entries("k1") == {}
    assert os.path.exists(path + ".corrupt") and "unreadable tuning store" in capsys.readouterr().err
    with open(path, "w") as f:
        json.dump({"version": 999, "problems": {"k": {}}}, f)
    assert a.problems() == {}                                              # another format: ignored
