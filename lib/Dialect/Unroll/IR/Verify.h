//===- Verify.h - checks shared by the unroll op verifiers ------*- C++ -*-===//
#ifndef UNROLL_LIB_DIALECT_UNROLL_IR_VERIFY_H
#define UNROLL_LIB_DIALECT_UNROLL_IR_VERIFY_H

#include "unroll/Dialect/Unroll/IR/UnrollOps.h"

#include "llvm/ADT/StringMap.h"

#include <cstdio>
#include <string>

namespace mlir::unroll::detail {

/// Doubles in diagnostics as a person writes them: 2, 0.002, -inf.
inline std::string fmt(double v) {
  char buf[64];
  snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

/// A [d, k] projection / [d, d] weight must match the tokens' feature size d,
/// which therefore must be static.
inline LogicalResult verifyFeatureMatrix(Operation *op, Value y, Value w, StringRef what,
                                         bool square) {
  auto yt = cast<RankedTensorType>(y.getType());
  auto wt = cast<RankedTensorType>(w.getType());
  if (wt.getRank() != 2 || !wt.hasStaticShape())
    return op->emitOpError() << "expected " << what << " to be a static 2-d tensor, got " << wt;
  if (wt.getElementType() != yt.getElementType())
    return op->emitOpError() << "expected " << what << " element type " << yt.getElementType()
                             << ", got " << wt.getElementType();
  int64_t f = yt.getRank() - 1; // the feature dimension: last of [n, d] and [B, n, d]
  if (yt.isDynamicDim(f))
    return op->emitOpError() << "expected a static feature dimension d when " << what
                             << " is given, got " << yt;
  if (wt.getDimSize(0) != yt.getDimSize(f))
    return op->emitOpError() << "expected " << what << " with " << yt.getDimSize(f)
                             << " rows to match the tokens' feature dimension, got " << wt;
  if (square && wt.getDimSize(0) != wt.getDimSize(1))
    return op->emitOpError() << "expected a square " << what << ", got " << wt;
  return success();
}

inline LogicalResult verifyCenter(Operation *op, Value y, Value center) {
  if (center && center.getType() != y.getType())
    return op->emitOpError() << "expected center of type " << y.getType() << ", got "
                             << center.getType();
  return success();
}

/// The mask attributes: `graph` present exactly when mask is `graph`, and then
/// a square 0/1 matrix.
inline LogicalResult verifyMask(Operation *op, MaskKind mask, std::optional<ElementsAttr> graph,
                                Value y) {
  if (mask != MaskKind::graph) {
    if (graph)
      return op->emitOpError("'graph' attribute requires mask(graph)");
    return success();
  }
  if (!graph)
    return op->emitOpError("mask(graph) requires a 'graph' attribute");
  auto gt = cast<ShapedType>(graph->getType());
  if (gt.getRank() != 2 || gt.getDimSize(0) != gt.getDimSize(1))
    return op->emitOpError() << "expected a square graph matrix, got " << gt;
  auto yt = cast<RankedTensorType>(y.getType());
  int64_t n = yt.getRank() - 2; // the token dimension
  if (!yt.isDynamicDim(n) && yt.getDimSize(n) != gt.getDimSize(0))
    return op->emitOpError() << "expected a graph over " << yt.getDimSize(n) << " tokens, got "
                             << gt;
  auto ints = dyn_cast<DenseIntElementsAttr>(*graph);
  if (!ints)
    return op->emitOpError("expected the graph as dense integer elements");
  for (const APInt &v : ints.getValues<APInt>())
    if (!v.isZero() && !v.isOne())
      return op->emitOpError("expected graph entries to be 0 or 1");
  return success();
}

/// Parameters are identified by name: each name must have one type.
inline LogicalResult verifyParams(Operation *root) {
  llvm::StringMap<Type> seen;
  WalkResult r = root->walk([&](ParamOp p) {
    auto [it, inserted] = seen.try_emplace(p.getName(), p.getType());
    if (!inserted && it->second != p.getType()) {
      p.emitOpError() << "parameter '" << p.getName() << "' has type " << p.getType()
                      << " here but " << it->second << " elsewhere";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(r.wasInterrupted());
}

} // namespace mlir::unroll::detail

#endif // UNROLL_LIB_DIALECT_UNROLL_IR_VERIFY_H
