//===- ReverseMode.h - the reverse-mode driver ------------------*- C++ -*-===//
//
// One reverse-mode driver for energies and models. It walks straight-line
// forward ops backwards and asks each for its vector-Jacobian product through
// VJPOpInterface (the rules live next to the ops: StepOps.cpp,
// ModelOps.cpp). Cotangents of a value used more than once are summed with
// `unroll.add`; gradients of parameters, and of the region inputs named as
// sinks, become `unroll.accumulate_grad`.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_DIALECT_UNROLL_IR_REVERSEMODE_H
#define UNROLL_DIALECT_UNROLL_IR_REVERSEMODE_H

#include "mlir/IR/Builders.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::unroll {

class ReverseMode {
public:
  explicit ReverseMode(OpBuilder &b) : b(b) {}

  /// Seeds the cotangent of `out` with `dout`, then emits, at the builder,
  /// the VJP of every op of `ops` (in reverse order; ops whose results do not
  /// reach `out` are skipped). Returns the cotangent of each of `wrt` (null
  /// where it does not reach `out`). Cotangents of `sinks` (inputs whose
  /// gradient the caller collects, like an energy's X) and of parameters are
  /// emitted as `unroll.accumulate_grad`.
  FailureOr<SmallVector<Value>> run(ArrayRef<Operation *> ops, Value out, Value dout,
                                    ValueRange wrt, ValueRange sinks = {});

  /// For the rules: the cotangent of `v` so far (null: none reaches it).
  Value cotangent(Value v) const { return adjoints.lookup(v); }
  /// For rules whose VJP op adds into a cotangent itself (an addend
  /// operand): removes and returns the cotangent of `v` so far, so that the
  /// rule's result, given to addCotangent, replaces it. Null where there is
  /// none yet, and for parameters and sinks (their parts are accumulated,
  /// never carried).
  Value takeCotangent(Value v);
  /// For the rules: `g` is (a part of) the cotangent of `v`, an operand of
  /// `user`. Parameters and sinks get `unroll.accumulate_grad`; values
  /// computed by the differentiated ops or among `wrt` accumulate; anything
  /// else is an error located at `user`.
  LogicalResult addCotangent(Operation *user, Value v, Value g);

  /// VJP rules applied so far.
  unsigned numRules() const { return rules; }

private:
  OpBuilder &b;
  llvm::DenseMap<Value, Value> adjoints;
  llvm::DenseSet<Value> inScope, sinkSet;
  unsigned rules = 0;
};

} // namespace mlir::unroll

#endif // UNROLL_DIALECT_UNROLL_IR_REVERSEMODE_H
