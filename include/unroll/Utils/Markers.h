//===- Markers.h - attributes one pass leaves for a later one ---*- C++ -*-===//
//
// The unroll lowering marks linalg ops and slices it builds so that later,
// target-specific passes can recognize them without pattern-matching their
// bodies: GELU and its gradient (folded into GEMM epilogues on the CPU,
// fused on the GPU) and slices whose source should be computed in place.
// Producers (convert-unroll-to-linalg) and consumers (lib/Transforms) both
// include this header, so neither layer includes the other.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_UTILS_MARKERS_H
#define UNROLL_UTILS_MARKERS_H

namespace mlir {
class Operation;
} // namespace mlir

namespace mlir::unroll {

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

#endif // UNROLL_UTILS_MARKERS_H
