#!/usr/bin/env bash
# clang-format over heddle's C++ (.clang-format at the repository root):
#   tools/format.sh --check   list the files whose formatting differs, exit 1 if any (changes nothing)
#   tools/format.sh --fix     rewrite those files in place
# Files: src/heddle/**/*.{h,cpp} and the tests' C++ (tests/**/*.{h,cpp,c}; not the hand-written .cu kernels,
# whose line numbers the interpreter tests read in reports). Not the device headers
# (src/heddle/codegen/device/*.cuh) nor the interpreter runtime (src/heddle/interp/rt/*): both are
# embedded as text into printed kernels / host builds, so their bytes are part of the printed sources.
# clang-format: the PyPI wheel (pip install clang-format, pinned in ci/constraints.txt), or $CLANG_FORMAT.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
if [[ "$mode" != "--check" && "$mode" != "--fix" ]]; then
  echo "usage: tools/format.sh --check | --fix" >&2
  exit 2
fi
cf=${CLANG_FORMAT:-clang-format}
if ! command -v "$cf" >/dev/null; then  # the wheel's binary where its script folder is not on PATH
  cf=$(python3 -c 'import clang_format, os; print(os.path.join(os.path.dirname(clang_format.__file__), "data", "bin", "clang-format"))' 2>/dev/null || echo clang-format)
fi
if ! command -v "$cf" >/dev/null; then
  echo "tools/format.sh: $cf not found (pip install clang-format, or set CLANG_FORMAT)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files 'src/heddle/*.h' 'src/heddle/*.cpp' 'tests/*.h' 'tests/*.cpp' 'tests/*.c' |
                     grep -v -e '^src/heddle/codegen/device/' -e '^src/heddle/interp/rt/')
if [[ "$mode" == "--fix" ]]; then
  "$cf" -i --style=file "${files[@]}"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! "$cf" --style=file --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "$f"
    bad=$((bad + 1))
  fi
done
echo "tools/format.sh: $bad of ${#files[@]} files differ from .clang-format" >&2
[[ $bad -eq 0 ]]
