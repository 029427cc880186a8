//===- UnrollOps.cpp - unroll op verifiers --------------------------------===//
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"
#include "unroll/Dialect/Unroll/IR/ScalarRegion.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace mlir::unroll;

#include "unroll/Dialect/Unroll/IR/UnrollEnums.cpp.inc"

#define GET_OP_CLASSES
#include "unroll/Dialect/Unroll/IR/UnrollOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Shape helpers
//===----------------------------------------------------------------------===//

/// Doubles in diagnostics as a person writes them: 2, 0.002, -inf.
static std::string fmt(double v) {
  char buf[64];
  snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

/// A [d, k] projection / [d, d] weight must match the tokens' feature size d,
/// which therefore must be static.
static LogicalResult verifyFeatureMatrix(Operation *op, Value y, Value w,
                                         StringRef what, bool square) {
  auto yt = cast<RankedTensorType>(y.getType());
  auto wt = cast<RankedTensorType>(w.getType());
  if (wt.getRank() != 2 || !wt.hasStaticShape())
    return op->emitOpError() << "expected " << what
                             << " to be a static 2-d tensor, got " << wt;
  if (wt.getElementType() != yt.getElementType())
    return op->emitOpError() << "expected " << what << " element type "
                             << yt.getElementType() << ", got "
                             << wt.getElementType();
  if (yt.isDynamicDim(1))
    return op->emitOpError() << "expected a static feature dimension d when "
                             << what << " is given, got " << yt;
  if (wt.getDimSize(0) != yt.getDimSize(1))
    return op->emitOpError()
           << "expected " << what << " with " << yt.getDimSize(1)
           << " rows to match the tokens' feature dimension, got " << wt;
  if (square && wt.getDimSize(0) != wt.getDimSize(1))
    return op->emitOpError() << "expected a square " << what << ", got " << wt;
  return success();
}

static LogicalResult verifyCenter(Operation *op, Value y, Value center) {
  if (center && center.getType() != y.getType())
    return op->emitOpError() << "expected center of type " << y.getType()
                             << ", got " << center.getType();
  return success();
}

/// The mask attributes: `graph` present exactly when mask is `graph`, and then
/// a square 0/1 matrix.
static LogicalResult verifyMask(Operation *op, MaskKind mask,
                                std::optional<ElementsAttr> graph, Value y) {
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
  if (!yt.isDynamicDim(0) && yt.getDimSize(0) != gt.getDimSize(0))
    return op->emitOpError() << "expected a graph over " << yt.getDimSize(0)
                             << " tokens, got " << gt;
  auto ints = dyn_cast<DenseIntElementsAttr>(*graph);
  if (!ints)
    return op->emitOpError("expected the graph as dense integer elements");
  for (const APInt &v : ints.getValues<APInt>())
    if (!v.isZero() && !v.isOne())
      return op->emitOpError("expected graph entries to be 0 or 1");
  return success();
}

//===----------------------------------------------------------------------===//
// EnergyOp
//===----------------------------------------------------------------------===//

MinimizeOp EnergyOp::getMinimize() {
  Block &b = getBody().front();
  return b.empty() ? MinimizeOp() : dyn_cast<MinimizeOp>(b.back());
}

/// Parameters are identified by name: each name must have one type.
static LogicalResult verifyParams(Operation *root) {
  llvm::StringMap<Type> seen;
  WalkResult r = root->walk([&](ParamOp p) {
    auto [it, inserted] = seen.try_emplace(p.getName(), p.getType());
    if (!inserted && it->second != p.getType()) {
      p.emitOpError() << "parameter '" << p.getName() << "' has type "
                      << p.getType() << " here but " << it->second
                      << " elsewhere";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(r.wasInterrupted());
}

LogicalResult EnergyOp::verifyRegions() {
  Block &body = getBody().front();
  if (body.getNumArguments() != 2)
    return emitOpError() << "expected the body to take (Y, X), got "
                         << body.getNumArguments() << " arguments";
  Type yt = body.getArgument(0).getType();
  auto rt = dyn_cast<RankedTensorType>(yt);
  if (!rt || rt.getRank() != 2 ||
      !isa<Float32Type, Float64Type>(rt.getElementType()))
    return emitOpError() << "expected Y to be a 2-d f32 or f64 tensor, got "
                         << yt;
  if (body.getArgument(1).getType() != yt)
    return emitOpError() << "expected X of type " << yt << ", got "
                         << body.getArgument(1).getType();
  if (body.empty() || !isa<MinimizeOp>(body.back()))
    return emitOpError("expected the body to end with 'unroll.minimize'");
  for (Operation &op : body.without_terminator()) {
    if (isa<MinimizeOp, YieldOp>(op))
      return op.emitOpError("must be the last op of the energy body");
    bool isTerm = op.getNumResults() == 1 &&
                  isa<EnergyType>(op.getResult(0).getType());
    if (isTerm &&
        (op.getNumOperands() == 0 || op.getOperand(0) != body.getArgument(0)))
      return op.emitOpError("expected an energy term of the energy's variable "
                            "Y (the body's first argument)");
  }
  if (!getSteps().empty()) {
    Block &steps = getSteps().front();
    if (steps.getNumArguments() != 2 ||
        steps.getArgument(0).getType() != yt ||
        steps.getArgument(1).getType() != yt)
      return emitOpError("expected the steps region to take (Y, X) like the "
                         "body");
    auto yield = steps.empty() ? YieldOp() : dyn_cast<YieldOp>(steps.back());
    if (!yield || yield.getValues().size() != 1 ||
        yield.getValues()[0].getType() != yt)
      return emitOpError() << "expected the steps region to yield the next Y "
                              "of type "
                           << yt;
  }
  if (!getReverse().empty()) {
    Block &rev = getReverse().front();
    auto yield = rev.empty() ? YieldOp() : dyn_cast<YieldOp>(rev.back());
    if (rev.getNumArguments() != 3 || !yield || yield.getValues().size() != 1)
      return emitOpError("expected the reverse region to take (Y, X, dY') and "
                         "yield dY");
  }
  return verifyParams(getOperation());
}

//===----------------------------------------------------------------------===//
// ParamOp
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  if (getName().empty())
    return emitOpError("expected a non-empty parameter name");
  if (!getType().hasStaticShape())
    return emitOpError() << "expected a static shape, got " << getType();
  for (int64_t s : getType().getShape())
    if (s <= 0)
      return emitOpError() << "expected positive sizes, got " << getType();
  double sd = getStd().convertToDouble();
  if (!(sd >= 0.0) || !std::isfinite(sd))
    return emitOpError() << "expected a finite std >= 0, got " << fmt(sd);
  return success();
}

//===----------------------------------------------------------------------===//
// PairwiseOp
//===----------------------------------------------------------------------===//

/// Samples a user-written rho on z >= 0 and rejects it where rho' < 0 (not
/// non-decreasing), rho'' > 0 (not concave) or a value is not finite. The
/// derivatives come from hyper-dual evaluation of the region, i.e. exactly
/// the rho' and rho'' that symbolic differentiation builds.
static LogicalResult checkConcaveNonDecreasing(Operation *op, Region &rho) {
  std::vector<double> zs;
  for (int i = 0; i <= 1000; ++i) // dense near 0, where most rho bend
    zs.push_back(0.01 * i);
  for (int i = 0; i <= 1200; ++i) // log-spaced out to 1e6
    zs.push_back(std::pow(10.0, -8.0 + 14.0 * i / 1200.0));
  for (double z : zs) {
    Dual2 r = evaluateScalarRegion(rho, z);
    if (!std::isfinite(r.v) || !std::isfinite(r.d) || !std::isfinite(r.dd))
      return op->emitOpError() << "expected rho to be finite on z >= 0, got "
                                  "rho(" << fmt(z) << ") = " << fmt(r.v)
                               << ", rho' = " << fmt(r.d) << ", rho'' = " << fmt(r.dd);
    double tol = 1e-12 * (1.0 + std::abs(r.v));
    if (r.d < -tol)
      return op->emitOpError()
             << "expected rho to be non-decreasing on z >= 0, got rho'(" << fmt(z)
             << ") = " << fmt(r.d);
    if (r.dd > tol)
      return op->emitOpError()
             << "expected rho to be concave on z >= 0, got rho''(" << fmt(z)
             << ") = " << fmt(r.dd);
  }
  return success();
}

LogicalResult PairwiseOp::verify() {
  Type elem = getY().getType().getElementType();
  if (getProj() &&
      failed(verifyFeatureMatrix(*this, getY(), getProj(), "proj", false)))
    return failure();
  if (failed(verifyMask(*this, getMask(), getGraph(), getY())))
    return failure();
  bool custom = getRho() == RhoKind::custom;
  if (custom != !getRhoBody().empty())
    return emitOpError() << (custom ? "rho(custom) requires a region computing "
                                      "rho(z)"
                                    : "a rho region requires rho(custom)");
  if (!custom)
    return success(); // built-in rho: concave non-decreasing by construction
  if (failed(verifyScalarRegion(*this, getRhoBody(), elem, "rho")))
    return failure();
  return checkConcaveNonDecreasing(*this, getRhoBody());
}

//===----------------------------------------------------------------------===//
// Other energy terms
//===----------------------------------------------------------------------===//

LogicalResult QuadraticOp::verify() {
  return verifyFeatureMatrix(*this, getY(), getWeight(), "weight", true);
}

LogicalResult SqNormOp::verify() {
  double c = getCoeff().convertToDouble();
  if (!(c > 0.0) || !std::isfinite(c))
    return emitOpError() << "expected a convex regularizer: coeff must be "
                            "positive and finite, got "
                         << fmt(c);
  return verifyCenter(*this, getY(), getCenter());
}

//===----------------------------------------------------------------------===//
// MinimizeOp
//===----------------------------------------------------------------------===//

LogicalResult MinimizeOp::verify() {
  unsigned pairwise = 0, quadratic = 0, sqnorm = 0, nonneg = 0;
  for (Value t : getTerms()) {
    Operation *def = t.getDefiningOp();
    if (!def)
      return emitOpError("expected energy terms defined by ops");
    if (isa<PairwiseOp>(def))
      ++pairwise;
    else if (isa<QuadraticOp>(def))
      ++quadratic;
    else if (isa<SqNormOp>(def))
      ++sqnorm;
    else if (isa<NonNegOp>(def))
      ++nonneg;
  }
  if (pairwise != 1)
    return emitOpError() << "expected exactly one 'unroll.pairwise' term, got "
                         << pairwise;
  if (sqnorm > 1)
    return emitOpError() << "expected at most one 'unroll.sqnorm' term, got "
                         << sqnorm;
  if (quadratic > 1 || nonneg > 1)
    return emitOpError("expected at most one 'unroll.quadratic' and one "
                       "'unroll.nonneg' term");
  Schedule s = getSchedule();
  StringRef name = stringifySchedule(s);
  if (s == Schedule::single && (quadratic || nonneg))
    return emitOpError() << "schedule 'single' has no step for "
                         << (quadratic ? "'unroll.quadratic'" : "'unroll.nonneg'")
                         << "; use 'aim' or 'proximal_aim'";
  if (s != Schedule::single && !quadratic)
    return emitOpError() << "schedule '" << name
                         << "' expected an 'unroll.quadratic' term";
  if (s == Schedule::aim && nonneg)
    return emitOpError("schedule 'aim' has no step for 'unroll.nonneg'; use "
                       "'proximal_aim'");
  if (s == Schedule::proximal_aim && !nonneg)
    return emitOpError("schedule 'proximal_aim' expected an 'unroll.nonneg' "
                       "term");
  if (s != Schedule::single) {
    if (!getAlpha())
      return emitOpError() << "schedule '" << name
                           << "' expected a step size alpha(...)";
    double a = getAlpha()->convertToDouble();
    if (!(a > 0.0 && a <= 1.0))
      return emitOpError() << "expected step size alpha in (0, 1], got " << fmt(a);
  } else if (getAlpha()) {
    return emitOpError("schedule 'single' takes no alpha");
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Step ops
//===----------------------------------------------------------------------===//

LogicalResult MMStepOp::verify() {
  Type elem = getY().getType().getElementType();
  if (getProj() &&
      failed(verifyFeatureMatrix(*this, getY(), getProj(), "proj", false)))
    return failure();
  if (failed(verifyCenter(*this, getY(), getCenter())) ||
      failed(verifyMask(*this, getMask(), getGraph(), getY())))
    return failure();
  bool general = getForm() == WeightForm::general;
  if (general != !getWeightBody().empty())
    return emitOpError() << (general ? "form(general) requires a region "
                                       "computing rho'(z)"
                                     : "a weight region requires form(general)");
  if (getVariant() == AttentionVariant::certified && !general)
    return emitOpError("variant(certified) requires form(general)");
  if (getCoeff().convertToDouble() < 0.0)
    return emitOpError() << "expected coeff >= 0, got "
                         << getCoeff().convertToDouble();
  if (general)
    return verifyScalarRegion(*this, getWeightBody(), elem, "weight");
  return success();
}

LogicalResult GradStepOp::verify() {
  if (failed(verifyFeatureMatrix(*this, getY(), getWeight(), "weight", true)) ||
      failed(verifyCenter(*this, getY(), getCenter())))
    return failure();
  double a = getAlpha().convertToDouble();
  if (!(a > 0.0 && a <= 1.0))
    return emitOpError() << "expected step size alpha in (0, 1], got " << fmt(a);
  if (getCoeff().convertToDouble() < 0.0)
    return emitOpError() << "expected coeff >= 0, got "
                         << getCoeff().convertToDouble();
  return success();
}

//===----------------------------------------------------------------------===//
// Looped transformers
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::verify() {
  auto x = getX().getType(), y = getResult().getType();
  auto w = getWeight().getType(), b = getBias().getType();
  Type e = x.getElementType();
  if (w.getElementType() != e || b.getElementType() != e || y.getElementType() != e)
    return emitOpError("expected one element type for x, weight, bias and result");
  if (!w.hasStaticShape() || !b.hasStaticShape())
    return emitOpError() << "expected a static weight and bias, got " << w << " and " << b;
  if (x.isDynamicDim(2) || x.getDimSize(2) != w.getDimSize(1))
    return emitOpError() << "expected x with " << w.getDimSize(1)
                         << " features to match weight " << w << ", got " << x;
  if (b.getDimSize(0) != w.getDimSize(0))
    return emitOpError() << "expected a bias of " << w.getDimSize(0)
                         << " entries, got " << b;
  if (y.isDynamicDim(2) || y.getDimSize(2) != w.getDimSize(0))
    return emitOpError() << "expected a result with " << w.getDimSize(0)
                         << " features, got " << y;
  if (y.getDimSize(0) != x.getDimSize(0) || y.getDimSize(1) != x.getDimSize(1))
    return emitOpError() << "expected the result to keep x's batch and token "
                            "sizes, got " << y;
  return success();
}

LogicalResult LayerNormOp::verify() {
  auto x = getX().getType();
  if (x.isDynamicDim(2))
    return emitOpError() << "expected a static feature size, got " << x;
  for (Value v : {getGain(), getBias()}) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t != RankedTensorType::get({x.getDimSize(2)}, x.getElementType()))
      return emitOpError() << "expected gain and bias of type "
                           << RankedTensorType::get({x.getDimSize(2)}, x.getElementType())
                           << ", got " << t;
  }
  double eps = getEps().convertToDouble();
  if (!(eps > 0.0))
    return emitOpError() << "expected eps > 0, got " << fmt(eps);
  return success();
}

LogicalResult AttentionOp::verify() {
  auto q = getQkv().getType(), y = getResult().getType();
  int64_t h = getHeads();
  if (q.isDynamicDim(2) || q.getDimSize(2) % 3 != 0)
    return emitOpError() << "expected qkv with 3·D features, got " << q;
  int64_t d = q.getDimSize(2) / 3;
  if (d % h != 0)
    return emitOpError() << "expected " << h << " heads to divide D = " << d;
  if (y.getElementType() != q.getElementType() || y.isDynamicDim(2) ||
      y.getDimSize(2) != d || y.getDimSize(0) != q.getDimSize(0) ||
      y.getDimSize(1) != q.getDimSize(1))
    return emitOpError() << "expected a result of D = " << d
                         << " features and qkv's batch and token sizes, got " << y;
  return success();
}

LogicalResult PositionEmbedOp::verify() {
  auto x = getX().getType(), t = getTable().getType();
  if (!t.hasStaticShape() || x.isDynamicDim(2) || t.getDimSize(1) != x.getDimSize(2) ||
      t.getElementType() != x.getElementType())
    return emitOpError() << "expected a static [positions, " << x.getDimSize(2)
                         << "] table, got " << t;
  if (!x.isDynamicDim(1) && x.getDimSize(1) > t.getDimSize(0))
    return emitOpError() << "expected at most " << t.getDimSize(0)
                         << " tokens for the table, got " << x.getDimSize(1);
  return success();
}

LogicalResult AccumulateGradOp::verify() {
  auto arg = dyn_cast<BlockArgument>(getParam());
  bool energyInput = arg && arg.getArgNumber() == 1 &&
                     isa_and_nonnull<EnergyOp>(arg.getOwner()->getParentOp());
  if (!getParam().getDefiningOp<ParamOp>() && !energyInput)
    return emitOpError("expected the gradient of an 'unroll.param' or of an "
                       "energy's input X");
  if (getParam().getType() != getGrad().getType())
    return emitOpError() << "expected a gradient of type " << getParam().getType()
                         << ", got " << getGrad().getType();
  return success();
}

LoopOp ModelOp::getLoop() {
  for (Operation &op : getBody().front())
    if (auto l = dyn_cast<LoopOp>(op))
      return l;
  return {};
}

OutputOp ModelOp::getOutput() {
  Block &b = getBody().front();
  return b.empty() ? OutputOp() : dyn_cast<OutputOp>(b.back());
}

/// Ops allowed in the read-in, loop body and head: those that have a VJP.
static bool isModelStepOp(Operation *op) {
  return isa<ParamOp, LinearOp, LayerNormOp, AttentionOp, GeluOp, AddOp,
             PositionEmbedOp>(op);
}

LogicalResult ModelOp::verifyRegions() {
  Block &body = getBody().front();
  if (body.getNumArguments() != 1)
    return emitOpError() << "expected the body to take the prompt tokens Z, got "
                         << body.getNumArguments() << " arguments";
  auto z = dyn_cast<RankedTensorType>(body.getArgument(0).getType());
  if (!z || z.getRank() != 3 || z.isDynamicDim(2) ||
      !isa<Float32Type, Float64Type>(z.getElementType()))
    return emitOpError() << "expected Z to be a [B, n, d] f32 or f64 tensor with "
                            "static d, got " << body.getArgument(0).getType();
  if (body.empty() || !isa<OutputOp>(body.back()))
    return emitOpError("expected the body to end with 'unroll.output'");
  unsigned loops = 0;
  for (Operation &op : body.without_terminator()) {
    if (isa<LoopOp>(op)) {
      ++loops;
      continue;
    }
    if (!isModelStepOp(&op))
      return op.emitOpError("is not supported in a model body (supported: "
                            "param, linear, layer_norm, attention, gelu, add, "
                            "position_embed, one loop)");
    for (Type t : op.getResultTypes())
      if (auto rt = dyn_cast<RankedTensorType>(t); rt && rt.getElementType() != z.getElementType())
        return op.emitOpError() << "expected element type " << z.getElementType();
  }
  if (loops != 1)
    return emitOpError() << "expected exactly one 'unroll.loop', got " << loops;
  auto out = getOutput().getPredictions().getType();
  if (out.isDynamicDim(2) || out.getDimSize(2) != 1)
    return emitOpError() << "expected predictions [B, n, 1], got " << out;
  // The head must depend on the loop's result, not on values before it other
  // than parameters (it is re-run on every iterate the loss sees).
  LoopOp loop = getLoop();
  for (Operation *op = loop->getNextNode(); op && op != &body.back(); op = op->getNextNode())
    for (Value v : op->getOperands()) {
      Operation *d = v.getDefiningOp();
      if (v == loop.getResult() || isa_and_nonnull<ParamOp>(d) ||
          (d && d->getBlock() == &body && loop->isBeforeInBlock(d)))
        continue;
      return op->emitOpError("expected the read-out to use only the loop's "
                             "result, parameters and read-out values");
    }
  return verifyParams(getOperation());
}

LogicalResult LoopOp::verifyRegions() {
  if (getWindow() > getIterations())
    return emitOpError() << "expected window T <= iterations b, got T = "
                         << getWindow() << " > b = " << getIterations();
  Block &b = getBody().front();
  if (b.getNumArguments() != 1 || b.getArgument(0).getType() != getInput().getType())
    return emitOpError() << "expected the body to take one " << getInput().getType();
  auto y = b.empty() ? YieldOp() : dyn_cast<YieldOp>(b.back());
  if (!y || y.getValues().size() != 1 || y.getValues()[0].getType() != getInput().getType())
    return emitOpError() << "expected the body to yield the next state of type "
                         << getInput().getType();
  for (Operation &op : b.without_terminator())
    if (!isModelStepOp(&op))
      return op.emitOpError("is not supported in a loop body (supported: "
                            "param, linear, layer_norm, attention, gelu, add, "
                            "position_embed)");
  return success();
}
