//===- UnrollToGPU.h - unroll ops as GPU kernels in phase form --*- C++ -*-===//
//
// The GPU pipeline's own lowerings of unroll ops (and its emulation's): ops
// written as CTA kernels with shared tiles and barriers
// (unroll/Utils/CtaKernel.h) instead of the target-neutral linalg of
// convert-unroll-to-linalg. They run before it; what they leave (an op no
// tile fits) it lowers as on every target.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_CONVERSION_UNROLLTOGPU_UNROLLTOGPU_H
#define UNROLL_CONVERSION_UNROLLTOGPU_UNROLLTOGPU_H

#include "mlir/IR/PatternMatch.h"

namespace mlir::unroll {

/// unroll.attention as one kernel and unroll.attention_vjp as three, with
/// shared tiles and barriers, in the phase form of unroll/Utils/CtaKernel.h
/// (FusedAttention.cpp). `tile` 0 picks the largest tile that fits in shared
/// memory; where none (or not the one asked for) fits, the patterns do not
/// apply and the op is left for convert-unroll-to-linalg.
void populateFusedAttentionPatterns(RewritePatternSet &patterns, int64_t tile);
/// Whether those patterns apply to `op` (an attention op whose tiles fit).
bool fitsFusedAttention(Operation *op, int64_t tile);

} // namespace mlir::unroll

#endif // UNROLL_CONVERSION_UNROLLTOGPU_UNROLLTOGPU_H
