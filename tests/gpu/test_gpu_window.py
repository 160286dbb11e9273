"""The GPU window (tools/gpu_window.sh, docs/gpu-window.md) without a GPU: the dry run goes through every stage
end to end (so no typo or path can waste a window), and HEDDLE_DEBUG's bounded waits reach the printed
kernels through the NVRTC options and the cache key."""
import json
import os
import subprocess
import sys

import pytest
import torch

import heddle
from support.env import requires_nvrtc, rt
from support.interp_defs import needs_cxx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "window"))


@requires_nvrtc
@needs_cxx
def test_dry_run_goes_through_every_stage(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ)
    env.pop("HEDDLE_DEBUG", None)
    r = subprocess.run(["bash", os.path.join(ROOT, "tools", "gpu_window.sh"), "--dry-run", str(out)],
                       capture_output=True, text=True, timeout=1500, env=env)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    summary = (out / "summary.txt").read_text()
    stages = [ln.split()[0] for ln in summary.splitlines()]
    for stage in ("env", "install", "smoke", "families", "pytest", "sanitize", "bench", "report"):
        assert stage in stages, summary
    from families import FAMILIES
    for name, fam in FAMILIES.items():  # every family's every case lowered and prepared; no failure anywhere
        assert f"families  {name}: {len(fam.cases)}/{len(fam.cases)} pass" in summary, summary
    assert "FAILED" not in summary and "ERROR" not in summary and "TIMEOUT" not in summary, summary
    results = [json.loads(ln) for ln in (out / "results.jsonl").read_text().splitlines()]
    interpreted = [x for x in results if "interpret_s" in x]
    assert {x["family"] for x in interpreted} == {"cp_async", "sm90_coop"}
    assert all(x["status"] == "pass" and max(x["rel_err"]) < 1e-2 for x in interpreted), interpreted
    bench = [json.loads(ln) for ln in (out / "bench.jsonl").read_text().splitlines()]
    assert "meta" in bench[0] and any("ceilings" in b for b in bench)
    timed = [b for b in bench if b.get("status") == "ok"]
    assert {b["suite"] for b in timed} >= {"square", "fused", "variants"}
    assert {b["impl"] for b in timed} >= {"heddle", "cublas", "torch_eager", "cublaslt_fused", "torch_compile",
                                          "cooperative", "pingpong", "epilogue_role", "split_k", "stream_k"}
    # at most 8 files come back from a window, none deeper than two folders
    kept = [p for p in out.iterdir() if p.name != "_work"]
    assert sorted(p.name for p in kept) == ["bench.jsonl", "env.txt", "logs.tar.gz", "results.jsonl", "summary.txt",
                                            "window.log"]
    perf = (out / "_work" / "perf.md").read_text()
    assert "heddle's variants against each other" in perf and "cuBLASLt fused" in perf


def test_stamp_digests_follow_native_and_python_sources(tmp_path):
    from prepare_stamp import digests
    (tmp_path / "src").mkdir()
    (tmp_path / "python" / "heddle").mkdir(parents=True)
    (tmp_path / "src" / "a.cpp").write_text("int a;")
    (tmp_path / "python" / "heddle" / "x.py").write_text("x = 1")
    d0 = digests(str(tmp_path))
    (tmp_path / "python" / "heddle" / "x.py").write_text("x = 2")
    d1 = digests(str(tmp_path))
    assert d1["native"] == d0["native"] and d1["python"] != d0["python"]
    (tmp_path / "src" / "a.cpp").write_text("int b;")
    assert digests(str(tmp_path))["native"] != d1["native"]


def test_family_names_are_unique_and_every_family_has_cases():
    from families import FAMILIES
    assert len(FAMILIES) >= 18
    for f in FAMILIES.values():
        assert f.cases and f.needs in ("any", "sm_90a", "sm_100a")
        assert len({c.label for c in f.cases}) == len(f.cases), f.name


def test_device_copies_keep_padded_scale_strides_the_block_kernel_needs():
    """The third window's sm90_fp8_block cases at M = 77 and 130 failed before their kernels ran: `.cuda()` made
    the padded M-major scale_a dense (strides (1, M)), which its TMA map refuses. family_run copies with the
    tensor's own strides, on the GPU and (so that the dry run checks the same layouts) on the CPU."""
    import family_run
    from families import FAMILIES
    case = next(c for c in FAMILIES["sm90_fp8_block"].cases if c.M % 4)
    fd = case.make("sm_90a")
    ts = family_run.inputs(fd, case.M, seed=1)
    i = next(j for j, t in enumerate(fd.inputs) if t.name == "sa")
    copies = [family_run.on_device(t, "cpu") for t in ts]
    assert copies[i].stride() == ts[i].stride() != (1, case.M) and torch.equal(copies[i], ts[i])
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    k.prepare(copies, tensor_map_encoder=heddle._C.interp.encode_tensor_map_tiled, sms=4)
    dense = list(copies)
    dense[i] = copies[i].t().contiguous().t()  # what .cuda() gave: M-major, M not padded
    assert dense[i].stride() == (1, case.M)
    with pytest.raises(heddle.InputError, match=r"'sa' \(scale_a\).*m_major_scales"):
        k.prepare(dense, tensor_map_encoder=heddle._C.interp.encode_tensor_map_tiled, sms=4)


