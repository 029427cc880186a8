//===- DeriveSteps.cpp - energy -> descent steps --------------------------===//
//
// Implements --unroll-derive-steps: reads an energy's terms and schedule and
// writes one descent iteration into its `steps` region.
//
//===----------------------------------------------------------------------===//
#include "unroll/Dialect/Unroll/IR/ScalarRegion.h"
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"
#include "unroll/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"

#include <cmath>

namespace mlir::unroll {
#define GEN_PASS_DEF_UNROLLDERIVESTEPS
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;
using namespace mlir::unroll;

namespace {

/// The terms of an energy, by role.
struct Terms {
  PairwiseOp pairwise;
  QuadraticOp quadratic;
  SqNormOp sqnorm;
  NonNegOp nonneg;
  LsqOp lsq;
  L1Op l1;
  LseOp lse;
};

Terms collectTerms(MinimizeOp min) {
  Terms t;
  for (Value v : min.getTerms()) {
    Operation *def = v.getDefiningOp();
    if (auto p = dyn_cast<PairwiseOp>(def))
      t.pairwise = p;
    else if (auto q = dyn_cast<QuadraticOp>(def))
      t.quadratic = q;
    else if (auto r = dyn_cast<SqNormOp>(def))
      t.sqnorm = r;
    else if (auto n = dyn_cast<NonNegOp>(def))
      t.nonneg = n;
    else if (auto l = dyn_cast<LsqOp>(def))
      t.lsq = l;
    else if (auto l = dyn_cast<L1Op>(def))
      t.l1 = l;
    else if (auto l = dyn_cast<LseOp>(def))
      t.lse = l;
  }
  return t;
}

/// Checks the derived rho' region against the hyper-dual derivative of rho
/// at a few points: a guard against a wrong differentiation rule.
LogicalResult checkDerivative(Operation *op, Region &rho, Region &rhoPrime) {
  for (double z : {0.0, 0.3, 1.0, 2.5, 10.0, 100.0}) {
    double want = evaluateScalarRegion(rho, z).d;
    double got = evaluateScalarRegion(rhoPrime, z).v;
    if (!(std::abs(got - want) <= 1e-9 * (1.0 + std::abs(want))))
      return op->emitOpError() << "internal error: derived rho'(" << z << ") = " << got
                               << " but expected " << want;
  }
  return success();
}

struct DeriveStepsPass : public unroll::impl::UnrollDeriveStepsBase<DeriveStepsPass> {
  using UnrollDeriveStepsBase::UnrollDeriveStepsBase;

