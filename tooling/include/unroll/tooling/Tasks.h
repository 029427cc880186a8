//===- Tasks.h - in-context learning tasks and curricula -------*- C++ -*-===//
#ifndef UNROLL_TOOLING_TASKS_H
#define UNROLL_TOOLING_TASKS_H

#include "unroll/runtime/ModelRun.h"

#include <cstdint>
#include <random>
#include <string>

namespace unroll {

/// A seeded generator whose whole state is the engine's: normals come from
/// Box–Muller without a cached second value, so saving the engine is enough
/// to resume bit-identically.
class Rng {
public:
  explicit Rng(uint64_t seed = 0) : eng_(seed) {}
  double uniform() { return (eng_() >> 11) * (1.0 / 9007199254740992.0); }
  double normal() {
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300)
      u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  uint64_t below(uint64_t n) { return eng_() % n; }
  std::string save() const;
  bool restore(const std::string &s);

private:
  std::mt19937_64 eng_;
};

/// value(step) = min(end, start + inc * floor(step / interval)).
struct Curriculum {
  int64_t start = 0, end = 0, inc = 0, interval = 1;
  int64_t at(int64_t step) const {
    if (inc == 0 || interval <= 0)
      return end;
    return std::min(end, start + inc * (step / interval));
  }
};

/// The engine seed of prompt `index` of training step `step` in the global
/// batch: training data is a function of (seed, step, index) alone, so N
/// ranks drawing B/N prompts each draw the batch one process would, and a
/// resumed run draws what an uninterrupted one would.
uint64_t promptSeed(uint64_t seed, int64_t step, int64_t index);

/// Linear regression prompts (P2, Garg et al.): w ~ N(0, I_active),
/// x ~ N(0, I) with the coordinates past `active` set to 0, y = x·w (+ noise).
Prompts sampleLinear(int64_t batch, int64_t points, int64_t dim, int64_t active, double noise,
                     Rng &rng);

/// Sparse linear regression (P2): like sampleLinear, but w has `nonzero`
/// nonzero coordinates, chosen uniformly among the active ones.
Prompts sampleSparseLinear(int64_t batch, int64_t points, int64_t dim, int64_t active,
                           int64_t nonzero, Rng &rng);

/// Depth-`depth` decision trees (P2, Garg et al.): every internal node splits
/// on a coordinate drawn uniformly from the active ones at threshold 0 (left
/// if x_c <= 0), leaves ~ N(0, 1); x ~ N(0, I_active).
Prompts sampleDecisionTree(int64_t batch, int64_t points, int64_t dim, int64_t active,
                           int64_t depth, Rng &rng);

/// Two-layer ReLU networks (P2): y = sqrt(2/hidden) · relu(x W1) W2 with W1
/// [active, hidden] and W2 [hidden] ~ N(0, 1); x ~ N(0, I_active).
Prompts sampleReluNet(int64_t batch, int64_t points, int64_t dim, int64_t active, int64_t hidden,
                      Rng &rng);

/// The in-context tasks of unroll-run and their P2 defaults.
struct TaskSpec {
  std::string name;
  int64_t pointsStart, pointsEnd, pointsInc; // points curriculum at d = 20
  double noise;                              // label noise std
  /// Squared error of the zero predictor, E[y^2], at `active` dimensions:
  /// what P2 divides by (zero predictor = 1).
  double zeroError(int64_t active, double noise) const;
  /// `noise` overrides the task's label noise (linear tasks only).
  /// `batch` prompts drawn one after another from `rng` (evaluation).
  Prompts sample(int64_t batch, int64_t points, int64_t dim, int64_t active, double noise,
                 Rng &rng) const;
  /// Prompts first .. first + count - 1 of training step `step`, each drawn
  /// from its own engine (promptSeed): any split of the batch draws the same
  /// prompts.
  Prompts sampleAt(uint64_t seed, int64_t step, int64_t first, int64_t count, int64_t points,
                   int64_t dim, int64_t active, double noise) const;
};

/// nullptr for an unknown task; `known` lists the names.
const TaskSpec *findTask(const std::string &name, std::string &known);

} // namespace unroll

#endif