def test_f32_outputs_of_8bit_kernels_allow_fp8_accumulation_error_and_no_more():
    """Hopper's FP8 wgmma accumulates with fewer bits than f32 (the third window: amax scales 1.5e-3 relative
    from float64 at K = 1040): f32 outputs of 8-bit kernels get TOL_F32_FP8_ACCUM, other f32 outputs keep 1e-3."""
    from family_run import compare
    ref = torch.rand(64, 8, dtype=torch.float64) + 1
    near = (ref * (1 + 1.5e-3)).float()
    assert not compare(near, ref)["ok"] and compare(near, ref, fp8_accum=True)["ok"]
    assert not compare((ref * 1.01).float(), ref, fp8_accum=True)["ok"]
    assert compare((ref * 1.004).to(torch.bfloat16), ref, fp8_accum=True)["ok"]  # bf16 keeps its own tolerance


# --- HEDDLE_DEBUG ---------------------------------------------------------------------------------


def test_debug_options_reach_nvrtc_and_bad_ones_are_named(monkeypatch):
    monkeypatch.delenv("HEDDLE_DEBUG", raising=False)
    plain = rt.nvrtc_options("sm_90a")
    assert not any("HEDDLE_BOUNDED" in o for o in plain) and "-lineinfo" not in plain
    monkeypatch.setenv("HEDDLE_DEBUG", "bounded_waits")
    assert "-DHEDDLE_BOUNDED_WAIT_NS=1000000000ULL" in rt.nvrtc_options("sm_90a")
    monkeypatch.setenv("HEDDLE_DEBUG", " lineinfo , bounded_waits=250")
    opts = rt.nvrtc_options("sm_90a")
    assert "-lineinfo" in opts and "-DHEDDLE_BOUNDED_WAIT_NS=250000000ULL" in opts
    assert rt.nvrtc_options("sm_90a", lineinfo=True).count("-lineinfo") == 1
    for bad, match in (("bounded_wait", "unknown option 'bounded_wait'"), ("bounded_waits=0", "bounded_waits=0"),
                       ("bounded_waits=1s", "bounded_waits=1s"), ("lineinfo=1", "unknown option 'lineinfo=1'")):
        monkeypatch.setenv("HEDDLE_DEBUG", bad)
        with pytest.raises(heddle.InputError, match=match):
            rt.nvrtc_options("sm_90a")


@requires_nvrtc
@pytest.mark.parametrize("family", ["sm90_coop", "sm90_pingpong", "cp_async_split_k"])
def test_bounded_waits_are_compiled_in_only_when_asked_and_cost_no_spills(family, monkeypatch):
    """With bounded_waits the mbarrier and grid-flag spins read %globaltimer and trap after printing who waited;
    without it the PTX has neither. The report sits in a noreturn function, so the heaviest kernels keep their
    registers (no spills: the ping-pong 128x128x64 kernel spilled 72 bytes with a returning one). The cache
    never serves one build for the other (the option is in the key)."""
    from families import FAMILIES
    fd = FAMILIES[family].cases[0].make("sm_90a")
    monkeypatch.delenv("HEDDLE_DEBUG", raising=False)
    plain = heddle.Kernel.build(fd, "sm_90a")
    monkeypatch.setenv("HEDDLE_DEBUG", "bounded_waits=500")
    bounded = heddle.Kernel.build(fd, "sm_90a")
    assert "%globaltimer" not in plain.ptx and "trap;" not in plain.ptx
    assert "%globaltimer" in bounded.ptx and "trap;" in bounded.ptx and "vprintf" in bounded.ptx
    assert "500000000" in bounded.ptx  # the bound itself, in nanoseconds
    st = bounded.stats
    assert st.spill_stores == 0 and st.spill_loads == 0, bounded.ptxas
    # ptxas serialises wgmma around the report call (C7510 naming heddle::debug): expected in a debug build only,
    # so Kernel.build accepts it there (kernel.real_advisories) and the release build has no advisory at all
    assert not plain.stats.advisories and all("heddle5debug" in a for a in st.advisories), st.advisories
    from heddle.core.kernel import real_advisories
    assert real_advisories(st) == []
    assert st.registers <= max(plain.stats.registers, 168), (st.registers, plain.stats.registers)


@pytest.mark.slow
def test_prepare_builds_a_cp312_wheel_stamped_with_the_tree(tmp_path):
    """`tools/gpu_window.sh prepare` (a full build: slow) leaves one cp312 wheel and a STAMP whose digests match
    the tree, so the window's install stage takes the wheel rather than a source build."""
    import shutil
    if not any(os.path.exists(p) for p in [shutil.which("python3.12") or ""] +
               [os.path.join(os.path.expanduser("~/.pyenv/versions"), v, "bin", "python3.12")
                for v in (os.listdir(os.path.expanduser("~/.pyenv/versions"))
                          if os.path.isdir(os.path.expanduser("~/.pyenv/versions")) else [])]):
        pytest.skip("no Python 3.12 on this machine")
    tree = tmp_path / "tree"
    subprocess.run(["git", "clone", "-q", ROOT, str(tree)], check=True)
    r = subprocess.run(["bash", str(tree / "tools" / "gpu_window.sh"), "prepare"], capture_output=True, text=True,
                       timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    wheels = [p.name for p in (tree / ".whl").iterdir() if p.suffix == ".whl"]
    assert len(wheels) == 1 and "-cp312-cp312-" in wheels[0], wheels
    stamp = dict(ln.split("=", 1) for ln in (tree / ".whl" / "STAMP").read_text().split() if "=" in ln)
    from prepare_stamp import digests
    assert {k: stamp[k] for k in ("native", "python")} == digests(str(tree))
    assert stamp["wheel"] == wheels[0] and stamp["dirty"] == "no"
