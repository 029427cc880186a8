# unroll — the two commands of the README's quick start:
#   make run    install what is missing, build, train the CPU-sized looped
#               transformer on in-context linear regression and evaluate it
#   make run-energy   compile P1's Transformer energy and print its energy trace
#   make run-energy-icl   train an energy that learns in context (conjugate
#               gradients on a kernel energy, d = 5) and evaluate it
#   make test   install what is missing, build, run every test suite
BUILD ?= build
OUT   ?= out
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release

.PHONY: all setup configure build run run-energy run-energy-icl test check clean docs bench fuzz test-asan format

all: build

setup:
	@bash scripts/setup.sh

$(BUILD)/build.ninja: | setup
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS) \
	  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py

configure: $(BUILD)/build.ninja

build: setup configure
	cmake --build $(BUILD)

# ARGS: more unroll-run flags for `make run`, e.g. ARGS="--seed 1 --cpu-precision bf16".
run: build
	@bash scripts/run-train.sh $(BUILD) $(OUT) $(ARGS)

run-energy: build
	@bash scripts/run-energy.sh $(BUILD) $(OUT)

# ARGS: more unroll-run flags, e.g. ARGS="--seed 1".
run-energy-icl: build
	@bash scripts/run-energy-icl.sh $(BUILD) $(OUT) $(ARGS)

test: build
	@bash scripts/test.sh $(BUILD)

check: test

FUZZ_SECONDS ?= 60
fuzz: setup
	@bash scripts/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_TARGET)

# The whole test suite with AddressSanitizer + UndefinedBehaviorSanitizer on
# the project's code (build-asan/).
test-asan: setup
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_C_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer" \
	  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer" \
	  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
	  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py
	cmake --build build-asan
	ASAN_OPTIONS=detect_leaks=0:allow_user_poisoning=0:abort_on_error=1 \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  bash scripts/test.sh build-asan

bench: build
	@bash bench/run.sh $(BUILD) $(OUT)/bench

# clang-format-19 over every C/C++ source (scripts/format.sh --check only lists).
format:
	@bash scripts/format.sh

docs: configure
	cmake --build $(BUILD) --target mlir-doc

clean:
	rm -rf $(BUILD) $(OUT)
