#!/usr/bin/env bash
# P2's two ablations at the small CPU scale (d = 5, D = 64, 4 heads, at most
# 11 points; examples/looped_gpt2_small.train.json: 2000 steps, batch 64,
# lr 1e-3), all on icl_linear:
#   1. weight tying without input injection (Y <- M(Y), Y_0 = P) against the
#      looped model with injection (Y <- M(Y + P)): loop studies to 100 loops;
#   2. the standard 12-layer GPT-2 (b = 1) against the looped 1-layer model
#      (b = 10, T = 5): error vs k through the same evaluation.
# Results in OUT/ (per-model folders, loops.svg, eval.svg, summary.txt).
#   scripts/reproduce-ablations.sh [BUILD] [OUT]
set -euo pipefail
BUILD=${1:-build}; OUT=${2:-out/ablations}
BIN="$BUILD/bin"
PY=${PYTHON:-python3}
mkdir -p "$OUT"
gen() { # name, extra generator flags
  local name=$1; shift
  if [ ! -f "$OUT/$name.so" ]; then
    "$PY" scripts/gen_gpt2.py "$name" --d 5 --D 64 --heads 4 --positions 11 "$@" > "$OUT/$name.mlir"
    "$BIN/unroll-opt" "$OUT/$name.mlir" --lower-to-cpu -o "$OUT/$name.ll.mlir"
    "$BIN/unroll-translate" "$OUT/$name.ll.mlir" -o "$OUT/$name.so"
  fi
}
gen looped_injection --loops 10 --window 5 --injection add
gen looped_tying --loops 10 --window 5 --injection none
gen gpt2_L12 --layers 12 --loops 1 --window 1
: > "$OUT/summary.txt"
for m in looped_injection looped_tying gpt2_L12; do
  start=$(date +%s)
  "$BIN/unroll-run" "$OUT/$m.so" --task icl_linear --config examples/looped_gpt2_small.train.json \
      --out "$OUT/$m" --log-every 500 > "$OUT/$m.log" 2>&1
  params=$("$BIN/unroll-run" "$OUT/$m.so" --info | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["models"][0]["num_params"])')
  echo "== $m: $params parameters, training + evaluation $(( $(date +%s) - start )) s" | tee -a "$OUT/summary.txt"
  grep -A12 "^evaluation:" "$OUT/$m.log" | tee -a "$OUT/summary.txt"
done
for m in looped_injection looped_tying; do
  "$BIN/unroll-run" "$OUT/$m.so" --task icl_linear --checkpoint "$OUT/$m/checkpoint" \
      --eval-loops 1:20,25:100:5 --eval-prompts 640 --out "$OUT/$m" | tee -a "$OUT/summary.txt"
done
"$BIN/unroll-plot" "$OUT/loops.svg" --log-y --y-floor 1e-3 \
    --title "icl_linear, d = 5, k = 10: error after each loop (trained at b = 10)" \
    --xlabel "loop iterations" --ylabel "normalized squared error at the last position" \
    "$OUT/looped_injection/loops.csv:error_last_position:input injection" \
    "$OUT/looped_tying/loops.csv:error_last_position:tying, no injection"
"$BIN/unroll-plot" "$OUT/eval.svg" --log-y --y-floor 1e-3 \
    --title "icl_linear, d = 5: standard 12-layer GPT-2 vs looped (1 layer, b = 10)" \
    --xlabel "in-context examples k" --ylabel "normalized squared error" \
    "$OUT/gpt2_L12/eval.csv:model:standard, L = 12" \
    "$OUT/looped_injection/eval.csv:model:looped, L = 1, b = 10" \
    "$OUT/looped_injection/eval.csv:least_squares:least squares" \
    "$OUT/looped_injection/eval.csv:nearest_neighbors_3:3-NN"
echo "wrote $OUT/loops.svg, $OUT/eval.svg and $OUT/summary.txt"
