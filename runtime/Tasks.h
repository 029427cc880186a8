//===- Tasks.h - in-context learning tasks and curricula -------*- C++ -*-===//
#ifndef UNROLL_RUNTIME_TASKS_H
#define UNROLL_RUNTIME_TASKS_H

#include "ModelRun.h"

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

/// Linear regression prompts (P2, Garg et al.): w ~ N(0, I_active),
/// x ~ N(0, I) with the coordinates past `active` set to 0, y = x·w (+ noise).
Prompts sampleLinear(int64_t batch, int64_t points, int64_t dim, int64_t active,
                     double noise, Rng &rng);

} // namespace unroll

#endif
