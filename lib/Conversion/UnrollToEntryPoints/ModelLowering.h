//===- ModelLowering.h - a model's entry points, shared state ---*- C++ -*-===//
//
// The class that emits a differentiated model's entry points: the forward,
// truncated back-propagation and Adam (ModelEntryPoints.cpp), and the
// fixed-point ones, halting and the implicit / Jacobian-free / phantom
// gradients (FixedPointEntryPoints.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_LIB_CONVERSION_UNROLLTOENTRYPOINTS_MODELLOWERING_H
#define UNROLL_LIB_CONVERSION_UNROLLTOENTRYPOINTS_MODELLOWERING_H

#include "EntryPoints.h"
#include "unroll/Conversion/UnrollToLinalg/Builders.h"

#include "mlir/IR/IRMapping.h"

namespace mlir::unroll::lowering {

/// The training loss at the x positions, and what entry points add around
/// the block (injection, initial states).
struct Loss : TokenEmitter {
  using TokenEmitter::TokenEmitter;

  /// Σ_{b,i} (pred[b, 2i, 0] − ys[b, i])² as a scalar.
  Value sqErr(Value pred, Value ys) {
    Value init =
        b.create<linalg::FillOp>(loc, cst(0.0),
                                 b.create<tensor::EmptyOp>(loc, ArrayRef<int64_t>{}, t).getResult())
            .getResult(0);
    Value r = generic({pred, ys}, {map(2, {d(0), d(1) * 2, c(0)}), id(2)}, init,
                      AffineMap::get(2, 0, {}, b.getContext()), iters("rr"),
                      [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                        Value e = nb.create<arith::SubFOp>(l, a[0], a[1]);
                        return nb.create<arith::AddFOp>(l, a[2], nb.create<arith::MulFOp>(l, e, e));
                      });
    return b.create<tensor::ExtractOp>(loc, r, ValueRange{});
  }
  /// dpred[b, j, 0] = coef (pred − ys[b, j/2]) at even j, 0 at odd j.
  Value sqErrVJP(Value pred, Value ys, Value coef) {
    Value zero = cst(0.0);
    return generic({pred, ys}, {id(3), map(3, {d(0), d(1).floorDiv(2)})}, fullLike(pred, 0.0),
                   id(3), iters("ppp"), [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                     Value j = nb.create<linalg::IndexOp>(l, 1);
                     Value two = nb.create<arith::ConstantIndexOp>(l, 2);
                     Value z = nb.create<arith::ConstantIndexOp>(l, 0);
                     Value even = nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq,
                                                           nb.create<arith::RemUIOp>(l, j, two), z);
                     Value g =
                         nb.create<arith::MulFOp>(l, coef, nb.create<arith::SubFOp>(l, a[0], a[1]));
                     return nb.create<arith::SelectOp>(l, even, g, zero);
                   });
  }
};

class ModelLowering {
public:
  ModelLowering(ModelOp model, bool recomputeWindow) : model(model) {
    table.collect(model);
    if (!recomputeWindow)
      tape = planTape(model.getLoop());
  }

  LogicalResult emit(OpBuilder &b);
  llvm::json::Object info();

private:
  /// What the ops of one entry function see: parameter tensors, and the flat
  /// gradient (a tensor threaded through loops) when computing gradients.
  struct Ctx {
    SmallVector<Value> params;
    Value grad;
    Value dp; // the loop input P's cotangent, in a backward iteration
  };

  Type elem() { return cast<RankedTensorType>(model.getPrompt().getType()).getElementType(); }
  LogicalResult emitOp(OpBuilder &b, Operation &op, IRMapping &map, Ctx &ctx);
  /// Runs a region's single block on `args`, returning the yielded values.
  /// `map` (optional) may hold values already known and receives every value
  /// emitted; ops in `skip` are not emitted.
  FailureOr<SmallVector<Value>> run(OpBuilder &b, Region &r, ValueRange args, Ctx &ctx,
                                    IRMapping *map = nullptr,
                                    const DenseSet<Operation *> *skip = nullptr);
  /// The read-in (ops before the loop): P from Z.
  FailureOr<Value> embed(OpBuilder &b, Value z, Ctx &ctx);
  /// The read-out (ops after the loop) on a state Y: predictions [B, n, 1].
  FailureOr<Value> head(OpBuilder &b, Value y, Ctx &ctx);
  Value inject(TokenEmitter &nn, Value y, Value p);
  /// Maps the model body's parameters (visible inside the loop's regions).
  void seedParams(IRMapping &map, Ctx &ctx) {
    for (auto p : model.getBody().front().getOps<ParamOp>())
      map.map(p.getResult(), ctx.params[table.indexOf(p.getName())]);
  }
  Value initState(TokenEmitter &nn, Value p);
  /// The loop body's arguments for the state `u`: (u) or (u, P).
  SmallVector<Value> bodyArgs(Value u, Value p) {
    if (model.getLoop().getBody().getNumArguments() == 2)
      return {u, p};
    return {u};
  }
  /// @M_solve(Z, theta, max, tol, preds[B, n], loops[B]): the loop run
  /// until every prompt halts (FixedPointEntryPoints.cpp).
  LogicalResult emitSolve(OpBuilder &b);
  /// @M_loss_grad_fixed(Z, ys, theta, b, steps, tol, damping, losses[1],
  /// grad, stats[2]): the loss at Y_b and its gradient through the fixed
  /// point (implicit, Jacobian-free or phantom), with one iteration's
  /// activations stored.
  LogicalResult emitFixedGrad(OpBuilder &b);
  /// The model info's "fixed_point" entry: entry points, the IR's choices and
  /// the activation storage per token of each gradient mode.
  llvm::json::Object fixedPointInfo();
  /// The state after one application of the loop's injection and body.
  FailureOr<Value> step(OpBuilder &b, Location loc, Value y, Value p, Ctx &ctx,
                        IRMapping *acts = nullptr);
  /// @M_energy_trace, for a loop that descends an energy.
  LogicalResult emitEnergyTrace(OpBuilder &b, EnergyOp energy);
  /// The energy E(Y; X) of every prompt ([B]) at token batches Y and X.
  FailureOr<Value> energyOf(OpBuilder &b, EnergyOp energy, Value y, Value x, Ctx &ctx);

  /// The energy the loop descends (its `energy` attribute), if any.
  EnergyOp loopEnergy() {
    auto sym = model.getLoop().getEnergyAttr();
    return sym ? SymbolTable::lookupNearestSymbolFrom<EnergyOp>(model, sym) : EnergyOp();
  }

  ModelOp model;
  ParamTable table;
  Tape tape; // empty: the backward recomputes each block
};

} // namespace mlir::unroll::lowering

#endif // UNROLL_LIB_CONVERSION_UNROLLTOENTRYPOINTS_MODELLOWERING_H