  LogicalResult derive(EnergyOp energy);
  void runOnOperation() override {
    for (auto energy : getOperation().getOps<EnergyOp>())
      if (energy.getSteps().empty() && failed(derive(energy)))
        return signalPassFailure();
  }
};

LogicalResult DeriveStepsPass::derive(EnergyOp energy) {
  MinimizeOp min = energy.getMinimize();
  Terms terms = collectTerms(min);
  Location loc = min.getLoc();
  Type tokenTy = energy.getTokenType();
  Type elemTy = energy.getTokenType().getElementType();

  Block *steps = new Block();
  energy.getSteps().push_back(steps);
  Value y = steps->addArgument(tokenTy, energy.getVariable().getLoc());
  Value x = steps->addArgument(energy.getInput().getType(), energy.getInput().getLoc());
  OpBuilder b = OpBuilder::atBlockEnd(steps);

  // Operands of the terms are Y, X or parameters; parameters are re-declared
  // by name inside the steps region (the region is isolated from the body).
  IRMapping map;
  map.map(energy.getVariable(), y);
  map.map(energy.getInput(), x);
  auto operand = [&](Value v) -> Value {
    if (!v)
      return {};
    if (Value m = map.lookupOrNull(v))
      return m;
    Operation *def = v.getDefiningOp();
    if (!isa_and_nonnull<ParamOp>(def)) {
      min.emitOpError("expected term operands to be Y, X or unroll.param");
      return {};
    }
    return b.clone(*def, map)->getResult(0);
  };

  double coeff = terms.sqnorm ? terms.sqnorm.getCoeff().convertToDouble() : 0.0;

  // Sparse coding: one proximal-gradient step (gradient step of size 1/L on
  // the fit, then the prox of the l1 term: the soft threshold).
  if (min.getSchedule() == Schedule::ista || min.getSchedule() == Schedule::fista) {
    Value xin = operand(terms.lsq.getX()), dict = operand(terms.lsq.getDict());
    if (!xin || !dict)
      return failure();
    Value from = y;
    // FISTA: the same step at Y + μ_k (Y − Y_prev); k and Y_prev are the
    // steps region's third and fourth arguments (a second loop state).
    if (min.getSchedule() == Schedule::fista) {
      Value k = steps->addArgument(b.getIndexType(), loc);
      Value prev = steps->addArgument(tokenTy, loc);
      from = b.create<ExtrapolateOp>(loc, tokenTy, y, prev, k);
      ++numSteps;
    }
    Value next =
        b.create<IstaStepOp>(terms.lsq.getLoc(), tokenTy, from, xin, dict, terms.l1.getLambdaAttr(),
                             terms.l1.getNonnegAttr(), terms.lsq.getPowerIterationsAttr());
    b.create<YieldOp>(loc, ValueRange{next});
    ++numSteps, ++numEnergies;
    return success();
  }
  // Hopfield: the concave-convex step, the majorize-minimize step of the
  // log-sum-exp against the memory (attention of the queries to X).
  if (min.getSchedule() == Schedule::cccp) {
    Value memory = operand(terms.lse.getX());
    if (!memory)
      return failure();
    Value next = b.create<CccpStepOp>(terms.lse.getLoc(), tokenTy, y, memory,
                                      terms.lse.getBetaAttr(), b.getF64FloatAttr(coeff));
    b.create<YieldOp>(loc, ValueRange{next});
    ++numSteps, ++numEnergies;
    return success();
  }

  Value center = terms.sqnorm ? operand(terms.sqnorm.getCenter()) : Value();
  PairwiseOp pw = terms.pairwise;
  bool certified = min.getAttention() == AttentionVariant::certified;

  // Attention: majorize-minimize step on the pairwise term.
  WeightForm form = WeightForm::general;
  if (pw.getRho() == RhoKind::neg_exp && !certified)
    form = assumeUnitNorm ? WeightForm::softmax : WeightForm::reweighted_softmax;
  Value proj = operand(pw.getProj());
  if (pw.getProj() && !proj)
    return failure();
  // Certified with a quadratic term: one step on the majorizer of the whole
  // smooth part (attention, FFN and regularizer), so that no gradient step
  // of the quadratic alone follows (AIM's alternation does not guarantee
  // descent of the sum; this step does).
  Value quad;
  if (certified && min.getSchedule() != Schedule::single) {
    quad = operand(terms.quadratic.getWeight());
    if (!quad)
      return failure();
  }
  auto mm = b.create<MMStepOp>(pw.getLoc(), tokenTy, y, proj, certified ? center : Value(), quad,
                               form, min.getAttention(), pw.getMask(), pw.getGraphAttr(),
                               llvm::APFloat(certified ? coeff : 0.0));
  if (form == WeightForm::general) {
    Region rho;
    Region *rhoSrc = &pw.getRhoBody();
    if (pw.getRho() != RhoKind::custom) {
      buildBuiltinRho(rho, static_cast<int>(pw.getRho()), elemTy, pw.getLoc());
      rhoSrc = &rho;
    }
    differentiateScalarRegion(*rhoSrc, mm.getWeightBody(), pw.getLoc());
    if (failed(checkDerivative(pw, *rhoSrc, mm.getWeightBody())))
      return failure();
  }
  Value cur = mm.getResult();
  ++numSteps;

  // FFN: gradient step on the quadratic term (+ R).
  if (min.getSchedule() != Schedule::single && !quad) {
    QuadraticOp q = terms.quadratic;
    Value w = operand(q.getWeight());
    if (!w)
      return failure();
    // A learnable step size is the parameter "alpha" [1], starting at alpha.
    Value step;
    if (min.getLearnable())
      step = b.create<ParamOp>(min.getLoc(), RankedTensorType::get({1}, elemTy),
                               b.getStringAttr("alpha"), b.getF64FloatAttr(0.1),
                               InitKindAttr::get(b.getContext(), InitKind::constant),
                               min.getAlphaAttr(), /*fixed=*/nullptr);
    cur = b.create<GradStepOp>(q.getLoc(), tokenTy, cur, w, center, step, min.getAlphaAttr(),
                               b.getF64FloatAttr(coeff));
    ++numSteps;
  }
  // Nonlinearity: prox of the indicator.
  if (min.getSchedule() == Schedule::proximal_aim) {
    cur = b.create<ProxNonNegOp>(terms.nonneg.getLoc(), tokenTy, cur);
    ++numSteps;
  }
  b.create<YieldOp>(loc, ValueRange{cur});
  ++numEnergies;
  return success();
}

} // namespace
