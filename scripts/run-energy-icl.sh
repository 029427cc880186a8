#!/usr/bin/env bash
# An energy that learns in context, at its small default: compile
# examples/energy_icl_cg.mlir (a kernel energy descended by conjugate
# gradients, d = 5, 38 parameters), train it on in-context linear regression
# (examples/energy_icl_cg.train.json: 12,000 steps, the looped GPT-2's budget
# in docs/reproduction.md), evaluate it beside least squares, averaging and
# 3-NN, and run it for 1 to 100 loops (trained at b = 10).
#   scripts/run-energy-icl.sh [BUILD_DIR] [OUT_DIR] [extra unroll-run flags...]
set -euo pipefail
BUILD=${1:-build}; OUT=${2:-out}; shift $(( $# > 2 ? 2 : $# ))
BIN="$BUILD/bin"
mkdir -p "$OUT"
so="$OUT/energy_icl_cg.so"
if [ ! -f "$so" ] || [ examples/energy_icl_cg.mlir -nt "$so" ] || [ "$BIN/unroll-translate" -nt "$so" ]; then
  echo "+ unroll-opt examples/energy_icl_cg.mlir --lower-to-cpu -o $OUT/energy_icl_cg.lowered.mlir"
  "$BIN/unroll-opt" examples/energy_icl_cg.mlir --lower-to-cpu -o "$OUT/energy_icl_cg.lowered.mlir"
  echo "+ unroll-translate $OUT/energy_icl_cg.lowered.mlir -o $so"
  "$BIN/unroll-translate" "$OUT/energy_icl_cg.lowered.mlir" -o "$so"
fi
echo "+ unroll-run $so --task icl_linear --config examples/energy_icl_cg.train.json --out $OUT/energy-icl $*"
"$BIN/unroll-run" "$so" --task icl_linear --config examples/energy_icl_cg.train.json \
  --out "$OUT/energy-icl" "$@"
echo "+ unroll-run $so --checkpoint $OUT/energy-icl/checkpoint --eval-loops 1,2,3,4,5,10,20,50,100 --out $OUT/energy-icl $*"
"$BIN/unroll-run" "$so" --checkpoint "$OUT/energy-icl/checkpoint" \
  --eval-loops 1,2,3,4,5,10,20,50,100 --out "$OUT/energy-icl" "$@"
