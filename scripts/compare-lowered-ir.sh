#!/usr/bin/env bash
# Lowers every example with two builds of unroll-opt (e.g. the previous
# commit's and this one's) on the CPU, emulated-GPU and GPU (format=isa)
# pipelines and compares the outputs byte for byte: a refactoring of the
# compiler must leave them identical.
#   scripts/compare-lowered-ir.sh BASE_BIN NEW_BIN [OUT]   (exit 1 if any differ)
set -uo pipefail
B=${1:?bin folder of the base build}; N=${2:?bin folder of the new build}; O=${3:-out/lowered-ir}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$O"; diff=0; n=0
for f in "$ROOT"/examples/*.mlir; do
  e=$(basename "$f" .mlir)
  for p in "cpu:--lower-to-cpu" "emu:--lower-to-gpu-emulated" "gpu:--lower-to-gpu=format=isa"; do
    k=${p%%:*}; flag=${p#*:}
    "$B/unroll-opt" "$f" "$flag" -o "$O/$e.$k.base" 2>/dev/null; rb=$?
    "$N/unroll-opt" "$f" "$flag" -o "$O/$e.$k.new" 2>/dev/null; rn=$?
    [ $rb != 0 ] && [ $rn != 0 ] && continue # neither lowers it (e.g. no CUDA toolkit)
    n=$((n + 1))
    if [ $rb != $rn ] || ! cmp -s "$O/$e.$k.base" "$O/$e.$k.new"; then
      echo "differs: $e $k (exit codes $rb, $rn)"; diff=$((diff + 1))
    fi
  done
done
echo "$n builds compared, $diff differ"
[ $diff = 0 ]
