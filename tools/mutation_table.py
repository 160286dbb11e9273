"""The source-mutation campaign over every kernel family (tests/support/mutation_defs.py): every mutant kind
(heddle.core.source_mutants, kinds="all") of each family's representative kernel is interpreted, and the
kill table per family and per kind is printed or written into docs/verification.md between the
generated-section markers (benchmarks/report.py's replace_section), so it can be regenerated after a merge:

    PYTHONPATH=python python3 tools/mutation_table.py --write docs/verification.md [--families f ...] [--json out]

Survivors are listed under the table with their kind, line and edit. The results behind the table are kept in
docs/data/mutation.json, so a new or changed family is run alone and merged into them:

    PYTHONPATH=python python3 tools/mutation_table.py --update docs/data/mutation.json --families f ... \
        --json docs/data/mutation.json --write docs/verification.md"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "tests"), os.path.join(ROOT, "benchmarks")]

from support.mutation_defs import FAMILIES, family_kernel  # noqa: E402
from report import replace_section  # noqa: E402

from heddle.core.interpret import mutation_kill_rate  # noqa: E402
from heddle.core.source_mutants import ALL_KINDS, MAP_KINDS  # noqa: E402

SECTION = "mutation kill table"
DOC_TOOL = "tools/mutation_table.py"


def parse_table(text: str) -> dict:
    """The results a generated section of `text` shows (the inverse of render, for families it names): the
    kill counts per kind from the table's cells and the survivors from the list under it; a family's seconds
    are not shown per family, so they come back as None."""
    begin = text.index(f"<!-- BEGIN GENERATED: {SECTION} ({DOC_TOOL}) -->")
    lines = text[begin:text.index(f"<!-- END GENERATED: {SECTION} -->")].splitlines()
    head = next(ln for ln in lines if ln.startswith("| family |"))
    kinds = [c.strip().strip("`") for c in head.strip("|").split("|")[2:]]
    out = {}
    for ln in lines:
        m = re.match(r"\| (\w+) \(.*?\) \| \d+ / \d+ \|(.*)\|$", ln)
        if not m:
            continue
        cells = [c.strip() for c in m.group(2).split("|")]
        by_kind = {k: [int(x) for x in c.split("/")] for k, c in zip(kinds, cells) if c}
        out[m.group(1)] = {"by_kind": by_kind, "survivors": [], "seconds": None}
    for ln in lines:
        m = re.match(r"- (\w+): `(\w+)` line (\d+): (.*)$", ln)
        if m and m.group(1) in out:
            out[m.group(1)]["survivors"].append([m.group(2), int(m.group(3)), m.group(4)])
    return out


def campaign(families, kinds="all", log=print, save=None) -> dict:
    """{family: {'by_kind': {kind: [killed, total]}, 'survivors': [[kind, line, what]], 'seconds'}}; save:
    a path the results so far are written to after each family."""
    out = {}
    for name in families:
        t0 = time.time()
        k, ins, sms = family_kernel(name)
        res = mutation_kill_rate(k, *ins, sms=sms, kinds=kinds)
        out[name] = {"by_kind": {kk: list(v) for kk, v in res["by_kind"].items()},
                     "survivors": [[m.kind, m.line, m.what] for m in res["survivors"]],
                     "seconds": round(time.time() - t0, 1)}
        log(f"{name}: {res['killed']}/{res['total']} killed in {out[name]['seconds']} s" +
            "".join(f"\n  survivor {m.kind} line {m.line}: {m.what}" for m in res["survivors"]))
        if save:
            json.dump(out, open(save, "w"), indent=1)
    return out


def render(results: dict) -> str:
    kinds = [k for k in list(ALL_KINDS) + list(MAP_KINDS) if any(k in r["by_kind"] for r in results.values())]
    head = "| family | killed / mutants | " + " | ".join(f"`{k}`" for k in kinds) + " |"
    rows = [head, "|" + "---|" * (len(kinds) + 2)]
    col = {k: [0, 0] for k in kinds}
    for name, r in results.items():
        kk = sum(v[0] for v in r["by_kind"].values())
        tt = sum(v[1] for v in r["by_kind"].values())
        cells = []
        for k in kinds:
            v = r["by_kind"].get(k)
            cells.append(f"{v[0]}/{v[1]}" if v else "")
            if v:
                col[k][0] += v[0]
                col[k][1] += v[1]
        rows.append(f"| {name} ({FAMILIES[name][4]}) | {kk} / {tt} | " + " | ".join(cells) + " |")
    tk = sum(v[0] for v in col.values())
    tt = sum(v[1] for v in col.values())
    rows.append(f"| **every family** | **{tk} / {tt}** | " + " | ".join(f"{a}/{b}" for a, b in col.values()) + " |")
    surv = [f"- {name}: `{kind}` line {line}: {what}" for name, r in results.items() for kind, line, what in r["survivors"]]
    timed = [r["seconds"] for r in results.values() if r.get("seconds") is not None]
    when = f"in {sum(timed):.0f} s" if len(timed) == len(results) else "in earlier runs" if not timed else \
        f"in {sum(timed):.0f} s for {len(timed)} of the {len(results)} families; the others in earlier runs"
    return "\n".join(rows + ["", f"Survivors ({len(surv)}; classified in the text below):", ""] + (surv or ["- none"]) +
                     ["", f"(generated by `tools/mutation_table.py --write docs/verification.md` {when})"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--families", nargs="*", default=list(FAMILIES))
    ap.add_argument("--kinds", nargs="*", default=None, help="only these kinds (default: all)")
    ap.add_argument("--write", metavar="MD", help="replace the generated section of this markdown file")
    ap.add_argument("--json", metavar="PATH", help="also write the raw results")
    ap.add_argument("--load", metavar="PATH", help="render results saved with --json instead of running")
    ap.add_argument("--update", metavar="PATH", help="rerun --families x --kinds and replace them in these saved "
                    "results (after a fix to one kind's checks, or for a new family), then render the whole; a .md "
                    "path reads the results its generated table shows")
    a = ap.parse_args(argv)
    if a.load:
        results = json.load(open(a.load))
    elif a.update:
        src = open(a.update).read()
        results = parse_table(src) if a.update.endswith(".md") else json.loads(src)
        for name, r in campaign(a.families, a.kinds or "all", log=lambda s: print(s, file=sys.stderr, flush=True)).items():
            old = results.setdefault(name, {"by_kind": {}, "survivors": [], "seconds": 0})
            full = set(r["by_kind"]) >= set(old["by_kind"])  # every kind rerun: this run's time is the family's
            old["by_kind"].update(r["by_kind"])
            old["survivors"] = [x for x in old["survivors"] if x[0] not in r["by_kind"]] + r["survivors"]
            old["seconds"] = r["seconds"] if full or old["seconds"] is None else round(old["seconds"] + r["seconds"], 1)
    else:
        results = campaign(a.families, a.kinds or "all", log=lambda s: print(s, file=sys.stderr, flush=True),
                           save=a.json)
    results = {**{f: results[f] for f in FAMILIES if f in results}, **results}  # the families' own order
    if a.json:
        json.dump(results, open(a.json, "w"), indent=1)
    table = render(results)
    if a.write:
        text = open(a.write).read()
        open(a.write, "w").write(replace_section(text, SECTION, table, tool="tools/mutation_table.py"))
    else:
        print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
