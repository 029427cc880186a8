#!/usr/bin/env bash
# The issue-17 experiments (docs/experiments/unrolled-optimization/):
#   sparse coding, m = 250, n = 500: ISTA and FISTA (1000 iterations, both
#   compiled schedules) and the
#   16-layer learned unrollings ALISTA, TiLISTA, LISTA-CP, LISTA-CPSS (trained
#   with --steps STEPS) and LISTA (LISTA_STEPS: 6M parameters, slower), NMSE
#   per layer on the same 1000 validation samples; modern Hopfield retrieval
#   swept over beta. ONLY=sparse|hopfield runs one half; VARIANTS="alista …"
#   the learned unrollings to train.
#   scripts/unrolled-optimization-study.sh BUILD OUT [STEPS] [LISTA_STEPS]
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-docs/experiments/unrolled-optimization}
STEPS=${3:-4000}
LISTA_STEPS=${4:-1000}
ONLY=${ONLY:-all}
VARIANTS=${VARIANTS:-alista tilista lista_cp lista_cpss lista}
BIN=$BUILD/bin
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$OUT"
compile() { # compile NAME SRC
  "$BIN"/unroll-opt "$2" --lower-to-cpu -o "$TMP/$1.mlir"
  "$BIN"/unroll-translate "$TMP/$1.mlir" -o "$TMP/$1.so"
}
if [ "$ONLY" != hopfield ]; then
for v in sparse_coding lista_cp tilista alista lista_cpss lista; do compile $v examples/$v.mlir; done
"$BIN"/unroll-run "$TMP/sparse_coding.so" --task sparse_coding --out "$OUT/ista" | tee "$OUT/ista.txt"
"$BIN"/unroll-run "$TMP/sparse_coding.so" --task sparse_coding --energy fista --out "$OUT/fista" | tee "$OUT/fista.txt"
for v in $VARIANTS; do
  s=$STEPS; [ $v = lista ] && s=$LISTA_STEPS
  "$BIN"/unroll-run "$TMP/$v.so" --task sparse_coding --steps "$s" --out "$OUT/$v" 2>&1 | tee "$OUT/$v.txt"
done
fi
if [ "$ONLY" != sparse ]; then
# Hopfield: one library per beta (beta is a compile-time attribute).
for beta in 1 2 4 8 16 32 64 128; do
  sed "s/beta(16.0)/beta($beta.0)/" examples/hopfield.mlir > "$TMP/hopfield_$beta.mlir"
  compile hopfield_$beta "$TMP/hopfield_$beta.mlir"
  for c in mask noise; do
    "$BIN"/unroll-run "$TMP/hopfield_$beta.so" --task hopfield --corrupt $c --out "$OUT/hopfield/beta_${beta}_$c" \
      > "$OUT/hopfield/beta_${beta}_$c.txt" 2>&1 || true
  done
done
fi
python3 scripts/unrolled-optimization-summary.py "$OUT"
"$BIN"/unroll-plot "$OUT/sparse_coding_layers.svg" --title "sparse coding, m = 250, n = 500: NMSE per layer (1000 validation samples)" \
  --xlabel "layer / iteration k" --ylabel "NMSE (dB)" \
  "$OUT/sparse_coding_layers.csv:ista:ISTA" "$OUT/sparse_coding_layers.csv:fista:FISTA" \
  "$OUT/sparse_coding_layers.csv:alista:ALISTA" "$OUT/sparse_coding_layers.csv:tilista:TiLISTA" \
  "$OUT/sparse_coding_layers.csv:lista_cp:LISTA-CP" "$OUT/sparse_coding_layers.csv:lista_cpss:LISTA-CPSS" \
  "$OUT/sparse_coding_layers.csv:lista:LISTA"
"$BIN"/unroll-plot "$OUT/hopfield_beta.svg" --title "modern Hopfield retrieval (N = 1000, d = 64): error against beta" \
  --xlabel "beta" --ylabel "fraction retrieving the wrong pattern" \
  "$OUT/hopfield_beta.csv:mask_one_step:masked, 1 step" "$OUT/hopfield_beta.csv:mask_converged:masked, converged" \
  "$OUT/hopfield_beta.csv:noise_one_step:noisy, 1 step" "$OUT/hopfield_beta.csv:noise_converged:noisy, converged"
