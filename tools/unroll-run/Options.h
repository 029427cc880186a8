//===- Options.h - unroll-run's command line -------------------*- C++ -*-===//
//
// What the flags set (Options) and the table that parses them and writes
// --help (Options.cpp). The run modes read Options: RunEnergy.cpp (energy
// libraries: traces, sparse coding, Hopfield) and RunModel.cpp (models:
// training, evaluation, prediction, the energy along a loop).
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_RUN_OPTIONS_H
#define UNROLL_RUN_OPTIONS_H

#include "unroll/runtime/Model.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace unroll {

struct Options {
  std::string model, task, energy, input, output, plot, modelName, checkpoint, config;
  bool info = false, json = false, resume = false, predict = false;
  int64_t iterations = -1, tokens = -1, dim = -1, loops = -1;
  std::vector<int64_t> evalLoops; // --eval-loops: the loop study
  uint64_t seed = 0;
  double scale = 1.0;
  int64_t samples = -1, patterns = -1; // --task sparse_coding / hopfield
  double snrDb = -1;
  std::string corrupt = "mask";
  /// Training settings given as flags, as config keys (override --config).
  nlohmann::json train = nlohmann::json::object();
  /// The arguments, for the check that every rank of a job got the same.
  std::string commandLine;
};

/// Parses the command line (not -h/--help or --gpu-info alone, which
/// main answers first); false with `err`.
bool parseOptions(int argc, char **argv, Options &o, std::string &err);
/// The --help text, from the same table.
std::string usageText();
/// Prints "unroll-run: error: " (with the rank under a launcher) and `msg`;
/// returns 2.
int die(const std::string &msg);

/// The run modes.
int runEnergy(const Options &o, const Model &m);
int runOptimization(const Options &o, const Model &m, const std::string &task);
int runModel(const Options &o, const Model &m, const std::string &task, bool energyOfModel);

} // namespace unroll

#endif // UNROLL_RUN_OPTIONS_H
