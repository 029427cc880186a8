#!/usr/bin/env bash
# Builds the libFuzzer target with clang-19 (address + undefined sanitizers on
# our code) in build-fuzz/ and runs it for SECONDS over a corpus seeded from
# examples/ and test/. Crashes land in out/fuzz/ as crash-* files; turn each
# into a regression test. Prints libFuzzer's final statistics.
#   scripts/fuzz.sh [SECONDS] [JOBS]
set -euo pipefail
SECONDS_TO_RUN=${1:-60}
BUILD=build-fuzz
OUT=out/fuzz
mkdir -p "$OUT/corpus"
if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang-19 CXX=clang++-19 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DUNROLL_BUILD_FUZZER=ON -DUNROLL_BUILD_UNITTESTS=OFF \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py > "$OUT/configure.log"
fi
cmake --build "$BUILD" --target unroll-fuzz
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
cd "$OUT"
../../"$BUILD"/bin/unroll-fuzz corpus -max_total_time="$SECONDS_TO_RUN" -max_len=8192 \
  -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix=./ 2>&1 | tail -25
