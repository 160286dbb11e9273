"""The TMA-store epilogue of a fusion with two outputs (training: D = gelu(x @ w + bias) and the
pre-activation D1 a backward keeps; passes/tma_store_epilogue.cpp): each output has staging slots of its own
(sD, sD1: same chunks, same 128-byte swizzled boxes), the pair program's results for both are written by
stmatrix before the one fence.proxy.async + named barrier, and the elected thread issues both TMA stores
(tmD, tmD1) in ONE bulk group per chunk, so the wait_group.read accounting stays per chunk.

Checked here: the lowered plan (name, shared-memory plan, explain lines, the two stores before one commit),
the kernel-IR simulator (clean with float64-right numbers for BOTH outputs, a wrong D1 caught, every sync
mutant killed), the CPU interpreter of the printed source (both outputs on ragged M / N, cooperative and
ping-pong; source mutants: D1's store before the barrier, the proxy fence between sD's and sD1's writes),
NVRTC for sm_90a (no spills, two bulk tensor stores per chunk, no st.global), the automatic schedule
(heddle.matmul's saved= op gets it) and the ScheduleErrors for what is not built."""
import re

import pytest
import torch

import heddle
from support.env import requires_nvrtc
from heddle.core.interpret import _Mutated
from heddle.interpret import interpret
from support.wgmma_defs import (assert_every_source_mutant_killed, assert_interprets_clean, assert_simulates_clean,
                         assert_store_protocol_mutants_killed, build, inputs, killed_sync_mutants, nvrtc_sm90,
                         roles_for, schedule_sm90)
from support.interp_defs import needs_cxx
from support.matmul_defs import matmul_fusion


def two_out(variant="coop", n=200, bn=128, stages=3, prefetch=1, **kw):
    return build(variant, stages=stages, prefetch=prefetch, n=n, bn=bn, store="tma", epilogue="bias_gelu_saved", **kw)


def f32_outputs(variant="coop", n=72, k=16 * 7, saved="f32", out="f32"):
    """bf16 inputs, D = gelu(x @ w + bias) and D1 = the pre-activation, in the dtypes given."""
    fd = heddle.Fusion()
    a = fd.input("a", "bf16", ["M", k])
    b = fd.input("b", "bf16", [k, n])
    pre = fd.matmul(a, b, False, False) + fd.input("bias", "bf16", [n])
    fd.output(heddle.ops.gelu(pre).to(out))
    fd.output(pre.to(saved))
    schedule_sm90(fd, a, b, bm=128 if variant == "coop" else 64, bn=64, bk=16, wgs=2 if variant == "coop" else 1,
                  stages=3, prefetch=1, roles=roles_for(variant))
    fd.matmul_tensor.epilogue_store("tma")
    return fd


@pytest.mark.parametrize("variant,suffix,barrier,slot", [
    ("coop", "_ws2coop_40_232_tmas2", "named_barrier(2, 256)", "sD1 + ((tl * 2 + 1) % 2) * 8192"),
    ("pingpong", "_ws2pp_40_232_tmas2", "named_barrier(2 + (warp - 4) / 4, 128)",
     "sD1 + ((warp - 4) / 4 * 2 + (u * 2 + 1) % 2) * 4096")])
