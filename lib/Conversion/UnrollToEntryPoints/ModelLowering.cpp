//===- ModelLowering.cpp - the pieces every model entry point is built of -===//
//
// What the entry points of a model have in common: the model's ops copied
// into a function (emitOp, run), the read-in and read-out around the loop
// (embed, head), input injection and the initial state, one iteration of the
// loop (step), and an energy evaluated at a state (energyOf). The entry
// points themselves are in ModelEntryPoints.cpp (forward, loss and gradient,
// Adam, energy trace) and FixedPointEntryPoints.cpp (solve, the gradient
// through a fixed point); both call these and neither calls the other's.
//
//===----------------------------------------------------------------------===//
#include "ModelLowering.h"
#include "unroll/Utils/Builders.h"

#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::unroll;
using namespace mlir::unroll::lowering;

LogicalResult ModelLowering::emitOp(OpBuilder &b, Operation &op, IRMapping &map, Ctx &ctx) {
  if (auto p = dyn_cast<ParamOp>(op)) {
    map.map(p.getResult(), ctx.params[table.indexOf(p.getName())]);
    return success();
  }
  if (auto acc = dyn_cast<AccumulateGradOp>(op)) {
    if (!ctx.grad)
      return success(); // forward-only function
    if (!acc.getParam().getDefiningOp<ParamOp>()) {
      // The loop's input P (the reverse region's second argument).
      TokenEmitter nn(b, op.getLoc(), elem());
      Value g = nn.castTo(map.lookup(acc.getGrad()), ctx.dp.getType());
      ctx.dp = nn.castTo(nn.add(ctx.dp, g), ctx.dp.getType());
      return success();
    }
    const ParamInfo &p = table[acc.getParam().getDefiningOp<ParamOp>().getName()];
    ctx.grad = accumulateInto(b, op.getLoc(), ctx.grad, p, map.lookup(acc.getGrad()));
    return success();
  }
  if (isIndexArithmetic(&op)) { // the iteration index's arithmetic
    b.clone(op, map);
    return success();
  }
  if (isa<LoopOp, OutputOp, ModelOp, EnergyOp>(op) || !isa<UnrollDialect>(op.getDialect()))
    return op.emitOpError("cannot be lowered in a model");
  // Every other op is copied as it is; convert-unroll-to-linalg lowers it.
  b.clone(op, map);
  return success();
}

FailureOr<SmallVector<Value>> ModelLowering::run(OpBuilder &b, Region &r, ValueRange args, Ctx &ctx,
                                                 IRMapping *given,
                                                 const DenseSet<Operation *> *skip) {
  Block &blk = r.front();
  IRMapping local;
  IRMapping &map = given ? *given : local;
  seedParams(map, ctx);
  for (auto [a, v] : llvm::zip(blk.getArguments(), args))
    map.map(a, v);
  for (Operation &op : blk) {
    if (auto y = dyn_cast<YieldOp>(op)) {
      SmallVector<Value> out;
      for (Value v : y.getValues())
        out.push_back(map.lookup(v));
      return out;
    }
    if (skip && skip->contains(&op))
      continue;
    if (failed(emitOp(b, op, map, ctx)))
      return failure();
  }
  return model.emitOpError("region without unroll.yield");
}

FailureOr<Value> ModelLowering::embed(OpBuilder &b, Value z, Ctx &ctx) {
  IRMapping map;
  map.map(model.getPrompt(), z);
  LoopOp loop = model.getLoop();
  for (Operation &op : model.getBody().front()) {
    if (&op == loop.getOperation())
      break;
    if (failed(emitOp(b, op, map, ctx)))
      return failure();
  }
  return map.lookup(loop.getInput());
}

FailureOr<Value> ModelLowering::head(OpBuilder &b, Value y, Ctx &ctx) {
  IRMapping map;
  LoopOp loop = model.getLoop();
  map.map(loop.getResult(), y);
  for (Operation &op : model.getBody().front()) {
    if (isa<ParamOp>(op)) {
      if (failed(emitOp(b, op, map, ctx)))
        return failure();
      continue;
    }
    if (!loop->isBeforeInBlock(&op) || isa<OutputOp>(op))
      continue;
    if (failed(emitOp(b, op, map, ctx)))
      return failure();
  }
  return map.lookup(model.getOutput().getPredictions());
}

Value ModelLowering::inject(TokenEmitter &nn, Value y, Value p) {
  switch (model.getLoop().getInjection()) {
  case Injection::add:
    return nn.add(y, p);
  case Injection::mul:
    return nn.mul(y, p);
  case Injection::none:
    return y;
  }
  llvm_unreachable("injection");
}

Value ModelLowering::initState(TokenEmitter &nn, Value p) {
  if (model.getLoop().readsData()) {
    // Y_0 = 0 of the state's type, with P's batch and token sizes.
    RankedTensorType st = stateType();
    SmallVector<Value> dyn;
    for (int64_t i = 0; i < st.getRank(); ++i)
      if (st.isDynamicDim(i))
        dyn.push_back(nn.dim(p, i));
    return nn.full(st, dyn, 0.0);
  }
  switch (model.getLoop().getInjection()) {
  case Injection::add:
    return nn.fullLike(p, 0.0);
  case Injection::mul:
    return nn.fullLike(p, 1.0);
  case Injection::none:
    return p;
  }
  llvm_unreachable("injection");
}

FailureOr<Value> ModelLowering::step(OpBuilder &b, Location loc, Value y, Value p, Ctx &ctx,
                                     IRMapping *acts, Value k, Value yPrev) {
  TokenEmitter nn(b, loc, elem());
  LoopOp loop = model.getLoop();
  FailureOr<SmallVector<Value>> out =
      run(b, loop.getBody(),
          bodyArgs(inject(nn, y, p), p, k, yPrev ? inject(nn, yPrev, p) : Value()), ctx, acts);
  if (failed(out))
    return failure();
  return nn.castTo((*out)[0], stateType());
}

FailureOr<Value> ModelLowering::energyOf(OpBuilder &b, EnergyOp energy, Value y, Value x,
                                         Ctx &ctx) {
  Block &body = energy.getBody().front();
  Location loc = energy.getLoc();
  auto batch = cast<RankedTensorType>(y.getType());
  auto perPrompt = RankedTensorType::get({kDyn}, elem());
  IRMapping map;
  map.map(body.getArgument(0), y);
  map.map(body.getArgument(1), x);
  TokenEmitter nn(b, loc, elem());
  Value total;
  for (Operation &op : body.without_terminator()) {
    if (auto p = dyn_cast<ParamOp>(op)) {
      if (!table.index.count(p.getName()))
        return model.emitOpError() << "descends @" << energy.getSymName() << ", whose parameter '"
                                   << p.getName() << "' is not a parameter of the model";
      map.map(p.getResult(), ctx.params[table.indexOf(p.getName())]);
      continue;
    }
    // The term, on the batch; its value is one energy per prompt.
    Operation *term = b.clone(op, map);
    for (OpResult r : term->getResults())
      if (r.getType() == energy.getTokenType())
        r.setType(batch);
    if (term->getNumResults() != 1 || !isa<EnergyType>(term->getResult(0).getType()))
      continue;
    Value v = b.create<UnrealizedConversionCastOp>(loc, perPrompt, term->getResult(0)).getResult(0);
    total = total ? nn.castTo(nn.add(total, v), perPrompt) : v;
  }
  if (!total)
    return energy.emitOpError("has no terms");
  return total;
}
