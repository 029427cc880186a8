//===- Adam.h - the Adam optimizer (PyTorch's formulation) -----*- C++ -*-===//
#ifndef UNROLL_TOOLING_ADAM_H
#define UNROLL_TOOLING_ADAM_H

#include "unroll/runtime/ModelRun.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace unroll {

/// m ← β1 m + (1−β1) g;  v ← β2 v + (1−β2) g²;
/// θ ← θ − lr · (m / (1−β1ᵗ)) / (sqrt(v / (1−β2ᵗ)) + ε). No weight decay.
struct Adam {
  double lr = 1e-4, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  int64_t step = 0;
  std::vector<double> m, v;

  /// This step's settings for a library's compiled Adam (after ++step).
  AdamStep compiledStep() const { return {lr, beta1, beta2, eps, step}; }

  void update(std::vector<double> &theta, const std::vector<double> &g) {
    if (m.size() != theta.size()) {
      m.assign(theta.size(), 0.0);
      v.assign(theta.size(), 0.0);
    }
    ++step;
    double bc1 = 1 - std::pow(beta1, (double)step), bc2 = 1 - std::pow(beta2, (double)step);
    double sqrtBc2 = std::sqrt(bc2);
    for (size_t i = 0; i < theta.size(); ++i) {
      m[i] = beta1 * m[i] + (1 - beta1) * g[i];
      v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
      theta[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / sqrtBc2 + eps);
    }
  }
};

} // namespace unroll

#endif
