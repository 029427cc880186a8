//===- EnergyOps.cpp - verifiers of the energy-level ops ------------------===//
//
// unroll.energy, unroll.param, the terms (pairwise, quadratic, sqnorm,
// nonneg) and unroll.minimize. Verifiers reject what the theory rejects
// (rho not concave or not non-decreasing, a non-convex regularizer, a
// schedule without a step for a term) with a located diagnostic.
//
//===----------------------------------------------------------------------===//
#include "Verify.h"
#include "unroll/Dialect/Unroll/IR/ScalarRegion.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <cmath>

using namespace mlir;
using namespace mlir::unroll;
using namespace mlir::unroll::detail;

//===----------------------------------------------------------------------===//
// EnergyOp
//===----------------------------------------------------------------------===//

MinimizeOp EnergyOp::getMinimize() {
  Block &b = getBody().front();
  return b.empty() ? MinimizeOp() : dyn_cast<MinimizeOp>(b.back());
}

LogicalResult EnergyOp::verifyRegions() {
  Block &body = getBody().front();
  if (body.getNumArguments() != 2)
    return emitOpError() << "expected the body to take (Y, X), got " << body.getNumArguments()
                         << " arguments";
  Type yt = body.getArgument(0).getType();
  auto rt = dyn_cast<RankedTensorType>(yt);
  if (!rt || rt.getRank() != 2 || !isa<Float32Type, Float64Type>(rt.getElementType()))
    return emitOpError() << "expected Y to be a 2-d f32 or f64 tensor, got " << yt;
  if (failed(detail::verifyTensorSize(*this, yt, "tokens Y")))
    return failure();
  Type xt = body.getArgument(1).getType();
  auto xr = dyn_cast<RankedTensorType>(xt);
  if (!xr || xr.getRank() != 2 || xr.getElementType() != rt.getElementType())
    return emitOpError() << "expected X to be a 2-d tensor of " << rt.getElementType()
                         << " (Y's element type), got " << xt;
  if (failed(detail::verifyTensorSize(*this, xt, "input X")))
    return failure();
  if (body.empty() || !isa<MinimizeOp>(body.back()))
    return emitOpError("expected the body to end with 'unroll.minimize'");
  // The transformer schedules descend from Y_0 = X: X is a token matrix.
  Schedule schedule = getMinimize().getSchedule();
  if (schedule != Schedule::ista && schedule != Schedule::fista && schedule != Schedule::cccp &&
      xt != yt)
    return emitOpError() << "expected X of type " << yt << ", got " << xt << " (schedule '"
                         << stringifySchedule(schedule)
                         << "' descends from Y_0 = X; only 'ista' and 'cccp' read X as data)";
  for (Operation &op : body.without_terminator()) {
    if (isa<MinimizeOp, YieldOp>(op))
      return op.emitOpError("must be the last op of the energy body");
    bool isTerm = op.getNumResults() == 1 && isa<EnergyType>(op.getResult(0).getType());
    if (isTerm && (op.getNumOperands() == 0 || op.getOperand(0) != body.getArgument(0)))
      return op.emitOpError("expected an energy term of the energy's variable "
                            "Y (the body's first argument)");
  }
  if (!getSteps().empty()) {
    Block &steps = getSteps().front();
    unsigned na = steps.getNumArguments();
    if (na < 2 || na > 4 || steps.getArgument(0).getType() != yt ||
        steps.getArgument(1).getType() != xt ||
        (na >= 3 && !steps.getArgument(2).getType().isIndex()) ||
        (na == 4 && steps.getArgument(3).getType() != yt))
      return emitOpError("expected the steps region to take (Y, X) like the "
                         "body, optionally the iteration index k: index, and then the previous "
                         "iterate Y_prev (a second loop state)");
    auto yield = steps.empty() ? YieldOp() : dyn_cast<YieldOp>(steps.back());
    if (!yield || yield.getValues().size() != 1 || yield.getValues()[0].getType() != yt)
      return emitOpError() << "expected the steps region to yield the next Y "
                              "of type "
                           << yt;
  }
  if (!getReverse().empty()) {
    Block &rev = getReverse().front();
    auto yield = rev.empty() ? YieldOp() : dyn_cast<YieldOp>(rev.back());
    unsigned stepArgs = getSteps().empty() ? 2 : getSteps().front().getNumArguments();
    unsigned yields = stepArgs == 4 ? 2 : 1;
    if (rev.getNumArguments() != stepArgs + 1 || !yield || yield.getValues().size() != yields)
      return emitOpError("expected the reverse region to take (Y, X, dY'[, k[, Y_prev]]) and "
                         "yield dY (and dY_prev)");
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
  if (failed(detail::verifyTensorSize(*this, getType(), "a parameter")))
    return failure();
  double sd = getStd().convertToDouble();
  if (!(sd >= 0.0) || !std::isfinite(sd))
    return emitOpError() << "expected a finite std >= 0, got " << fmt(sd);
  bool constant = getInit() == InitKind::constant;
  if (constant != getValue().has_value())
    return emitOpError(constant ? "init(constant) requires a 'value' attribute"
                                : "a 'value' attribute requires init(constant)");
  if (constant && !std::isfinite(getValue()->convertToDouble()))
    return emitOpError() << "expected a finite value, got " << fmt(getValue()->convertToDouble());
  return success();
}

//===----------------------------------------------------------------------===//
// PairwiseOp
//===----------------------------------------------------------------------===//

/// Samples a user-written rho on z >= 0 and rejects it where rho' < 0 (not
/// non-decreasing), rho'' > 0 (not concave) or a value is not finite. The
/// derivatives come from hyper-dual evaluation of the region, i.e. exactly
/// the rho' and rho'' that symbolic differentiation builds.
LogicalResult mlir::unroll::detail::checkConcaveNonDecreasing(Operation *op, Region &rho) {
  std::vector<double> zs;
  for (int i = 0; i <= 1000; ++i) // dense near 0, where most rho bend
    zs.push_back(0.01 * i);
  for (int i = 0; i <= 1200; ++i) // log-spaced out to 1e6
    zs.push_back(std::pow(10.0, -8.0 + 14.0 * i / 1200.0));
  for (double z : zs) {
    Dual2 r = evaluateScalarRegion(rho, z);
    if (!std::isfinite(r.v) || !std::isfinite(r.d) || !std::isfinite(r.dd))
      return op->emitOpError() << "expected rho to be finite on z >= 0, got "
                                  "rho("
                               << fmt(z) << ") = " << fmt(r.v) << ", rho' = " << fmt(r.d)
                               << ", rho'' = " << fmt(r.dd);
    double tol = 1e-12 * (1.0 + std::abs(r.v));
    if (r.d < -tol)
      return op->emitOpError() << "expected rho to be non-decreasing on z >= 0, got rho'(" << fmt(z)
                               << ") = " << fmt(r.d);
    if (r.dd > tol)
      return op->emitOpError() << "expected rho to be concave on z >= 0, got rho''(" << fmt(z)
                               << ") = " << fmt(r.dd);
  }
  return success();
}

LogicalResult PairwiseOp::verify() {
  Type elem = getY().getType().getElementType();
  if (getProj() && failed(verifyFeatureMatrix(*this, getY(), getProj(), "proj", false)))
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

/// The feature size (last dimension) of a token matrix or batch.
static int64_t features(RankedTensorType t) { return t.getDimSize(t.getRank() - 1); }

LogicalResult LsqOp::verify() {
  auto yt = getY().getType(), xt = getX().getType();
  auto at = getDict().getType();
  if (at.getElementType() != yt.getElementType() || xt.getElementType() != yt.getElementType())
    return emitOpError() << "expected Y, X and A of one element type, got " << yt << ", " << xt
                         << " and " << at;
  if (!at.hasStaticShape())
    return emitOpError() << "expected a static dictionary A [m, n], got " << at;
  if (xt.getRank() != yt.getRank())
    return emitOpError() << "expected X of Y's rank " << yt.getRank() << ", got " << xt;
  if (ShapedType::isDynamic(features(yt)) || features(yt) != at.getDimSize(1))
    return emitOpError() << "expected A [m, n] with n = the codes' size (Y is " << yt << "), got A "
                         << at;
  if (ShapedType::isDynamic(features(xt)) || features(xt) != at.getDimSize(0))
    return emitOpError() << "expected A [m, n] with m = the measurements' size (X is " << xt
                         << "), got A " << at;
  for (int64_t i = 0; i + 1 < yt.getRank(); ++i)
    if (!yt.isDynamicDim(i) && !xt.isDynamicDim(i) && yt.getDimSize(i) != xt.getDimSize(i))
      return emitOpError() << "expected one measurement per code: Y " << yt << " and X " << xt
                           << " differ in dimension " << i;
  return success();
}

LogicalResult L1Op::verify() {
  double l = getLambda().convertToDouble();
  if (!(l >= 0.0) || !std::isfinite(l))
    return emitOpError() << "expected a finite lambda >= 0, got " << fmt(l);
  return success();
}

LogicalResult LseOp::verify() {
  double beta = getBeta().convertToDouble();
  if (!(beta > 0.0) || !std::isfinite(beta))
    return emitOpError() << "expected a finite beta > 0, got " << fmt(beta);
  auto yt = getY().getType(), xt = getX().getType();
  if (xt.getElementType() != yt.getElementType() || xt.getRank() != yt.getRank())
    return emitOpError() << "expected a memory X of Y's rank and element type, got " << xt
                         << " for Y " << yt;
  if (ShapedType::isDynamic(features(yt)) || features(yt) != features(xt))
    return emitOpError() << "expected stored patterns (rows of X) of the queries' static size "
                         << features(yt) << ", got X " << xt;
  return success();
}

//===----------------------------------------------------------------------===//
// MinimizeOp
//===----------------------------------------------------------------------===//

/// Sparse coding (`ista`) and Hopfield (`cccp`) energies: their terms are
/// fixed by the schedule.
static LogicalResult verifyOptimizationSchedule(MinimizeOp op, unsigned total, unsigned lsq,
                                                unsigned l1, unsigned lse, unsigned sqnorm) {
  StringRef name = stringifySchedule(op.getSchedule());
  if (op.getAlpha() || op.getLearnable() || op.getAttention() != AttentionVariant::paper)
    return op.emitOpError() << "schedule '" << name
                            << "' takes no alpha, learnable or attention: its step size follows "
                               "from the energy";
  if (op.getSchedule() == Schedule::ista || op.getSchedule() == Schedule::fista) {
    if (lsq != 1 || l1 != 1 || total != 2)
      return op.emitOpError() << "schedule '" << name
                              << "' expected exactly one 'unroll.lsq' and one "
                                 "'unroll.l1' term, got "
                              << total << " terms";
    return success();
  }
  if (lse != 1 || sqnorm != 1 || total != 2)
    return op.emitOpError() << "schedule 'cccp' expected exactly one 'unroll.lse' and one "
                               "'unroll.sqnorm' term, got "
                            << total << " terms";
  for (Value t : op.getTerms())
    if (auto r = t.getDefiningOp<SqNormOp>(); r && r.getCenter())
      return r.emitOpError("schedule 'cccp' needs the regularizer without a center");
  return success();
}

static bool isKernelSchedule(Schedule s) {
  return s == Schedule::gd || s == Schedule::line_search || s == Schedule::cg ||
         s == Schedule::nesterov;
}

/// Kernel energies: one unroll.kernel_pairwise term; the step sizes each
/// schedule takes.
static LogicalResult verifyKernelSchedule(MinimizeOp op, unsigned total, unsigned kernels) {

  Schedule s = op.getSchedule();
  StringRef name = stringifySchedule(s);
  if (kernels != 1 || total != 1)
    return op.emitOpError() << "schedule '" << name
                            << "' expected exactly one 'unroll.kernel_pairwise' term, got " << total
                            << " terms";
  if (op.getAttention() != AttentionVariant::paper)
    return op.emitOpError() << "schedule '" << name << "' takes no attention(...)";
  bool adaptive = s == Schedule::line_search || s == Schedule::cg;
  if (adaptive && (op.getAlpha() || op.getLearnable() || op.getMomentum() || op.getPerIteration()))
    return op.emitOpError() << "schedule '" << name
                            << "' finds each prompt's step length by exact line search: it takes "
                               "no alpha, momentum, learnable or per_iteration";
  if (!adaptive) {
    if (!op.getAlpha())
      return op.emitOpError() << "schedule '" << name << "' expected a step size alpha(...)";
    double a = op.getAlpha()->convertToDouble();
    if (!(a > 0.0) || !std::isfinite(a))
      return op.emitOpError() << "expected a finite step size alpha > 0, got " << fmt(a);
  }
  if (s == Schedule::nesterov) {
    if (!op.getMomentum())
      return op.emitOpError("schedule 'nesterov' expected a momentum(...)");
    double m = op.getMomentum()->convertToDouble();
    if (!(m >= 0.0 && m < 1.0))
      return op.emitOpError() << "expected momentum in [0, 1), got " << fmt(m);
  } else if (op.getMomentum()) {
    return op.emitOpError() << "schedule '" << name << "' takes no momentum(...)";
  }
  if (op.getPerIteration() && !op.getLearnable())
    return op.emitOpError("'per_iteration' learns one step size per iteration: it needs "
                          "'learnable'");
  if (op.getEps()) {
    double e = op.getEps()->convertToDouble();
    if (!adaptive)
      return op.emitOpError() << "schedule '" << name
                              << "' takes no eps (only line_search and cg measure curvature)";
    if (!(e >= 0.0 && e < 1.0))
      return op.emitOpError() << "expected eps in [0, 1), got " << fmt(e);
  }
  return success();
}

LogicalResult MinimizeOp::verify() {
  unsigned pairwise = 0, quadratic = 0, sqnorm = 0, nonneg = 0, lsq = 0, l1 = 0, lse = 0,
           kernels = 0;
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
    else if (isa<LsqOp>(def))
      ++lsq;
    else if (isa<L1Op>(def))
      ++l1;
    else if (isa<LseOp>(def))
      ++lse;
    else if (isa<KernelPairwiseOp>(def))
      ++kernels;
  }
  if (isKernelSchedule(getSchedule()))
    return verifyKernelSchedule(*this, getTerms().size(), kernels);
  if (kernels)
    return emitOpError() << "schedule '" << stringifySchedule(getSchedule())
                         << "' has no step for 'unroll.kernel_pairwise'; use 'gd', "
                            "'line_search', 'cg' or 'nesterov'";
  if (getPerIteration() || getMomentum() || getEps())
    return emitOpError() << "per_iteration, momentum and eps are for the kernel schedules (gd, "
                            "line_search, cg, nesterov)";
  if (getSchedule() == Schedule::ista || getSchedule() == Schedule::fista ||
      getSchedule() == Schedule::cccp)
    return verifyOptimizationSchedule(*this, getTerms().size(), lsq, l1, lse, sqnorm);
  if (lsq || l1 || lse)
    return emitOpError() << "schedule '" << stringifySchedule(getSchedule()) << "' has no step for "
                         << (lsq  ? "'unroll.lsq'"
                             : l1 ? "'unroll.l1'"
                                  : "'unroll.lse'")
                         << "; use 'ista' (lsq + l1) or 'cccp' (lse + sqnorm)";
  if (pairwise != 1)
    return emitOpError() << "expected exactly one 'unroll.pairwise' term, got " << pairwise;
  if (sqnorm > 1)
    return emitOpError() << "expected at most one 'unroll.sqnorm' term, got " << sqnorm;
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
    return emitOpError() << "schedule '" << name << "' expected an 'unroll.quadratic' term";
  if (s == Schedule::aim && nonneg)
    return emitOpError("schedule 'aim' has no step for 'unroll.nonneg'; use "
                       "'proximal_aim'");
  if (s == Schedule::proximal_aim && !nonneg)
    return emitOpError("schedule 'proximal_aim' expected an 'unroll.nonneg' "
                       "term");
  bool certified = getAttention() == AttentionVariant::certified;
  if (certified && s != Schedule::single && getAlpha())
    return emitOpError("attention(certified) takes one step of size 1/L (a bound of the whole "
                       "energy's curvature) on all its terms: remove alpha(...)");
  if (s != Schedule::single && !certified) {
    if (!getAlpha())
      return emitOpError() << "schedule '" << name << "' expected a step size alpha(...)";
    double a = getAlpha()->convertToDouble();
    if (!(a > 0.0 && a <= 1.0))
      return emitOpError() << "expected step size alpha in (0, 1], got " << fmt(a);
  } else if (getAlpha()) {
    return emitOpError("schedule 'single' takes no alpha");
  }
  if (getLearnable() && !getAlpha())
    return emitOpError("'learnable' needs a step size alpha(...) to start from");
  if (getLearnable() && getAttention() == AttentionVariant::certified)
    return emitOpError("'learnable' has no step size to learn with attention(certified): its "
                       "step size is 1/L, from a bound of the whole energy's curvature");
  return success();
}
