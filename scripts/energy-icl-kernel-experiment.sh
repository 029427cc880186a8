#!/usr/bin/env bash
# Kernel energies that learn in context, against the looped GPT-2 at equal
# training steps (docs/experiments/energy-icl). Every model is trained by
# unroll-run on icl_linear with the same recipe (batch 64, 12,000 steps, Adam
# at 3e-3 with 500 warm-up steps and a cosine decay to 1e-5, seed 0; the
# GPT-2 with its make-run config at 12,000 steps), evaluated on the same 1280
# prompts, and run for 1 to 10b loops (the loop study):
#
#   d5/gpt2          examples/looped_gpt2_small.mlir (52,033 parameters)
#   d5/cg            examples/energy_icl_cg.mlir: conjugate gradients, the kernel on x
#   d5/cg_dense      the same kernel on every feature (x and y)
#   d5/line_search   exact line search along the gradient
#   d5/nesterov      Nesterov's momentum, a learned step and momentum per iteration
#   d5/gd            gradient descent, a learned step per iteration (von Oswald)
#   d5/cg_s1, cg_s2  cg with seeds 1 and 2
#   d5/cg_noisy      cg on icl_noisy_linear; d5/cg_sparse on icl_sparse_linear
#   d20/cg, d20/line_search   d = 20, k up to 40, b = 25 (dims curriculum every 500 steps)
#   d20/cg_24k       d20/cg trained twice as long
#   fixed/...        cg and line_search trained with --gradient implicit, phantom, jfb
#                    (3000 steps), and halting (--loops auto) of the trained d5/cg
#
# Two runs at a time (one thread each); then each model's training step is
# timed alone (unroll-bench, 2 threads). Results and summary.json in OUT;
# scripts/energy-icl-kernel-summary.py writes the page's tables and plots.
#   scripts/energy-icl-kernel-experiment.sh [BUILD] [OUT] [STEPS]
set -euo pipefail
BUILD=${1:-build}; OUT=${2:-out/energy-icl-kernel}; STEPS=${3:-12000}
BIN="$BUILD/bin"
G="python3 scripts/gen-energy-icl.py"
mkdir -p "$OUT"/{d5,d20,fixed,src}
RECIPE=(--steps "$STEPS" --batch 64 --lr 3e-3 --lr-schedule cosine --lr-min 1e-5 --warmup 500
        --seed 0 --eval-prompts 1280 --log-every 1000 --save-every 4000)

# name -> source (generated ones into OUT/src)
gen() { local n=$1; shift; [ -f "$OUT/src/$n.mlir" ] || $G "$n" "$@" > "$OUT/src/$n.mlir"; }
gen cg_dense --d 5 --schedule cg --loops 10 --dense
gen line_search --d 5 --schedule line_search --loops 10
gen nesterov --d 5 --schedule nesterov --loops 10
gen gd --d 5 --schedule gd --loops 10
gen cg20 --d 20 --schedule cg --loops 25
gen line_search20 --d 20 --schedule line_search --loops 25
declare -A SRC=([gpt2]=examples/looped_gpt2_small.mlir [cg]=examples/energy_icl_cg.mlir
                [cg_dense]=$OUT/src/cg_dense.mlir [line_search]=$OUT/src/line_search.mlir
                [nesterov]=$OUT/src/nesterov.mlir [gd]=$OUT/src/gd.mlir
                [cg20]=$OUT/src/cg20.mlir [line_search20]=$OUT/src/line_search20.mlir)
for m in "${!SRC[@]}"; do
  so="$OUT/src/$m.so"
  [ -f "$so" ] && [ "$so" -nt "${SRC[$m]}" ] && [ "$so" -nt "$BIN/unroll-opt" ] && continue
  echo "compiling ${SRC[$m]}" >&2
  "$BIN/unroll-opt" "${SRC[$m]}" --lower-to-cpu -o "$OUT/src/$m.ll"
  "$BIN/unroll-translate" "$OUT/src/$m.ll" -o "$so"
  "$BIN/unroll-run" "$so" --info > "$OUT/src/$m.info.json"
