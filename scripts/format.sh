#!/usr/bin/env bash
# Formats the project's C and C++ sources with clang-format-19 and the
# root .clang-format (LLVM style, 100 columns).
#   scripts/format.sh           rewrite the files in place
#   scripts/format.sh --check   list the files that are not formatted; exit 1 if any
set -euo pipefail
cd "$(dirname "$0")/.."
CF=${CLANG_FORMAT:-clang-format-19}
command -v "$CF" >/dev/null || { echo "format: $CF not found (apt-get install clang-format-19)" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.c')
if [ "${1:-}" = "--check" ]; then
  bad=0
  for f in "${files[@]}"; do
    if ! "$CF" --dry-run --Werror "$f" >/dev/null 2>&1; then echo "$f"; bad=1; fi
  done
  exit $bad
fi
"$CF" -i "${files[@]}"
