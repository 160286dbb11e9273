"""The catalogue of source-mutant kinds (heddle.core.source_mutants, issue 28): every kind generates
mutants for the families it applies to (a printer change cannot make one vanish silently), a sample of
each kind is killed on one representative kernel per family in the default run, and the full campaign
(tools/mutation_table.py; the kill table in docs/verification.md) leaves only the documented survivors."""
import json
import os
import sys

import pytest

from heddle.core.source_mutants import ALL_KINDS, DEFAULT_KINDS, MAP_KINDS, map_mutants, source_mutants
from heddle.interpret import mutation_kill_rate
from support.interp_defs import needs_cxx
from support.mutation_defs import FAMILIES, KNOWN_SURVIVORS, family_kernel

CATALOGUE = set(ALL_KINDS) - set(DEFAULT_KINDS)
_SM90 = {"grow_expect_tx", "init_count", "pre_arrive_count", "stage_modulo", "tma_coord", "elect_mask", "fence_kind",
         "delete_fence"}
_ROLES = _SM90 | {"setmaxnreg_value", "setmaxnreg_move"}
_MAPS = {"map_box", "map_dims", "map_stride", "map_swizzle", "map_dtype", "map_oob_fill", "map_l2"}
APPLIES = {  # family -> the catalogue kinds that must generate mutants for its kernel
    "sm80_cp_async": {"stage_modulo"},
    "sm80_split_k": {"stage_modulo", "flag_count"},
    "sm80_stream_k": {"stage_modulo", "flag_count"},
    "sm90_pipeline": _SM90 | {"flip_parity_role"} | _MAPS,
    "sm90_coop": _ROLES | {"tile_stride"} | _MAPS,
    "sm90_pingpong": _ROLES | {"tile_stride"} | _MAPS,
    "sm90_3role": _ROLES | {"tile_stride", "named_barrier_count", "named_barrier_id"} | _MAPS,
    "sm90_cluster": _ROLES | {"tile_stride", "multicast_mask", "remote_rank", "flip_parity_role"} | _MAPS,
    "sm90_tma_store": _ROLES | {"tile_stride", "named_barrier_count", "named_barrier_id"} | _MAPS,
    "sm90_split_k": _SM90 | {"flag_count", "flip_parity_role"} | _MAPS,
    "sm90_stream_k": _ROLES | {"flag_count", "named_barrier_count", "named_barrier_id"} | _MAPS,
    "sm90_block": _ROLES | {"tile_stride", "promotion", "scale_ring"} | _MAPS,
    "sm90_fp8": _SM90 | {"flip_parity_role", "fp8_k_step", "fp8_drop_scale"} | _MAPS,
    "sm90_fp8_amax": _ROLES | {"quant_shuffle", "quant_mask", "quant_group", "quant_divisor"} | _MAPS,
    "sm100_tcgen05": _SM90 | {"tile_stride", "tmem_stage"} | _MAPS,
    "sm100_tma_store": _SM90 | {"tile_stride", "tmem_stage", "named_barrier_count", "named_barrier_id"} | _MAPS,
    "sm100_tma_store_amax": _SM90 | {"tile_stride", "tmem_stage", "named_barrier_count", "named_barrier_id", "quant_mask",
                                     "quant_group", "quant_divisor"} | _MAPS,
    "sm100_mxfp8": _SM90 | {"tile_stride"} | _MAPS,  # one accumulator stage: no tmem_stage mutant
    "sm100_mxfp8_amax": _SM90 | {"tile_stride", "quant_mask", "quant_group", "quant_divisor"} | _MAPS,
    "sm100_nvfp4": _SM90 | {"tile_stride"} | _MAPS,
    "sm100_mxfp4": _SM90 | {"tile_stride"} | _MAPS,
    "sm100_nvfp4_amax": _SM90 | {"tile_stride", "quant_mask", "quant_group", "quant_divisor"} | _MAPS,
    "sm100_mx_out": _SM90 | {"tile_stride", "mx_amax", "mx_code", "mx_offset", "mx_padding", "mx_inverse"} | _MAPS,
    "sm80_grouped": {"stage_modulo", "group_walk_bound", "group_walk_offset"},
    "sm90_grouped": _SM90 | {"group_walk_bound", "group_walk_offset"} | _MAPS,
    "sm80_masked": {"stage_modulo", "masked_rows", "group_walk_offset"},
    "sm100_grouped": _SM90 | {"group_walk_bound", "group_walk_offset"} | _MAPS,  # one accumulator stage
    "gfx90a_lds_dma": {"stage_modulo", "amd_fence"},
    "gfx942_lds_dma": {"stage_modulo", "amd_fence"},
    "gfx1200_split_barrier": {"stage_modulo", "amd_fence"},
}


def test_every_kind_generates_mutants_for_the_families_it_applies_to():
    seen = set()
    for fam, kinds in APPLIES.items():
        k, _, _ = family_kernel(fam)
        got = {m.kind for m in source_mutants(k.source, "all")} | {m.kind for m in map_mutants(k, "all")}
        assert kinds <= got, (fam, sorted(kinds - got))
        seen |= got
    assert CATALOGUE | set(MAP_KINDS) <= seen, sorted(CATALOGUE | set(MAP_KINDS) - seen)
    assert set(APPLIES) == set(FAMILIES)


def test_catalogue_kinds_are_opt_in():
    k, _, _ = family_kernel("sm90_cluster")
    assert {m.kind for m in source_mutants(k.source)} <= set(DEFAULT_KINDS)
    assert not map_mutants(k)
    assert {m.kind for m in source_mutants(k.source, ["remote_rank"])} == {"remote_rank"}


