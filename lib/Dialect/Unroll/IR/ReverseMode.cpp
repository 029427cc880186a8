//===- ReverseMode.cpp - the reverse-mode driver --------------------------===//
//
// See ReverseMode.h. The rules themselves are the ops' VJPOpInterface
// implementations.
//
//===----------------------------------------------------------------------===//
#include "unroll/Dialect/Unroll/IR/ReverseMode.h"
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"

using namespace mlir;
using namespace mlir::unroll;

FailureOr<SmallVector<Value>> ReverseMode::run(ArrayRef<Operation *> ops, Value out, Value dout,
                                               ValueRange wrt, ValueRange sinks) {
  adjoints.clear();
  inScope.clear();
  sinkSet.clear();
  for (Operation *op : ops)
    inScope.insert(op->result_begin(), op->result_end());
  inScope.insert(wrt.begin(), wrt.end());
  sinkSet.insert(sinks.begin(), sinks.end());
  adjoints[out] = dout;
  for (Operation *op : llvm::reverse(ops)) {
    if (isa<ParamOp>(op))
      continue;
    if (llvm::none_of(op->getResults(), [&](Value r) { return adjoints.count(r); }))
      continue; // does not reach the output
    auto rule = dyn_cast<VJPOpInterface>(op);
    if (!rule)
      return op->emitOpError("has no VJP rule");
    if (failed(rule.buildVJP(b, *this)))
      return failure();
    ++rules;
  }
  SmallVector<Value> result;
  for (Value v : wrt)
    result.push_back(adjoints.lookup(v));
  return result;
}

Value ReverseMode::takeCotangent(Value v) {
  if (v.getDefiningOp<ParamOp>() || sinkSet.contains(v))
    return {};
  auto it = adjoints.find(v);
  if (it == adjoints.end())
    return {};
  Value g = it->second;
  adjoints.erase(it);
  return g;
}

LogicalResult ReverseMode::addCotangent(Operation *user, Value v, Value g) {
  Location loc = user->getLoc();
  if (v.getDefiningOp<ParamOp>() || sinkSet.contains(v)) {
    b.create<AccumulateGradOp>(loc, v, g);
    return success();
  }
  if (!inScope.contains(v))
    return user->emitOpError("cannot differentiate with respect to a weight that is not an "
                             "'unroll.param'");
  auto [it, inserted] = adjoints.try_emplace(v, g);
  if (!inserted)
    it->second = b.create<AddOp>(loc, g.getType(), it->second, g);
  return success();
}
