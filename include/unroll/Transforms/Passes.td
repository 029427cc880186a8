//===- Passes.td - unroll transformation passes ------------*- tablegen -*-===//
#ifndef UNROLL_TRANSFORMS_PASSES_TD
#define UNROLL_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def UnrollDeriveSteps : Pass<"unroll-derive-steps", "ModuleOp"> {
  let summary = "Derive the descent steps of each energy from its schedule";
  let description = [{
    Fills the empty `steps` region of every `unroll.energy` with one iteration
    of its schedule: an `unroll.mm_step` for the pairwise term (majorize-
    minimize, P1 Thm 3.1), an `unroll.grad_step` for the quadratic term
    (P1 eq. 16) and an `unroll.prox_nonneg` for the indicator (P1 eq. 17),
    in the schedule's order. The attention weights are rho'(z): for
    rho = -exp(-z) (paper variant) the reweighted softmax of Thm 3.1; for
    every other rho, and for user-written rho, a region computing rho'(z)
    built by differentiating the rho region (forward mode). Energies whose
    steps are already present are left alone.
  }];
  let options = [
    Option<"assumeUnitNorm", "assume-unit-norm", "bool", /*default=*/"false",
           "Tokens have rows of constant norm (e.g. after LayerNorm): "
           "rho = -exp(-z) gives the canonical softmax instead of the "
           "reweighted one">
  ];
  let statistics = [
    Statistic<"numEnergies", "energies", "Number of energies whose steps were derived">,
    Statistic<"numSteps", "steps", "Number of step ops created">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

def UnrollDifferentiate : Pass<"unroll-differentiate", "ModuleOp"> {
  let summary = "Build the reverse-mode (VJP) regions of every model";
  let description = [{
    For each `unroll.model` whose reverse regions are empty, writes
    vector-Jacobian products, one rule per step op, in reverse order:

    * the loop's `reverse` region (u, dY) -> du recomputes the body from u
      (only the loop states are stored by the lowering) and back-propagates,
    * the model's `head_reverse` (Y, dpred) -> dY does the same for the
      read-out,
    * `embed_reverse` (Z, dP) for the read-in.

    Energies get a `reverse` region (Y, X, dY') -> dY for one descent
    iteration (energies with certified steps are left without one).
    Parameter gradients become `unroll.accumulate_grad`. The truncated loss
    over the last T iterations is assembled by the lowering from these
    regions (see docs/Rationale.md).
  }];
  let statistics = [
    Statistic<"numModels", "models", "Number of models differentiated">,
    Statistic<"numVJPs", "vjps", "Number of VJP ops created">,
    Statistic<"numSkipped", "skipped", "Energies left without a reverse (certified steps)">
  ];
}

#endif
