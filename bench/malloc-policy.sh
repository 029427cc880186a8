#!/usr/bin/env bash
# unroll-run's heap policy (the heap keeps freed parameter-sized buffers for
# the next step) against glibc's own (UNROLL_MALLOC=glibc: each large buffer
# mapped afresh and unmapped on free), in the same run, alternating: a short
# stage-wise training of the learned unrollings (the trainer's own "trained
# stagewise: ... in X s", one thread, 60 steps: layers 1-2), both forms,
# and 60 steps of icl_linear on the CPU-sized looped GPT-2 (whole process). Prints a table and
# writes OUT/malloc-policy.json.
#   bench/malloc-policy.sh BUILD [OUT] [ROUNDS]
set -euo pipefail
BUILD=${1:?build folder}; OUT=${2:-out/malloc-policy}; ROUNDS=${3:-3}
mkdir -p "$OUT"
for v in alista lista_cpss lista looped_gpt2_small; do
  "$BUILD/bin/unroll-opt" examples/$v.mlir --lower-to-cpu -o "$OUT/$v.mlir"
  "$BUILD/bin/unroll-translate" "$OUT/$v.mlir" -o "$OUT/$v.so"
done
rows=()
for r in $(seq "$ROUNDS"); do
  for v in alista lista_cpss lista; do
    for form in model energy; do
      pick=(); [ $form = energy ] && pick=(--energy $v)
      for policy in glibc unroll; do
        echo "round $r/$ROUNDS: $v ($form form), $policy heap ..." >&2
        s=$(UNROLL_MALLOC=$policy UNROLL_THREADS=1 "$BUILD/bin/unroll-run" "$OUT/$v.so" "${pick[@]}" \
              --task sparse_coding --stage-steps 10 --steps 60 --samples 20 --out "$OUT/run" |
            sed -n 's/^trained stagewise: .* in \([0-9.]*\) s.*/\1/p')
        rows+=("{\"round\": $r, \"what\": \"$v, $form form\", \"policy\": \"$policy\", \"seconds\": $s}")
      done
    done
  done
  for policy in glibc unroll; do
    echo "round $r/$ROUNDS: looped_gpt2_small icl_linear, $policy heap ..." >&2
    t0=$(date +%s.%N)
    UNROLL_MALLOC=$policy UNROLL_THREADS=1 "$BUILD/bin/unroll-run" "$OUT/looped_gpt2_small.so" \
      --task icl_linear --steps 60 --eval-prompts 0 --out "$OUT/icl" 2> /dev/null
    s=$(echo "$(date +%s.%N) - $t0" | bc)
    rows+=("{\"round\": $r, \"what\": \"looped_gpt2_small, icl_linear (whole process)\", \"policy\": \"$policy\", \"seconds\": $s}")
  done
done
(IFS=,; echo "{\"runs\": [${rows[*]}]}") > "$OUT/malloc-policy.json"
python3 - "$OUT/malloc-policy.json" <<'PY'
import json, statistics, sys
runs = json.load(open(sys.argv[1]))["runs"]
print("| 60 steps, one thread | glibc's policy (s) | unroll-run's (s) | speed-up |")
print("|---|---|---|---|")
for what in dict.fromkeys(r["what"] for r in runs):
    med = {p: statistics.median(r["seconds"] for r in runs if r["what"] == what and r["policy"] == p)
           for p in ("glibc", "unroll")}
    print(f"| {what} | {med['glibc']:.2f} | {med['unroll']:.2f} | {med['glibc'] / med['unroll']:.2f}x |")
print(f"\nmedians of {len({r['round'] for r in runs})} rounds; {sys.argv[1]}")
PY
