"""The role graph (lower/analysis/role_graph.h): roles from the definitions of circular-buffered
tensors, one edge per producer -> consumer pair with any number of edges, ScheduleErrors naming a
cycle, incompatible stage positions or stage counts, ping-pong as an order edge; the lowered Hopper
kernels' graphs and their Mermaid pictures (kernel.explain(format="mermaid"))."""
import pytest

from heddle import InputError, ScheduleError
from heddle import _C
from support.wgmma_defs import build

K, T = "k loop", "tile loop"


def op(label, role, pos, writes=(), reads=()):
    return (label, role, pos, [tuple(w) for w in writes], list(reads))


def test_a_second_producer_is_one_more_edge():
    # load -> mma (sA, sB), mma -> epilogue (acc, staged), bias_load -> epilogue (sBias): three rings
    g = _C.role_graph_lab(
        ["load", "mma", "epilogue", "bias_load"],
        [op("tma sA", 0, K, [("sA", 4)]), op("tma sB", 0, K, [("sB", 4)]),
         op("mma", 1, K, [("acc", 2, True, T)], ["sA", "sB"]),
         op("tma sBias", 3, T, [("sBias", 2)]),
         op("epilogue", 2, T, [], ["acc", "sBias"])])
    assert g["edges"] == [(0, 1, "ring", ["sA", "sB"], 4, K, False),
                          (1, 2, "ring", ["acc"], 2, T, True),
                          (3, 2, "ring", ["sBias"], 2, T, False)]
    topo = g["topo"]
    for a, b, *_ in g["edges"]:
        assert topo.index(a) < topo.index(b)
    assert g["positions"] == [K, T, "", T]
    assert g["str"] == ("load -(sA, sB)-> mma; mma -(acc, staged in shared memory)-> epilogue; "
                        "bias_load -(sBias)-> epilogue")


def test_many_edges_fan_out_and_in():
    # two producers feed two consumers that both feed a sink: 2*2 + 2 = 6 edges, each its own ring
    ops = [op("p0", 0, K, [("x0", 3)]), op("p1", 1, K, [("x1", 3)])]
    ops += [op(f"c{i}", 2 + i, K, [(f"y{i}", 2)], ["x0", "x1"]) for i in range(2)]
    ops += [op("sink", 4, T, [], ["y0", "y1"])]
    g = _C.role_graph_lab(["p0", "p1", "c0", "c1", "sink"], ops)
    assert [(a, b) for a, b, *_ in g["edges"]] == [(0, 2), (0, 3), (1, 2), (1, 3), (2, 4), (3, 4)]
    assert g["topo"].index(4) == 4


def test_a_cycle_is_named():
    ops = [op("a", 0, K, [("x", 2)], ["z"]), op("b", 1, K, [("y", 2)], ["x"]), op("c", 2, K, [("z", 2)], ["y"])]
    with pytest.raises(ScheduleError) as ei:
        _C.role_graph_lab(["ra", "rb", "rc"], ops)
    m = str(ei.value)
    assert "ra -(x)-> rb -(y)-> rc -(z)-> ra" in m and "cycle" in m
    # two roles feeding each other
    with pytest.raises(ScheduleError, match=r"ra -\(x\)-> rb -\(y\)-> ra"):
        _C.role_graph_lab(["ra", "rb"], [op("a", 0, K, [("x", 2)], ["y"]), op("b", 1, K, [("y", 2)], ["x"])])


def test_ping_pong_is_an_order_edge_not_a_cycle():
    g = _C.role_graph_lab(["load", "mma"], [op("tma", 0, K, [("sA", 4)]), op("mma", 1, K, [], ["sA"])], [1])
    assert g["edges"][-1] == (1, 1, "order", ["order"], 2, "", False)
    assert "mma -(order: warpgroups take turns)-> mma" in g["str"]


def test_incompatible_stage_positions_are_named():
    ops = [op("tma sA", 0, K, [("sA", 4)]), op("tma sBias", 0, T, [("sBias", 2)]),
           op("mma", 1, K, [], ["sA", "sBias"])]
    with pytest.raises(ScheduleError) as ei:
        _C.role_graph_lab(["load", "mma"], ops)
    m = str(ei.value)
    assert "role 'load' produces tensors at different stage positions" in m
    assert "sA at the k loop" in m and "sBias at the tile loop" in m and "their own producer role" in m


def test_one_edge_needs_one_stage_count_and_one_producer():
    ops = [op("tma sA", 0, K, [("sA", 4)]), op("tma sB", 0, K, [("sB", 3)]), op("mma", 1, K, [], ["sA", "sB"])]
    with pytest.raises(ScheduleError, match=r"sA \(4 stages\) and sB \(3 stages\) go from role 'load' to role 'mma'"):
        _C.role_graph_lab(["load", "mma"], ops)
    ops = [op("tma sA", 0, K, [("sA", 4)]), op("copy sA", 1, K, [("sA", 4)]), op("mma", 2, K, [], ["sA"])]
    with pytest.raises(ScheduleError, match="written by roles 'l0' .* and 'l1'"):
        _C.role_graph_lab(["l0", "l1", "mma"], ops)


