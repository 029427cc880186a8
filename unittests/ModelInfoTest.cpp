//===- ModelInfoTest.cpp - untrusted model infos and checkpoint states ----===//
//
// Regression tests for what fuzz/readers-fuzz.cpp found (docs/robustness.md):
// a model info or a state.json whose keys have the wrong type made
// nlohmann::json throw (std::terminate, an abort) instead of a message.
//
//===----------------------------------------------------------------------===//
#include "unroll/runtime/Model.h"
#include "unroll/tooling/Checkpoint.h"

#include <gtest/gtest.h>

#include <fstream>
#include <unistd.h>

using namespace unroll;

namespace {

const char *kValid = R"({"kind": "model", "element_type": "f32", "models": [{
  "name": "m", "forward": "m_forward", "loss_grad": "m_loss_grad", "prompt_dim": 2,
  "iterations": 3, "window": 2, "num_params": 6, "positions": 8,
  "fixed_point": {"solve": "m_solve", "gradient": "bptt", "until": {"tol": 0.001, "max": 50}},
  "params": [{"name": "w", "shape": [2, 2], "offset": 0, "init": "normal", "std": 0.02},
             {"name": "b", "shape": [2], "offset": 4, "init": "zeros"}]}]})";

/// validateModelInfo on kValid with `edit` applied.
bool validWith(const std::function<void(nlohmann::json &)> &edit, std::string &error) {
  nlohmann::json j = nlohmann::json::parse(kValid);
  edit(j);
  return validateModelInfo(j, "lib.so", error);
}

TEST(ModelInfo, AcceptsWhatLibrariesWrite) {
  std::string error;
  EXPECT_TRUE(validWith([](nlohmann::json &) {}, error)) << error;
  // Libraries write null for what they do not fix (an energy's tokens).
  EXPECT_TRUE(validWith([](nlohmann::json &j) { j["models"][0]["positions"] = nullptr; }, error))
      << error;
}

TEST(ModelInfo, RefusesNonObjects) {
  // The fuzzer's first finds: "-4" and friends (type_error 305 before).
  for (const char *text : {"-4", "[1, 2]", "\"s\"", "null", "true"}) {
    std::string error;
    EXPECT_FALSE(validateModelInfo(nlohmann::json::parse(text), "lib.so", error)) << text;
    EXPECT_EQ(error, "lib.so: model info is not a JSON object") << text;
  }
}

TEST(ModelInfo, RefusesKeysOfTheWrongType) {
  struct Case {
    std::function<void(nlohmann::json &)> edit;
    std::string message;
  };
  std::vector<Case> cases = {
      {[](auto &j) { j["models"] = 3; }, "lib.so: model info: 'models' must be an array"},
      {[](auto &j) { j["models"][0] = "m"; },
       "lib.so: model info: every entry of 'models' must be an object"},
      {[](auto &j) { j["models"][0]["num_params"] = "6"; },
       "lib.so: model info of 'm': 'num_params' must be an integer in [0, 1099511627776]"},
      {[](auto &j) { j["models"][0]["name"] = 1; },
       "lib.so: model info of '?': 'name' must be a string"},
      {[](auto &j) { j["models"][0]["prompt_dim"] = -1; },
       "lib.so: model info of 'm': 'prompt_dim' must be an integer in [1, 1099511627776]"},
      {[](auto &j) { j["models"][0]["params"][1]["offset"] = 5; },
       "lib.so: model info of 'm', parameter b: offset 5 + 2 entries run past num_params = 6"},
      {[](auto &j) { j["models"][0]["params"][0]["shape"] = {2, -2}; },
       "lib.so: model info of 'm', parameter w: 'shape' must hold sizes >= 1 whose product is "
       "at most 2^40"},
      {[](auto &j) { j["models"][0]["fixed_point"]["until"] = {{"tol", 0.1}}; },
       "lib.so: model info of 'm', fixed_point.until: 'tol' must be a number beside an integer "
       "'max'"},
      {[](auto &j) { j["models"][0]["fixed_point"]["gradient"] = 7; },
       "lib.so: model info of 'm', fixed_point: 'gradient' must be a string"},
      {[](auto &j) {
         j["energies"] = {{{"name", "e"},
                           {"num_params", 0},
                           {"iterations", 2},
                           {"params", nlohmann::json::array()},
                           {"terms", nlohmann::json::array()},
                           {"tokens", "8"}}};
       },
       "lib.so: model info of 'e': 'tokens' must be an integer in [1, 1099511627776]"},
      // Keys the tools read without asking must be there (the long fuzz
      // run's finds: a const json read of a missing key is undefined).
      {[](auto &j) { j["models"][0].erase("params"); },
       "lib.so: model info of 'm': 'params' must be an array"},
      {[](auto &j) { j["models"][0].erase("window"); },
       "lib.so: model info of 'm': 'window' must be an integer in [1, 1099511627776]"},
      {[](auto &j) {
         j["energies"] = {{{"name", "e"},
                           {"num_params", 0},
                           {"iterations", 2},
                           {"params", nlohmann::json::array()}}};
       },
       "lib.so: model info of 'e': 'terms' must be an array of objects"},
  };
  for (const Case &c : cases) {
    std::string error;
    EXPECT_FALSE(validWith(c.edit, error)) << c.message;
    EXPECT_EQ(error, c.message);
  }
}

TEST(CheckpointState, RefusesKeysOfTheWrongType) {
  nlohmann::json info = nlohmann::json::parse(kValid)["models"][0];
  std::string dir = ::testing::TempDir() + "unroll_state_" + std::to_string(getpid());
  TrainState s;
  s.theta.assign(6, 0.5);
  s.rng = "1 2 3";
  std::string error, step;
  ASSERT_TRUE(saveCheckpoint(dir, info, s, nlohmann::json::object(), error)) << error;
  ASSERT_TRUE(latestStep(dir, step, error)) << error;
  struct Case {
    const char *state, *message;
  };
  for (const Case &c : {
           Case{R"({"step": "7", "rng": "1"})", "'step' must be an integer >= 0, got \"7\""},
           Case{R"({"step": -1, "rng": "1"})", "'step' must be an integer >= 0, got -1"},
           Case{R"({"step": 1, "rng": 5})", "'rng' must be a string, got 5"},
           Case{R"({"step": 1, "rng": "1", "adam_step": 1.5})",
                "'adam_step' must be an integer >= 0, got 1.5"},
           Case{R"({"step": 1, "rng": "1", "lr": "x"})", "'lr' must be a finite number, got \"x\""},
           Case{R"({"step": 1, "rng": "1", "config": []})", "'config' must be an object, got []"},
           Case{R"([1, 2])", "not a training state"},
       }) {
    std::ofstream(step + "/state.json") << c.state;
    TrainState t;
    nlohmann::json config;
    EXPECT_FALSE(loadCheckpoint(dir, info, t, config, error)) << c.state;
    EXPECT_NE(error.find(c.message), std::string::npos) << error;
  }
}

} // namespace
