#!/usr/bin/env bash
# Same-run A/B of two compilers: compiles the benchmark models with the
# unroll-opt/unroll-translate of BASE and of NEW (two build folders, e.g. a
# build of the previous commit and this one), then times each library's
# training step and forward with NEW's unroll-bench, alternating A and B in
# ROUNDS rounds so that the VM's drift hits both. Prints a table and writes
# OUT/ab.json.
#   bench/ab.sh BASE_BUILD NEW_BUILD [OUT] [ROUNDS] [REPEATS] [CONFIGS...]  (configs: small paper)
set -euo pipefail
BASE=${1:?base build folder}; NEW=${2:?new build folder}; OUT=${3:-out/ab}
ROUNDS=${4:-3}; REPEATS=${5:-5}; shift $(( $# > 5 ? 5 : $# ))
CONFIGS=("$@"); [ ${#CONFIGS[@]} -gt 0 ] || CONFIGS=(small paper)
THREADS=${BENCH_THREADS:-2}
declare -A NAME=([small]=looped_gpt2_small [paper]=looped_gpt2)
declare -A POINTS=([small]=11 [paper]=41)
mkdir -p "$OUT"
for c in "${CONFIGS[@]}"; do
  for side in base new; do
    bin=$([ $side = base ] && echo "$BASE/bin" || echo "$NEW/bin")
    n=${NAME[$c]}
    echo "compiling examples/$n.mlir with $bin" >&2
    "$bin/unroll-opt" "examples/$n.mlir" --lower-to-cpu -o "$OUT/$n.$side.mlir"
    "$bin/unroll-translate" "$OUT/$n.$side.mlir" -o "$OUT/$n.$side.so"
  done
  if cmp -s "$OUT/${NAME[$c]}.base.so" "$OUT/${NAME[$c]}.new.so"; then
    echo "$c: the two compilers build byte-identical libraries (timing differences are noise)" >&2
  elif cmp -s "$OUT/${NAME[$c]}.base.mlir" "$OUT/${NAME[$c]}.new.mlir"; then
    echo "$c: the two compilers emit identical LLVM-dialect IR" >&2
  fi
done
runs=()
for c in "${CONFIGS[@]}"; do
  for r in $(seq "$ROUNDS"); do
    for side in base new; do
      echo "timing $c $side (round $r/$ROUNDS, $THREADS threads) ..." >&2
      j=$(UNROLL_THREADS=$THREADS "$NEW/bin/unroll-bench" "$OUT/${NAME[$c]}.$side.so" \
            --points "${POINTS[$c]}" --repeats "$REPEATS")
      runs+=("{\"config\": \"$c\", \"side\": \"$side\", \"round\": $r, \"result\": $j}")
    done
  done
done
printf '{"threads": %s, "runs": [%s]}\n' "$THREADS" "$(IFS=,; echo "${runs[*]}")" > "$OUT/ab.json"
python3 - "$OUT/ab.json" <<'PY'
import json, sys, statistics as st
j = json.load(open(sys.argv[1]))
print(f"| config | what | base median (s) | new median (s) | new / base | runs per side |")
print("|---|---|---|---|---|---|")
for c in dict.fromkeys(r["config"] for r in j["runs"]):
    for key, what in (("train_step_s", "training step"), ("forward_s", "forward")):
        t = {s: [x for r in j["runs"] if r["config"] == c and r["side"] == s for x in r["result"][key]]
             for s in ("base", "new")}
        b, n = st.median(t["base"]), st.median(t["new"])
        print(f"| {c} | {what} | {b:.4f} | {n:.4f} | {n / b:.3f} | {len(t['base'])} |")
print(f"({j['threads']} threads; A and B alternate within each round)")
PY
echo "wrote $OUT/ab.json" >&2
