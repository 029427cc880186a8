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
#include "unroll/Utils/Builders.h"

#include "mlir/IR/IRMapping.h"

namespace mlir::unroll::lowering {

/// The training loss at the predicted positions (interleaved: the x
/// tokens; concat: the query, the last token; dense: every entry), and what
/// entry points add around the block (injection, initial states).
struct Loss : TokenEmitter {
  Loss(OpBuilder &b, Location loc, Type t, Encoding encoding = Encoding::interleaved)
      : TokenEmitter(b, loc, t), concat(encoding == Encoding::concat),
        dense(encoding == Encoding::dense) {}
  bool concat, dense;

  /// Σ_{b,i} (pred[b, 2i, 0] − ys[b, i])² as a scalar (concat: Σ_b of the
  /// query's, pred[b, n − 1, 0] against ys[b, n − 1]; dense: Σ_{b,i,f} of
  /// pred[b, i, f] against ys[b, i F + f]).
  Value sqErr(Value pred, Value ys) {
    Value init =
        b.create<linalg::FillOp>(loc, cst(0.0),
                                 b.create<tensor::EmptyOp>(loc, ArrayRef<int64_t>{}, t).getResult())
            .getResult(0);
    auto scalar = AffineMap::get(dense ? 3 : 2, 0, {}, b.getContext());
    if (dense) {
      Value r = generic({pred, ys}, {id(3), denseTargets(pred)}, init, scalar, iters("rrr"),
                        [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                          Value e = nb.create<arith::SubFOp>(l, a[0], a[1]);
                          return nb.create<arith::AddFOp>(l, a[2],
                                                          nb.create<arith::MulFOp>(l, e, e));
                        });
      return b.create<tensor::ExtractOp>(loc, r, ValueRange{});
    }
    Value last = concat ? lastToken(ys) : Value();
    AffineMap predMap = concat ? map(2, {d(0), d(1), c(0)}) : map(2, {d(0), d(1) * 2, c(0)});
    Value zero = cst(0.0);
    Value r = generic({pred, ys}, {predMap, id(2)}, init, scalar, iters("rr"),
                      [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                        Value e = nb.create<arith::SubFOp>(l, a[0], a[1]);
                        Value sq = nb.create<arith::MulFOp>(l, e, e);
                        if (concat)
                          sq = nb.create<arith::SelectOp>(l, isToken(nb, l, 1, last), sq, zero);
                        return nb.create<arith::AddFOp>(l, a[2], sq);
                      });
    return b.create<tensor::ExtractOp>(loc, r, ValueRange{});
  }
  /// dpred[b, j, 0] = coef (pred − ys[b, j/2]) at even j, 0 at odd j (concat:
  /// at the query alone; dense: dpred[b, i, f] = coef (pred − ys[b, i F + f])).
  Value sqErrVJP(Value pred, Value ys, Value coef) {
    Value zero = cst(0.0);
    if (dense)
      return generic({pred, ys}, {id(3), denseTargets(pred)}, fullLike(pred, 0.0), id(3),
                     iters("ppp"), [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                       return nb.create<arith::MulFOp>(l, coef,
                                                       nb.create<arith::SubFOp>(l, a[0], a[1]));
                     });
    Value last = concat ? lastToken(ys) : Value();
    AffineMap ysMap = concat ? map(3, {d(0), d(1)}) : map(3, {d(0), d(1).floorDiv(2)});
    return generic({pred, ys}, {id(3), ysMap}, fullLike(pred, 0.0), id(3), iters("ppp"),
                   [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                     Value at;
                     if (concat) {
                       at = isToken(nb, l, 1, last);
                     } else {
                       Value j = nb.create<linalg::IndexOp>(l, 1);
                       Value two = nb.create<arith::ConstantIndexOp>(l, 2);
                       Value z = nb.create<arith::ConstantIndexOp>(l, 0);
                       at = nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq,
                                                     nb.create<arith::RemUIOp>(l, j, two), z);
                     }
                     Value g =
                         nb.create<arith::MulFOp>(l, coef, nb.create<arith::SubFOp>(l, a[0], a[1]));
                     return nb.create<arith::SelectOp>(l, at, g, zero);
                   });
  }
  /// How many predictions the loss averages: B k (concat: B; dense: B n F,
  /// ys's size).
  Value count(Value bsz, Value k) {
    Value n = concat ? bsz : b.create<arith::MulIOp>(loc, bsz, k).getResult();
    return b.create<arith::SIToFPOp>(loc, t, b.create<arith::IndexCastOp>(loc, b.getI64Type(), n));
  }

private:
  /// (b, i, f) -> (b, i F + f): dense targets [B, n F] for predictions [B, n, F].
  AffineMap denseTargets(Value pred) {
    int64_t f = cast<RankedTensorType>(pred.getType()).getDimSize(2);
    return map(3, {d(0), d(1) * f + d(2)});
  }
  Value lastToken(Value ys) {
    return b.create<arith::SubIOp>(loc, dim(ys, 1), b.create<arith::ConstantIndexOp>(loc, 1));
  }
  static Value isToken(OpBuilder &nb, Location l, unsigned loopDim, Value last) {
    Value j = nb.create<linalg::IndexOp>(l, loopDim);
    return nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, j, last);
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
  /// Emit @M_forward_tape and @M_vjp_tape (the pass's model-vjp option).
  bool vjp = true;
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
  Encoding encoding() { return model.getEncoding(); }
  /// The state's type (the loop's result; P's unless the loop reads data).
  RankedTensorType stateType() { return model.getLoop().getStateType(); }
  /// Features per prediction: 1, or F with encoding(dense).
  int64_t outputs() {
    return cast<RankedTensorType>(model.getOutput().getPredictions().getType()).getDimSize(2);
  }
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
  /// The width of a prompt's predictions, n F, for n tokens.
  Value predWidth(OpBuilder &b, Location loc, Value n) {
    if (outputs() == 1)
      return n;
    return b.create<arith::MulIOp>(loc, n, b.create<arith::ConstantIndexOp>(loc, outputs()));
  }
  /// The loop body's arguments for the state `u`: (u), (u, P), (u, P, k)
  /// or (u, P, k, u_prev), as many as the body takes (k: the iteration
  /// index, u_prev: the previous iteration's input).
  SmallVector<Value> bodyArgs(Value u, Value p, Value k = {}, Value uPrev = {}) {
    SmallVector<Value> all{u, p, k, uPrev};
    all.resize(model.getLoop().getBody().getNumArguments());
    return all;
  }
  /// Does the loop carry the previous state (a body that takes u_prev)?
  bool carriesPrevious() { return model.getLoop().takesPrevious(); }
  /// @M_loss_grad, and the predictions' VJP in two halves that meet at the
  /// window's tape: @M_forward_tape, @M_vjp_tape (ModelEntryPoints.cpp).
  enum class GradientEntry { Loss, ForwardTape, VjpTape };
  LogicalResult emitGradient(OpBuilder &b, GradientEntry kind);
  /// The model info's "window_workspace" (null without @M_vjp_tape).
  llvm::json::Value windowWorkspaceInfo();
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
  /// The state after one application of the loop's injection and body, as
  /// iteration `k` (an index; null where the body takes none) from the
  /// state `y` and the one before it, `yPrev` (where the body takes it).
  FailureOr<Value> step(OpBuilder &b, Location loc, Value y, Value p, Ctx &ctx,
                        IRMapping *acts = nullptr, Value k = {}, Value yPrev = {});
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
