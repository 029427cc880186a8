//===- Tape.cpp - which activations the training step stores --------------===//
//
// The recorded iterations of a training step's window store the activations
// that the loop's reverse region reads (the tape), so that the backward skips
// the reverse region's copy of the forward ops. This file decides which
// values those are; ModelEntryPoints.cpp threads the [T, B, n, F] tensors
// through the loops.
//
//===----------------------------------------------------------------------===//
#include "EntryPoints.h"

#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::unroll;
using namespace mlir::unroll::lowering;

Tape mlir::unroll::lowering::planTape(LoopOp loop) {
  Block &rev = loop.getReverse().front(), &body = loop.getBody().front();
  Tape t;
  // The reverse region takes the body's arguments and then dY; what depends
  // on dY is the VJP part. Parameters are views of theta, and index
  // arithmetic is recomputed: neither stored nor skipped.
  DenseSet<Value> dual{rev.getArguments().back()};
  for (Operation &op : rev) {
    if (isa<ParamOp>(op) || isIndexArithmetic(&op))
      continue;
    bool isDual = op.getNumResults() == 0 ||
                  llvm::any_of(op.getOperands(), [&](Value v) { return dual.contains(v); });
    if (isDual)
      dual.insert(op.result_begin(), op.result_end());
    else
      t.primal.insert(&op);
  }
  IRMapping toBody;
  for (auto [r, b] : llvm::zip(rev.getArguments(), body.getArguments()))
    toBody.map(r, b);
  // Parameters correspond by name (a body may declare one several times,
  // e.g. once per inlined descent step).
  auto same = [&](Value r, Value b) {
    auto pr = r.getDefiningOp<ParamOp>(), pb = b.getDefiningOp<ParamOp>();
    if (pr || pb)
      return pr && pb && pr.getName() == pb.getName();
    return toBody.lookupOrDefault(r) == b;
  };
  DenseSet<Operation *> matched;
  for (Operation &op : rev) {
    if (!t.primal.contains(&op) && !isIndexArithmetic(&op))
      continue;
    Operation *match = nullptr;
    for (Operation &cand : body) {
      if (matched.contains(&cand) || cand.getName() != op.getName() ||
          cand.getAttrDictionary() != op.getAttrDictionary() ||
          cand.getResultTypes() != op.getResultTypes() ||
          cand.getNumOperands() != op.getNumOperands())
        continue;
      if (llvm::all_of(llvm::zip(op.getOperands(), cand.getOperands()),
                       [&](auto pair) { return same(std::get<0>(pair), std::get<1>(pair)); })) {
        match = &cand;
        break;
      }
    }
    if (!match)
      return Tape{};
    matched.insert(match);
    toBody.map(op.getResults(), match->getResults());
  }
  for (Operation &op : rev) {
    if (!t.primal.contains(&op))
      continue;
    for (Value r : op.getResults()) {
      if (llvm::all_of(r.getUsers(), [&](Operation *u) { return t.primal.contains(u); }))
        continue; // only the primal copy reads it
      auto ty = dyn_cast<RankedTensorType>(r.getType());
      if (!ty || ty.getRank() != 3 || !ty.isDynamicDim(0) || !ty.isDynamicDim(1) ||
          ty.isDynamicDim(2))
        return Tape{};
      t.rev.push_back(r);
      t.body.push_back(toBody.lookup(r));
    }
  }
  return t;
}
