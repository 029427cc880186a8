# unroll — the two commands of the README's quick start:
#   make run    install what is missing, build, train the CPU-sized looped
#               transformer on in-context linear regression and evaluate it
#   make run-energy   compile P1's Transformer energy and print its energy trace
#   make test   install what is missing, build, run every test suite
BUILD ?= build
OUT   ?= out
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release

.PHONY: all setup configure build run run-energy test check clean docs bench

all: build

setup:
	@bash scripts/setup.sh

$(BUILD)/build.ninja: | setup
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS) \
	  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py

configure: $(BUILD)/build.ninja

build: setup configure
	cmake --build $(BUILD)

run: build
	@bash scripts/run-train.sh $(BUILD) $(OUT)

run-energy: build
	@bash scripts/run-energy.sh $(BUILD) $(OUT)

test: build
	@bash scripts/test.sh $(BUILD)

check: test

bench: build
	@bash bench/run.sh $(BUILD) $(OUT)/bench

docs: configure
	cmake --build $(BUILD) --target mlir-doc

clean:
	rm -rf $(BUILD) $(OUT)
