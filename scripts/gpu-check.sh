#!/usr/bin/env bash
# Runs the GPU tests and the GPU benchmark from a bundle made by
# scripts/gpu-bundle.sh, on a machine with an NVIDIA driver; needs nothing
# else (python3 with torch is used for the PyTorch peer if present).
#
#   gpu-check.sh BUNDLE RESULTS [REPEATS]
#
# Writes RESULTS/tests.txt (each check, PASS/FAIL), RESULTS/gpu-bench.json
# and RESULTS/gpu-bench.md (the table), RESULTS/summary.txt. Exit status 0 iff
# every test passed. Budget: under 8 minutes on an H200 (the training run and
# each PyTorch peer are cut at 150 s and 120 s).
#
# Limits, from the environment (seconds): CHECK_LIMIT (each check, 120),
# TRAIN_LIMIT (the short training run, 150), PEER_LIMIT (each PyTorch peer,
# 120), DEADLINE (after this many seconds the remaining stages are skipped
# and logged as such, 900). A check that hangs is killed and FAILs with 124.
# PEERS: which PyTorch peers to run, as COMPILE:PRECISION (torch-bench.py's
# arguments), default "0:fp32 1:fp32 max-autotune:tf32 max-autotune:bf16":
# eager and torch.compile in FP32, torch.compile(mode="max-autotune") with
# TF32 matmuls and under bf16 autocast. AUTOTUNE_LIMIT (each max-autotune
# peer, whose compilation times kernels: 200).
set -uo pipefail
CHECK_LIMIT=${CHECK_LIMIT:-120}; TRAIN_LIMIT=${TRAIN_LIMIT:-150}
PEER_LIMIT=${PEER_LIMIT:-120}; DEADLINE=${DEADLINE:-900}
AUTOTUNE_LIMIT=${AUTOTUNE_LIMIT:-200}
late() { # late STAGE: true (and logged) once DEADLINE has passed
  [ "$SECONDS" -lt "$DEADLINE" ] && return 1
  log "skipped: $1 (DEADLINE=$DEADLINE s passed)"
}
B=$(cd "${1:?usage: gpu-check.sh BUNDLE RESULTS [REPEATS]}" && pwd)
R=${2:?usage: gpu-check.sh BUNDLE RESULTS [REPEATS]}; REPEATS=${3:-20}
mkdir -p "$R"; R=$(cd "$R" && pwd)
BIN="$B/bin"; LIB="$B/lib"
log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$R/summary.txt" >&2; }
: > "$R/tests.txt"; : > "$R/summary.txt"
if ! "$BIN/unroll-run" --gpu-info > "$R/device.txt" 2>&1; then
  log "$(cat "$R/device.txt")"
  exit 1
