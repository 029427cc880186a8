//===- UnrollToLinalg.h - unroll ops to linalg patterns ---------*- C++ -*-===//
//
// The conversion patterns of convert-unroll-to-linalg, by op family, for
// pipelines and tools that want them without the pass. Each family lives in
// its own file of lib/Conversion/UnrollToLinalg/.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_CONVERSION_UNROLLTOLINALG_UNROLLTOLINALG_H
#define UNROLL_CONVERSION_UNROLLTOLINALG_UNROLLTOLINALG_H

#include "mlir/IR/PatternMatch.h"
#include "unroll/Utils/Markers.h"

namespace mlir::unroll {
class MMStepOp;

/// unroll.linear, unroll.linear_vjp (Linear.cpp).
void populateLinearPatterns(RewritePatternSet &patterns);
/// unroll.layer_norm, unroll.layer_norm_vjp (LayerNorm.cpp); with `cpuKernels`
/// each becomes one call of the CPU row kernels.
void populateLayerNormPatterns(RewritePatternSet &patterns, bool cpuKernels);
/// unroll.attention, unroll.attention_vjp (Attention.cpp); with `cpuKernels`
/// each becomes one call of the CPU kernels instead of linalg ops.
void populateAttentionPatterns(RewritePatternSet &patterns, bool cpuKernels);
/// unroll.gelu, unroll.add, unroll.position_embed and their VJPs
/// (Elementwise.cpp).
void populateElementwisePatterns(RewritePatternSet &patterns);
/// unroll.pairwise, unroll.quadratic, unroll.sqnorm, unroll.nonneg: the value
/// of the term (EnergyTerms.cpp).
void populateEnergyTermPatterns(RewritePatternSet &patterns);
/// unroll.mm_step, unroll.grad_step, unroll.prox_nonneg and their VJPs
/// (Steps.cpp).
void populateStepPatterns(RewritePatternSet &patterns);
/// Kernel energies: unroll.kernel_pairwise and the pieces of its steps
/// (kernel_matrix, kernel_apply, inner, axpy, normalize, ratio,
/// kernel_trace, pick) with their VJPs (KernelEnergy.cpp).
void populateKernelEnergyPatterns(RewritePatternSet &patterns);
/// Sparse coding: lsq, l1, ista_step, lista_step, extrapolate and their
/// VJPs (SparseCoding.cpp).
void populateSparseCodingPatterns(RewritePatternSet &patterns);
/// Modern Hopfield retrieval: lse, cccp_step and its VJP (Hopfield.cpp).
void populateHopfieldPatterns(RewritePatternSet &patterns);
/// Every family above.
void populateUnrollToLinalgPatterns(RewritePatternSet &patterns, bool cpuKernels);

/// The normalized attention matrix of `step` at `y` (with projection `proj`
/// or null), as linalg on tensors at the builder (the @E_weights entry).
Value buildAttentionWeights(OpBuilder &b, MMStepOp step, Value y, Value proj);

} // namespace mlir::unroll

#endif // UNROLL_CONVERSION_UNROLLTOLINALG_UNROLLTOLINALG_H
