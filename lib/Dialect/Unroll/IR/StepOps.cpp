//===- StepOps.cpp - descent-step ops: verifiers and VJP rules ------------===//
//
// unroll.mm_step, unroll.grad_step and unroll.prox_nonneg: their verifiers
// and their gradient rules (VJPOpInterface).
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
// Step ops
//===----------------------------------------------------------------------===//

LogicalResult MMStepOp::verify() {
  Type elem = getY().getType().getElementType();
  if (getProj() && failed(verifyFeatureMatrix(*this, getY(), getProj(), "proj", false)))
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
  if (getQuad()) {
    if (getVariant() != AttentionVariant::certified)
      return emitOpError("a 'quad' weight requires variant(certified)");
    if (failed(verifyFeatureMatrix(*this, getY(), getQuad(), "quad", true)))
      return failure();
  }
  if (getCoeff().convertToDouble() < 0.0)
    return emitOpError() << "expected coeff >= 0, got " << getCoeff().convertToDouble();
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
    return emitOpError() << "expected coeff >= 0, got " << getCoeff().convertToDouble();
  if (Value s = getStep()) {
    auto st = cast<RankedTensorType>(s.getType());
    auto want = RankedTensorType::get({1}, getY().getType().getElementType());
    if (st != want)
      return emitOpError() << "expected a step size of type " << want << ", got " << st;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// DescendOp
//===----------------------------------------------------------------------===//

LogicalResult DescendOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto energy = symbols.lookupNearestSymbolFrom<EnergyOp>(*this, getEnergyAttr());
  if (!energy)
    return emitOpError() << "expected '" << getEnergy() << "' to name an 'unroll.energy'";
  RankedTensorType tok = energy.getTokenType(), y = getY().getType();
  if (tok.getElementType() != y.getElementType() || tok.isDynamicDim(1) ||
      tok.getDimSize(1) != y.getDimSize(2))
    return emitOpError() << "expected tokens with the " << tok.getDimSize(1) << " features and "
                         << tok.getElementType() << " of @" << getEnergy() << "'s " << tok
                         << ", got " << y;
  if (!tok.isDynamicDim(0))
    return emitOpError() << "expected @" << getEnergy()
                         << " to take any number of tokens (its Y is " << tok << ")";
  // X: the energy's input on the batch, of Y's type or (a loop reading data)
  // [B, n, m] for an energy whose input has m features of its own.
  auto in = cast<RankedTensorType>(energy.getInput().getType());
  auto x = cast<RankedTensorType>(getX().getType());
  if (x != y && (in.isDynamicDim(1) || x.getElementType() != y.getElementType() ||
                 x.isDynamicDim(2) || x.getDimSize(2) != in.getDimSize(1) ||
                 x.getShape()[0] != y.getShape()[0] || x.getShape()[1] != y.getShape()[1]))
    return emitOpError() << "expected X to be Y's " << y << " or the batch of @" << getEnergy()
                         << "'s input " << in << " (with Y's batch and token sizes), got " << x;
  if (getPrev() && getPrev().getType() != getY().getType())
    return emitOpError() << "expected 'prev' of type " << getY().getType() << ", got "
                         << getPrev().getType();
  // What the derived steps take beyond (Y, X): the iteration index, then
  // the previous iterate.
  unsigned wants = energy.getSteps().empty() ? 2 : energy.getSteps().front().getNumArguments();
  if (wants >= 3 && !getIteration())
    return emitOpError() << "@" << getEnergy()
                         << "'s steps take the iteration index: pass `iteration %k` (a loop "
                            "body's third argument)";
  if (wants == 4 && !getPrev())
    return emitOpError() << "@" << getEnergy()
                         << "'s steps take the previous iterate: pass `prev %u_prev` (a loop "
                            "body's fourth argument)";
  return success();
}

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

LogicalResult ProxNonNegOp::buildVJP(OpBuilder &b, ReverseMode &rm) {
  Value dy = rm.cotangent(getResult());
  auto v = b.create<ProxNonNegVJPOp>(getLoc(), getY().getType(), getY(), dy);
  return rm.addCotangent(*this, getY(), v);
}

LogicalResult GradStepOp::buildVJP(OpBuilder &b, ReverseMode &rm) {
  Value dy = rm.cotangent(getResult());
  Type tok = getY().getType();
  Type dstepTy = getStep() ? getStep().getType() : Type();
  auto v = b.create<GradStepVJPOp>(getLoc(), tok, getWeight().getType(), tok, dstepTy, getY(),
                                   getWeight(), dy, getCenter(), getStep(), getAlphaAttr(),
                                   getCoeffAttr());
  if (failed(rm.addCotangent(*this, getY(), v.getDx())) ||
      failed(rm.addCotangent(*this, getWeight(), v.getDweight())))
    return failure();
  if (getCenter() && failed(rm.addCotangent(*this, getCenter(), v.getDcenter())))
    return failure();
  if (getStep())
    return rm.addCotangent(*this, getStep(), v.getDstep());
  return success();
}

LogicalResult MMStepOp::buildVJP(OpBuilder &b, ReverseMode &rm) {
  Value dy = rm.cotangent(getResult());
  bool certified = getVariant() == AttentionVariant::certified;
  Type dprojTy = getProj() ? getProj().getType() : Type();
  Value center = certified ? getCenter() : Value();
  Type dcenterTy = center ? center.getType() : Type();
  Type dquadTy = getQuad() ? getQuad().getType() : Type();
  auto v = b.create<MMStepVJPOp>(getLoc(), getY().getType(), dprojTy, dcenterTy, dquadTy, getY(),
                                 getProj(), dy, center, getQuad(), getFormAttr(), getVariantAttr(),
                                 getMaskAttr(), getGraphAttr(), getCoeffAttr());
  // The VJP's weight region yields (rho'(z), rho''(z)).
  if (getForm() == WeightForm::general)
    differentiateScalarRegion(getWeightBody(), v.getWeightBody(), getLoc(),
                              /*yieldPrimal=*/true);
  if (failed(rm.addCotangent(*this, getY(), v.getDx())))
    return failure();
  if (getProj() && failed(rm.addCotangent(*this, getProj(), v.getDproj())))
    return failure();
  if (center && failed(rm.addCotangent(*this, center, v.getDcenter())))
    return failure();
  if (getQuad())
    return rm.addCotangent(*this, getQuad(), v.getDquad());
  return success();
}

LogicalResult IstaStepOp::buildVJP(OpBuilder &b, ReverseMode &rm) {
  Value dy = rm.cotangent(getResult());
  auto v = b.create<IstaStepVJPOp>(getLoc(), getY().getType(), getX().getType(),
                                   getDict().getType(), getY(), getX(), getDict(), dy,
                                   getLambdaAttr(), getNonnegAttr(), getPowerIterationsAttr());
  if (failed(rm.addCotangent(*this, getY(), v.getDx())) ||
      failed(rm.addCotangent(*this, getX(), v.getDinput())))
    return failure();
  return rm.addCotangent(*this, getDict(), v.getDdict());
}

LogicalResult ExtrapolateOp::buildVJP(OpBuilder &b, ReverseMode &rm) {
  Value dz = rm.cotangent(getResult());
  auto v = b.create<ExtrapolateVJPOp>(getLoc(), getY().getType(), getY().getType(), dz, getLayer());
  if (failed(rm.addCotangent(*this, getY(), v.getDx())))
    return failure();
  return rm.addCotangent(*this, getPrev(), v.getDprev());
}

LogicalResult CccpStepOp::buildVJP(OpBuilder &b, ReverseMode &rm) {
  Value dy = rm.cotangent(getResult());
  auto v = b.create<CccpStepVJPOp>(getLoc(), getY().getType(), getX().getType(), getY(), getX(), dy,
                                   getBetaAttr(), getCoeffAttr());
  if (failed(rm.addCotangent(*this, getY(), v.getDx())))
    return failure();
  return rm.addCotangent(*this, getX(), v.getDinput());
}

LogicalResult ListaStepOp::verify() {
  auto yt = getY().getType(), xt = getX().getType();
  auto at = getDict().getType(), wt = getWeight().getType();
  Type el = yt.getElementType();
  for (Type t : {xt.getElementType(), at.getElementType(), wt.getElementType(),
                 getGamma().getType().getElementType(), getTheta().getType().getElementType()})
    if (t != el)
      return emitOpError() << "expected every operand of element type " << el << ", got " << t;
  if (!at.hasStaticShape() || !wt.hasStaticShape())
    return emitOpError("expected static shapes of A and W");
  int64_t m = at.getDimSize(0), n = at.getDimSize(1);
  if (yt.getDimSize(yt.getRank() - 1) != n || xt.getDimSize(xt.getRank() - 1) != m)
    return emitOpError() << "expected codes of size " << n << " and measurements of size " << m
                         << " (A is " << at << "), got " << yt << " and " << xt;
  int64_t layers = getGamma().getType().getDimSize(0);
  if (getTheta().getType() != getGamma().getType() || ShapedType::isDynamic(layers))
    return emitOpError() << "expected gamma and theta of one static type [K], got "
                         << getGamma().getType() << " and " << getTheta().getType();
  bool shared = wt.getRank() == 2 && wt.getShape() == at.getShape();
  bool untied = wt.getRank() == 3 && wt.getDimSize(0) == layers && wt.getDimSize(1) == m &&
                wt.getDimSize(2) == n;
  if (!shared && !untied)
    return emitOpError() << "expected W of A's shape [" << m << ", " << n << "] (shared) or ["
                         << layers << ", " << m << ", " << n << "] (one per layer), got " << wt;
  if (Value w2 = getW2()) {
    auto t = cast<RankedTensorType>(w2.getType());
    bool ok = t.getElementType() == el && t.hasStaticShape() &&
              ((t.getRank() == 2 && t.getDimSize(0) == n && t.getDimSize(1) == n) ||
               (t.getRank() == 3 && t.getDimSize(0) == layers && t.getDimSize(1) == n &&
                t.getDimSize(2) == n));
    if (!ok)
      return emitOpError() << "expected w2 of shape [" << n << ", " << n << "] (shared) or ["
                           << layers << ", " << n << ", " << n << "] (one per layer), got " << t;
  }
  return success();
}

LogicalResult ListaStepOp::buildVJP(OpBuilder &b, ReverseMode &rm) {
  Value dy = rm.cotangent(getResult());
  SmallVector<Type> types{getY().getType(), getX().getType(), getDict().getType(),
                          getWeight().getType()};
  SmallVector<Value> operands{getY(), getX(), getDict(), getWeight()};
  if (getW2()) {
    types.push_back(getW2().getType());
    operands.push_back(getW2());
  }
  types.append({getGamma().getType(), getTheta().getType()});
  operands.append({getGamma(), getTheta(), getLayer(), dy});
  auto v = b.create<ListaStepVJPOp>(getLoc(), types, operands);
  v.setNonneg(getNonneg());
  v.setSupport(getSupport());
  if (getW2() && failed(rm.addCotangent(*this, getW2(), v.getDw2())))
    return failure();
  if (failed(rm.addCotangent(*this, getY(), v.getDx())) ||
      failed(rm.addCotangent(*this, getX(), v.getDinput())) ||
      failed(rm.addCotangent(*this, getDict(), v.getDdict())) ||
      failed(rm.addCotangent(*this, getWeight(), v.getDweight())) ||
      failed(rm.addCotangent(*this, getGamma(), v.getDgamma())))
    return failure();
  return rm.addCotangent(*this, getTheta(), v.getDtheta());
}
