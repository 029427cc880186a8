//===- Contraction.h - linalg contractions as GEMM calls --------*- C++ -*-===//
#ifndef UNROLL_UTILS_CONTRACTION_H
#define UNROLL_UTILS_CONTRACTION_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <functional>
#include <optional>
#include <utility>
#include <string>

namespace mlir::unroll {

/// How a contraction becomes a call (Contraction.cpp).
struct ContractionCall {
  /// The callee for f32 (true) or f64 (false) elements.
  std::function<std::string(bool f32)> name;
  /// Arguments of the callee: the 13 of the GEMM ABI, then `extraArgs`.
  unsigned numArgs = 13;
  SmallVector<int64_t> extraArgs;
  /// Contractions with batch dimensions: a loop of calls (else unchanged).
  bool batchLoops = true;
  /// Every operand must have a static unit stride in its row or column
  /// group (a library that takes row- or column-major matrices).
  bool unitStride = false;
  /// The callee takes, after `extraArgs`, the address of a bias vector b
  /// (0: none) and computes C = A·B + b[n] when `biasFlag` is set in its
  /// flags (extraArgs[0]): a broadcast of b into a row-major C right
  /// before the contraction is then folded into the call.
  bool biasArg = false;
  int64_t biasFlag = 0;
  /// The callee takes, after the bias, the address of an output D with C's
  /// strides and writes GELU(C) there when `geluFlag` is set: a GELU op
  /// (marked unroll.gelu) of C right after a row-major, overwritten C is
  /// then folded into the call. 0: never fold (the argument is still
  /// passed when `epilogueArg`).
  bool epilogueArg = false;
  int64_t geluFlag = 0;
  /// ... and takes there GELU's input x, computing C = GELU'(x) ∘ (A·B),
  /// when `dgeluFlag` is set: the GELU gradient (unroll.gelu_vjp) of a
  /// fresh, zero-filled C is folded, the call writing its output.
  int64_t dgeluFlag = 0;
  /// ... and takes there a matrix x with C's strides, computing C = A·B (+
  /// b) + x, when `addFlag` is set: a sum C = C + x right after an
  /// overwritten, row-major C (what forwardProductIntoSum makes of a
  /// residual connection) is folded. 0: never fold.
  int64_t addFlag = 0;
  /// ... and takes there a contiguous vector s of M, adding A's row sums to
  /// it (s[m] += Σ_k A[m, k]), when `rowSumFlag` is set: a reduction of A
  /// over its k dims right after the contraction (the bias gradient after a
  /// weight gradient) is folded. 0: never fold.
  int64_t rowSumFlag = 0;
};

/// `c = 0 or a bias broadcast; c += A·B; r = c + x` with c a fresh buffer
/// that nothing else reads (a linear layer and the residual sum after it):
/// the product goes into r itself (`r = ...; r += A·B; r = r + x`), so that
/// rewriteContraction can fold the sum into the call (ContractionCall::
/// addFlag) instead of leaving a pass over three matrices. Returns whether
/// it changed `op`.
bool forwardProductIntoSum(linalg::GenericOp op);

/// The buffer a memref is a view of (through view-like ops and casts): an
/// allocation, a function argument or whatever else defined it.
Value viewRoot(Value memref);

/// The elements [first, last] of its buffer that a memref with a static
/// shape and strided layout covers; none if any of them is dynamic.
std::optional<std::pair<int64_t, int64_t>> staticExtent(Type type);

/// Named matmuls (plain, transposed A or B) under `root` become generics,
/// which rewriteContraction matches.
void generalizeMatmuls(Operation *root);

/// The body computes acc + a · b (in either operand order).
bool isMulAdd(linalg::GenericOp op);

/// One init, and the body yields out + f(ins) with the accumulator out read
/// nowhere else: starting from another init adds that init to the result.
bool addsToInit(linalg::GenericOp op);

/// A fill with the constant +0.0 or -0.0 (on tensors or buffers).
bool isZeroFill(linalg::FillOp fill);

/// Replaces `op` (bufferized) by calls if it is a contraction the call can
/// express; failure leaves it unchanged.
LogicalResult rewriteContraction(linalg::GenericOp op, const ContractionCall &call);

} // namespace mlir::unroll

#endif // UNROLL_UTILS_CONTRACTION_H
