#!/usr/bin/env bash
# P2's tasks at the small CPU scale, trained until the error at k = 2d stops
# improving: every task trains the looped model (examples/looped_gpt2_small.mlir:
# d = 5, D = 64, 4 heads, b = 10, T = 5, at most 11 points) and the standard
# 12-layer GPT-2 of the same width (b = 1) at equal steps, with the schedule
# of examples/looped_gpt2_small.train.json (warm-up, cosine decay) for STEPS
# steps, at the peak rate of that file (3e-3) for the looped models and
# L12_LR (default 1e-3) for the 12-layer one, which at 3e-3 stayed at the
# zero predictor's loss for 3000 steps. Each model is trained again at twice
# the steps while that still improves its error at k = 2d beyond the
# evaluation's 5-95% band, up to MAX_STEPS (default 2 STEPS: one doubling).
# The tasks P2 states loop settings for that differ from the small config's
# (linear regression b = 20, T = 15; sparse linear regression b = 20, T = 10)
# also get a chain of the same looped block run at P2's settings (looped_b20),
# and icl_linear trains the weight-tied loop without injection. Every model is
# evaluated on 1280 prompts beside the task's baselines; the looped and
# weight-tied models of icl_linear get loop studies to 500 loops.
#
#   scripts/reproduce-small.sh [BUILD] [OUT] [STEPS]      (default 12000 steps)
#   JOBS=2 scripts/reproduce-small.sh ...                 two runs at a time, one thread each
#   MAX_STEPS=48000 scripts/reproduce-small.sh ...        keep doubling up to 48000 steps
#   CHAINS="looped_b20/icl_linear gpt2_L12/icl_sparse_linear" scripts/reproduce-small.sh ...
#                                                         only these chains, in this order
#
# Results in OUT/<task>/<model>/ (eval.*, loops.*, metrics.jsonl), the plots
# OUT/<task>.svg, OUT/loops.svg and OUT/<task>.steps.svg, and the table OUT/summary.md
# (scripts/reproduce-summary.py). About 45 minutes of one core per task at
# 12000 steps (the 12-layer model is two thirds of it) and 70 more at twice
# the steps, and for each b = 20 chain about 30 and 60 minutes: about 6.5
# hours with JOBS=2 on 2 cores.
set -euo pipefail
BUILD=${1:-build}; OUT=${2:-out/reproduce-small}; STEPS=${3:-12000}
JOBS=${JOBS:-1}
L12_LR=${L12_LR:-1e-3}
MAX_STEPS=${MAX_STEPS:-$((2 * STEPS))}
BIN="$BUILD/bin"
PY=${PYTHON:-python3}
CONFIG=examples/looped_gpt2_small.train.json
TASKS=(icl_linear icl_noisy_linear icl_sparse_linear icl_relu2nn icl_decision_tree)
mkdir -p "$OUT"

compile() { # name source.mlir
  local name=$1 src=$2
  if [ ! -f "$OUT/$name.so" ] || [ "$src" -nt "$OUT/$name.so" ]; then
    echo "compiling $name" >&2
    "$BIN/unroll-opt" "$src" --lower-to-cpu -o "$OUT/$name.ll.mlir"
    "$BIN/unroll-translate" "$OUT/$name.ll.mlir" -o "$OUT/$name.so"
  fi
}
gen() { # name, generator flags: the same dims as the looped example
  local name=$1; shift
  [ -f "$OUT/$name.mlir" ] ||
    "$PY" scripts/gen-gpt2.py "$name" --d 5 --D 64 --heads 4 --positions 11 "$@" > "$OUT/$name.mlir"
  compile "$name" "$OUT/$name.mlir"
}
compile looped examples/looped_gpt2_small.mlir
gen tying --loops 10 --window 5 --injection none
gen gpt2_L12 --layers 12 --loops 1 --window 1

