#!/usr/bin/env bash
# The GPU window (docs/gpu-window.md): prepare here, run there in one command, read the results here.
#
#   tools/gpu_window.sh prepare              # CPU machine: cp312 wheel of heddle into .whl/ (+ .whl/STAMP)
#   tools/gpu_window.sh run OUT [opts]       # GPU machine: every stage, about 7 minutes (--budget 420)
#   tools/gpu_window.sh rerun OUT --families F,G [--only families,sanitize] [--budget 240]
#                                            # second command: named families / stages only
#   tools/gpu_window.sh --dry-run [OUT]      # anywhere, no GPU: every stage end to end (CI runs this)
#   tools/gpu_window.sh report OUT           # CPU machine: OUT/bench.jsonl -> docs/perf.md rows and plots
#
# On the device tool: run "tools/gpu_window.sh run $OUT" with carry [".whl"] and timeout_s about 480.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python3}"
cmd="${1:-}"
shift || true
case "$cmd" in
  prepare)
    PY312="${PY312:-}"
    if [ -z "$PY312" ]; then  # the first Python 3.12 that runs (a pyenv shim may exist without its version active)
      for p in "$(command -v python3.12 || true)" "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/3.12*/bin/python3.12; do
        if [ -n "$p" ] && [ -x "$p" ] && "$p" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
          PY312="$p"; break
        fi
      done
    fi
    [ -n "$PY312" ] || { echo "prepare: no Python 3.12 found (set PY312=/path/to/python3.12)" >&2; exit 2; }
    mkdir -p "$ROOT/.whl"
    rm -f "$ROOT"/.whl/heddle-*.whl "$ROOT/.whl/STAMP"
    echo "prepare: building the cp312 wheel with $PY312 ..."
    (cd "$ROOT" && "$PY312" -m pip wheel -q --no-deps -w .whl . -Cbuild-dir=build/window-cp312)
    {
      echo "commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
      echo "dirty=$([ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ] && echo yes || echo no)"
      echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
      echo "python_version=$("$PY312" -c 'import platform; print(platform.python_version())')"
      echo "wheel=$(cd "$ROOT/.whl" && ls heddle-*.whl)"
      "$PY" "$ROOT/tools/window/prepare_stamp.py" "$ROOT"
    } > "$ROOT/.whl/STAMP"
    cat "$ROOT/.whl/STAMP"
    du -sh "$ROOT/.whl"
    ;;
  run)
    [ $# -ge 1 ] || { echo "usage: $0 run OUT [--budget S] [--families F,G] [--only STAGES]" >&2; exit 2; }
    exec "$PY" "$ROOT/tools/window/window.py" run "$@"
    ;;
  rerun)
    [ $# -ge 1 ] || { echo "usage: $0 rerun OUT --families F,G [--only STAGES] [--budget S]" >&2; exit 2; }
    out="$1"; shift
    exec "$PY" "$ROOT/tools/window/window.py" run "$out" --budget 240 --only install,smoke,families,sanitize "$@"
    ;;
  --dry-run|dry-run)
    out="${1:-${TMPDIR:-/tmp}/heddle-window-dry}"
    rm -rf "$out"
    exec "$PY" "$ROOT/tools/window/window.py" dry "$out" --budget "${BUDGET:-1500}"
    ;;
  report)
    [ $# -ge 1 ] || { echo "usage: $0 report OUT" >&2; exit 2; }
    exec "$PY" "$ROOT/benchmarks/report.py" --window "$1/bench.jsonl"
    ;;
  *)
    sed -n '2,12p' "$0" >&2
    exit 2
    ;;
esac
