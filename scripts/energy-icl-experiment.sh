#!/usr/bin/env bash
# Energies that learn in context, against the looped GPT-2, at P2's small
# CPU scale (d = 5, at most k = 11 points, b = 10, T = 5, batch 64, Adam lr
# 1e-3, P2's curricula), every model trained for the same number of steps
# on icl_linear and evaluated on the same 1280 prompts:
#
#   gpt2            examples/looped_gpt2_small.mlir (D = 64, 4 heads)
#   energy          examples/energy_icl.mlir: P1's eq. 20 energy with the
#                   residual term, the loop's input P as its center (derived
#                   injection), learnable step size, D = 64
#   energy_add      examples/energy_icl_add.mlir: the loop injects P (add)
#   energy_cert     examples/energy_icl_certified.mlir: the certified step on
#                   the whole energy (every iteration provably descends)
#   energy_d160     energy with D = 160 (about the GPT-2's parameter count)
#   energy_pos      energy with a learned position embedding added in the
#                   read-in (P = read_in(Z) + wpe), so that attention can pair
#                   a y token with its x token by position
#
# For each: the error against k (eval.csv), the energy along the loop after
# training (energy.csv: steps that increased it), the parameter count and the
# time per training step (unroll-bench, the models one after the other in
# this run, 2 threads). Results, one plot and summary.json in OUT.
#   scripts/energy-icl-experiment.sh [BUILD] [OUT] [STEPS]
set -euo pipefail
BUILD=${1:-build}; OUT=${2:-out/energy-icl}; STEPS=${3:-5000}
BIN="$BUILD/bin"
mkdir -p "$OUT"
if [ ! -f "$OUT/energy_icl_d160.mlir" ] || [ examples/energy_icl.mlir -nt "$OUT/energy_icl_d160.mlir" ]; then
  sed 's/64xf32/160xf32/g; s/<64x/<160x/g; s/std = 0.125/std = 0.079/' examples/energy_icl.mlir \
    | sed 's/@icl_energy\b/@icl_energy_d160/g; s/@energy_icl\b/@energy_icl_d160/' > "$OUT/energy_icl_d160.mlir"
fi
if [ ! -f "$OUT/energy_icl_pos.mlir" ] || [ examples/energy_icl.mlir -nt "$OUT/energy_icl_pos.mlir" ]; then
  python3 - examples/energy_icl.mlir "$OUT/energy_icl_pos.mlir" <<'PY'
import sys
s = open(sys.argv[1]).read()
old = "  %P = unroll.linear %Z, %Wi, %bi : (tensor<?x?x5xf32>, tensor<64x5xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>"
assert old in s
s = s.replace(old, """  %wpe = unroll.param "wpe" {std = 0.1 : f64} : tensor<23x64xf32>
  %P0 = unroll.linear %Z, %Wi, %bi : (tensor<?x?x5xf32>, tensor<64x5xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %P = unroll.position_embed %P0, %wpe : tensor<?x?x64xf32>, tensor<23x64xf32>""")
s = s.replace("@icl_energy", "@icl_energy_pos").replace("@energy_icl ", "@energy_icl_pos ")
open(sys.argv[2], "w").write(s)
PY
fi
declare -A SRC=([gpt2]=examples/looped_gpt2_small.mlir [energy]=examples/energy_icl.mlir
                [energy_add]=examples/energy_icl_add.mlir
                [energy_cert]=examples/energy_icl_certified.mlir
                [energy_d160]="$OUT/energy_icl_d160.mlir" [energy_pos]="$OUT/energy_icl_pos.mlir")
MODELS=(gpt2 energy energy_add energy_cert energy_d160 energy_pos)
for m in "${MODELS[@]}"; do
  if [ -f "$OUT/$m.so" ] && [ "$OUT/$m.so" -nt "${SRC[$m]}" ] && [ "$OUT/$m.so" -nt "$BIN/unroll-opt" ]; then
    continue
  fi
  echo "compiling ${SRC[$m]}" >&2
  "$BIN/unroll-opt" "${SRC[$m]}" --lower-to-cpu -o "$OUT/$m.mlir"
  "$BIN/unroll-translate" "$OUT/$m.mlir" -o "$OUT/$m.so"