fi
log "device: $(cat "$R/device.txt")"
command -v nvidia-smi >/dev/null && nvidia-smi > "$R/nvidia-smi.txt" 2>&1
export UNROLL_THREADS=$(nproc)
fails=0
check() { # check NAME COMMAND... : runs it, records the last lines and PASS/FAIL
  local name=$1; shift
  if late "$name"; then fails=$((fails + 1)); echo "$name SKIPPED" >> "$R/tests.txt"; return; fi
  local t0=$(date +%s.%N)
  timeout "$CHECK_LIMIT" "$@" > "$R/$name.log" 2>&1; local rc=$?
  local dt=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}")
  if [ $rc -eq 0 ]; then st=PASS; else st=FAIL; fails=$((fails + 1)); fi
  [ $rc -eq 124 ] && st="FAIL (killed after ${CHECK_LIMIT} s)"
  printf '%-32s %s  (%ss)  %s\n' "$name" "$st" "$dt" "$(grep -E 'max rel|relative error' "$R/$name.log" | tail -1)" | tee -a "$R/tests.txt" >&2
}
log "tests"
check paper-vs-cpu "$BIN/unroll-model-check" --against "$LIB/looped_gpt2.gpu.so" "$LIB/looped_gpt2.cpu.so" --batch 8 --points 41
check paper-tf32-vs-cpu "$BIN/unroll-model-check" --against "$LIB/looped_gpt2_tf32.gpu.so" "$LIB/looped_gpt2.cpu.so" --batch 8 --points 41 --tol 3e-3
check paper-bf16-vs-cpu "$BIN/unroll-model-check" --against "$LIB/looped_gpt2_bf16.gpu.so" "$LIB/looped_gpt2.cpu.so" --batch 8 --points 41 --tol 2e-2
check paper-gelu-epilogue-vs-cpu "$BIN/unroll-model-check" --against "$LIB/looped_gpt2_gelu.gpu.so" "$LIB/looped_gpt2.cpu.so" --batch 8 --points 41
check small-vs-cpu "$BIN/unroll-model-check" --against "$LIB/looped_gpt2_small.gpu.so" "$LIB/looped_gpt2_small.cpu.so" --batch 16 --points 11
check paper-vs-reference "$BIN/unroll-model-check" --forward "$LIB/looped_gpt2.gpu.so" --batch 4 --points 41 --perturb 0
check gradcheck-f64-truncated "$BIN/unroll-model-check" --gradcheck "$LIB/tiny_f64.gpu.so"
check gradcheck-f64-full "$BIN/unroll-model-check" --gradcheck "$LIB/tiny_f64.gpu.so" --loops 3 --window 3
check rows-f64-gradcheck "$BIN/unroll-model-check" --gradcheck "$LIB/rows_f64.gpu.so"
check rows-f64-vs-cpu "$BIN/unroll-model-check" --against "$LIB/rows_f64.gpu.so" "$LIB/rows_f64.cpu.so" --points 6 --tol 1e-12
check attention-tiles-f64-gradcheck "$BIN/unroll-model-check" --gradcheck "$LIB/tiles_f64.gpu.so" --points 11
check attention-tiles-f64-vs-cpu "$BIN/unroll-model-check" --against "$LIB/tiles_f64.gpu.so" "$LIB/tiles_f64.cpu.so" --points 11 --tol 1e-12
# python/unroll on a GPU library, where python3 has torch.
if command -v python3 >/dev/null && python3 -c "import torch" 2>/dev/null; then
  check python-gpu-vs-cpu env PYTHONPATH="$B/python" python3 "$B/python-gpu-vs-cpu.py" "$LIB/tiles_f64.gpu.so" "$LIB/tiles_f64.cpu.so" 1e-12
else
  log "no python3 with torch here: python-gpu-vs-cpu skipped"
fi
for e in transformer_energy custom_rho_energy residual_energy; do
  check "energy-$e" "$BIN/unroll-energy-check" --compare "$LIB/$e.gpu.so" --cases 20
