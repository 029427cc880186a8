//===- Differentiate.cpp - reverse mode for models ------------------------===//
//
// Implements --unroll-differentiate. Reverse mode over straight-line step
// ops: the forward ops are cloned (recomputed) into the reverse region, then
// walked backwards, each op contributing its VJP op(s) and
// accumulate_grad for its parameters.
//
//===----------------------------------------------------------------------===//
#include "unroll/Dialect/Unroll/IR/ScalarRegion.h"
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"
#include "unroll/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_UNROLLDIFFERENTIATE
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;
using namespace mlir::unroll;

namespace {

class ReverseBuilder {
public:
  ReverseBuilder(OpBuilder &b, llvm::Statistic &numVJPs) : b(b), numVJPs(numVJPs) {}

  /// Adjoint of `wrt` given `out` = f(..) of the forward `ops` (in order)
  /// and its adjoint `dout`. Emits VJPs at the builder. Returns null when
  /// `wrt` does not influence `out`.
  FailureOr<Value> run(ArrayRef<Operation *> ops, Value out, Value dout, Value wrt);

private:
  void addAdjoint(Location loc, Value v, Value g) {
    auto it = adj.find(v);
    if (it == adj.end())
      adj[v] = g;
    else
      it->second = b.create<AddOp>(loc, g.getType(), it->second, g);
  }
  LogicalResult paramGrad(Operation *user, Value p, Value g) {
    if (!p.getDefiningOp<ParamOp>())
      return user->emitOpError("cannot differentiate with respect to a weight "
                               "that is not an 'unroll.param'");
    b.create<AccumulateGradOp>(user->getLoc(), p, g);
    return success();
  }