# Default run: per family, one or two catalogue kinds on its representative kernel (adversarial schedule):
# every mutant killed but the documented equivalents, and each kind kills at least one.
SAMPLES = [
    ("sm80_cp_async", ("stage_modulo",)),
    ("sm80_split_k", ("flag_count",)),
    ("sm80_stream_k", ("flag_count",)),
    ("sm90_pipeline", ("grow_expect_tx", "map_box")),
    ("sm90_coop", ("setmaxnreg_value",)),
    ("sm90_pingpong", ("pre_arrive_count",)),
    ("sm90_3role", ("named_barrier_count",)),
    ("sm90_cluster", ("multicast_mask",)),
    ("sm90_tma_store", ("map_dtype",)),
    ("sm90_split_k", ("flag_count",)),
    ("sm90_stream_k", ("named_barrier_count",)),
    ("sm90_fp8", ("fp8_k_step", "fp8_drop_scale")),
    ("sm90_fp8_amax", ("quant_mask",)),
    ("sm100_tcgen05", ("tile_stride",)),
    ("sm100_tma_store", ("named_barrier_count",)),
    ("sm100_tma_store_amax", ("quant_mask",)),
    ("sm100_mxfp8", ("tma_coord",)),
    ("sm100_mxfp8_amax", ("quant_mask",)),
    ("sm100_nvfp4", ("tma_coord",)),
    ("sm100_mxfp4", ("tma_coord",)),
    ("sm100_nvfp4_amax", ("quant_mask",)),
    ("sm100_mx_out", ("mx_offset", "mx_padding")),
    ("sm80_grouped", ("group_walk_bound", "group_walk_offset")),
    ("sm90_grouped", ("group_walk_bound", "group_walk_offset")),
    ("sm80_masked", ("masked_rows",)),
    ("sm100_grouped", ("group_walk_bound", "group_walk_offset")),
    ("gfx90a_lds_dma", ("stage_modulo",)),
    ("gfx942_lds_dma", ("stage_modulo",)),
    ("gfx1200_split_barrier", ("stage_modulo",)),
]


@needs_cxx
@pytest.mark.parametrize("fam,kinds", SAMPLES, ids=[f for f, _ in SAMPLES])
def test_catalogue_sample_killed(fam, kinds):
    k, ins, sms = family_kernel(fam)
    res = mutation_kill_rate(k, *ins, sms=sms, kinds=kinds, schedules=(("adversarial", 0),))
    for kind in kinds:
        assert res["by_kind"].get(kind, (0, 0))[0] >= 1, (kind, res["by_kind"])
    known = set(KNOWN_SURVIVORS.get(fam, []))
    assert not [m for m in res["survivors"] if (m.kind, m.what) not in known], res["survivors"]


@needs_cxx
@pytest.mark.slow
@pytest.mark.parametrize("fam", list(FAMILIES))
def test_campaign_leaves_only_the_documented_survivors(fam):
    # every kind on the family's kernel; a survivor not in KNOWN_SURVIVORS (classified in
    # docs/verification.md) is a new blind spot, one listed there that is now killed should leave the list
    k, ins, sms = family_kernel(fam)
    res = mutation_kill_rate(k, *ins, sms=sms, kinds="all")
    got = sorted((m.kind, m.what) for m in res["survivors"])
    assert got == sorted(KNOWN_SURVIVORS.get(fam, [])), got


def test_table_goes_between_the_generated_markers(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, os.path.join(root, "tools"))
    import mutation_table
    results = {"sm80_cp_async": {"by_kind": {"delete_sync": [8, 8], "stage_modulo": [2, 4]},
                                 "survivors": [["stage_modulo", 36, "ring index % 3 -> % 2"]], "seconds": 1.0}}
    (tmp_path / "r.json").write_text(json.dumps(results))
    doc = tmp_path / "v.md"
    doc.write_text("# head\n\ntext before\n")
    for _ in range(2):  # a second write replaces the section, it does not append another
        mutation_table.main(["--load", str(tmp_path / "r.json"), "--write", str(doc)])
    text = doc.read_text()
    assert text.startswith("# head\n\ntext before\n")
    assert text.count("<!-- BEGIN GENERATED: mutation kill table (tools/mutation_table.py) -->") == 1
    assert "| sm80_cp_async (sm_80 cp.async ring, 3 stages prefetch 2) | 10 / 12 | 8/8 | 2/4 |" in text
    assert "- sm80_cp_async: `stage_modulo` line 36: ring index % 3 -> % 2" in text


def test_saved_results_are_the_documented_table():
    # docs/data/mutation.json is what --update merges new families into: it must render exactly the table
    # docs/verification.md shows, and parse_table must read that table back (the --update *.md bootstrap)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, os.path.join(root, "tools"))
    import mutation_table
    saved = json.load(open(os.path.join(root, "docs", "data", "mutation.json")))
    doc = open(os.path.join(root, "docs", "verification.md")).read()
    assert mutation_table.render(saved) in doc
    parsed = mutation_table.parse_table(doc)
    assert list(parsed) == list(saved)
    for fam, r in saved.items():
        assert parsed[fam]["by_kind"] == r["by_kind"] and parsed[fam]["survivors"] == r["survivors"], fam
    assert set(saved) == set(FAMILIES), sorted(set(FAMILIES) ^ set(saved))