done
check energy-gradcheck-custom "$BIN/unroll-energy-check" --gradcheck "$LIB/energy_gradients.gpu.so" --energy custom_causal --cases 3
check energy-gradcheck-residual "$BIN/unroll-energy-check" --gradcheck "$LIB/energy_gradients.gpu.so" --energy log1_residual --cases 3
# Energies that learn in context: the descent steps of examples/energy_icl.mlir
# looped with injection, against the CPU build, and 50 training steps on both;
# an f64 energy model against central differences.
check energy-icl-vs-cpu "$BIN/unroll-model-check" --against "$LIB/energy_icl.gpu.so" "$LIB/energy_icl.cpu.so"
check energy-model-f64-gradcheck "$BIN/unroll-model-check" --gradcheck "$LIB/energy_model_f64.gpu.so"
rm -rf "$R/energy-icl-gpu" "$R/energy-icl-cpu"
check energy-icl-train-50-gpu "$BIN/unroll-run" "$LIB/energy_icl.gpu.so" --steps 50 --batch 8 --adam-eps 1e-3 --eval-prompts 0 --out "$R/energy-icl-gpu"
check energy-icl-train-50-cpu "$BIN/unroll-run" "$LIB/energy_icl.cpu.so" --steps 50 --batch 8 --adam-eps 1e-3 --eval-prompts 0 --out "$R/energy-icl-cpu"
check energy-icl-train-50-match "$BIN/unroll-model-check" --compare-checkpoints "$R/energy-icl-gpu/checkpoint" "$R/energy-icl-cpu/checkpoint"
rm -rf "$R/train-gpu" "$R/train-cpu"
check fixed-point-f64 "$BIN/unroll-fixed-point-check" "$LIB/contractive_block.gpu.so"
check train-100-gpu "$BIN/unroll-run" "$LIB/looped_gpt2.gpu.so" --steps 100 --batch 8 --adam-eps 1e-3 --eval-prompts 0 --log-every 25 --out "$R/train-gpu"
check train-100-cpu "$BIN/unroll-run" "$LIB/looped_gpt2.cpu.so" --steps 100 --batch 8 --adam-eps 1e-3 --eval-prompts 0 --log-every 25 --out "$R/train-cpu"
check train-100-match "$BIN/unroll-model-check" --compare-checkpoints "$R/train-gpu/checkpoint" "$R/train-cpu/checkpoint"
# bf16 matrix products: the loss curve of 100 steps tracks the FP32 CPU one.
rm -rf "$R/train-bf16"
check train-100-bf16-gpu "$BIN/unroll-run" "$LIB/looped_gpt2_bf16.gpu.so" --steps 100 --batch 8 --adam-eps 1e-3 --eval-prompts 0 --log-every 25 --out "$R/train-bf16"
check train-100-bf16-curve "$B/compare-loss-curves.sh" "$R/train-bf16/metrics.jsonl" "$R/train-cpu/metrics.jsonl" 1e-2
# CUDA graph replay must be bit-identical to running every call directly.
rm -rf "$R/train-gpu-nograph"
check train-100-gpu-nograph "$BIN/unroll-run" "$LIB/looped_gpt2.gpu.so" --steps 100 --batch 8 --adam-eps 1e-3 --eval-prompts 0 --log-every 25 --gpu-graphs off --out "$R/train-gpu-nograph"
check train-100-graph-bitwise "$BIN/unroll-model-check" --compare-checkpoints "$R/train-gpu/checkpoint" "$R/train-gpu-nograph/checkpoint" --tol 1e-300
# Data parallelism over NCCL (docs/training.md): two ranks, one GPU each,
# against one process on one GPU, where the machine has two GPUs and an MPI
# launcher (libunroll_mpi.so needs Open MPI 4's libmpi.so.40).
ngpu=$(command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -c '^GPU' || echo 0)
if [ "$ngpu" -ge 2 ] && command -v mpirun >/dev/null && [ -f "$LIB/libunroll_mpi.so" ]; then
  rm -rf "$R/dp-1" "$R/dp-2"
  check dp-1-gpu "$BIN/unroll-run" "$LIB/looped_gpt2.gpu.so" --steps 50 --batch 8 --eval-prompts 0 --out "$R/dp-1"
  check dp-2-ranks-nccl mpirun --oversubscribe -np 2 $([ "$(id -u)" = 0 ] && echo --allow-run-as-root) \
    "$BIN/unroll-run" "$LIB/looped_gpt2.gpu.so" --steps 50 --batch 8 --eval-prompts 0 --allreduce nccl --out "$R/dp-2"
  check dp-2-vs-1 "$BIN/unroll-model-check" --compare-checkpoints "$R/dp-1/checkpoint" "$R/dp-2/checkpoint" --global --tol 1e-4
else
  log "data parallelism over NCCL: skipped ($ngpu GPU(s); needs 2, mpirun and lib/libunroll_mpi.so)"
fi

