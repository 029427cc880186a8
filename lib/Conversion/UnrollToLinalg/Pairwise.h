//===- Pairwise.h - token-pair geometry of energies and MM steps -*- C++ -*-===//
//
// Shared by the energy-term patterns (EnergyTerms.cpp) and the step patterns
// (Steps.cpp): masks, pair distances z_ij = ½‖u_i − u_j‖², the weights
// rho'(z) of a general MM step, and the row-normalized attention matrix of
// every weight form; for token matrices [n, d] and, per prompt, for token
// batches [B, n, d] (Emitter::nb).
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_LIB_CONVERSION_UNROLLTOLINALG_PAIRWISE_H
#define UNROLL_LIB_CONVERSION_UNROLLTOLINALG_PAIRWISE_H

#include "unroll/Utils/Builders.h"
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"

namespace mlir::unroll::lowering {

/// The mask of a pairwise term / MM step, turned into a scalar predicate
/// usable inside a 2-d linalg.generic body.
struct Mask {
  MaskKind kind = MaskKind::none;
  Value graph;     // n × n tensor of 0/1 in the element type, for kind == graph
  unsigned nb = 0; // batch loops before (i, j) in the generics that use it

  /// Extra generic inputs this mask needs (the graph) with their maps.
  void addInputs(Emitter &e, SmallVector<Value> &ins, SmallVector<AffineMap> &maps) const;
  /// i1 "pair (i, j) interacts"; `gval` is the graph entry if any.
  Value keep(OpBuilder &b, Location loc, Value gval) const;
};
Mask makeMask(Emitter &e, MaskKind kind, std::optional<ElementsAttr> graph);

/// Inlines a scalar region (one arg) at the builder; its yielded value #idx.
Value inlineScalarRegion(OpBuilder &b, Region &r, Value z, unsigned idx = 0);

/// What the attention weights of an MM step (or of its VJP) are made of.
struct AttnSpec {
  WeightForm form;
  MaskKind mask;
  std::optional<ElementsAttr> graph;
  Region *weight; // rho' (and, for a VJP, rho'') region for form(general)
};
AttnSpec specOf(MMStepOp op);
AttnSpec specOf(MMStepVJPOp op);

/// z_ij = max(0, ½|u_i|² + ½|u_j|² − u_i·u_j) = ½|u_i − u_j|².
Value pairwiseZ(Emitter &e, Value u);
/// Masked, unnormalized weights w_ij = m_ij rho'(z_ij) of a general MM step
/// (or m_ij rho''(z_ij) with idx = 1 on a VJP's region).
Value generalWeights(Emitter &e, const AttnSpec &op, Value u, const Mask &m, unsigned idx = 0);
/// Inside a linalg.generic body over (batch..., i, j) with `first` = the
/// number of batch loops: `onDiag` where i == j, else `offDiag`.
Value identityEntry(OpBuilder &b, Location l, Value onDiag, Value offDiag, unsigned first = 0);
/// Row-normalizes non-negative weights; a row summing to 0 becomes the
/// identity row (that token stays put).
Value normalizeRows(Emitter &e, Value w);
/// softmax_j of u_i·u_j (− ½|u_j|² for the reweighted form), masked.
Value softmaxWeights(Emitter &e, const AttnSpec &op, Value u, const Mask &m);
/// The normalized attention matrix of an MM step at Y.
Value attentionMatrix(Emitter &e, const AttnSpec &op, Value y, Value proj);

} // namespace mlir::unroll::lowering

#endif // UNROLL_LIB_CONVERSION_UNROLLTOLINALG_PAIRWISE_H