def test_plan_stages_both_outputs_and_stores_them_in_one_bulk_group(variant, suffix, barrier, slot):
    low = two_out(variant).lower("sm_90a")
    assert low.name.endswith("_obf16" + suffix), low.name
    text, src = low.explain(), low.source
    assert ("TMA store of D and D1 in 2 chunk(s) of 64 columns through sD[2] and sD1[2] (one bulk group per chunk)"
            in text.splitlines()[0]), text.splitlines()[0]
    assert "RAW sD, sD1 (stmatrix -> tma_store)" in text
    assert "close the one bulk group of this chunk's 2 stores (sD, sD1)" in text
    # shared memory: sD1 as large as sD, 1024-byte aligned (a 128-byte swizzled box)
    plan = {s["buffer"]: s for s in low.smem_plan}
    assert plan["sD1"]["bytes"] == plan["sD"]["bytes"] == (2 if variant == "coop" else 4) * low.tile["bm"] * 128
    assert plan["sD1"]["offset"] % 1024 == 0
    # a map per output, D1's at D's box
    maps = {m["param"]: m for m in low.tensor_maps}
    assert maps["tmD1"]["operand"] == "D1" and maps["tmD1"]["box_cols"] == maps["tmD"]["box_cols"] == 64
    # per chunk (a macro each): both stmatrix before the fence, then ONE barrier, both stores, ONE commit
    assert src.count("heddle::sm90::stmatrix_x4(sD1 + ") == 2 and src.count("heddle::sm90::stmatrix_x4(sD + ") == 2
    assert src.count("bulk_commit();") == 2 and src.count("(&tmD1, ") == 2 and src.count("(&tmD, ") == 2
    chunk = src[src.index("heddle::sm90::fence_proxy_async();"):src.index("bulk_commit();")]
    assert chunk.index(barrier) < chunk.index("(&tmD, ") < chunk.index("(&tmD1, ")
    assert f"tma_store_tile<heddle::sm90::TmaTile<{low.tile['bm']}, 64, heddle::bf16>, 2>(&tmD1, m0, n0 + 64, 0, {slot});" \
        in src
    # nothing stores D1 from registers
    assert "D1[(long long)" not in src and "if (row < M && col < N)" not in src


@pytest.mark.parametrize("variant", ["coop", "pingpong"])
def test_simulator_clean_with_right_numbers_for_both_outputs(variant):
    assert_simulates_clean(two_out(variant), label=variant)


def test_simulator_checks_d1_numbers():
    # the reference tuple (D, D1) is checked output by output: a wrong D1 is a mismatch naming D1
    from heddle import verify
    from heddle.reference import evaluate
    fd = two_out()
    ins = inputs(fd, 77, seed=3)
    d, d1 = evaluate(fd, ins)
    good = verify.simulate(fd.lower("sm_90a"), ins, reference=(d, d1))
    assert good.ok, good.report()
    out, out1 = good.outputs
    assert torch.allclose(out1, d1.float(), atol=4e-2, rtol=2e-2) and not torch.allclose(out1, out)
    bad = verify.simulate(fd.lower("sm_90a"), ins, reference=(d, d1 + 1))
    assert not bad.ok and "D1[0][" in bad.report(), bad.report()


def test_simulator_runs_f32_outputs_clean():
    # 4-byte outputs: 32-column chunks, two floats per pair into each output's slot
    fd = f32_outputs()
    low = fd.lower("sm_90a")
    assert "TMA store of D and D1 in 2 chunk(s) of 32 columns" in low.explain().splitlines()[0]
    assert_simulates_clean(fd, Ms=(77,), label="f32")


@pytest.mark.parametrize("variant,at_least", [("coop", 40), ("pingpong", 50)])
def test_every_simulator_mutant_is_killed(variant, at_least):
    killed = killed_sync_mutants(two_out(variant), at_least=at_least)
    for sync in ("fence.proxy.async", "cp.async.bulk.wait_group.read", "bar.sync 2"):
        assert sync in killed, (sync, killed)


@needs_cxx
@pytest.mark.parametrize("variant,kw,M", [("coop", dict(), 77), ("pingpong", dict(), 130),
                                          ("coop", dict(n=72, bn=64, dtype="f16"), 130)])
def test_interpreter_numbers_for_both_outputs_on_ragged_shapes(variant, kw, M):
    # ragged M, N (200 / 72 against 128- / 64-column tiles), K = 104 against 16-deep k-tiles
    fd = two_out(variant, k=16 * 7 - 8, **kw)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    assert_interprets_clean(k, inputs(fd, M, seed=M), sms=1)
    r = interpret(k, *inputs(fd, M, seed=M), sms=1)
    assert r.ok and len(r.output) == 2 and r.output[1].shape == (M, kw.get("n", 200)), r.report()