done
# Two trainings at a time (one thread each), then the timings alone.
train() { # (a model already trained in OUT is kept: rerun to redo only what is missing)
  local m=$1
  [ -f "$OUT/$m/eval.csv" ] && [ -f "$OUT/$m.log" ] && return
  UNROLL_THREADS=1 "$BIN/unroll-run" "$OUT/$m.so" --task icl_linear --steps "$STEPS" --batch 64 \
    --lr 1e-3 --seed 0 --eval-prompts 1280 --log-every 500 --out "$OUT/$m" > "$OUT/$m.log" 2>&1
  echo "trained $m" >&2
}
running=0
for m in "${MODELS[@]}"; do
  if [ $running -ge 2 ]; then wait -n; running=$((running - 1)); fi
  train "$m" &
  running=$((running + 1))
done
wait
for m in "${MODELS[@]}"; do
  echo "timing $m" >&2
  UNROLL_THREADS=2 "$BIN/unroll-bench" "$OUT/$m.so" --points 11 --repeats 9 > "$OUT/$m.bench.json"
  "$BIN/unroll-run" "$OUT/$m.so" --info > "$OUT/$m.info.json"
done
"$BIN/unroll-plot" "$OUT/error.svg" --log-y --y-floor 1e-3 \
  --title "icl_linear, d = 5, after $STEPS steps: looped GPT-2 vs energy-derived loops" \
  --xlabel "in-context examples k" --ylabel "normalized squared error" \
  "$OUT/gpt2/eval.csv:model:looped GPT-2 (D 64)" "$OUT/energy/eval.csv:model:energy, residual (D 64)" \
  "$OUT/energy_add/eval.csv:model:energy, loop injection (D 64)" \
  "$OUT/energy_cert/eval.csv:model:energy, certified (D 64)" \
  "$OUT/energy_d160/eval.csv:model:energy, residual (D 160)" \
  "$OUT/energy_pos/eval.csv:model:energy, residual, positions in P (D 64)" \
  "$OUT/gpt2/eval.csv:least_squares:least squares" "$OUT/gpt2/eval.csv:averaging:averaging" \
  "$OUT/gpt2/eval.csv:nearest_neighbors_3:3-NN"
python3 - "$OUT" "$STEPS" "${MODELS[@]}" <<'PY'
import csv, json, os, re, sys
out, steps, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows = {}
for m in models:
    info = json.load(open(f"{out}/{m}.info.json"))["models"][0]
    bench = json.load(open(f"{out}/{m}.bench.json"))
    ev = list(csv.DictReader(open(f"{out}/{m}/eval.csv")))
    log = open(f"{out}/{m}.log").read()
    t = re.search(r"trained \d+ steps in (\d+)m(\d+)s", log)
    r = {"params": info["num_params"],
         "error_k5": float(ev[5]["model"]), "error_k10": float(ev[10]["model"]),
         "least_squares_k5": float(ev[5]["least_squares"]),
         "averaging_k10": float(ev[10]["averaging"]), "nn3_k10": float(ev[10]["nearest_neighbors_3"]),
         "train_step_s_2threads": bench["train_step_median_s"],
         "forward_s_2threads": bench["forward_median_s"],
         "training_wall_s_1thread": int(t.group(1)) * 60 + int(t.group(2)) if t else None,
         "final_loss": float(re.findall(r"loss ([0-9.]+)", log)[-1])}
    if os.path.exists(f"{out}/{m}/energy.json"):
        e = json.load(open(f"{out}/{m}/energy.json"))
        r.update({"energy_steps_increasing": e["steps_increasing_total"],
                  "energy_steps_total": e["steps_total"],
                  "energy_monotone_prompts": e["monotone_prompts"],
                  "energy_prompts": e["prompts"]})
    rows[m] = r
json.dump({"steps": steps, "task": "icl_linear", "d": 5, "loops": 10, "window": 5,
           "batch": 64, "lr": 1e-3, "models": rows}, open(f"{out}/summary.json", "w"), indent=2)
print(f"| model | parameters | error k = 5 | error k = 10 (2d) | train step (s, 2 threads) | forward (s) | steps increasing E |")
print("|---|---|---|---|---|---|---|")
for m, r in rows.items():
    inc = f"{r['energy_steps_increasing']} of {r['energy_steps_total']}" if "energy_steps_total" in r else "-"
    print(f"| {m} | {r['params']} | {r['error_k5']:.3f} | {r['error_k10']:.3f} | "
          f"{r['train_step_s_2threads']:.4f} | {r['forward_s_2threads']:.4f} | {inc} |")
r = rows[models[0]]
print(f"(baselines at k = 10: averaging {r['averaging_k10']:.3f}, 3-NN {r['nn3_k10']:.3f}; least squares at k = 5: {r['least_squares_k5']:.3g})")
PY
