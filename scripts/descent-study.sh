#!/usr/bin/env bash
# The descent study of docs/descent.md: compiles the six study energies
# (3 built-in rho x {paper, certified}) in f64 and f32, runs N random cases
# per seed, and writes a markdown table and JSON lines to OUT.
#   scripts/descent-study.sh [BUILD] [OUT] [CASES] [SEEDS...]
set -euo pipefail
BUILD=${1:-build}; OUT=${2:-out/descent}; CASES=${3:-10000}; shift $(( $# > 3 ? 3 : $# ))
SEEDS=("$@"); [ ${#SEEDS[@]} -gt 0 ] || SEEDS=(0)
BIN="$BUILD/bin"
mkdir -p "$OUT"
SRC=test/Integration/CPU/descent-study.mlir
grep -v '^//' "$SRC" > "$OUT/study-f64.mlir"
sed 's/f64/f32/g' "$OUT/study-f64.mlir" > "$OUT/study-f32.mlir"
: > "$OUT/results.jsonl"
{
  echo "| precision | energy | seed | cases | increases | beyond rounding | largest relative increase |"
  echo "|---|---|---|---|---|---|---|"
} > "$OUT/table.md"
for prec in f64 f32; do
  "$BIN/unroll-opt" "$OUT/study-$prec.mlir" --lower-to-cpu -o "$OUT/study-$prec.lowered.mlir"
  "$BIN/unroll-translate" "$OUT/study-$prec.lowered.mlir" -o "$OUT/study-$prec.so"
  for e in paper_neg_exp paper_log2 paper_log1 certified_neg_exp certified_log2 certified_log1; do
    for s in "${SEEDS[@]}"; do
      line=$("$BIN/unroll-energy-check" --study "$OUT/study-$prec.so" --energy "$e" \
               --cases "$CASES" --seed "$s" | sed -n 's/^  json: //p')
      echo "$line" | sed "s/^{/{\"precision\":\"$prec\",\"seed\":$s,/" >> "$OUT/results.jsonl"
      python3 - "$prec" "$s" "$line" >> "$OUT/table.md" <<'PY'
import json, sys
prec, seed, j = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
print(f"| {prec} | {j['energy']} | {seed} | {j['cases']} | {j['increases']} | "
      f"{j['increases_beyond_rounding']} | {j['max_relative_increase']:.3g} |")
PY
    done
  done
done
cat "$OUT/table.md"
