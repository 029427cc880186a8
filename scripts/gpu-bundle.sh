#!/usr/bin/env bash
# Builds, on any machine with the CUDA toolkit (no GPU needed), a folder that
# runs on a machine with only an NVIDIA driver (x86-64, glibc >= 2.36):
#
#   bin/   unroll-run, unroll-model-check, unroll-energy-check, unroll-bench,
#          unroll-fixed-point-check
#          (libstdc++ linked in: they need only libc and libm)
#   lib/   compiled.so files, each for the GPU (*.gpu.so, the mgpu* runtime
#          inside) and for the CPU (*.cpu.so, the oracle); libunroll_mpi.so
#          where the build has it (used only under mpirun: it needs the
#          machine's Open MPI 4 libmpi.so.40)
#          lib/cubins/: the paper config's kernels as cubins (for cuobjdump)
#   gpu-check.sh, bench/torch-bench.py, bench/p2_torch.py (PyTorch peer, used
#          only if the GPU machine has torch); python/unroll and
#          python-gpu-vs-cpu.py (likewise)
#
#   scripts/gpu-bundle.sh [BUILD] [OUT]        (default: build out/gpu-bundle)
# then copy OUT to the GPU machine and run  OUT/gpu-check.sh OUT RESULTS
set -euo pipefail
BUILD=${1:-build}; OUT=${2:-out/gpu-bundle}
SRC=$(cd "$(dirname "$0")/.." && pwd)
BIN="$BUILD/bin"
CUDA=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$OUT/bin" "$OUT/lib" "$OUT/bench"
for t in unroll-run unroll-model-check unroll-energy-check unroll-bench unroll-fixed-point-check; do
  cp "$BIN/$t" "$OUT/bin/"
done
if [ -f "$BUILD/lib/libunroll_mpi.so" ]; then
  cp "$BUILD/lib/libunroll_mpi.so" "$OUT/lib/"
fi
cp "$SRC/scripts/gpu-check.sh" "$SRC/scripts/compare-loss-curves.sh" "$OUT/"
cp "$SRC/bench/torch-bench.py" "$SRC/bench/p2_torch.py" "$OUT/bench/"
# python/unroll and its GPU-vs-CPU check (run only where python3 has torch).
rm -rf "$OUT/python" && mkdir -p "$OUT/python" && cp -r "$SRC/python/unroll" "$OUT/python/"
cp "$SRC/scripts/python-gpu-vs-cpu.py" "$OUT/"

build() { # build NAME SOURCE.mlir TARGET [=PIPELINE-OPTIONS]
  local name=$1 src=$2 target=$3; shift 3
  local so="$OUT/lib/$name.$target.so"
  if [ -f "$so" ] && [ "$so" -nt "$src" ] && [ "$so" -nt "$BIN/unroll-opt" ]; then return; fi
  echo "building $so" >&2
  "$BIN/unroll-opt" "$src" "--lower-to-$target$*" -o "$OUT/lib/$name.$target.mlir"
  "$BIN/unroll-translate" "$OUT/lib/$name.$target.mlir" -o "$so"
  rm -f "$OUT/lib/$name.$target.mlir"
}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 "$SRC/scripts/gen-gpt2.py" add --d 3 --D 8 --heads 2 --loops 4 --window 2 --positions 6 --dtype f64 > "$tmp/tiny_f64.mlir"
for m in looped_gpt2 looped_gpt2_small; do
  build "$m" "$SRC/examples/$m.mlir" gpu "=cuda-path=$CUDA"
  build "$m" "$SRC/examples/$m.mlir" cpu
done
# The paper config with its matrix products on TF32 tensor cores.
build looped_gpt2_tf32 "$SRC/examples/looped_gpt2.mlir" gpu "=cuda-path=$CUDA precision=tf32"
# ... and on bf16 ones (operands rounded to bf16, f32 accumulation).
build looped_gpt2_bf16 "$SRC/examples/looped_gpt2.mlir" gpu "=cuda-path=$CUDA precision=bf16"
# ... and with the MLP's GELU in cuBLASLt's GELU_AUX_BIAS epilogue (opt-in
# until this check shows cuBLASLt's GELU is the model's tanh GELU).
build looped_gpt2_gelu "$SRC/examples/looped_gpt2.mlir" gpu "=cuda-path=$CUDA gelu-epilogue=1"
build tiny_f64 "$tmp/tiny_f64.mlir" gpu "=cuda-path=$CUDA"
# D = 32: layer norms on a warp per row, f64 sums shuffled as 32-bit halves.
python3 "$SRC/scripts/gen-gpt2.py" add --d 3 --D 32 --heads 2 --loops 4 --window 2 --positions 6 --dtype f64 > "$tmp/rows_f64.mlir"
build rows_f64 "$tmp/rows_f64.mlir" gpu "=cuda-path=$CUDA"
build rows_f64 "$tmp/rows_f64.mlir" cpu
# Fused attention over many small tiles (22-token prompts: 6 key tiles of 4).
python3 "$SRC/scripts/gen-gpt2.py" add --d 3 --D 8 --heads 2 --loops 4 --window 2 --positions 24 --dtype f64 > "$tmp/tiles_f64.mlir"
build tiles_f64 "$tmp/tiles_f64.mlir" gpu "=cuda-path=$CUDA attention-tile=4"
build tiles_f64 "$tmp/tiles_f64.mlir" cpu
for e in transformer_energy custom_rho_energy residual_energy; do
  build "$e" "$SRC/examples/$e.mlir" gpu "=cuda-path=$CUDA"
done
build energy_gradients "$SRC/test/Integration/CPU/energy-gradients.mlir" gpu "=cuda-path=$CUDA"
# An energy whose derived steps are looped and trained in context (f32), and
# an f64 energy model for gradient checks: the product's central use.
build energy_icl "$SRC/examples/energy_icl.mlir" gpu "=cuda-path=$CUDA"
build energy_icl "$SRC/examples/energy_icl.mlir" cpu
build energy_model_f64 "$SRC/test/Integration/CPU/Inputs/energy_model.mlir" gpu "=cuda-path=$CUDA"
# Halting and the fixed-point gradients (scf.while on device values).
build contractive_block "$SRC/test/Integration/CPU/Inputs/contractive-block.mlir" gpu "=cuda-path=$CUDA"
# The paper config's kernels as plain cubins, for cuobjdump there (registers,
# spills, SASS): the library embeds them where cuobjdump does not look.
rm -rf "$OUT/lib/cubins"
python3 "$SRC/scripts/extract-cubins.py" "$OUT/lib/looped_gpt2.gpu.so" "$OUT/lib/cubins" > /dev/null
echo "bundle in $OUT ($(du -sh "$OUT" | cut -f1)); on the GPU machine: $OUT/gpu-check.sh $OUT RESULTS" >&2
