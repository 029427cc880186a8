//===- Batching.h - an energy's ops on token batches ------------*- C++ -*-===//
//
// An energy is written over one token matrix Y [n, d]; a model's loop body
// descends it for every prompt of a token batch [B, n, d]. The ops are the
// same (their lowering handles a leading batch dimension), only the token
// types change.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_DIALECT_UNROLL_IR_BATCHING_H
#define UNROLL_DIALECT_UNROLL_IR_BATCHING_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::unroll {

/// Clones the ops of `block` (without its terminator) at `b`, with `map`
/// (which should map the block's arguments to token batches); every result
/// of the type `tokens` (the energy's [n, d]) computed from the block's
/// tensor arguments gets the type `batch` ([B, n, d]), and every other
/// tensor computed from them (a value per prompt, kernel matrices) a
/// leading batch dimension. Returns the clones.
SmallVector<Operation *> cloneForBatch(OpBuilder &b, Block &block, IRMapping &map,
                                       RankedTensorType tokens, RankedTensorType batch);

} // namespace mlir::unroll

#endif // UNROLL_DIALECT_UNROLL_IR_BATCHING_H
