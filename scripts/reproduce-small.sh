#!/usr/bin/env bash
# P2's tasks at the small CPU scale (examples/looped_gpt2_small.mlir: d = 5,
# D = 64, 4 heads, b = 10, T = 5, at most 11 points), 2000 steps each with
# examples/looped_gpt2_small.train.json, evaluated on 1280 prompts beside the
# baselines, plus the loop study of the linear-regression model to 100 loops.
# Results in OUT/<task>/ (eval.*, loops.*); a summary in OUT/summary.txt.
#   scripts/reproduce-small.sh [BUILD] [OUT]
set -euo pipefail
BUILD=${1:-build}; OUT=${2:-out/reproduce-small}
BIN="$BUILD/bin"
mkdir -p "$OUT"
so="$OUT/looped_gpt2_small.so"
if [ ! -f "$so" ]; then
  "$BIN/unroll-opt" examples/looped_gpt2_small.mlir --lower-to-cpu -o "$OUT/small.mlir"
  "$BIN/unroll-translate" "$OUT/small.mlir" -o "$so"
fi
: > "$OUT/summary.txt"
for task in icl_linear icl_sparse_linear icl_relu2nn icl_decision_tree icl_noisy_linear; do
  echo "== $task" | tee -a "$OUT/summary.txt"
  start=$(date +%s)
  "$BIN/unroll-run" "$so" --task "$task" --config examples/looped_gpt2_small.train.json \
      --out "$OUT/$task" --log-every 500 > "$OUT/$task.log" 2>&1
  echo "training + evaluation: $(( $(date +%s) - start )) s" | tee -a "$OUT/summary.txt"
  grep -A20 "^evaluation:" "$OUT/$task.log" | tee -a "$OUT/summary.txt"
done
"$BIN/unroll-run" "$so" --task icl_linear --checkpoint "$OUT/icl_linear/checkpoint" \
    --eval-loops 1:20,25:100:5 --eval-prompts 640 --out "$OUT/icl_linear" | tee -a "$OUT/summary.txt"
