#!/usr/bin/env bash
# The CPU benchmark: the same training step and forward, for the small and the
# paper config, with unroll and with PyTorch (OpenBLAS) in one run, on one
# thread and on all cores (BENCH_THREADS, default 2), plus the machine's GEMM
# peak measured in the same run. Prints a table and writes OUT/bench.json.
#   bench/run.sh [BUILD] [OUT] [REPEATS] [CONFIGS...]   (configs: small paper)
# Each number is the median of at least REPEATS timed runs. The VM's speed
# drifts, so unroll and PyTorch alternate: BENCH_ROUNDS rounds (default 2),
# each running unroll then PyTorch for ceil(REPEATS / rounds) timed runs
# after a warm-up; the median is over all rounds' runs.
# BENCH_BASE=OTHER_BUILD also compiles the models with another build's
# unroll-opt/unroll-translate (e.g. the commit before a change) and times
# those libraries in the same rounds: the table then has a before column.
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
results=()
for c in "${CONFIGS[@]}"; do
  read -r name d D H L pos loops window points <<< "${ARGS[$c]}"
  so="$OUT/$name.so"
  if [ ! -f "$so" ] || [ "examples/$name.mlir" -nt "$so" ] || [ "$BIN/unroll-translate" -nt "$so" ] \
     || [ "$BIN/unroll-opt" -nt "$so" ]; then
    echo "compiling examples/$name.mlir" >&2
    "$BIN/unroll-opt" "examples/$name.mlir" --lower-to-cpu -o "$OUT/$name.ll.mlir"
    "$BIN/unroll-translate" "$OUT/$name.ll.mlir" -o "$so"
  fi
  base_so="$OUT/$name.base.so"
  if [ -n "${BENCH_BASE:-}" ] && { [ ! -f "$base_so" ] || [ "$BENCH_BASE/bin/unroll-translate" -nt "$base_so" ]; }; then
    echo "compiling examples/$name.mlir with $BENCH_BASE" >&2
    "$BENCH_BASE/bin/unroll-opt" "examples/$name.mlir" --lower-to-cpu -o "$OUT/$name.base.ll.mlir"
    "$BENCH_BASE/bin/unroll-translate" "$OUT/$name.base.ll.mlir" -o "$base_so"
  fi
  for t in "${THREAD_COUNTS[@]}"; do
    us=(); trs=(); bs=()
    for r in $(seq "$ROUNDS"); do
      if [ -n "${BENCH_BASE:-}" ]; then
        echo "timing $c: unroll before ($t threads, round $r/$ROUNDS) ..." >&2
        bs+=("$(UNROLL_THREADS=$t "$BIN/unroll-bench" "$base_so" --points "$points" --repeats "$PER_ROUND")")
      fi
      echo "timing $c: unroll ($t threads, round $r/$ROUNDS) ..." >&2
      us+=("$(UNROLL_THREADS=$t "$BIN/unroll-bench" "$so" --points "$points" --repeats "$PER_ROUND")")
      echo "timing $c: PyTorch ($t threads, round $r/$ROUNDS) ..." >&2
      trs+=("$(OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t $PY bench/torch_bench.py "$d" "$D" "$H" "$L" \
               "$pos" "$loops" "$window" "$points" 64 "$PER_ROUND" "$t")")
    done
    # One record per side: the first round's fields, every round's times,
    # medians over all of them.
    merge='import json, sys
rs = [json.loads(a) for a in sys.argv[1:]]
m = rs[0]
for k in ("train_step_s", "forward_s"):
    m[k] = [x for r in rs for x in r[k]]
    m[k.replace("_s", "_median_s")] = sorted(m[k])[len(m[k]) // 2]
m["rounds"] = len(rs)
print(json.dumps(m))'
    u=$($PY -c "$merge" "${us[@]}"); tr=$($PY -c "$merge" "${trs[@]}")
    before=""
    [ ${#bs[@]} -gt 0 ] && before=", \"before\": $($PY -c "$merge" "${bs[@]}")"
    results+=("{\"config\": \"$c\", \"threads\": $t, \"dims\": [$d, $D, $H, $L, $loops, $window, $points], \"unroll\": $u, \"torch\": $tr$before}")
  done
done
echo "measuring the GEMM peak ..." >&2
peaks=()
for t in "${THREAD_COUNTS[@]}"; do
  peaks+=("\"$t\": $("$BIN/unroll-gemm-bench" 2048 2048 256 --threads "$t" --repeats 9)")
done
printf '{"runs": [%s], "gemm_peak": {%s}}\n' "$(IFS=,; echo "${results[*]}")" \
  "$(IFS=,; echo "${peaks[*]}")" > "$OUT/bench.json"
$PY - "$OUT/bench.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))

def flops(d, D, H, L, loops, window, points, batch):
    """Model FLOPs (multiply-adds x 2) of one forward over `loops` iterations
    and of one training step (forward over b, backward over the last T at
    twice the forward cost); layer norms, softmax and GELU are O(nD) and left
    out. Per block and token: QKV 6D^2, projection 2D^2, MLP 16D^2; attention
    scores and weighted sum 4nD per token."""
    n = 2 * points
    it = L * (24 * n * D * D + 4 * n * n * D)
    io = 2 * n * d * D + 2 * n * D
    return batch * (loops * it + io), batch * ((loops + 2 * window) * it + io)

has_before = any("before" in r for r in j["runs"])
extra = " before (s) | before: share of peak |" if has_before else ""
print("| config | threads | what | unroll (s) | PyTorch (s) | speed-up | unroll GFLOP/s | GEMM peak GFLOP/s | share of GEMM peak | PyTorch GFLOP/s |" + extra)
print("|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if has_before else ""))
for r in j["runs"]:
    d, D, H, L, loops, window, points = r["dims"]
    b = r["unroll"]["batch"]
    ff, ft = flops(d, D, H, L, loops, window, points, b)
    peak = j["gemm_peak"][str(r["threads"])]["gflops"]
    for what, key, f in (("training step", "train_step_median_s", ft), ("forward", "forward_median_s", ff)):
        u, t = r["unroll"][key], r["torch"][key]
        row = (f"| {r['config']} (b={loops}, T={window}, k={points}, batch {b}) | {r['threads']} | {what} "
               f"| {u:.4f} | {t:.4f} | {t/u:.2f}x | {f/u/1e9:.1f} | {peak:.0f} | {100*f/u/1e9/peak:.0f}% | {f/t/1e9:.1f} |")
        if has_before:
            bt = r["before"][key]
            row += f" {bt:.4f} | {100*f/bt/1e9/peak:.0f}% |"
        print(row)
pk = ", ".join(f"{k} thread{'s' if k != '1' else ''}: {v['gflops']:.0f} GFLOP/s" for k, v in j["gemm_peak"].items())
t0 = j["runs"][0]["torch"]
n = len(j["runs"][0]["unroll"]["train_step_s"])
print(f"(median of {n} runs each, unroll and PyTorch alternating in {j['runs'][0]['unroll']['rounds']} rounds; GEMM peak = unroll's f32 GEMM kernel on 2048x2048x256 in the same run: {pk}; "
      f"PyTorch {t0['torch']}, BLAS: {t0['blas']})")
PY
echo "wrote $OUT/bench.json" >&2