# One training run + evaluation (skipped when its eval.json exists). A run
# that ends without its evaluation (a signal, an error) fails, and its
# chain stops there.
run() { # library task steps dir [unroll-run flags]
  local model=$1 task=$2 steps=$3 dir=$4; shift 4
  [ -f "$dir/eval.json" ] && return 0
  mkdir -p "$dir"
  local threads=""
  [ "$JOBS" -gt 1 ] && threads="UNROLL_THREADS=1"
  # An interrupted run continues from its last checkpoint (every 2000 steps);
  # its seconds then count only the part after the interruption.
  local resume=() note=""
  if [ -d "$dir/checkpoint" ]; then resume=(--resume); note=", resumed"; fi
  local start rc=0 name=${dir##*/}
  start=$(date +%s)
  env $threads "$BIN/unroll-run" "$OUT/$model.so" --task "$task" --config "$CONFIG" \
      --steps "$steps" --out "$dir" --log-every 1000 --save-every 2000 "${resume[@]}" "$@" \
      >> "$dir/run.log" 2>&1 || rc=$?
  echo "$(( $(date +%s) - start ))" > "$dir/seconds"
  if [ ! -f "$dir/eval.json" ]; then
    echo "interrupted: $task ${name%_x*} at $steps steps (exit $rc after $(cat "$dir/seconds") s;" \
         "$dir/run.log; the same command resumes it)" >&2
    return 1
  fi
  echo "done: $task ${name%_x*} ($steps steps, $(cat "$dir/seconds") s$note)" >&2
}
# The directory of a chain's run at MULT times STEPS.
rundir() { # chain-name task mult
  local d="$OUT/$2/$1"
  [ "$3" -gt 1 ] && d+="_x$3"
  echo "$d"
}
# A chain trains one model on one task at STEPS, 2 STEPS, 4 STEPS, ...
# steps (the schedule stretched each time), until doubling no longer
# improves the error at k = 2d beyond its band (reproduce-summary.py
# --improving) or the next run would pass MAX_STEPS.
chain() { # chain-name task library [unroll-run flags]
  local name=$1 task=$2 model=$3; shift 3
  local m=1 dir prev=""
  while :; do
    dir=$(rundir "$name" "$task" "$m")
    run "$model" "$task" $((m * STEPS)) "$dir" "$@" || return 0
    if [ -n "$prev" ] && ! "$PY" scripts/reproduce-summary.py --improving "$prev/eval.json" "$dir/eval.json"; then
      echo "stopped: $task $name at $((m * STEPS)) steps (no better than at $((m * STEPS / 2)))" >&2
      return 0
    fi
    [ $((2 * m * STEPS)) -le "$MAX_STEPS" ] || return 0
    prev=$dir; m=$((2 * m))
  done
}
# Every chain as "name/task library [unroll-run flags]" (name: its run
# directories' name, library: OUT/library.so); the 12-layer
# chains first, as they are the longest. The weight-tied model is one run.
declare -A P2_LOOPS=([icl_linear]="--loops 20 --window 15" [icl_sparse_linear]="--loops 20 --window 10")
chains=()
for task in "${TASKS[@]}"; do chains+=("gpt2_L12/$task gpt2_L12 --lr $L12_LR"); done
for task in "${TASKS[@]}"; do
  [ -n "${P2_LOOPS[$task]:-}" ] && chains+=("looped_b20/$task looped ${P2_LOOPS[$task]}")
done
for task in "${TASKS[@]}"; do chains+=("looped/$task looped"); done
chains+=("tying/icl_linear tying")
if [ -n "${CHAINS:-}" ]; then # the named chains only, in CHAINS's order
  picked=()
  for want in $CHAINS; do
    found=""
    for c in "${chains[@]}"; do [ "${c%% *}" = "$want" ] && picked+=("$c") && found=1; done
    [ -n "$found" ] || { echo "reproduce-small.sh: no chain named '$want' in CHAINS (names: ${chains[*]%% *})" >&2; exit 2; }
  done
  chains=("${picked[@]}")
fi
for c in "${chains[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  name=${c%% *}; rest=${c#* }
  if [ "$name" = tying/icl_linear ]; then
    run tying icl_linear "$STEPS" "$OUT/icl_linear/tying" &
  else
    # shellcheck disable=SC2086
    chain "${name%%/*}" "${name#*/}" $rest &
  fi
done
wait

# Loop studies: every finished run of icl_linear's looped chains, and the weight-tied model.
loop_curves=()
loop_study() { # model dir curve-name
  [ -f "$2/loops.json" ] ||
    "$BIN/unroll-run" "$OUT/$1.so" --task icl_linear --checkpoint "$2/checkpoint" \
        --eval-loops 1:20,25:100:5,110:500:10 --eval-prompts 640 --out "$2" > "$2/loops.log"
  loop_curves+=("$2/loops.csv:error_last_position:$3")
}
for name in looped looped_b20; do
  b=10; [ "$name" = looped_b20 ] && b=20
  m=1
  while d=$(rundir $name icl_linear $m) && [ -f "$d/eval.json" ]; do
    loop_study looped "$d" "input injection, b = $b, $((m * STEPS)) steps"
    m=$((2 * m))
  done
done
[ -f "$OUT/icl_linear/tying/eval.json" ] &&
  loop_study tying "$OUT/icl_linear/tying" "tying, no injection, $STEPS steps"
[ ${#loop_curves[@]} -gt 0 ] &&
  "$BIN/unroll-plot" "$OUT/loops.svg" --log-y --y-floor 1e-3 \
      --title "icl_linear, d = 5, k = 10: error after each loop (trained at b = 10 or 20)" \
      --xlabel "loop iterations" --ylabel "normalized squared error at the last position" \
      "${loop_curves[@]}"
# (With CHAINS, the plots of the runs that exist.)
for task in "${TASKS[@]}"; do
  [ -f "$OUT/$task/looped/eval.csv" ] && [ -f "$OUT/$task/gpt2_L12/eval.csv" ] || continue
  "$BIN/unroll-plot" "$OUT/$task.svg" --log-y --y-floor 1e-4 \
      --title "$task, d = 5: looped (L = 1, b = 10) vs standard (L = 12), $STEPS steps" \
      --xlabel "in-context examples k" --ylabel "normalized squared error" \
      "$OUT/$task/looped/eval.csv:model:looped, L = 1" \
      "$OUT/$task/gpt2_L12/eval.csv:model:standard, L = 12" \
      "$OUT/$task/looped/eval.csv:least_squares:least squares" \
      "$OUT/$task/looped/eval.csv:nearest_neighbors_3:3-NN"
done
label() { # a chain's or a baseline's name in the plots' legends, as the tables write it
  "$PY" scripts/reproduce-summary.py --label "$1"
}
# Each task's error against k after each of its chains' runs.
for task in "${TASKS[@]}"; do
  ls "$OUT/$task"/*_x2/eval.csv > /dev/null 2>&1 || continue
  curves=()
  for model in looped looped_b20 gpt2_L12; do
    name=$(label "$model")
    m=1
    while d=$(rundir "$model" "$task" $m) && [ -f "$d/eval.csv" ]; do
      curves+=("$d/eval.csv:model:$name, $((m * STEPS)) steps")
      m=$((2 * m))
    done
  done
  # Lasso from the first run's file (every run's has the task's baselines).
  [ "$task" = icl_sparse_linear ] && curves+=("${curves[0]%%:*}:lasso_0.01:$(label lasso_0.01)")
  "$BIN/unroll-plot" "$OUT/$task.steps.svg" --log-y --y-floor 1e-4 \
      --title "$task, d = 5: error after each doubling of the training steps" \
      --xlabel "in-context examples k" --ylabel "normalized squared error" "${curves[@]}"
done
# Each task's error at k = 2d against the training steps, a curve per chain:
# where a chain flattens, doubling stopped helping.
"$PY" scripts/reproduce-summary.py --convergence "$OUT" "$STEPS"
for task in "${TASKS[@]}"; do
  csv=$OUT/$task.convergence.csv
  [ -f "$csv" ] || continue
  curves=()
  for col in $(head -1 "$csv" | tr , ' '); do
    # the chains and the task's reference baseline, not the bands
    case $col in steps|*_p05|*_p95) ;; *) curves+=("$csv:$col:$(label "$col")");; esac
  done
  "$BIN/unroll-plot" "$OUT/$task.convergence.svg" --log-x --log-y \
      --title "$task, d = 5: error at k = 10 against training steps" \
      --xlabel "training steps" --ylabel "normalized squared error at k = 10" "${curves[@]}"
done
"$PY" scripts/reproduce-summary.py "$OUT" "$STEPS" | tee "$OUT/summary.md"
