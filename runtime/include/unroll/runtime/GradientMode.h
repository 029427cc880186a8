//===- GradientMode.h - how a training step differentiates the loop -*- C++ -*-===//
#ifndef UNROLL_RUNTIME_GRADIENTMODE_H
#define UNROLL_RUNTIME_GRADIENTMODE_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace unroll {

/// How a training step differentiates the loop (docs/training.md). bptt:
/// through the last T iterates (@M_loss_grad). The others differentiate the
/// loss at Y_b through the fixed point (@M_loss_grad_fixed): g starts at
/// v = ∂L/∂Y_b and takes g ← v + g (λ J + (1 − λ) I) until ‖Δg‖ ≤ tol ‖g‖ or
/// `steps` values of g exist; the parameters then get λ g ∂f/∂θ.
struct GradientMode {
  enum Kind { Bptt, Implicit, Jfb, Phantom } kind = Bptt;
  int64_t steps = 1;    // implicit: the cap; phantom: k; jfb: 1
  double tol = 0.0;     // implicit only (0: run all `steps`)
  double damping = 1.0; // λ in (0, 1]
  /// As --gradient spells it: bptt, implicit:1e-05:100, jfb, phantom:5:0.5.
  std::string str() const;
  bool fixedPoint() const { return kind != Bptt; }
};
/// Parses bptt | implicit[:TOL[:MAX]] | jfb | phantom[:K[:TAU]] (defaults:
/// implicit tol 1e-5, max 100; phantom k 5, tau 0.5).
bool parseGradientMode(const std::string &text, GradientMode &out, std::string &error);
/// The mode a model's IR chose (model info "fixed_point"), bptt if none.
GradientMode modelGradientMode(const nlohmann::json &modelInfo);

/// Bytes of activations one prompt of `tokens` tokens keeps for the
/// backward of a training step (model info "fixed_point": per-token sizes of
/// the state and of one iteration's tape): bptt keeps min(T, b) + 1 states
/// and min(T, b) tapes, the fixed-point modes two states and one tape,
/// whatever b is. -1 if the info has no sizes.
int64_t activationBytesPerPrompt(const nlohmann::json &modelInfo, const GradientMode &g,
                                 int64_t window, int64_t loops, int64_t tokens);

} // namespace unroll

#endif