@needs_cxx
def test_interpreter_numbers_for_f32_outputs():
    fd = f32_outputs(k=16 * 7 - 8)
    assert_interprets_clean(heddle.Kernel.build(fd, "sm_90a", rtc=False), inputs(fd, 77, seed=4), sms=1)


def _d1_store_before_the_barrier(src):
    """Every chunk's D1 store moved out of the issuing block to just before the barrier that publishes the
    chunk (its own issuing block: same thread, same bulk group)."""
    lines = src.split("\n")
    out, moved = [], 0
    for i, line in enumerate(lines):
        if "(&tmD1, " not in line:
            out.append(line)
            continue
        j = max(x for x in range(len(out)) if out[x].lstrip().startswith("if ("))  # the issuing block
        assert "named_barrier(" in out[j - 1], out[j - 1]
        ind = out[j - 1][:len(out[j - 1]) - len(out[j - 1].lstrip())]
        out[j - 1:j - 1] = [ind + out[j].strip(), line, ind + "}"]
        moved += 1
    assert moved == 2
    return "\n".join(out)


def _fence_between_the_buffers(src):
    """The proxy fence after sD's stmatrix but before sD1's (in the macro), instead of after both."""
    for st in [x for x in src.split("\n") if "heddle::sm90::stmatrix_x4(sD1 + " in x]:  # one per chunk
        ind = st[:len(st) - len(st.lstrip())]
        src = src.replace(st, ind + "heddle::sm90::fence_proxy_async(); \\\n" + st)
    return re.sub(r"\n *heddle::sm90::fence_proxy_async\(\);  // sync [^\n]*", "", src)


@needs_cxx
@pytest.mark.parametrize("variant", ["coop", "pingpong"])
@pytest.mark.parametrize("mutate,why", [(_d1_store_before_the_barrier, "read-after-write race on shared bytes"),
                                         (_fence_between_the_buffers, "missing fence.proxy.async")])
def test_interpreter_catches_the_second_buffers_protocol_broken(variant, mutate, why):
    fd = two_out(variant, n=128, bn=128)
    k = heddle.Kernel.build(fd, "sm_90a", rtc=False)
    assert_interprets_clean(k, inputs(fd, 130, seed=5), sms=1)
    r = interpret(_Mutated(k, mutate(k.lowered.source)), *inputs(fd, 130, seed=5), sms=1)
    # the TMA store of sD1 reads what the generic proxy wrote without the ordering it needs
    assert not r.ok and why in r.report() and "(&tmD1, " in r.report(), r.report()


@needs_cxx
def test_interpreter_source_mutants_of_the_store_protocol_killed():
    assert_store_protocol_mutants_killed(two_out(n=128, bn=128))


@needs_cxx
@pytest.mark.slow
@pytest.mark.parametrize("variant", ["coop", "pingpong"])
def test_interpreter_every_source_mutant_killed(variant):
    assert_every_source_mutant_killed(two_out(variant, n=128, bn=128))


@requires_nvrtc
@pytest.mark.parametrize("variant,kw,chunks", [
    ("coop", dict(bm=128, bn=256, bk=64), 4),
    ("pingpong", dict(bm=128, bn=128, bk=64), 2),
    ("coop", dict(bm=128, bn=128, bk=64, dtype="f16"), 2)])
def test_nvrtc_compiles_two_bulk_stores_per_chunk_without_spills(variant, kw, chunks):
    low = build(variant, stages=4, prefetch=2, n=1024, k=4096, store="tma", epilogue="bias_gelu_saved",
                **kw).lower("sm_90a")
    r = nvrtc_sm90(low)
    store = "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"
    assert r.ptx.count(store) == 2 * chunks, r.ptx.count(store)  # both maps used, every chunk
    assert r.ptx.count("cp.async.bulk.commit_group") == chunks
    assert "stmatrix.sync.aligned.m8n8.x4.shared.b16" in r.ptx and "fence.proxy.async" in r.ptx
    assert "st.global" not in r.ptx  # neither output is stored from registers


