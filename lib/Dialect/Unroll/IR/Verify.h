//===- Verify.h - checks shared by the unroll op verifiers ------*- C++ -*-===//
#ifndef UNROLL_LIB_DIALECT_UNROLL_IR_VERIFY_H
#define UNROLL_LIB_DIALECT_UNROLL_IR_VERIFY_H

#include "unroll/Dialect/Unroll/IR/UnrollOps.h"

#include "llvm/ADT/StringMap.h"

#include <cstdio>
#include <optional>
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
/// a square 0/1 matrix; `context` only where the op has a query
/// (`allowContext`: the kernel energies).
inline LogicalResult verifyMask(Operation *op, MaskKind mask, std::optional<ElementsAttr> graph,
                                Value y, bool allowContext = false) {
  if (mask == MaskKind::context && !allowContext)
    return op->emitOpError("mask(context) is for kernel energies (unroll.kernel_pairwise and "
                           "its steps), whose query reads the context");
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

/// Samples a rho region on z >= 0 and rejects it where rho' < 0, rho'' > 0
/// or a value is not finite (EnergyOps.cpp).
LogicalResult checkConcaveNonDecreasing(Operation *op, Region &rho);

/// The most bytes a tensor of the dialect, or all of an energy's or model's
/// parameters together, may take: 2^40 (1 TiB; docs/robustness.md). Larger
/// static shapes are typos, and their sizes overflow the lowering's
/// arithmetic.
constexpr uint64_t kMaxTensorBytes = uint64_t(1) << 40;

/// Bytes of `count` elements of `elem`, or nothing on overflow.
inline std::optional<uint64_t> bytesOf(uint64_t count, Type elem) {
  uint64_t bytes;
  if (__builtin_mul_overflow(count, uint64_t(elem.getIntOrFloatBitWidth() / 8), &bytes))
    return std::nullopt;
  return bytes;
}

/// Elements of a tensor's static sizes (dynamic ones left out), or nothing
/// on overflow.
inline std::optional<uint64_t> staticElements(RankedTensorType t) {
  uint64_t n = 1;
  for (int64_t s : t.getShape())
    if (!ShapedType::isDynamic(s) && s > 0 && __builtin_mul_overflow(n, uint64_t(s), &n))
      return std::nullopt;
  return n;
}

/// `what` (of type `t`) within kMaxTensorBytes.
inline LogicalResult verifyTensorSize(Operation *op, Type t, StringRef what) {
  auto rt = dyn_cast<RankedTensorType>(t);
  if (!rt || !rt.getElementType().isIntOrFloat())
    return success();
  std::optional<uint64_t> n = staticElements(rt);
  std::optional<uint64_t> bytes = n ? bytesOf(*n, rt.getElementType()) : std::nullopt;
  if (bytes && *bytes <= kMaxTensorBytes)
    return success();
  InFlightDiagnostic d = op->emitOpError()
                         << "expected " << what << " of at most 2^40 bytes (1 TiB), got " << t;
  if (bytes)
    d << " (" << *bytes << " bytes)";
  else
    d << " (its size overflows 64 bits)";
  return d;
}

/// Parameters are identified by name: each name must have one type, and all
/// of them together must fit in kMaxTensorBytes.
inline LogicalResult verifyParams(Operation *root) {
  llvm::StringMap<Type> seen;
  uint64_t bytes = 0;
  bool tooMany = false;
  WalkResult r = root->walk([&](ParamOp p) {
    auto [it, inserted] = seen.try_emplace(p.getName(), p.getType());
    if (!inserted && it->second != p.getType()) {
      p.emitOpError() << "parameter '" << p.getName() << "' has type " << p.getType()
                      << " here but " << it->second << " elsewhere";
      return WalkResult::interrupt();
    }
    std::optional<uint64_t> n = staticElements(p.getType());
    std::optional<uint64_t> b = n ? bytesOf(*n, p.getType().getElementType()) : std::nullopt;
    if (inserted && (!b || __builtin_add_overflow(bytes, *b, &bytes)))
      tooMany = true;
    return WalkResult::advance();
  });
  if (r.wasInterrupted())
    return failure();
  if (tooMany || bytes > kMaxTensorBytes)
    return root->emitOpError() << "expected parameters of at most 2^40 bytes (1 TiB) in all, got "
                               << (tooMany ? std::string("more than 2^64") : std::to_string(bytes))
                               << " bytes";
  return success();
}

} // namespace mlir::unroll::detail

#endif // UNROLL_LIB_DIALECT_UNROLL_IR_VERIFY_H
