"""HEDDLE_DUMP=fusion,schedule,passes,kernel_ir,sync,cuda,ptx,ptxas (comma list) prints those stages
to stderr when a kernel is built — also when its binary comes from the cache."""
import os
import sys

STAGES = ("fusion", "schedule", "passes", "kernel_ir", "sync", "cuda", "ptx", "ptxas", "partition")


def requested():
    raw = os.environ.get("HEDDLE_DUMP", "")
    names = {s.strip() for s in raw.split(",") if s.strip()}
    if "all" in names:
        return set(STAGES)
    unknown = names - set(STAGES)
    if unknown:
        print(f"heddle: HEDDLE_DUMP names unknown stage(s) {sorted(unknown)}; known: {', '.join(STAGES)}",
              file=sys.stderr)
    return names


def dump(stage: str, text) -> None:
    """Print `text` (a string or a callable returning one) under a header when `stage` is requested."""
    if stage not in requested():
        return
    body = text() if callable(text) else text
    sys.stderr.write(f"===== heddle {stage} =====\n{body}")
    if not body.endswith("\n"):
        sys.stderr.write("\n")
