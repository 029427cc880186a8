#!/usr/bin/env bash
# The main job at its small default: compile P1's Transformer energy to a
# shared library and print its energy trace over 12 iterations.
#   scripts/run-energy.sh [BUILD_DIR] [OUT_DIR] [extra unroll-run flags...]
set -euo pipefail
BUILD=${1:-build}; OUT=${2:-out}; shift $(( $# > 2 ? 2 : $# ))
BIN="$BUILD/bin"
mkdir -p "$OUT"
echo "+ unroll-opt examples/transformer_energy.mlir --lower-to-cpu -o $OUT/transformer_energy.lowered.mlir"
"$BIN/unroll-opt" examples/transformer_energy.mlir --lower-to-cpu -o "$OUT/transformer_energy.lowered.mlir"
echo "+ unroll-translate $OUT/transformer_energy.lowered.mlir -o $OUT/compiled.so"
"$BIN/unroll-translate" "$OUT/transformer_energy.lowered.mlir" -o "$OUT/compiled.so"
echo "+ unroll-run $OUT/compiled.so --task energy --iterations 12 --seed 0 --plot $OUT/energy.svg $*"
"$BIN/unroll-run" "$OUT/compiled.so" --task energy --iterations 12 --seed 0 --plot "$OUT/energy.svg" "$@"
"$BIN/unroll-run" "$OUT/compiled.so" --task energy --iterations 12 --seed 0 --json "$@" > "$OUT/energy.json"
echo "wrote $OUT/compiled.so, $OUT/energy.svg (E(Y_t) against t) and $OUT/energy.json"
