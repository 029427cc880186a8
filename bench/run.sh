#!/usr/bin/env bash
# The CPU benchmark: the same training step and forward, for the small and the
# paper config, with unroll and with PyTorch (OpenBLAS) in one run, on one
# thread and on all cores (BENCH_THREADS, default 2), plus the machine's GEMM
# peak measured in the same run (before and after the timings; the higher
# counts) and right before and after each of unroll's timed runs (each run's
# share against the peaks around it). Prints a table and writes
# OUT/bench.json.
#   bench/run.sh [BUILD] [OUT] [REPEATS] [CONFIGS...]   (configs: small paper)
# Each number is the median of at least REPEATS timed runs. The VM's speed
# drifts, so unroll and PyTorch alternate: BENCH_ROUNDS rounds (default 2),
# each running unroll then PyTorch for ceil(REPEATS / rounds) timed runs
# after a warm-up; the median is over all rounds' runs.
# BENCH_BASE=OTHER_BUILD also compiles the models with another build's
# unroll-opt/unroll-translate (e.g. the commit before a change) and times
# those libraries in the same rounds, with that build's unroll-bench where it
# has one (the runtime's part of a step, such as its micro-batches, is then
# the other build's too): the table then has a before column.
# BENCH_BF16=1 also times unroll with bf16 GEMM operands (UNROLL_CPU_PRECISION
# =bf16, the same library; needs AVX512_BF16) in the same rounds, and the
# bf16 GEMM peak beside the f32 one: the table then has bf16 columns.
set -euo pipefail
BUILD=${1:-build}; OUT=${2:-out/bench}; REPEATS=${3:-7}; shift $(( $# > 3 ? 3 : $# ))
CONFIGS=("$@"); [ ${#CONFIGS[@]} -gt 0 ] || CONFIGS=(small paper)
THREADS=${BENCH_THREADS:-2}
ROUNDS=${BENCH_ROUNDS:-2}
PER_ROUND=$(( (REPEATS + ROUNDS - 1) / ROUNDS ))
mkdir -p "$OUT"
BIN="$BUILD/bin"
PY=/usr/bin/python3
declare -A ARGS=(
  [small]="looped_gpt2_small 5 64 4 1 23 10 5 11"
  [paper]="looped_gpt2 20 256 8 1 203 20 15 41"
)
THREAD_COUNTS=(1); [ "$THREADS" -gt 1 ] && THREAD_COUNTS+=("$THREADS")
echo "measuring the GEMM peak ..." >&2
BF16=${BENCH_BF16:-0}
if [ "$BF16" = 1 ] && ! "$BIN/unroll-gemm-bench" 64 64 64 --bf16 --repeats 1 > /dev/null; then
  echo "bench/run.sh: BENCH_BF16=1 needs AVX512_BF16, which this CPU lacks" >&2
  exit 2
fi
PEAK_KINDS=(""); [ "$BF16" = 1 ] && PEAK_KINDS+=(--bf16)
# The VM's speed drifts within seconds (a busy neighbour on the core halves
# the FMA rate), so unroll-bench also measures the GEMM peak right before
# and after every timed step and forward, and each is set against the peaks
# of its own seconds (bench/table.py's last share column).
BRACKET="--bracket-peak 9"
declare -A early
for t in "${THREAD_COUNTS[@]}"; do
  for k in "${PEAK_KINDS[@]}"; do
    early[$t$k]=$("$BIN/unroll-gemm-bench" 2048 2048 256 --threads "$t" --repeats 9 $k)
  done
done
results=()
for c in "${CONFIGS[@]}"; do
  read -r name d D H L pos loops window points <<< "${ARGS[$c]}"
  so="$OUT/$name.so"
  # Compiled every time (seconds): a library kept from an earlier run would
  # miss a change to the kernels, which unroll-translate links from ../lib.
  echo "compiling examples/$name.mlir" >&2
  "$BIN/unroll-opt" "examples/$name.mlir" --lower-to-cpu -o "$OUT/$name.ll.mlir"
  "$BIN/unroll-translate" "$OUT/$name.ll.mlir" -o "$so"
  base_so="$OUT/$name.base.so"
  if [ -n "${BENCH_BASE:-}" ]; then
    echo "compiling examples/$name.mlir with $BENCH_BASE" >&2
    "$BENCH_BASE/bin/unroll-opt" "examples/$name.mlir" --lower-to-cpu -o "$OUT/$name.base.ll.mlir"
    "$BENCH_BASE/bin/unroll-translate" "$OUT/$name.base.ll.mlir" -o "$base_so"
  fi
  for t in "${THREAD_COUNTS[@]}"; do
    us=(); trs=(); bs=(); hs=()
    for r in $(seq "$ROUNDS"); do
      if [ -n "${BENCH_BASE:-}" ]; then
        echo "timing $c: unroll before ($t threads, round $r/$ROUNDS) ..." >&2
        base_bench="$BENCH_BASE/bin/unroll-bench"; [ -x "$base_bench" ] || base_bench="$BIN/unroll-bench"
        bs+=("$(UNROLL_THREADS=$t "$base_bench" "$base_so" --points "$points" --repeats "$PER_ROUND" $BRACKET)")
      fi
      echo "timing $c: unroll ($t threads, round $r/$ROUNDS) ..." >&2
      us+=("$(UNROLL_THREADS=$t "$BIN/unroll-bench" "$so" --points "$points" --repeats "$PER_ROUND" $BRACKET)")
      if [ "$BF16" = 1 ]; then
        echo "timing $c: unroll bf16 ($t threads, round $r/$ROUNDS) ..." >&2
        hs+=("$(UNROLL_CPU_PRECISION=bf16 UNROLL_THREADS=$t "$BIN/unroll-bench" "$so" --points "$points" --repeats "$PER_ROUND")")
      fi
      echo "timing $c: PyTorch ($t threads, round $r/$ROUNDS) ..." >&2
      trs+=("$(OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t $PY bench/torch-bench.py "$d" "$D" "$H" "$L" \
               "$pos" "$loops" "$window" "$points" 64 "$PER_ROUND" "$t")")
    done
    # One record per side: the first round's fields, every round's times,
    # medians over all of them.
    merge='import json, sys
rs = [json.loads(a) for a in sys.argv[1:]]
m = rs[0]
for k, med in (("train_step_s", "train_step_median_s"), ("forward_s", "forward_median_s")):
    m[k] = [x for r in rs for x in r[k]]
    m[med] = sorted(m[k])[len(m[k]) // 2]
    peaks = k[:-len("_s")] + "_peaks_gflops"
    if all(peaks in r for r in rs):
        m[peaks] = [x for r in rs for x in r[peaks]]
m["rounds"] = len(rs)
print(json.dumps(m))'
    u=$($PY -c "$merge" "${us[@]}"); tr=$($PY -c "$merge" "${trs[@]}")
    before=""
    [ ${#bs[@]} -gt 0 ] && before=", \"before\": $($PY -c "$merge" "${bs[@]}")"
    [ ${#hs[@]} -gt 0 ] && before+=", \"bf16\": $($PY -c "$merge" "${hs[@]}")"
    results+=("{\"config\": \"$c\", \"threads\": $t, \"dims\": [$d, $D, $H, $L, $loops, $window, $points], \"unroll\": $u, \"torch\": $tr$before}")
  done
done
echo "measuring the GEMM peak again ..." >&2
peaks=()
for t in "${THREAD_COUNTS[@]}"; do
  for k in "${PEAK_KINDS[@]}"; do
    # The higher of the two measurements (before and after the timings): a
    # peak taken in a slow minute of the VM would flatter every share.
    late=$("$BIN/unroll-gemm-bench" 2048 2048 256 --threads "$t" --repeats 9 $k)
    peaks+=("\"$t${k:+-bf16}\": $($PY -c 'import json, sys
a, b = (json.loads(x) for x in sys.argv[1:])
best = a if a["gflops"] >= b["gflops"] else b
best["measured_gflops"] = [a["gflops"], b["gflops"]]
print(json.dumps(best))' "${early[$t$k]}" "$late")")
  done
done
# The FMA pipes' own rate (vector FMAs on registers): the ceiling above the
# GEMM peak, which is unroll's own kernel and moves with it.
fma=()
for t in "${THREAD_COUNTS[@]}"; do
  if f=$("$BIN/unroll-gemm-bench" --fma-peak --threads "$t"); then fma+=("\"$t\": $f"); fi
done
printf '{"runs": [%s], "gemm_peak": {%s}, "fma_peak": {%s}}\n' "$(IFS=,; echo "${results[*]}")" \
  "$(IFS=,; echo "${peaks[*]}")" "$(IFS=,; echo "${fma[*]}")" > "$OUT/bench.json"
$PY "$(dirname "$0")/table.py" "$OUT/bench.json"
echo "wrote $OUT/bench.json" >&2