  OpBuilder &b;
  llvm::Statistic &numVJPs;
  DenseMap<Value, Value> adj;
};

FailureOr<Value> ReverseBuilder::run(ArrayRef<Operation *> ops, Value out,
                                     Value dout, Value wrt) {
  adj.clear();
  adj[out] = dout;
  for (Operation *op : llvm::reverse(ops)) {
    if (op->getNumResults() != 1)
      continue;
    Value dy = adj.lookup(op->getResult(0));
    if (!dy)
      continue; // does not reach the output
    Location loc = op->getLoc();
    LogicalResult ok = success();
    if (auto l = dyn_cast<LinearOp>(op)) {
      auto v = b.create<LinearVJPOp>(loc, l.getX().getType(), l.getWeight().getType(),
                                     l.getBias().getType(), l.getX(), l.getWeight(), dy);
      addAdjoint(loc, l.getX(), v.getDx());
      ok = succeeded(paramGrad(op, l.getWeight(), v.getDweight())) &&
                   succeeded(paramGrad(op, l.getBias(), v.getDbias()))
               ? success() : failure();
    } else if (auto n = dyn_cast<LayerNormOp>(op)) {
      auto v = b.create<LayerNormVJPOp>(loc, n.getX().getType(), n.getGain().getType(),
                                        n.getBias().getType(), n.getX(), n.getGain(),
                                        dy, n.getEpsAttr());
      addAdjoint(loc, n.getX(), v.getDx());
      ok = succeeded(paramGrad(op, n.getGain(), v.getDgain())) &&
                   succeeded(paramGrad(op, n.getBias(), v.getDbias()))
               ? success() : failure();
    } else if (auto a = dyn_cast<AttentionOp>(op)) {
      auto v = b.create<AttentionVJPOp>(loc, a.getQkv().getType(), a.getQkv(), dy,
                                        a.getHeadsAttr());
      addAdjoint(loc, a.getQkv(), v.getDqkv());
    } else if (auto g = dyn_cast<GeluOp>(op)) {
      auto v = b.create<GeluVJPOp>(loc, g.getX().getType(), g.getX(), dy);
      addAdjoint(loc, g.getX(), v.getDx());
    } else if (auto s = dyn_cast<AddOp>(op)) {
      addAdjoint(loc, s.getLhs(), dy);
      addAdjoint(loc, s.getRhs(), dy);
      continue;
    } else if (auto pe = dyn_cast<PositionEmbedOp>(op)) {
      addAdjoint(loc, pe.getX(), dy);
      auto v = b.create<PositionEmbedVJPOp>(loc, pe.getTable().getType(), dy, pe.getTable());
      ok = paramGrad(op, pe.getTable(), v.getDtable());
    } else if (isa<ParamOp>(op)) {
      continue;
    } else {
      return op->emitOpError("has no VJP rule");
    }
    if (failed(ok))
      return failure();
    ++numVJPs;
  }
  return adj.lookup(wrt);
}

struct DifferentiatePass
    : public unroll::impl::UnrollDifferentiateBase<DifferentiatePass> {
  using UnrollDifferentiateBase::UnrollDifferentiateBase;

  LogicalResult differentiate(ModelOp model);
  LogicalResult differentiate(EnergyOp energy);
  void runOnOperation() override {
    for (auto model : getOperation().getOps<ModelOp>())
      if (!model.isDifferentiated() && failed(differentiate(model)))
        return signalPassFailure();
    for (auto energy : getOperation().getOps<EnergyOp>())
      if (!energy.getSteps().empty() && energy.getReverse().empty() &&
          failed(differentiate(energy)))
        return signalPassFailure();
  }
};

/// One descent iteration of an energy, in reverse: (Y, X, dY') -> dY, with
/// accumulate_grad for the parameters and for X (through a residual center).
LogicalResult DifferentiatePass::differentiate(EnergyOp energy) {
  Block &fwd = energy.getSteps().front();
  // The certified step's size is a maximum over rows (not differentiable
  // everywhere, and not what one trains): such energies get no reverse.
  for (Operation &op : fwd)
    if (auto m = dyn_cast<MMStepOp>(op); m && m.getVariant() == AttentionVariant::certified) {
      ++numSkipped;
      return success();
    }
  Type tokTy = energy.getTokenType();
  Block *rev = new Block();
  energy.getReverse().push_back(rev);
  Value y = rev->addArgument(tokTy, energy.getLoc());
  Value x = rev->addArgument(tokTy, energy.getLoc());
  Value dyOut = rev->addArgument(tokTy, energy.getLoc());
  OpBuilder b = OpBuilder::atBlockEnd(rev);
  IRMapping map;
  map.map(fwd.getArgument(0), y);
  map.map(fwd.getArgument(1), x);
  SmallVector<Operation *> ops;
  for (Operation &op : fwd.without_terminator())
    ops.push_back(b.clone(op, map));
  Value out = map.lookup(cast<YieldOp>(fwd.back()).getValues()[0]);

  DenseMap<Value, Value> adj;
  adj[out] = dyOut;
  auto add = [&](Location loc, Value v, Value g) {
    auto it = adj.find(v);
    if (it == adj.end())
      adj[v] = g;
    else
      it->second = b.create<arith::AddFOp>(loc, it->second, g);
  };
  auto grad = [&](Operation *user, Value p, Value g) -> LogicalResult {
    if (!p.getDefiningOp<ParamOp>() && p != x)
      return user->emitOpError("cannot differentiate with respect to a weight "
                               "that is not an 'unroll.param'");
    b.create<AccumulateGradOp>(user->getLoc(), p, g);
    return success();
  };
  for (Operation *op : llvm::reverse(ops)) {
    if (op->getNumResults() != 1 || isa<ParamOp>(op))
      continue;
    Value dy = adj.lookup(op->getResult(0));
    if (!dy)
      continue;
    Location loc = op->getLoc();
    if (auto p = dyn_cast<ProxNonNegOp>(op)) {
      add(loc, p.getY(), b.create<ProxNonNegVJPOp>(loc, tokTy, p.getY(), dy));
    } else if (auto g = dyn_cast<GradStepOp>(op)) {
      auto v = b.create<GradStepVJPOp>(loc, tokTy, g.getWeight().getType(), tokTy, g.getY(),
                                       g.getWeight(), dy, g.getAlphaAttr(), g.getCoeffAttr());
      add(loc, g.getY(), v.getDx());
      if (failed(grad(op, g.getWeight(), v.getDweight())))
        return failure();
      if (g.getCenter() && failed(grad(op, g.getCenter(), v.getDcenter())))
        return failure();
    } else if (auto m = dyn_cast<MMStepOp>(op)) {
      Type dprojTy = m.getProj() ? m.getProj().getType() : Type();
      auto v = b.create<MMStepVJPOp>(loc, tokTy, dprojTy, m.getY(), m.getProj(), dy,
                                     m.getForm(), m.getMask(), m.getGraphAttr());
      if (m.getForm() == WeightForm::general)
        differentiateScalarRegion(m.getWeightBody(), v.getWeightBody(), loc,
                                  /*yieldPrimal=*/true);
      add(loc, m.getY(), v.getDx());
      if (m.getProj() && failed(grad(op, m.getProj(), v.getDproj())))
        return failure();
    } else {
      return op->emitOpError("has no VJP rule");
    }
    ++numVJPs;
  }
  Value dy = adj.lookup(y);
  if (!dy)
    return energy.emitOpError("the steps do not depend on Y");
  b.create<YieldOp>(energy.getLoc(), ValueRange{dy});
  return success();
}

/// Clones `ops` at the builder with `map`; parameters not yet mapped are
/// re-declared once (model regions are isolated from the body).
SmallVector<Operation *> cloneOps(OpBuilder &b, ArrayRef<Operation *> ops,
                                  IRMapping &map, bool redeclareParams) {
  SmallVector<Operation *> out;
  for (Operation *op : ops) {
    if (redeclareParams)
      for (Value v : op->getOperands())
        if (auto p = v.getDefiningOp<ParamOp>(); p && !map.contains(v))
          map.map(v, b.clone(*p)->getResult(0));
    out.push_back(b.clone(*op, map));
  }
  return out;
}

LogicalResult DifferentiatePass::differentiate(ModelOp model) {
  Block &body = model.getBody().front();
  LoopOp loop = model.getLoop();
  Type tokens = loop.getInput().getType();
  Type predTy = model.getOutput().getPredictions().getType();

  SmallVector<Operation *> embedOps, headOps;
  for (Operation &op : body.without_terminator()) {
    if (&op == loop.getOperation() || isa<ParamOp>(op))
      continue;
    (op.isBeforeInBlock(loop) ? embedOps : headOps).push_back(&op);
  }

  // Loop body: (u, dY) -> du. Parameters are visible (the loop is nested).
  {
    Block *rev = new Block();
    loop.getReverse().push_back(rev);
    Value u = rev->addArgument(tokens, loop.getLoc());
    Value dy = rev->addArgument(tokens, loop.getLoc());
    OpBuilder b = OpBuilder::atBlockEnd(rev);
    Block &fwd = loop.getBody().front();
    IRMapping map;
    map.map(fwd.getArgument(0), u);
    SmallVector<Operation *> ops;
    for (Operation &op : fwd.without_terminator())
      ops.push_back(&op);
    SmallVector<Operation *> clones = cloneOps(b, ops, map, false);
    ReverseBuilder r(b, numVJPs);
    Value out = map.lookup(cast<YieldOp>(fwd.back()).getValues()[0]);
    FailureOr<Value> du = r.run(clones, out, dy, u);
    if (failed(du))
      return failure();
    if (!*du)
      return loop.emitOpError("the loop body does not depend on its input");
    b.create<YieldOp>(loop.getLoc(), ValueRange{*du});
  }

  // Head: (Y, dpred) -> dY.
  {
    Block *rev = new Block();
    model.getHeadReverse().push_back(rev);
    Value y = rev->addArgument(tokens, loop.getLoc());
    Value dpred = rev->addArgument(predTy, model.getLoc());
    OpBuilder b = OpBuilder::atBlockEnd(rev);
    IRMapping map;
    map.map(loop.getResult(), y);
    SmallVector<Operation *> clones = cloneOps(b, headOps, map, true);
    ReverseBuilder r(b, numVJPs);
    Value out = map.lookupOrDefault(model.getOutput().getPredictions());
    FailureOr<Value> dy = r.run(clones, out, dpred, y);
    if (failed(dy))
      return failure();
    if (!*dy)
      return model.emitOpError("the predictions do not depend on the loop");
    b.create<YieldOp>(model.getLoc(), ValueRange{*dy});
  }

  // Read-in: (Z, dP) -> parameter gradients only.
  {
    Block *rev = new Block();
    model.getEmbedReverse().push_back(rev);
    Value z = rev->addArgument(model.getPrompt().getType(), model.getLoc());
    Value dp = rev->addArgument(tokens, loop.getLoc());
    OpBuilder b = OpBuilder::atBlockEnd(rev);
    IRMapping map;
    map.map(model.getPrompt(), z);
    SmallVector<Operation *> clones = cloneOps(b, embedOps, map, true);
    ReverseBuilder r(b, numVJPs);
    Value p = map.lookupOrDefault(loop.getInput());
    if (failed(r.run(clones, p, dp, z)))
      return failure();
    b.create<YieldOp>(model.getLoc());
  }
  ++numModels;
  return success();
}

} // namespace
