#!/usr/bin/env bash
# Builds a libFuzzer target with clang-19 (address + undefined sanitizers on
# our code) in build-fuzz/ and runs it for SECONDS. Crashes land in
# out/fuzz[-TARGET]/ as crash-* files; turn each into a regression test.
# Prints libFuzzer's final statistics.
#   scripts/fuzz.sh [SECONDS] [TARGET]       (make fuzz FUZZ_SECONDS=… FUZZ_TARGET=…)
# TARGET: mlir (default: parse, verify, lower; corpus from examples/ and
# test/), or a reader of the files users download (fuzz/readers-fuzz.cpp):
# safetensors, state (a checkpoint's state.json), config (--config JSON),
# model_info (a library's model info); seeds in fuzz/seeds/TARGET/.
set -euo pipefail
SECONDS_TO_RUN=${1:-60}
TARGET=${2:-mlir}
BUILD=build-fuzz
case "$TARGET" in
  mlir) OUT=out/fuzz; BINARY=unroll-fuzz ;;
  safetensors|state|config|model_info) OUT=out/fuzz-$TARGET; BINARY=unroll-fuzz-${TARGET//_/-} ;;
  *) echo "fuzz.sh: unknown target '$TARGET' (mlir, safetensors, state, config, model_info)" >&2; exit 2 ;;
esac
mkdir -p "$OUT/corpus"
# libFuzzer and the sanitizer runtimes (not pulled in by clang-19 itself).
if [ ! -f /usr/lib/llvm-19/lib/clang/19/lib/x86_64-pc-linux-gnu/libclang_rt.fuzzer.a ]; then
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends libclang-rt-19-dev
fi
if [ ! -f "$BUILD/build.ninja" ]; then
  # All of the project's code is instrumented for coverage and sanitizers
  # (MLIR's own libraries come prebuilt from Debian and are not).
  CC=clang-19 CXX=clang++-19 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link,address,undefined" \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined" \
    -DUNROLL_BUILD_FUZZER=ON -DUNROLL_BUILD_UNITTESTS=OFF \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py > "$OUT/configure.log"
fi
cmake --build "$BUILD" --target "$BINARY"
if [ "$TARGET" != mlir ]; then
  cp fuzz/seeds/"$TARGET"/* "$OUT/corpus/"
else
# Seeds: every .mlir the project has (split at -split-input-file markers).
python3 - "$OUT/corpus" <<'PY'
import glob, hashlib, os, sys
out = sys.argv[1]
for path in glob.glob("examples/*.mlir") + glob.glob("test/**/*.mlir", recursive=True):
    for part in open(path).read().split("// -----"):
        name = hashlib.sha1(part.encode()).hexdigest()
        with open(os.path.join(out, name), "w") as f:
            f.write(part)
PY
fi
cd "$OUT"
# Debian's MLIR libraries are not instrumented, while LLVM's headers poison
# allocator memory in our instrumented code: ignore that manual poisoning
# (every other ASan check stays on).
export ASAN_OPTIONS=allow_user_poisoning=0:detect_leaks=0
# Fork mode: a crash is recorded (crash-*) and fuzzing goes on, so one run
# reports its executions and all the crashes it found.
../../"$BUILD"/bin/"$BINARY" corpus -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
  -max_total_time="$SECONDS_TO_RUN" -max_len=8192 -timeout=20 -rss_limit_mb=4096 \
  -artifact_prefix=./ > fuzz.log 2>&1 || true
grep -E "^#[0-9]+" fuzz.log | tail -3
echo "crash files: $(ls crash-* 2>/dev/null | wc -l) (in $OUT)"