# --- the lowered Hopper kernels ---------------------------------------------------------------------

def test_hopper_kernels_graphs():
    low = build("3role", stages=4, prefetch=2).lower("sm_90a")
    assert low.sync_summary.startswith(
        "roles: load -(sA, sB)-> mma; mma -(acc, staged in shared memory)-> epilogue; ring sA, sB: 4 stages")
    low = build("pingpong", stages=4, prefetch=2).lower("sm_90a")
    assert "load -(sA, sB)-> mma; mma -(order: warpgroups take turns)-> mma" in low.sync_summary
    assert low.count_syncs("mbarrier.init") == 2 * 4 + 2  # full/empty per stage + order[2]


def test_mermaid_draws_roles_buffers_and_mbarriers():
    m = build("3role", stages=4, prefetch=2).lower("sm_90a").explain(format="mermaid")
    lines = m.splitlines()
    assert lines[0] == "flowchart LR"
    assert 'r0["load<br/>warps 0-3, setmaxnreg 40"]' in m and 'r2["epilogue<br/>warps 8-11, setmaxnreg 232"]' in m
    assert 'e0[("sA, sB<br/>4 stages<br/>full[4], empty[4]")]' in m
    assert '  r0 -->|"arrive.expect_tx full[j%4], TMA"| e0' in lines
    assert '  e0 -->|"wait full[i%4] parity (i/4)%2"| r1' in lines
    assert '  r1 -.->|"arrive empty[(i+3)%4]; producer waits parity (j/4)%2"| r0' in lines
    assert any(l.startswith('  e1[("sC (accumulator acc)') and "fullC[" in l for l in lines)
    pp = build("pingpong", stages=3, prefetch=1).lower("sm_90a").explain(format="mermaid")
    assert '  r1 -.->|"order[2]: wait order[c] parity (u+1-c)%2; arrive order[1-c] after its k loop"| r1' in pp
    plain = build("pipeline", stages=3, prefetch=1).lower("sm_90a").explain(format="mermaid")
    assert 'cta["all 128 threads"]' in plain and "sA<br/>3 stages" in plain and "full[3]" in plain
    with pytest.raises(InputError, match="formats are 'text'"):
        build("pipeline").lower("sm_90a").explain(format="dot")


def _lower_with(roles, wgs=1, bm=64):
    from support.wgmma_defs import schedule_sm90
    from support.matmul_defs import matmul_fusion
    fd, a, b = matmul_fusion(n=72, k=16 * 13, dtype="bf16")
    schedule_sm90(fd, a, b, bm=bm, bn=64, bk=16, wgs=wgs, stages=4, prefetch=2, roles=roles)
    return fd.lower("sm_90a")


def test_roles_take_their_work_from_data_flow_not_only_from_names():
    # unnamed roles take the data-flow positions (TMA producer -> MMA -> epilogue) in the order given
    named = _lower_with({"load": {"warps": 1, "registers": 40}, "mma": {"warpgroups": 1, "registers": 232},
                         "epilogue": {"warpgroups": 1, "registers": 232}})
    free = _lower_with({"tma_warp": {"warps": 1, "registers": 40}, "tc": {"warpgroups": 1, "registers": 232},
                        "writer": {"warpgroups": 1, "registers": 232}})
    assert free.sync_summary == named.sync_summary.replace("load", "tma_warp").replace(" mma", " tc").replace("epilogue", "writer")
    assert free.structure == named.structure
    free2 = _lower_with({"w0": 1, "w1": {"warpgroups": 2}}, wgs=2, bm=128)
    assert free2.sync_summary.startswith("roles: w0 -(sA, sB)-> w1;")
    # a named role keeps its position wherever it stands; the others fill the rest in order
    mixed = _lower_with({"first": 1, "epilogue": {"warpgroups": 1}, "second": {"warpgroups": 1}})
    assert "first -(sA, sB)-> second; second -(acc, staged in shared memory)-> epilogue" in mixed.sync_summary
    with pytest.raises(ScheduleError, match="role 'extra' has no work left"):
        _lower_with({"load": 1, "mma": {"warpgroups": 1}, "epilogue": {"warpgroups": 1}, "extra": 1})


def test_every_mbarrier_init_names_its_edge_stage_and_parity():
    low = build("3role", stages=4, prefetch=2).lower("sm_90a")
    inits = [e for e in low.sync_plan if e["hazards"] in ("init full", "init empty", "init fullC", "init emptyC")]
    assert len(inits) == 2 * 4 + 2 * 2
    for e in inits:
        assert "edge load -> mma (sA, sB)" in e["mechanism"] or "edge mma -> epilogue (sC)" in e["mechanism"], e
        assert e["stage"] != "" and "parity (" in e["mechanism"], e
    full1 = next(e for e in inits if e["hazards"] == "init full" and e["stage"] == "1")
    assert "phase q completes when item 1+4q has landed, the consumer waits parity (i/4)%2" in full1["mechanism"]
