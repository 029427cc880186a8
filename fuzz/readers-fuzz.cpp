//===- readers-fuzz.cpp - libFuzzer targets over the files users download --===//
//
// One source, four targets (UNROLL_FUZZ_TARGET, set by fuzz/CMakeLists.txt):
//
//   safetensors  parseSafetensors on the bytes (checkpoints, prompt files)
//   state        a checkpoint folder whose state.json is the bytes, loaded
//                with loadCheckpoint (its safetensors files are valid)
//   config       the bytes as a --config JSON: TrainConfig::apply, finish
//   model_info   the bytes as a library's model info: everything unroll-run
//                reads from it before calling the library (validateModelInfo,
//                then the runner's and the tools' readers)
//
// Errors are expected and ignored; a crash, an uncaught exception, a
// sanitizer report or a hang is a bug.  make fuzz FUZZ_TARGET=state
//
//===----------------------------------------------------------------------===//
#include "unroll/runtime/Model.h"
#include "unroll/runtime/ModelRun.h"
#include "unroll/tooling/Checkpoint.h"
#include "unroll/tooling/Safetensors.h"
#include "unroll/tooling/TrainConfig.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

using namespace unroll;

namespace {

/// A small model's info, as a library reports it.
const nlohmann::json &modelInfo() {
  static const nlohmann::json info = nlohmann::json::parse(R"({
    "name": "m", "forward": "m_forward", "loss_grad": "m_loss_grad", "prompt_dim": 2,
    "iterations": 3, "window": 2, "num_params": 6, "positions": 8,
    "fixed_point": {"solve": "m_solve", "gradient": "bptt", "state_bytes_per_token": 16,
                    "tape_bytes_per_token": 32},
    "params": [{"name": "w", "shape": [2, 2], "offset": 0, "init": "normal", "std": 0.02},
               {"name": "b", "shape": [2], "offset": 4, "init": "zeros"}]})");
  return info;
}

[[maybe_unused]] int fuzzState(const uint8_t *data, size_t size) {
  // A checkpoint folder with valid tensors; state.json is the input.
  static std::string dir = [] {
    std::string d = "/tmp/unroll-fuzz-state-" + std::to_string(getpid());
    TrainState s;
    s.theta.assign(6, 0.5);
    s.rng = "1 2 3";
    std::string error;
    if (!saveCheckpoint(d, modelInfo(), s, nlohmann::json::object(), error)) {
      fprintf(stderr, "fuzz set-up: %s\n", error.c_str());
      abort();
    }
    return d;
  }();
  std::string step, error;
  if (!latestStep(dir, step, error))
    abort();
  FILE *f = fopen((step + "/state.json").c_str(), "wb");
  fwrite(data, 1, size, f);
  fclose(f);
  TrainState s;
  nlohmann::json config;
  (void)loadCheckpoint(dir, modelInfo(), s, config, error);
  return 0;
}

[[maybe_unused]] int fuzzConfig(const uint8_t *data, size_t size) {
  auto j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded())
    return 0;
  TrainConfig cfg;
  std::string error;
  if (cfg.apply(j, error) && cfg.finish(modelInfo(), error))
    (void)cfg.toJson().dump();
  return 0;
}

[[maybe_unused]] int fuzzModelInfo(const uint8_t *data, size_t size) {
  auto info = nlohmann::json::parse(data, data + size, nullptr, false);
  if (info.is_discarded())
    return 0;
  std::string error;
  if (!validateModelInfo(info, "fuzz.so", error))
    return 0;
  for (const auto &m : info["models"]) {
    // What unroll-run reads before it calls the library.
    GradientMode g = modelGradientMode(m);
    (void)activationBytesPerPrompt(m, g, 2, 3, 8);
    TrainConfig cfg;
    if (cfg.finish(m, error))
      (void)cfg.toJson();
    std::vector<double> theta;
    int64_t n = m["num_params"];
    if (n <= (int64_t(1) << 20))
      initParameters(m["params"], n, theta, [] { return 0.5; }, 0.02);
  }
  return 0;
}

[[maybe_unused]] int fuzzSafetensors(const uint8_t *data, size_t size) {
  TensorMap out;
  std::string error;
  (void)parseSafetensors(reinterpret_cast<const char *>(data), size, "fuzz", out, error);
  return 0;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
#if defined(UNROLL_FUZZ_STATE)
  return fuzzState(data, size);
#elif defined(UNROLL_FUZZ_CONFIG)
  return fuzzConfig(data, size);
#elif defined(UNROLL_FUZZ_MODEL_INFO)
  return fuzzModelInfo(data, size);
#else
  return fuzzSafetensors(data, size);
#endif
}
