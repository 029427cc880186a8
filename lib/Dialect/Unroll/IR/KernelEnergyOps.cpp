//===- KernelEnergyOps.cpp - kernel energies and the pieces of their steps -===//
//
// unroll.kernel_pairwise (the energy term) and the step ops that gradient
// descent, exact line search, conjugate gradients and momentum on it are
// made of: kernel_matrix, kernel_apply, inner, axpy, normalize, ratio,
// kernel_trace and pick. Their verifiers and gradient rules.
//
// Shapes: a token matrix [n, D] (an energy's) or a token batch [B, n, D]
// (a model's loop body, prompt by prompt). Kernel matrices are [H, n, n]
// or [B, H, n, n]; a value per prompt is 0-d or [B]. Weights are never
// batched.
//
//===----------------------------------------------------------------------===//
#include "Verify.h"
#include "unroll/Dialect/Unroll/IR/ScalarRegion.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::unroll;
using namespace mlir::unroll::detail;

namespace {

RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Leading batch dimensions of a token tensor: 0 for [n, D], 1 for [B, n, D].
int64_t batchRank(Value tokens) { return tensorOf(tokens).getRank() - 2; }

/// A projection [F, heads · r]: F the tokens' (static) features, columns a
/// multiple of `heads`, the tokens' element type.
LogicalResult verifyProjection(Operation *op, Value tokens, Value w, StringRef what,
                               int64_t heads) {
  if (failed(verifyFeatureMatrix(op, tokens, w, what, /*square=*/false)))
    return failure();
  int64_t cols = tensorOf(w).getDimSize(1);
  if (cols % heads != 0)
    return op->emitOpError() << "expected " << what << "'s " << cols
                             << " columns to split into heads(" << heads << ") equal blocks";
  return success();
}

/// The kernel of a kernel energy or of kernel_matrix: `linear` takes no
/// region, every other kind one (rho for the term, rho' for the step).
LogicalResult verifyKernelRegion(Operation *op, KernelKind kind, Region &r, Type elem,
                                 bool isTerm) {
  bool needs = isTerm ? kind == KernelKind::custom : kind != KernelKind::linear;
  if (needs == r.empty()) {
    if (isTerm)
      return op->emitOpError() << (needs ? "kernel(custom) requires a region computing rho(z)"
                                         : "a rho region requires kernel(custom)");
    return op->emitOpError() << (needs ? "a rho kernel requires a region computing rho'(z)"
                                       : "kernel(linear) takes no region");
  }
  if (r.empty())
    return success();
  return verifyScalarRegion(op, r, elem, isTerm ? "rho" : "weight");
}

/// The kernel's source and its projections: `features` [lo, hi] (when
/// given) within the source's static features; W_q [hi − lo (or all), H · r];
/// W_k of W_q's type.
LogicalResult verifyKernelSource(Operation *op, Value src, Value query, Value key,
                                 std::optional<ArrayRef<int64_t>> features, int64_t heads) {
  if (key && key.getType() != query.getType())
    return op->emitOpError() << "expected key of the query's type " << query.getType() << ", got "
                             << key.getType();
  if (!features)
    return verifyProjection(op, src, query, "query", heads);
  auto st = tensorOf(src);
  int64_t f = st.getDimSize(st.getRank() - 1);
  if (features->size() != 2)
    return op->emitOpError() << "expected features [lo, hi], got " << features->size()
                             << " numbers";
  int64_t lo = (*features)[0], hi = (*features)[1];
  if (ShapedType::isDynamic(f) || lo < 0 || hi <= lo || hi > f)
    return op->emitOpError() << "expected features [lo, hi] with 0 <= lo < hi <= " << f
                             << " (the source's features), got [" << lo << ", " << hi << "]";
  auto qt = tensorOf(query);
  if (qt.getRank() != 2 || !qt.hasStaticShape() || qt.getDimSize(0) != hi - lo ||
      qt.getElementType() != st.getElementType())
    return op->emitOpError() << "expected query with " << hi - lo << " rows (features [" << lo
                             << ", " << hi << "]) of " << st.getElementType() << ", got " << qt;
  if (qt.getDimSize(1) % heads != 0)
    return op->emitOpError() << "expected query's " << qt.getDimSize(1)
                             << " columns to split into heads(" << heads << ") equal blocks";
  return success();
}

/// A per-prompt value of the tokens' batch: 0-d for [n, D], [B] for [B, n, D].
LogicalResult verifyPerPrompt(Operation *op, Value tokens, Type t, StringRef what) {
  auto rt = cast<RankedTensorType>(t);
  if (rt.getRank() != batchRank(tokens) || rt.getElementType() != tensorOf(tokens).getElementType())
    return op->emitOpError() << "expected " << what << " to hold one value per prompt of "
                             << tokens.getType() << " ("
                             << (batchRank(tokens) ? "a 1-d [B] tensor" : "a 0-d tensor")
                             << "), got " << t;
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// The energy term
//===----------------------------------------------------------------------===//

LogicalResult KernelPairwiseOp::verify() {
  Type elem = getY().getType().getElementType();
  int64_t heads = getHeads();
  if (getSource().getType().getRank() != getY().getType().getRank() ||
      getSource().getType().getElementType() != elem)
    return emitOpError() << "expected the kernel's source (Y or X) to be a token tensor of Y's "
                            "rank and element type, got "
                         << getSource().getType();
  if (failed(verifyKernelSource(*this, getSource(), getQuery(), getKey(), getFeatures(), heads)) ||
      failed(verifyProjection(*this, getY(), getValue(), "value", heads)))
    return failure();
  if (failed(verifyMask(*this, getMask(), getGraph(), getY(), /*allowContext=*/true)) ||
      failed(verifyKernelRegion(*this, getKernel(), getRhoBody(), elem, /*isTerm=*/true)))
    return failure();
  if (getMean() && getMask() == MaskKind::graph)
    return emitOpError("'mean' divides each row by its number of keys, which mask(graph) does not "
                       "fix: use none, causal or context");
  if (getKernel() == KernelKind::custom)
    return checkConcaveNonDecreasing(*this, getRhoBody());
  return success();
}

//===----------------------------------------------------------------------===//
// Step pieces
//===----------------------------------------------------------------------===//

LogicalResult KernelMatrixOp::verify() {
  int64_t heads = getHeads();
  if (failed(verifyKernelSource(*this, getSource(), getQuery(), getKey(), getFeatures(), heads)))
    return failure();
  if (failed(verifyMask(*this, getMask(), getGraph(), getSource(), /*allowContext=*/true)) ||
      failed(verifyKernelRegion(*this, getKernel(), getWeightBody(),
                                getSource().getType().getElementType(), /*isTerm=*/false)))
    return failure();
  if (getMean() && getMask() == MaskKind::graph)
    return emitOpError("'mean' is not defined for mask(graph)");
  auto k = getResult().getType();
  int64_t nb = batchRank(getSource());
  if (k.getRank() != nb + 3 || k.getElementType() != getSource().getType().getElementType() ||
      k.isDynamicDim(nb) || k.getDimSize(nb) != heads)
    return emitOpError() << "expected kernel matrices [" << (nb ? "B, " : "") << heads
                         << ", n, n] of " << getSource().getType().getElementType() << ", got "
                         << k;
  return success();
}

/// K [.., H, n, n] and Z [.., n, D] of one batch rank; W_v [D, H · r].
static LogicalResult verifyKernelsAndValue(Operation *op, Value kernels, Value z, Value value) {
  auto kt = tensorOf(kernels);
  int64_t nb = batchRank(z);
  if (kt.getRank() != nb + 3 || kt.getElementType() != tensorOf(z).getElementType())
    return op->emitOpError() << "expected kernel matrices of rank " << nb + 3 << " for tokens "
                             << z.getType() << ", got " << kt;
  if (kt.isDynamicDim(nb))
    return op->emitOpError() << "expected a static number of heads, got " << kt;
  return verifyProjection(op, z, value, "value", kt.getDimSize(nb));
}

LogicalResult KernelApplyOp::verify() {
  return verifyKernelsAndValue(*this, getKernels(), getZ(), getValue());
}

LogicalResult InnerOp::verify() {
  if (getLhs().getType() != getRhs().getType())
    return emitOpError() << "expected operands of one type, got " << getLhs().getType() << " and "
                         << getRhs().getType();
  return verifyPerPrompt(*this, getLhs(), getResult().getType(), "the result");
}

LogicalResult AxpyOp::verify() {
  if (getY() && getY().getType() != getX().getType())
    return emitOpError() << "expected 'plus' of type " << getX().getType() << ", got "
                         << getY().getType();
  if (Value a = getA()) {
    auto at = tensorOf(a);
    auto shared = RankedTensorType::get({1}, getX().getType().getElementType());
    if (at != shared && failed(verifyPerPrompt(*this, getX(), at, "'times'")))
      return emitOpError() << "('times' may also be a learned " << shared << ")";
  }
  return success();
}

LogicalResult RatioOp::verify() {
  if (getScale() && getScale().getType() != getNum().getType())
    return emitOpError() << "expected a scale of type " << getNum().getType() << ", got "
                         << getScale().getType();
  if (getResidual() && !getScale())
    return emitOpError("converged(...) compares against the scale: it needs 'scale'");
  for (Value v : {getResidual(), getSize()})
    if (v && v.getType() != getNum().getType())
      return emitOpError() << "expected converged(...) of type " << getNum().getType() << ", got "
                           << v.getType();
  double eps = getEps().convertToDouble();
  if (!(eps >= 0.0) || !std::isfinite(eps))
    return emitOpError() << "expected a finite eps >= 0, got " << fmt(eps);
  return success();
}

LogicalResult PickOp::verify() {
  auto vt = getValues().getType();
  if (vt.isDynamicDim(0))
    return emitOpError() << "expected a static number of entries, got " << vt;
  auto want = RankedTensorType::get({1}, vt.getElementType());
  if (getResult().getType() != want)
    return emitOpError() << "expected a result of type " << want << ", got "
                         << getResult().getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

LogicalResult KernelMatrixOp::buildVJP(OpBuilder &b, ReverseMode &rm) {
  Value dk = rm.cotangent(getResult());
  Type dkeyTy = getKey() ? getKey().getType() : Type();
  auto v = b.create<KernelMatrixVJPOp>(getLoc(), getSource().getType(), getQuery().getType(),
                                       dkeyTy, getSource(), getQuery(), getKey(), dk,
                                       getKernelAttr(), getHeadsAttr(), getMaskAttr(),
                                       getGraphAttr(), getFeaturesAttr(), getMeanAttr());
  // The VJP's region yields (rho'(z), rho''(z)).
  if (getKernel() != KernelKind::linear)
    differentiateScalarRegion(getWeightBody(), v.getWeightBody(), getLoc(), /*yieldPrimal=*/true);
  if (failed(rm.addCotangent(*this, getSource(), v.getDsource())) ||
      failed(rm.addCotangent(*this, getQuery(), v.getDquery())))
    return failure();
  if (getKey())
    return rm.addCotangent(*this, getKey(), v.getDkey());
  return success();
}

LogicalResult KernelApplyOp::buildVJP(OpBuilder &b, ReverseMode &rm) {
  auto v = b.create<KernelApplyVJPOp>(getLoc(), getKernels().getType(), getZ().getType(),
                                      getValue().getType(), getKernels(), getZ(), getValue(),
                                      rm.cotangent(getResult()));
  return success(succeeded(rm.addCotangent(*this, getKernels(), v.getDkernels())) &&
                 succeeded(rm.addCotangent(*this, getZ(), v.getDz())) &&
                 succeeded(rm.addCotangent(*this, getValue(), v.getDvalue())));
}

LogicalResult InnerOp::buildVJP(OpBuilder &b, ReverseMode &rm) {
  auto v = b.create<InnerVJPOp>(getLoc(), getLhs().getType(), getLhs().getType(), getLhs(),
                                getRhs(), rm.cotangent(getResult()), getOverContextAttr());
  return success(succeeded(rm.addCotangent(*this, getLhs(), v.getDlhs())) &&
                 succeeded(rm.addCotangent(*this, getRhs(), v.getDrhs())));
}

LogicalResult AxpyOp::buildVJP(OpBuilder &b, ReverseMode &rm) {
  Value dy = rm.cotangent(getResult());
  Type daTy = getA() ? getA().getType() : Type();
  auto v =
      b.create<AxpyVJPOp>(getLoc(), getX().getType(), daTy, getX(), getA(), dy, getScaleAttr());
  if (failed(rm.addCotangent(*this, getX(), v.getDx())))
    return failure();
  if (getA() && failed(rm.addCotangent(*this, getA(), v.getDa())))
    return failure();
  if (getY())
    return rm.addCotangent(*this, getY(), dy);
  return success();
}

LogicalResult NormalizeOp::buildVJP(OpBuilder &b, ReverseMode &rm) {
  auto v = b.create<NormalizeVJPOp>(getLoc(), getZ().getType(), getZ(), rm.cotangent(getResult()),
                                    getOverContextAttr(), getEpsAttr());
  return rm.addCotangent(*this, getZ(), v.getDz());
}

LogicalResult RatioOp::buildVJP(OpBuilder &b, ReverseMode &rm) {
  Type t = getNum().getType();
  auto v = b.create<RatioVJPOp>(getLoc(), t, t, getNum(), getDen(), getScale(), getResidual(),
                                getSize(), rm.cotangent(getResult()), getEpsAttr());
  // No gradient reaches the scale and the convergence test: they only
  // decide whether a step is taken.
  return success(succeeded(rm.addCotangent(*this, getNum(), v.getDnum())) &&
                 succeeded(rm.addCotangent(*this, getDen(), v.getDden())));
}

LogicalResult KernelTraceOp::buildVJP(OpBuilder &, ReverseMode &) {
  // The trace is a threshold's scale: it enters the steps only through a
  // comparison, which has no gradient.
  return success();
}

LogicalResult PickOp::buildVJP(OpBuilder &b, ReverseMode &rm) {
  auto v = b.create<PickVJPOp>(getLoc(), getValues().getType(), getValues(), getLayer(),
                               rm.cotangent(getResult()));
  return rm.addCotangent(*this, getValues(), v.getDvalues());
}
