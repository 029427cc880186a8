//===- Batching.cpp - an energy's ops on token batches --------------------===//
#include "unroll/Dialect/Unroll/IR/Batching.h"

using namespace mlir;

SmallVector<Operation *> mlir::unroll::cloneForBatch(OpBuilder &b, Block &block, IRMapping &map,
                                                     RankedTensorType tokens,
                                                     RankedTensorType batch) {
  SmallVector<Operation *> out;
  for (Operation &op : block.without_terminator()) {
    Operation *c = b.clone(op, map);
    for (OpResult r : c->getResults())
      if (r.getType() == tokens)
        r.setType(batch);
    out.push_back(c);
  }
  return out;
}
