#!/usr/bin/env bash
# The CPU benchmark: the same training step and forward, for the small and the
# paper config, with unroll and with PyTorch (OpenBLAS, 2 threads) in one run.
# Prints a table and writes OUT/bench.json.
#   bench/run.sh [BUILD] [OUT] [REPEATS] [CONFIGS...]   (configs: small paper)
set -euo pipefail
BUILD=${1:-build}; OUT=${2:-out/bench}; REPEATS=${3:-5}; shift $(( $# > 3 ? 3 : $# ))
CONFIGS=("$@"); [ ${#CONFIGS[@]} -gt 0 ] || CONFIGS=(small paper)
THREADS=${BENCH_THREADS:-2}
mkdir -p "$OUT"
BIN="$BUILD/bin"
PY=/usr/bin/python3
# PyTorch uses OpenBLAS's pthread flavour with the same thread count.
export OPENBLAS_NUM_THREADS=$THREADS OMP_NUM_THREADS=$THREADS
declare -A ARGS=(
  [small]="looped_gpt2_small 5 64 4 1 23 10 5 11"
  [paper]="looped_gpt2 20 256 8 1 203 20 15 41"
)
results=()
for c in "${CONFIGS[@]}"; do
  read -r name d D H L pos loops window points <<< "${ARGS[$c]}"
  so="$OUT/$name.so"
  if [ ! -f "$so" ] || [ "examples/$name.mlir" -nt "$so" ] || [ "$BIN/unroll-translate" -nt "$so" ]; then
    echo "compiling examples/$name.mlir" >&2
    "$BIN/unroll-opt" "examples/$name.mlir" --lower-to-cpu -o "$OUT/$name.ll.mlir"
    "$BIN/unroll-translate" "$OUT/$name.ll.mlir" -o "$so"
  fi
  echo "timing $c: unroll ($THREADS threads) ..." >&2
  u=$(UNROLL_THREADS=$THREADS "$BIN/unroll-bench" "$so" --points "$points" --repeats "$REPEATS")
  echo "timing $c: PyTorch ($THREADS threads) ..." >&2
  t=$($PY bench/torch_bench.py "$d" "$D" "$H" "$L" "$pos" "$loops" "$window" "$points" 64 "$REPEATS" "$THREADS")
  results+=("{\"config\": \"$c\", \"unroll\": $u, \"torch\": $t}")
done
printf '[%s]\n' "$(IFS=,; echo "${results[*]}")" > "$OUT/bench.json"
$PY - "$OUT/bench.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
print("| config | batch | what | unroll (s) | PyTorch (s) | unroll prompts/s | PyTorch prompts/s | speed-up |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    b = r["unroll"]["batch"]
    for what, key in (("training step", "train_step_median_s"), ("forward", "forward_median_s")):
        u, t = r["unroll"][key], r["torch"][key]
        print(f"| {r['config']} (b={r['unroll']['loops']}, T={r['unroll']['window']}, k={r['unroll']['points']}) "
              f"| {b} | {what} | {u:.4f} | {t:.4f} | {b/u:.1f} | {b/t:.1f} | {t/u:.2f}x |")
print(f"(median of each; unroll {rows[0]['unroll']['threads']} threads, PyTorch {rows[0]['torch']['torch']} "
      f"{rows[0]['torch']['threads']} threads, BLAS: {rows[0]['torch']['blas']})")
PY
echo "wrote $OUT/bench.json" >&2
