//===- Differentiate.cpp - the --unroll-differentiate pass ----------------===//
//
// Builds the reverse regions of energies and models. Each reverse region
// starts with a copy of its forward ops (so it is complete on its own; the
// lowering may read stored activations instead), followed by their
// vector-Jacobian products in reverse order. The rules are the ops' own
// (VJPOpInterface); ReverseMode is the one driver for energies and models.
//
//===----------------------------------------------------------------------===//
#include "unroll/Dialect/Unroll/IR/ReverseMode.h"
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"
#include "unroll/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_UNROLLDIFFERENTIATE
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;
using namespace mlir::unroll;

namespace {

/// Clones `ops` at the builder with `map`; parameters not yet mapped are
/// re-declared once when the target region is isolated from the body.
SmallVector<Operation *> cloneOps(OpBuilder &b, ArrayRef<Operation *> ops, IRMapping &map,
                                  bool redeclareParams) {
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

struct DifferentiatePass : public unroll::impl::UnrollDifferentiateBase<DifferentiatePass> {
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
  Type tokTy = energy.getTokenType();
  Block *rev = new Block();
  energy.getReverse().push_back(rev);
  Value y = rev->addArgument(tokTy, energy.getLoc());
  Value x = rev->addArgument(energy.getInput().getType(), energy.getLoc());
  Value dyOut = rev->addArgument(tokTy, energy.getLoc());
  OpBuilder b = OpBuilder::atBlockEnd(rev);
  IRMapping map;
  map.map(fwd.getArgument(0), y);
  map.map(fwd.getArgument(1), x);
  // Layered steps (a learned unrolling) take the iteration index k last.
  if (fwd.getNumArguments() >= 3)
    map.map(fwd.getArgument(2), rev->addArgument(b.getIndexType(), energy.getLoc()));
  // A second loop state (FISTA's previous iterate) gets its own cotangent.
  Value prev;
  if (fwd.getNumArguments() == 4) {
    prev = rev->addArgument(tokTy, energy.getLoc());
    map.map(fwd.getArgument(3), prev);
  }
  SmallVector<Operation *> ops;
  for (Operation &op : fwd.without_terminator())
    ops.push_back(&op);
  ops = cloneOps(b, ops, map, /*redeclareParams=*/false);
  Value out = map.lookup(cast<YieldOp>(fwd.back()).getValues()[0]);
  ReverseMode rm(b);
  SmallVector<Value> wrt{y};
  if (prev)
    wrt.push_back(prev);
  FailureOr<SmallVector<Value>> dy = rm.run(ops, out, dyOut, wrt, /*sinks=*/{x});
  if (failed(dy))
    return failure();
  numVJPs += rm.numRules();
  if (!(*dy)[0] || (prev && !(*dy)[1]))
    return energy.emitOpError("the steps do not depend on Y (and Y_prev)");
  b.create<YieldOp>(energy.getLoc(), ValueRange(*dy));
  return success();
}

LogicalResult DifferentiatePass::differentiate(ModelOp model) {
  Block &body = model.getBody().front();
  LoopOp loop = model.getLoop();
  Type tokens = loop.getStateType(), input = loop.getInput().getType();
  Type predTy = model.getOutput().getPredictions().getType();

  SmallVector<Operation *> embedOps, headOps;
  for (Operation &op : body.without_terminator()) {
    if (&op == loop.getOperation() || isa<ParamOp>(op))
      continue;
    (op.isBeforeInBlock(loop) ? embedOps : headOps).push_back(&op);
  }

  // Loop body: (u, [P, [k, [u_prev,]]] dY) -> du [, du_prev], with
  // accumulate_grad for P. Parameters are visible (the loop is nested).
  {
    Block *rev = new Block();
    loop.getReverse().push_back(rev);
    Block &fwd = loop.getBody().front();
    IRMapping map;
    SmallVector<Value> inputs;
    for (BlockArgument a : fwd.getArguments()) {
      inputs.push_back(rev->addArgument(a.getType(), loop.getLoc()));
      map.map(a, inputs.back());
    }
    SmallVector<Value> wrt{inputs[0]}, sinks;
    if (inputs.size() >= 2)
      sinks.push_back(inputs[1]);
    if (loop.takesPrevious())
      wrt.push_back(inputs[3]);
    Value dy = rev->addArgument(tokens, loop.getLoc());
    OpBuilder b = OpBuilder::atBlockEnd(rev);
    SmallVector<Operation *> ops;
    for (Operation &op : fwd.without_terminator())
      ops.push_back(&op);
    ops = cloneOps(b, ops, map, /*redeclareParams=*/false);
    Value out = map.lookup(cast<YieldOp>(fwd.back()).getValues()[0]);
    ReverseMode rm(b);
    FailureOr<SmallVector<Value>> du = rm.run(ops, out, dy, wrt, sinks);
    if (failed(du))
      return failure();
    numVJPs += rm.numRules();
    if (!(*du)[0])
      return loop.emitOpError("the loop body does not depend on its input");
    if (loop.takesPrevious() && !(*du)[1])
      return loop.emitOpError("the loop body takes the previous iteration's input but does not "
                              "use it");
    b.create<YieldOp>(loop.getLoc(), ValueRange(*du));
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
    SmallVector<Operation *> ops = cloneOps(b, headOps, map, /*redeclareParams=*/true);
    Value out = map.lookupOrDefault(model.getOutput().getPredictions());
    ReverseMode rm(b);
    FailureOr<SmallVector<Value>> dy = rm.run(ops, out, dpred, {y});
    if (failed(dy))
      return failure();
    numVJPs += rm.numRules();
    if (!(*dy)[0])
      return model.emitOpError("the predictions do not depend on the loop");
    b.create<YieldOp>(model.getLoc(), ValueRange{(*dy)[0]});
  }

  // Read-in: (Z, dP) -> parameter gradients only.
  {
    Block *rev = new Block();
    model.getEmbedReverse().push_back(rev);
    Value z = rev->addArgument(model.getPrompt().getType(), model.getLoc());
    Value dp = rev->addArgument(input, loop.getLoc());
    OpBuilder b = OpBuilder::atBlockEnd(rev);
    IRMapping map;
    map.map(model.getPrompt(), z);
    SmallVector<Operation *> ops = cloneOps(b, embedOps, map, /*redeclareParams=*/true);
    Value p = map.lookupOrDefault(loop.getInput());
    ReverseMode rm(b);
    if (failed(rm.run(ops, p, dp, {z})))
      return failure();
    numVJPs += rm.numRules();
    b.create<YieldOp>(model.getLoc());
  }
  ++numModels;
  return success();
}

} // namespace
