#!/usr/bin/env bash
# P1 §6 on real data: the energy of a 12-iteration symmetric-weight
# Transformer (examples/digits_energy.mlir, eq. 20 form, and its residual
# variant) across iterations, averaged over 200 images of scikit-learn's
# bundled digits (converted by scripts/digits-to-safetensors.py), for 5 draws
# of random weights, and after training the residual variant's weights with a
# read-out on digit classification for 2000 SGD steps (P1 Fig. 6;
# scripts/p1-digits-train.py, gradients from the library's compiled VJP).
# Reports whether the energy decreases monotonically.
# Results in OUT/: energy.csv (t, then the mean E(Y_t) per energy and seed),
# energy.svg, trained/ (training.json, trained.safetensors, energy.json),
# trained.svg, runs/*.json, summary.txt.
#   scripts/p1-digits-energy.sh [BUILD] [OUT]
set -euo pipefail
BUILD=${1:-build}; OUT=${2:-out/p1-digits}
BIN="$BUILD/bin"
PY=${PYTHON:-python3}
mkdir -p "$OUT/runs"
"$PY" scripts/digits-to-safetensors.py "$OUT/digits.safetensors" --samples 200 --seed 0
"$BIN/unroll-opt" examples/digits_energy.mlir --lower-to-cpu -o "$OUT/digits_energy.ll.mlir"
"$BIN/unroll-translate" "$OUT/digits_energy.ll.mlir" -o "$OUT/digits_energy.so"
for e in digits_energy digits_energy_residual; do
  for seed in 0 1 2 3 4; do
    "$BIN/unroll-run" "$OUT/digits_energy.so" --task energy --energy "$e" \
        --input "$OUT/digits.safetensors" --seed "$seed" --json > "$OUT/runs/$e.seed$seed.json"
  done
done
"$PY" scripts/p1-digits-train.py "$OUT/digits_energy.so" "$OUT/trained" --steps 2000 --lr 0.05
"$BIN/unroll-run" "$OUT/digits_energy.so" --task energy --energy digits_energy_residual \
    --input "$OUT/trained/trained.safetensors" --json > "$OUT/trained/energy.json"
"$BIN/unroll-run" "$OUT/digits_energy.so" --task energy --energy digits_energy_residual \
    --input "$OUT/trained/trained.safetensors" --plot "$OUT/trained.svg" | tail -1
"$PY" - "$OUT" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
runs = {os.path.basename(p)[:-5]: json.load(open(p)) for p in sorted(glob.glob(f"{out}/runs/*.json"))}
names = list(runs)
T = len(next(iter(runs.values()))["energies"])
with open(f"{out}/energy.csv", "w") as f:
    f.write("t," + ",".join(names) + "\n")
    for t in range(T):
        f.write(f"{t}," + ",".join(f"{runs[n]['energies'][t]:.12g}" for n in names) + "\n")
with open(f"{out}/summary.txt", "w") as f:
    f.write("energy, weights seed: E(Y_0) -> E(Y_12) (mean over samples); samples with a monotone trace; "
            "increasing steps; largest relative increase\n")
    for n, r in runs.items():
        mean_mono = all(b <= a for a, b in zip(r["energies"], r["energies"][1:]))
        f.write(f"{n:32s} {r['energies'][0]:10.4f} -> {r['energies'][-1]:10.4f}  mean trace "
                f"{'monotone' if mean_mono else 'NOT monotone'}; {r['monotone_samples']}/{r['samples']} "
                f"samples monotone; {r['increases']} of {r['samples'] * r['iterations']} steps up; "
                f"max rel. increase {r['max_relative_increase']:.3g}\n")
    r, t = json.load(open(f"{out}/trained/energy.json")), json.load(open(f"{out}/trained/training.json"))
    mean_mono = all(b <= a for a, b in zip(r["energies"], r["energies"][1:]))
    f.write(f"{'residual, trained (2000 SGD steps)':32s} {r['energies'][0]:10.4f} -> {r['energies'][-1]:10.4f}  mean trace "
            f"{'monotone' if mean_mono else 'NOT monotone'}; {r['monotone_samples']}/{r['samples']} "
            f"samples monotone; {r['increases']} of {r['samples'] * r['iterations']} steps up; "
            f"max rel. increase {r['max_relative_increase']:.3g}; "
            f"held-out accuracy {t['test_accuracy_200']:.3f} (chance 0.1)\n")
print(open(f"{out}/summary.txt").read())
PY
args=()
for e in digits_energy digits_energy_residual; do
  for seed in 0 1 2 3 4; do
    label="eq. 20, seed $seed"; [ "$e" = digits_energy_residual ] && label="residual, seed $seed"
    args+=("$OUT/energy.csv:$e.seed$seed:$label")
  done
done
"$BIN/unroll-plot" "$OUT/energy.svg" --title "P1 energy on 200 digits (8 tokens x 8 pixels), random weights" \
    --xlabel "iteration t" --ylabel "mean E(Y_t) over 200 images" "${args[@]}"