late "profile" || {
log "one-step kernel profile (paper config, batch 64, k = 41; top 15)"
timeout "$CHECK_LIMIT" "$BIN/unroll-bench" "$LIB/looped_gpt2.gpu.so" --points 41 --repeats 1 --gpu-profile 15 > /dev/null 2> "$R/profile.txt" || log "profile failed; see profile.txt"
if command -v cuobjdump >/dev/null && [ -d "$LIB/cubins" ]; then
  # Registers, stack and spills of every kernel (LDL/STL must be 0), from the
  # cubins scripts/gpu-bundle.sh extracted (cuobjdump cannot see them inside
  # the .so).
  for c in "$LIB"/cubins/*.cubin; do cuobjdump --dump-resource-usage "$c"; done > "$R/resource-usage.txt" 2>&1
  for c in "$LIB"/cubins/*.cubin; do cuobjdump --dump-sass "$c"; done > "$R/sass.txt" 2>&1
  log "SASS: $(grep -c 'Function :' "$R/sass.txt") kernels, LDL $(grep -c 'LDL' "$R/sass.txt"), STL $(grep -c 'STL' "$R/sass.txt"), SHFL $(grep -c 'SHFL' "$R/sass.txt"), FFMA $(grep -c 'FFMA' "$R/sass.txt"); max registers $(grep -o 'REG:[0-9]*' "$R/resource-usage.txt" | cut -d: -f2 | sort -n | tail -1)"
fi
log "short paper-config training run (2,000 steps, batch 64, the default curriculum from d = 5; evaluated against least squares; at most $TRAIN_LIMIT s)"
rm -rf "$R/train-paper"
timeout "$TRAIN_LIMIT" "$BIN/unroll-run" "$LIB/looped_gpt2.gpu.so" --task icl_linear --steps 2000 --batch 64 --eval-prompts 640 --log-every 200 --out "$R/train-paper" > "$R/train-paper.log" 2>&1 \
  || log "training run stopped (status $?; 124 = the $TRAIN_LIMIT s limit): see train-paper.log"
grep -E "steps/s|trained|CUDA graphs|^ +k +model|^ +(20|40) " "$R/train-paper.log" | tail -7 | tee -a "$R/summary.txt" >&2
}
log "benchmark (paper config, batch 64, k = 41, median of $REPEATS)"
rows=()
row() { # row NAME UNROLL-BENCH-ARGS...: one benchmark row, unless late or failing
  late "benchmark row '$1'" && return
  local name=$1; shift
  local u
  u=$(timeout "$CHECK_LIMIT" "$BIN/unroll-bench" "$@" 2>>"$R/summary.txt") && rows+=("{\"name\": \"$name\", \"r\": $u}") \
    || log "benchmark row '$name' failed (status $?)"
}
row "unroll GPU (FP32)" "$LIB/looped_gpt2.gpu.so" --points 41 --repeats "$REPEATS"
row "unroll GPU (TF32)" "$LIB/looped_gpt2_tf32.gpu.so" --points 41 --repeats "$REPEATS"
row "unroll GPU (bf16 GEMMs)" "$LIB/looped_gpt2_bf16.gpu.so" --points 41 --repeats "$REPEATS"
row "unroll GPU (FP32, GELU epilogue)" "$LIB/looped_gpt2_gelu.gpu.so" --points 41 --repeats "$REPEATS"
row "unroll GPU (FP32, no CUDA graph)" "$LIB/looped_gpt2.gpu.so" --points 41 --repeats "$REPEATS" --gpu-graphs off
row "unroll CPU ($(nproc) threads)" "$LIB/looped_gpt2.cpu.so" --points 41 --repeats 3 --threads "$(nproc)"
PY=$(command -v python3 || true)
if [ -n "$PY" ] && "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  for peer in ${PEERS:-0:fp32 1:fp32 max-autotune:tf32 max-autotune:bf16}; do
    compiled=${peer%%:*}; precision=fp32
    [ "$peer" != "$compiled" ] && precision=${peer#*:}
    case $compiled in
      0) name="PyTorch eager" limit=$PEER_LIMIT ;;
      1) name="PyTorch torch.compile" limit=$PEER_LIMIT ;;
      *) name="PyTorch torch.compile $compiled" limit=$AUTOTUNE_LIMIT ;;
    esac
    case $precision in
      fp32) name="$name (FP32)" ;; tf32) name="$name (TF32)" ;; bf16) name="$name (bf16 autocast)" ;;
    esac
    late "$name" && continue
    t=$(cd "$B/bench" && timeout "$limit" "$PY" torch-bench.py 20 256 8 1 203 20 15 41 64 "$REPEATS" 1 cuda "$compiled" "$precision" 2>>"$R/summary.txt") \
      && rows+=("{\"name\": \"$name\", \"r\": $t}") \
      || log "$name failed (status $?); see summary"
  done
else
  log "no python3 with CUDA-enabled torch here: PyTorch peer skipped"
fi
printf '[%s]\n' "$(IFS=,; echo "${rows[*]}")" > "$R/gpu-bench.json"
{
  echo "| implementation | device | training step (s) | forward (s) |"
  echo "|---|---|---|---|"
  sed 's/},{"name"/}\n{"name"/g' "$R/gpu-bench.json" | while read -r line; do
    name=$(echo "$line" | sed -n 's/.*"name": "\([^"]*\)".*/\1/p')
    dev=$(echo "$line" | sed -n 's/.*"device": *"\([^"]*\)".*/\1/p')
    ts=$(echo "$line" | sed -n 's/.*"train_step_median_s": *\([0-9.e+-]*\).*/\1/p')
    fs=$(echo "$line" | sed -n 's/.*"forward_median_s": *\([0-9.e+-]*\).*/\1/p')
    [ -n "$name" ] && echo "| $name | ${dev:-?} | $ts | $fs |"
  done
} > "$R/gpu-bench.md"
cat "$R/gpu-bench.md" >&2
log "$fails failing checks; results in $R"
[ $fails -eq 0 ]
