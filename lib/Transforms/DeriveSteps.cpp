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
  KernelPairwiseOp kernel;
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
    else if (auto k = dyn_cast<KernelPairwiseOp>(def))
      t.kernel = k;
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
  LogicalResult deriveKernelSteps(EnergyOp energy, KernelPairwiseOp term, Block *steps,
                                  OpBuilder &b, function_ref<Value(Value)> operand);
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

  if (terms.kernel)
    return deriveKernelSteps(energy, terms.kernel, steps, b, operand);

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

/// Kernel energies: the step of the schedule, written from the pieces
/// (kernel_matrix, kernel_apply, inner, axpy, normalize, ratio, pick):
///   gd           Y − α G
///   line_search  Y − t Ĝ, t = ⟨G, Ĝ⟩ / ⟨Ĝ, A Ĝ⟩ (exact on the quadratic)
///   cg           P = G − β D̂ with D = Y − Y_prev, β = ⟨G, A D̂⟩ / ⟨D̂, A D̂⟩
///                (P is A-conjugate to the last step), then the exact step
///                along P̂
///   nesterov     Z = Y + μ (Y − Y_prev), Z − α G(Z)
/// with G = Σ_h K_h V_h W_v,hᵀ and A its Hessian (kernel_apply), hats unit
/// directions, and no step along a direction whose curvature is below eps
/// times the trace of A.
LogicalResult DeriveStepsPass::deriveKernelSteps(EnergyOp energy, KernelPairwiseOp term,
                                                 Block *steps, OpBuilder &b,
                                                 function_ref<Value(Value)> operand) {
  MinimizeOp min = energy.getMinimize();
  Schedule sched = min.getSchedule();
  Location loc = term.getLoc();
  Type tokTy = energy.getTokenType();
  Type elemTy = energy.getTokenType().getElementType();
  Value y = steps->getArgument(0);
  bool perIteration = min.getPerIteration();
  bool withPrev = sched == Schedule::cg || sched == Schedule::nesterov;
  Value k, prev;
  if (perIteration || withPrev)
    k = steps->addArgument(b.getIndexType(), loc);
  if (withPrev)
    prev = steps->addArgument(tokTy, loc);

  Value src = operand(term.getSource()), wq = operand(term.getQuery());
  Value wk = term.getKey() ? operand(term.getKey()) : Value();
  Value wv = operand(term.getValue());
  if (!src || !wq || !wv || (term.getKey() && !wk))
    return failure();
  int64_t heads = term.getHeads();
  bool ctx = term.getMask() == MaskKind::context;
  auto kTy = RankedTensorType::get({heads, ShapedType::kDynamic, ShapedType::kDynamic}, elemTy);
  auto km = b.create<KernelMatrixOp>(loc, kTy, src, wq, wk, term.getKernelAttr(),
                                     term.getHeadsAttr(), term.getMaskAttr(), term.getGraphAttr(),
                                     term.getFeaturesAttr(), term.getMeanAttr());
  if (term.getKernel() != KernelKind::linear) {
    // The kernel is rho'(z): the derivative of the term's rho.
    Region rho;
    Region *src = &term.getRhoBody();
    if (term.getKernel() != KernelKind::custom) {
      buildBuiltinRho(rho, static_cast<int>(term.getKernel()) - 1, elemTy, loc);
      src = &rho;
    }
    differentiateScalarRegion(*src, km.getWeightBody(), loc);
    if (failed(checkDerivative(term, *src, km.getWeightBody())))
      return failure();
  }
  Value K = km.getResult();
  auto scalarTy = RankedTensorType::get({}, elemTy);
  auto apply = [&](Value z) { return b.create<KernelApplyOp>(loc, tokTy, K, z, wv).getResult(); };
  auto inner = [&](Value a, Value c) {
    return b.create<InnerOp>(loc, scalarTy, a, c, ctx ? b.getUnitAttr() : UnitAttr()).getResult();
  };
  auto unit = [&](Value z) {
    return b
        .create<NormalizeOp>(loc, tokTy, z, ctx ? b.getUnitAttr() : UnitAttr(),
                             b.getF64FloatAttr(elemTy.isF32() ? 1e-30 : 1e-200))
        .getResult();
  };
  auto axpy = [&](Value xv, Value a, Value yv, double c) {
    return b.create<AxpyOp>(loc, tokTy, xv, a, yv, b.getF64FloatAttr(c)).getResult();
  };
  double eps = min.getEps() ? min.getEps()->convertToDouble() : 1e-5;
  Value trace, gg, yy;
  // A step length along a unit direction: none where its curvature is flat,
  // nor once ‖G‖ is within eps of its bound tr(A) ‖Y‖ (converged).
  auto ratio = [&](Value num, Value den, Value g) {
    if (!trace) {
      trace = b.create<KernelTraceOp>(loc, scalarTy, K, wv, ctx ? b.getUnitAttr() : UnitAttr());
      gg = inner(g, g);
      yy = inner(y, y);
    }
    return b.create<RatioOp>(loc, scalarTy, num, den, trace, gg, yy, b.getF64FloatAttr(eps))
        .getResult();
  };
  // A learned scalar: the parameter `name` ([1], or one per iteration read
  // at k), starting at `init`.
  auto learned = [&](StringRef name, double init) -> Value {
    int64_t n = perIteration ? min.getIterations() : 1;
    Value p = b.create<ParamOp>(min.getLoc(), RankedTensorType::get({n}, elemTy),
                                b.getStringAttr(name), b.getF64FloatAttr(0.1),
                                InitKindAttr::get(b.getContext(), InitKind::constant),
                                b.getF64FloatAttr(init), /*fixed=*/nullptr);
    if (!perIteration)
      return p;
    return b.create<PickOp>(min.getLoc(), RankedTensorType::get({1}, elemTy), p, k);
  };

  Value next;
  switch (sched) {
  case Schedule::gd: {
    double alpha = min.getAlpha()->convertToDouble();
    Value g = apply(y);
    next = min.getLearnable() ? axpy(g, learned("alpha", alpha), y, -1.0) : axpy(g, {}, y, -alpha);
    break;
  }
  case Schedule::line_search: {
    Value g = apply(y), gh = unit(g);
    next = axpy(gh, ratio(inner(g, gh), inner(gh, apply(gh)), g), y, -1.0);
    break;
  }
  case Schedule::cg: {
    Value g = apply(y);
    Value dh = unit(axpy(prev, {}, y, -1.0)); // the last step's direction
    Value adh = apply(dh);
    Value beta = ratio(inner(g, adh), inner(dh, adh), g);
    Value ph = unit(axpy(dh, beta, g, -1.0)); // G − β D̂, minus the new direction
    next = axpy(ph, ratio(inner(g, ph), inner(ph, apply(ph)), g), y, -1.0);
    break;
  }
  case Schedule::nesterov: {
    double mu = min.getMomentum()->convertToDouble(), alpha = min.getAlpha()->convertToDouble();
    Value d = axpy(prev, {}, y, -1.0);
    Value z = min.getLearnable() ? axpy(d, learned("momentum", mu), y, 1.0) : axpy(d, {}, y, mu);
    Value g = apply(z);
    next = min.getLearnable() ? axpy(g, learned("alpha", alpha), z, -1.0) : axpy(g, {}, z, -alpha);
    break;
  }
  default:
    return min.emitOpError("internal error: not a kernel schedule");
  }
  b.create<YieldOp>(min.getLoc(), ValueRange{next});
  ++numSteps, ++numEnergies;
  return success();
}

} // namespace
