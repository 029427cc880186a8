#!/usr/bin/env bash
# The main job at its small default: compile the CPU-sized looped transformer,
# train it on in-context linear regression (examples/looped_gpt2_small.train.json),
# and evaluate it against least squares, averaging and 3-NN.
#   scripts/run-train.sh [BUILD_DIR] [OUT_DIR] [extra unroll-run flags...]
set -euo pipefail
BUILD=${1:-build}; OUT=${2:-out}; shift $(( $# > 2 ? 2 : $# ))
BIN="$BUILD/bin"
mkdir -p "$OUT"
so="$OUT/looped_gpt2_small.so"
if [ ! -f "$so" ] || [ examples/looped_gpt2_small.mlir -nt "$so" ] || [ "$BIN/unroll-translate" -nt "$so" ]; then
  echo "+ unroll-opt examples/looped_gpt2_small.mlir --lower-to-cpu -o $OUT/looped_gpt2_small.lowered.mlir"
  "$BIN/unroll-opt" examples/looped_gpt2_small.mlir --lower-to-cpu -o "$OUT/looped_gpt2_small.lowered.mlir"
  echo "+ unroll-translate $OUT/looped_gpt2_small.lowered.mlir -o $so"
  "$BIN/unroll-translate" "$OUT/looped_gpt2_small.lowered.mlir" -o "$so"
fi
echo "+ unroll-run $so --task icl_linear --config examples/looped_gpt2_small.train.json --out $OUT/train $*"
"$BIN/unroll-run" "$so" --task icl_linear --config examples/looped_gpt2_small.train.json \
  --out "$OUT/train" "$@"