done

# run DIR MODEL LOOPLIST [unroll-run flags...]: train, evaluate, loop study
# (a run already in OUT is kept: rerun to redo only what is missing).
run() {
  local dir=$1 m=$2 loops=$3; shift 3
  [ -f "$dir/loops.csv" ] && return
  local t0=$SECONDS
  UNROLL_THREADS=1 "$BIN/unroll-run" "$OUT/src/$m.so" --task icl_linear "$@" --out "$dir" \
    > "$dir.log" 2>&1
  echo "train_seconds $((SECONDS - t0))" >> "$dir.log"
  UNROLL_THREADS=1 "$BIN/unroll-run" "$OUT/src/$m.so" --checkpoint "$dir/checkpoint" \
    --eval-loops "$loops" --out "$dir" "$@" >> "$dir.log" 2>&1
  echo "done $dir" >&2
}
L10=1,2,3,4,5,6,7,8,9,10,15,20,30,50,100
L25=1,2,5,10,15,20,25,30,50,100,250
jobs_=(
  "$OUT/d5/gpt2 gpt2 $L10 --config examples/looped_gpt2_small.train.json --steps $STEPS --seed 0 --eval-prompts 1280 --log-every 1000"
  "$OUT/d5/cg cg $L10 ${RECIPE[*]}"
  "$OUT/d5/cg_dense cg_dense $L10 ${RECIPE[*]}"
  "$OUT/d5/line_search line_search $L10 ${RECIPE[*]}"
  "$OUT/d5/nesterov nesterov $L10 ${RECIPE[*]}"
  "$OUT/d5/gd gd $L10 ${RECIPE[*]}"
  "$OUT/d5/cg_s1 cg $L10 ${RECIPE[*]} --seed 1"
  "$OUT/d5/cg_s2 cg $L10 ${RECIPE[*]} --seed 2"
  "$OUT/d5/cg_noisy cg $L10 ${RECIPE[*]} --task icl_noisy_linear"
  "$OUT/d5/cg_sparse cg $L10 ${RECIPE[*]} --task icl_sparse_linear"
  "$OUT/d20/cg cg20 $L25 ${RECIPE[*]} --curriculum-interval 500"
  "$OUT/d20/line_search line_search20 $L25 ${RECIPE[*]} --curriculum-interval 500"
  "$OUT/d20/cg_24k cg20 $L25 ${RECIPE[*]} --curriculum-interval 500 --steps $((2 * STEPS))"
)
for g in bptt implicit phantom jfb; do
  for m in cg line_search; do
    jobs_+=("$OUT/fixed/${m}_$g $m $L10 ${RECIPE[*]} --steps 3000 --gradient $g")
  done
done
running=0
for j in "${jobs_[@]}"; do
  if [ $running -ge 2 ]; then wait -n; running=$((running - 1)); fi
  # shellcheck disable=SC2086
  run $j &
  running=$((running + 1))
done
wait
# Halting: each prompt until its iterate stops moving.
if [ ! -f "$OUT/fixed/cg_halting/eval.json" ]; then
  "$BIN/unroll-run" "$OUT/src/cg.so" --checkpoint "$OUT/d5/cg/checkpoint" --loops auto --tol 1e-6 \
    --max-loops 100 --out "$OUT/fixed/cg_halting" > "$OUT/fixed/cg_halting.log" 2>&1
fi
# Time per training step, each model alone, 2 threads.
for m in gpt2 cg line_search nesterov gd cg20; do
  [ -f "$OUT/src/$m.bench.json" ] && continue
  pts=11; [ "$m" = cg20 ] && pts=41
  UNROLL_THREADS=2 "$BIN/unroll-bench" "$OUT/src/$m.so" --points $pts --repeats 9 \
    > "$OUT/src/$m.bench.json"
done
python3 scripts/energy-icl-kernel-summary.py "$OUT" --plot "$BIN/unroll-plot"