def _saved_op(saved, out="bf16"):
    from heddle.pytorch.matmul import MatmulSpec, fused_matmul_op
    spec = MatmulSpec(dtype="bf16", batched=False, batched_b=False, k=4096, n=1024, trans_a=False, trans_b=True,
                      bias=("bf16", 1), residual=None, activation="gelu", alpha=None, out_dtype=out, saved=saved)
    return fused_matmul_op(spec)


# ping-pong: 4 operand stages (128 KiB) leave room for one slot of each output per warpgroup (64 KiB), not two
@pytest.mark.parametrize("layout,tag", [("auto", "_ws2pp_40_232_tmas1"), ("cooperative", "_ws2coop_40_232_tmas2")])
def test_heddle_matmul_saved_op_gets_the_two_output_tma_store(layout, tag):
    fm = _saved_op("bf16")
    fm.epilogue_layout = layout
    k = fm.kernel("sm_90a", 8, 8, m=4096, rtc=False, sms=132)
    assert "_obf16" in k.name and k.name.endswith(tag), k.name
    assert "TMA store of D and D1" in k.lowered.explain().splitlines()[0]
    assert "(&tmD1, " in k.lowered.source
    assert "TMA store" in fm.describe("sm_90a", sms=132).splitlines()[-1]


def test_heddle_matmul_saved_in_another_element_size_keeps_the_direct_store():
    k = _saved_op("f32").kernel("sm_90a", 8, 8, m=4096, rtc=False, sms=132)
    assert "_of32" in k.name and "_tmas" not in k.name and "tma_store_tile" not in k.lowered.source, k.name


def test_schedule_counts_both_staging_buffers():
    # bm 128 x bn 256 x bk 64 with 4 stages: 192 KiB of operands; beside them two 16 KiB slots of one output
    # fit the 227 KiB, but two slots of each of two outputs (64 KiB) do not: one slot per output
    one = build("coop", stages=4, prefetch=2, n=1024, k=4096, bm=128, bn=256, bk=64, store="tma").lower("sm_90a")
    two = build("coop", stages=4, prefetch=2, n=1024, k=4096, bm=128, bn=256, bk=64, store="tma",
                epilogue="bias_gelu_saved").lower("sm_90a")
    assert one.name.endswith("_tmas2") and two.name.endswith("_tmas1"), (one.name, two.name)
    three = build("coop", stages=3, prefetch=1, n=1024, k=4096, bm=128, bn=256, bk=64, store="tma",
                  epilogue="bias_gelu_saved").lower("sm_90a")
    assert three.name.endswith("_tmas2"), three.name
    assert three.smem_bytes <= 227 * 1024


@pytest.mark.parametrize("build_it,match", [
    (lambda: f32_outputs(saved="bf16"), r"output .* \(bf16\) and output .* \(f32\) differ in element size"),
    (lambda: build("3role", epilogue="bias_gelu_saved", k=16 * 5), "2 outputs, but an epilogue role stores one tile"),
])
def test_what_is_not_built_is_a_named_error(build_it, match):
    with pytest.raises(heddle.ScheduleError, match=match):
        build_it().lower("sm_90a")


def test_auto_epilogue_role_with_two_outputs_is_a_named_error():
    fd, _, _ = matmul_fusion(n=1024, k=4096, dtype="bf16", layout="NT", epilogue="bias_gelu_saved")
    with pytest.raises(heddle.ScheduleError, match="'epilogue_role' stages one output tile .* 2 outputs"):
        fd.auto_schedule("sm_90a", m=4096, n=1024, k=4096, epilogue_layout="epilogue_role")
