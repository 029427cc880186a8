//===- Batching.cpp - an energy's ops on token batches --------------------===//
#include "unroll/Dialect/Unroll/IR/Batching.h"

#include "llvm/ADT/DenseSet.h"

using namespace mlir;

SmallVector<Operation *> mlir::unroll::cloneForBatch(OpBuilder &b, Block &block, IRMapping &map,
                                                     RankedTensorType tokens,
                                                     RankedTensorType batch) {
  // Values per prompt: the block's tensor arguments (Y, X, Y_prev) and
  // whatever is computed from them; parameters, and what is computed from
  // parameters alone, are shared by the batch.
  llvm::DenseSet<Value> perPrompt;
  for (BlockArgument a : block.getArguments())
    if (isa<RankedTensorType>(a.getType()))
      perPrompt.insert(a);
  SmallVector<Operation *> out;
  for (Operation &op : block.without_terminator()) {
    bool batched = llvm::any_of(op.getOperands(), [&](Value v) { return perPrompt.contains(v); });
    Operation *c = b.clone(op, map);
    for (auto [r, cr] : llvm::zip(op.getResults(), c->getResults())) {
      auto t = dyn_cast<RankedTensorType>(r.getType());
      if (!batched || !t)
        continue;
      perPrompt.insert(r);
      if (t == tokens) {
        cr.setType(batch);
        continue;
      }
      // One more leading dimension: the prompt.
      SmallVector<int64_t> shape{ShapedType::kDynamic};
      shape.append(t.getShape().begin(), t.getShape().end());
      cr.setType(RankedTensorType::get(shape, t.getElementType()));
    }
    out.push_back(c);
  }
  return out;
}
