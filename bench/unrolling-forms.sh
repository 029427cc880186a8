#!/usr/bin/env bash
# ALISTA's two forms in examples/alista.mlir, the energy @alista (run with
# --energy alista) and the model @alista_model (the default), timed in the
# same run: a short stage-wise training (the trainer's own "trained
# stagewise: ... in X s") and the evaluation of the shipped checkpoint on
# 2,000 samples (wall time), at 1 and 2 threads, the two forms alternating in
# ROUNDS rounds so that the machine's drift hits both. Prints a table and writes OUT/unrolling-forms.json.
#   bench/unrolling-forms.sh BUILD [OUT] [ROUNDS]
set -euo pipefail
BUILD=${1:?build folder}; OUT=${2:-out/unrolling-forms}; ROUNDS=${3:-3}
mkdir -p "$OUT"
declare -A PICK=([energy]="--energy alista" [model]="--model alista_model")
"$BUILD/bin/unroll-opt" examples/alista.mlir --lower-to-cpu -o "$OUT/alista.mlir"
"$BUILD/bin/unroll-translate" "$OUT/alista.mlir" -o "$OUT/alista.so"
rows=()
for r in $(seq "$ROUNDS"); do
  for threads in 1 2; do
    for form in energy model; do
      echo "round $r/$ROUNDS, $threads thread(s): $form ..." >&2
      # shellcheck disable=SC2086 # PICK's flag and its value are two words
      train=$(UNROLL_THREADS=$threads "$BUILD/bin/unroll-run" "$OUT/alista.so" ${PICK[$form]} --task sparse_coding \
                --stage-steps 10 --finetune-steps 30 --samples 300 --out "$OUT/train-$form" |
              sed -n 's/^trained stagewise: .* in \([0-9.]*\) s.*/\1/p')
      t0=$(date +%s.%N)
      # shellcheck disable=SC2086
      UNROLL_THREADS=$threads "$BUILD/bin/unroll-run" "$OUT/alista.so" ${PICK[$form]} --task sparse_coding \
        --checkpoint examples/checkpoints/alista --samples 2000 --out "$OUT/eval-$form" > /dev/null
      t1=$(date +%s.%N)
      rows+=("{\"round\": $r, \"threads\": $threads, \"form\": \"$form\", \"train_s\": $train, \"eval_s\": $(echo "$t1 - $t0" | bc)}")
    done
  done
done
(IFS=,; echo "{\"runs\": [${rows[*]}]}") > "$OUT/unrolling-forms.json"
python3 - "$OUT/unrolling-forms.json" <<'PY'
import json, statistics, sys
runs = json.load(open(sys.argv[1]))["runs"]
print("| threads | what | energy form (s) | model form (s) | model / energy |")
print("|---|---|---|---|---|")
for threads in (1, 2):
    for what, key in (("training, --stage-steps 10 --finetune-steps 30", "train_s"), ("evaluation, 2,000 samples", "eval_s")):
        med = {f: statistics.median(r[key] for r in runs if r["threads"] == threads and r["form"] == f)
               for f in ("energy", "model")}
        print(f"| {threads} | {what} | {med['energy']:.2f} | {med['model']:.2f} | "
              f"{med['model'] / med['energy']:.2f} |")
print(f"\nmedians of {len({r['round'] for r in runs})} rounds; {sys.argv[1]}")
PY
