//===- OptimizationCommon.h - what the optimization tasks share -*- C++ -*-===//
//
// Private to tooling/: the sparse coding, learned unrolling and Hopfield
// tasks (SparseCodingTask.cpp, LearnedUnrolling.cpp, HopfieldTask.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_TOOLING_OPTIMIZATIONCOMMON_H
#define UNROLL_TOOLING_OPTIMIZATIONCOMMON_H

#include "unroll/runtime/Energy.h"
#include "unroll/tooling/OptimizationTasks.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace unroll::opt {

/// Seconds since t0.
double seconds(std::chrono::steady_clock::time_point t0);
/// Writes `name` into the output folder (atomically); no-op without one.
bool writeOut(const OptimizationOptions &o, const std::string &name, const std::string &text,
              std::string &error);
/// The one parameter of an energy whose terms name it under `key`.
bool paramOffset(const nlohmann::json &e, const char *op, const char *key, int64_t &offset,
                 std::string &error);
/// The number attribute `key` of the energy's first `op` term (0 if none).
double termValue(const nlohmann::json &e, const char *op, const char *key);
/// λ_max(AᵀA) by a long power method (independent of the compiled step's).
double lipschitz(const std::vector<double> &A, int64_t mm, int64_t n);
/// ALISTA's W: argmin ‖WᵀA‖_F subject to diag(WᵀA) = 1, column by column.
std::vector<double> analyticWeight(const std::vector<double> &A, int64_t mm, int64_t n);
/// The problem's dictionary A [mm, n]: o.dictionary's tensor 'A' where given
/// (as it is; its shape, finite values and nonzero columns checked), else
/// A_ij ~ N(0, 1/m) with unit columns from --dict-seed's own stream.
bool problemDictionary(const OptimizationOptions &o, int64_t mm, int64_t n,
                       std::vector<double> &A, std::string &error);
/// Which dictionary a run has, as its checkpoint records it: {"dict_seed": S},
/// or for a file {"dictionary_fingerprint": a hash of A's values as f64}.
nlohmann::json dictionaryIdentity(const OptimizationOptions &o, const std::vector<double> &A);
/// Whether a checkpoint's config `c` (`where`: its state.json) was trained on
/// the dictionary `identity` names; else an error that says what to pass.
bool sameDictionary(const nlohmann::json &c, const nlohmann::json &identity,
                    const std::string &where, std::string &error);
/// For reports: "dictionary seed S" or "dictionary FILE".
std::string dictionaryName(const OptimizationOptions &o);
/// Draws `count` samples of the problem: x* (Bernoulli(0.1) × N(0, 1)) and
/// b = A x*, plus Gaussian noise at `snrDb` dB when snrDb >= 0.
void drawSamples(std::mt19937_64 &rng, const std::vector<double> &A, int64_t mm, int64_t n,
                 int64_t count, double snrDb, std::vector<double> &xs, std::vector<double> &b);

/// NMSE in dB of codes against the validation set's x*.
/// A learned unrolling (an energy with trainable parameters besides the
/// dictionary at aOff): initialized at ISTA, trained (or read from
/// o.checkpoint), reported per layer on the validation set `val`.
int learnedStudy(const Model &m, const nlohmann::json &e, const OptimizationOptions &o,
                 const std::vector<double> &A, int64_t aOff, int64_t mm, int64_t n, double L,
                 double lambda, const std::vector<double> &valXs, DescentInputs val,
                 std::string &error);

} // namespace unroll::opt

#endif
