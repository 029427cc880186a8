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
/// unroll.attention as one kernel and unroll.attention_vjp as three, with
/// shared tiles and barriers, in the phase form of unroll/Transforms/CtaKernel.h
/// (FusedAttention.cpp; for the GPU pipeline and its emulation). `tile` 0
/// picks the largest tile that fits in shared memory; where none (or not the
/// one asked for) fits, the patterns do not apply and Attention.cpp's do.
void populateFusedAttentionPatterns(RewritePatternSet &patterns, int64_t tile);
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
/// Every family above; fused attention where `fusedAttention`.
void populateUnrollToLinalgPatterns(RewritePatternSet &patterns, bool cpuKernels,
                                    bool fusedAttention = false, int64_t attentionTile = 0);

/// The normalized attention matrix of `step` at `y` (with projection `proj`
/// or null), as linalg on tensors at the builder (the @E_weights entry).
Value buildAttentionWeights(OpBuilder &b, MMStepOp step, Value y, Value proj);

/// The unit attribute on the linalg.generic that unroll.gelu becomes (tanh
/// GELU, elementwise, one input).
constexpr const char *kGeluAttr = "unroll.gelu";
/// ... and on the one unroll.gelu_vjp becomes (inputs x, dy: dy·GELU'(x)).
constexpr const char *kGeluVJPAttr = "unroll.gelu_vjp";
/// The unit attribute that marks a `tensor.insert_slice` whose source should
/// be computed in its destination slot (see writeMarkedSlicesInPlace).
constexpr const char *kInPlaceAttr = "unroll.in_place";
/// For every insert_slice marked with kInPlaceAttr under `root`: makes the
/// chain of destination-passing ops that computes its source write into the
/// slice of the destination (an extract_slice at the start of its block)
/// instead of into a fresh tensor.empty, so that bufferization writes it in
/// place instead of copying. Leaves a chain alone when it is not a single
/// use chain ending in a tensor.empty. Drops the markers unless
/// `keepMarks` (a later pass that rebuilds producers applies them again).
void writeMarkedSlicesInPlace(Operation *root, bool keepMarks = false);

} // namespace mlir::unroll

#endif // UNROLL_CONVERSION_UNROLLTOLINALG_UNROLLTOLINALG_H
