//===- FixedPointEntryPoints.cpp - loops run to their fixed point ---------===//
//
// A loop with input injection iterates Y_t = f(Y_{t-1}) = M(Y_{t-1} + P);
// where it settles, Y* = f(Y*). Two entry points use that:
//
//   @M_solve(Z, theta, max, tol, preds[B, n], loops[B])
//     Halting: prompt b stops at the first t with
//     ‖Y_t − Y_{t−1}‖ ≤ tol ‖Y_{t−1}‖ and keeps Y_t; the loop ends when all
//     have stopped or after `max` iterations. preds = head(Y) at the end,
//     loops = iterations each prompt used.
//
//   @M_loss_grad_fixed(Z, ys, theta, b, steps, tol, damping, losses[1],
//                      grad, stats[2])
//     The loss at Y_b (b − 1 iterations without gradient, the last one with
//     its activations kept), and its gradient through the fixed point. With
//     v = ∂L/∂Y_b, J = ∂f/∂Y at Y_b and A = λ J + (1 − λ) I (λ = damping),
//     g starts at v and takes g ← v + g A until ‖Δg‖ ≤ tol ‖g‖ or `steps`
//     values of g have been formed; the parameters then get λ g ∂f/∂θ and P
//     gets λ g ∂f/∂P. This one recurrence is all three modes:
//       implicit  steps = cap, tol: g → v (λ (I − J))⁻¹, so λ g ∂f/∂θ is the
//                 implicit-function-theorem gradient v (I − J)⁻¹ ∂f/∂θ;
//       phantom   steps = k, tol = 0: g = v Σ_{i<k} Aⁱ, back-propagation
//                 through k damped steps h ← λ f(h) + (1 − λ) h linearized
//                 at the fixed point;
//       jfb       steps = 1, λ = 1: g = v.
//     The recurrence needs only J's transpose products (the reverse
//     region with its parameter accumulations left out, so they are dead
//     code); the parameters' VJP runs once. Stored activations: one
//     iteration's, whatever b is. stats = (values of g formed, last
//     relative change).
//
//===----------------------------------------------------------------------===//
#include "ModelLowering.h"
#include "unroll/runtime/ModelInfo.h"

#include <limits>

using namespace mlir;
using namespace mlir::unroll;
namespace key = ::unroll::info;
using namespace mlir::unroll::lowering;

namespace {

/// Σ_{i,f} a[b, i, f] c[b, i, f] for every prompt b: [B].
Value perPromptDot(TokenEmitter &nn, Value a, Value c) {
  Value init = nn.full(nn.tensorTy({kDyn}), {nn.dim(a, 0)}, 0.0);
  return nn.generic({a, c}, {nn.id(3), nn.id(3)}, init, nn.map(3, {nn.d(0)}),
                    TokenEmitter::iters("prr"), TokenEmitter::fma);
}

/// Σ a c over two [B, n, F] tensors, as a scalar.
Value dotAll(TokenEmitter &nn, Value a, Value c) {
  return nn.e.reduceAll({a, c}, {nn.id(3), nn.id(3)}, TokenEmitter::fma, 3);
}

Value toIndex(OpBuilder &b, Location loc, Value i64) {
  return b.create<arith::IndexCastOp>(loc, b.getIndexType(), i64);
}

Value indexToFloat(OpBuilder &b, Location loc, Value i, Type t) {
  return b.create<arith::SIToFPOp>(loc, t, b.create<arith::IndexCastOp>(loc, b.getI64Type(), i));
}

} // namespace

LogicalResult ModelLowering::emitSolve(OpBuilder &b) {
  OpBuilder::InsertionGuard guard(b);
  Location loc = model.getLoc();
  Type t = elem();
  auto stateTy = cast<RankedTensorType>(model.getLoop().getInput().getType());
  func::FuncOp f = makeEntry(
      b, loc, (model.getSymName() + "_solve").str(),
      {dynMemref(3, t), dynMemref(1, t), b.getI64Type(), t, dynMemref(2, t), dynMemref(1, t)});
  Loss nn(b, loc, t, encoding());
  Ctx ctx{paramTensors(b, loc, f.getArgument(1), table, t), {}, {}};
  Value z = memrefToTensor(b, loc, f.getArgument(0), model.getPrompt().getType());
  FailureOr<Value> pOr = embed(b, z, ctx);
  if (failed(pOr))
    return failure();
  Value p = nn.castTo(*pOr, stateTy);
  Value maxIt = toIndex(b, loc, f.getArgument(2));
  Value tol = f.getArgument(3);
  Value tol2 = b.create<arith::MulFOp>(loc, tol, tol);
  Value bsz = nn.dim(z, 0);
  Value none = nn.full(nn.tensorTy({kDyn}), {bsz}, 0.0);
  Value c0 = b.create<arith::ConstantIndexOp>(loc, 0),
        c1 = b.create<arith::ConstantIndexOp>(loc, 1);
  // (t, Y, halted[B] (0 or 1), loops[B], prompts still running[, Y_{t-1}])
  SmallVector<Value> init{c0, nn.castTo(initState(nn, p), stateTy), none, none,
                          indexToFloat(b, loc, bsz, t)};
  const bool withPrev = carriesPrevious();
  if (withPrev)
    init.push_back(init[1]);
  LogicalResult ok = success();
  auto loop = b.create<scf::WhileOp>(
      loc, ValueRange(init).getTypes(), init,
      [&](OpBuilder &bb, Location l, ValueRange a) {
        Value more = bb.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, a[0], maxIt);
        Value zero = bb.create<arith::ConstantOp>(l, t, bb.getFloatAttr(t, 0.0));
        Value running = bb.create<arith::CmpFOp>(l, arith::CmpFPredicate::OGT, a[4], zero);
        bb.create<scf::ConditionOp>(l, bb.create<arith::AndIOp>(l, more, running), a);
      },
      [&](OpBuilder &lb, Location l, ValueRange a) {
        Loss ln(lb, l, t);
        Value y = a[1], halted = a[2];
        FailureOr<Value> next = step(lb, l, y, p, ctx, nullptr, a[0], withPrev ? a[5] : Value());
        if (failed(next)) {
          ok = failure();
          lb.create<scf::YieldOp>(l, a);
          return;
        }
        auto isSet = [&](OpBuilder &nb, Location nl, Value flag) {
          Value half = nb.create<arith::ConstantOp>(nl, t, nb.getFloatAttr(t, 0.5));
          return nb.create<arith::CmpFOp>(nl, arith::CmpFPredicate::OGT, flag, half);
        };
        // Halted prompts keep their iterate.
        Value kept = ln.generic(
            {*next, y, halted}, {ln.id(3), ln.id(3), ln.map(3, {ln.d(0)})}, ln.fullLike(y, 0.0),
            ln.id(3), Loss::iters("ppp"), [&](OpBuilder &nb, Location nl, ValueRange v) -> Value {
              return nb.create<arith::SelectOp>(nl, isSet(nb, nl, v[2]), v[1], v[0]);
            });
        Value diff = ln.ew({kept, y}, y, [](OpBuilder &nb, Location nl, ValueRange v) -> Value {
          return nb.create<arith::SubFOp>(nl, v[0], v[1]);
        });
        Value r = perPromptDot(ln, diff, diff), s = perPromptDot(ln, y, y);
        Value loops =
            ln.ew({halted, a[3]}, halted, [&](OpBuilder &nb, Location nl, ValueRange v) -> Value {
              Value one = nb.create<arith::ConstantOp>(nl, t, nb.getFloatAttr(t, 1));
              Value run = nb.create<arith::SubFOp>(nl, one, v[0]);
              return nb.create<arith::AddFOp>(nl, v[1], run);
            });
        Value nowHalted =
            ln.ew({halted, r, s}, halted, [&](OpBuilder &nb, Location nl, ValueRange v) -> Value {
              Value settled = nb.create<arith::CmpFOp>(nl, arith::CmpFPredicate::OLE, v[1],
                                                       nb.create<arith::MulFOp>(nl, tol2, v[2]));
              Value h = nb.create<arith::OrIOp>(nl, isSet(nb, nl, v[0]), settled);
              return nb.create<arith::UIToFPOp>(nl, t, h);
            });
        Value running = ln.e.reduceAll(
            {nowHalted}, {ln.id(1)},
            [&](OpBuilder &nb, Location nl, ValueRange v) -> Value {
              Value one = nb.create<arith::ConstantOp>(nl, t, nb.getFloatAttr(t, 1));
              return nb.create<arith::AddFOp>(nl, v[1], nb.create<arith::SubFOp>(nl, one, v[0]));
            },
            1);
        SmallVector<Value> carried{lb.create<arith::AddIOp>(l, a[0], c1), kept, nowHalted, loops,
                                   running};
        if (withPrev)
          carried.push_back(y);
        lb.create<scf::YieldOp>(l, carried);
      });
  if (failed(ok))
    return failure();
  FailureOr<Value> pred = head(b, loop.getResult(1), ctx);
  if (failed(pred))
    return failure();
  Value flat =
      b.create<tensor::CollapseShapeOp>(loc, *pred, ArrayRef<ReassociationIndices>{{0}, {1, 2}});
  storeTensor(b, loc, flat, f.getArgument(4));
  storeTensor(b, loc, loop.getResult(3), f.getArgument(5));
  b.create<func::ReturnOp>(loc);
  return success();
}

LogicalResult ModelLowering::emitFixedGrad(OpBuilder &b) {
  OpBuilder::InsertionGuard guard(b);
  Location loc = model.getLoc();
  Type t = elem(), i64 = b.getI64Type();
  LoopOp loop = model.getLoop();
  auto stateTy = cast<RankedTensorType>(loop.getInput().getType());
  func::FuncOp f = makeEntry(b, loc, (model.getSymName() + "_loss_grad_fixed").str(),
                             {dynMemref(3, t), dynMemref(2, t), dynMemref(1, t), i64, i64, t, t,
                              dynMemref(1, t), dynMemref(1, t), dynMemref(1, t)});
  Loss nn(b, loc, t, encoding());
  Ctx ctx{paramTensors(b, loc, f.getArgument(2), table, t), {}, {}};
  Value z = memrefToTensor(b, loc, f.getArgument(0), model.getPrompt().getType());
  Value ys = memrefToTensor(b, loc, f.getArgument(1), nn.tensorTy({kDyn, kDyn}));
  Value nb = toIndex(b, loc, f.getArgument(3)), steps = toIndex(b, loc, f.getArgument(4));
  Value tol = f.getArgument(5), lambda = f.getArgument(6);
  Value c0 = b.create<arith::ConstantIndexOp>(loc, 0),
        c1 = b.create<arith::ConstantIndexOp>(loc, 1);
  FailureOr<Value> pOr = embed(b, z, ctx);
  if (failed(pOr))
    return failure();
  Value p = nn.castTo(*pOr, stateTy);
  LogicalResult ok = success();

  // Y_{b-1} (and Y_{b-2}), without gradient.
  const bool withPrev = carriesPrevious();
  Value bm1 = b.create<arith::SubIOp>(loc, nb, c1);
  SmallVector<Value> freeInit{nn.castTo(initState(nn, p), stateTy)};
  if (withPrev)
    freeInit.push_back(freeInit[0]);
  auto free = b.create<scf::ForOp>(
      loc, c0, bm1, c1, freeInit, [&](OpBuilder &lb, Location ll, Value k, ValueRange it) {
        FailureOr<Value> y = step(lb, ll, it[0], p, ctx, nullptr, k, withPrev ? it[1] : Value());
        if (failed(y))
          ok = failure();
        SmallVector<Value> next{failed(y) ? it[0] : *y};
        if (withPrev)
          next.push_back(it[0]);
        lb.create<scf::YieldOp>(ll, next);
      });
  if (failed(ok))
    return failure();
  Value yPrev = free.getResult(0);
  Value yPrev2 = withPrev ? free.getResult(1) : Value();

  // Y_b = f(Y_{b-1}), keeping the activations the reverse region reads.
  Value u = inject(nn, yPrev, p);
  Value uPrev = withPrev ? inject(nn, yPrev2, p) : Value();
  IRMapping fwd;
  FailureOr<SmallVector<Value>> out = run(b, loop.getBody(), bodyArgs(u, p, bm1, uPrev), ctx, &fwd);
  if (failed(out))
    return failure();
  Value yStar = nn.castTo((*out)[0], stateTy);
  IRMapping acts;
  for (auto [rv, bv] : llvm::zip(tape.rev, tape.body))
    acts.map(rv, fwd.lookup(bv));
  const DenseSet<Operation *> *skip = tape.empty() ? nullptr : &tape.primal;

  // The loss at Y_b and v = ∂L/∂Y_b (the read-out's parameters get theirs).
  FailureOr<Value> pred = head(b, yStar, ctx);
  if (failed(pred))
    return failure();
  Value invBK = b.create<arith::DivFOp>(loc, nn.cst(1.0), nn.count(nn.dim(z, 0), nn.dim(ys, 1)));
  b.create<memref::StoreOp>(loc, b.create<arith::MulFOp>(loc, nn.sqErr(*pred, ys), invBK),
                            f.getArgument(7), ValueRange{c0});
  Value dpred = nn.sqErrVJP(*pred, ys, b.create<arith::MulFOp>(loc, nn.cst(2.0), invBK));
  Ctx grads{ctx.params, nn.full(nn.tensorTy({table.numParams}), {}, 0.0), nn.fullLike(p, 0.0)};
  FailureOr<SmallVector<Value>> dyh = run(b, model.getHeadReverse(), {yStar, dpred}, grads);
  if (failed(dyh))
    return failure();
  Value v = nn.castTo((*dyh)[0], stateTy);

  // g J (with `c` holding no gradient: the parameters' VJPs are dead code)
  // or, with the gradient, λ g ∂f/∂θ and λ g ∂f/∂P. A body that takes u_prev
  // is at its fixed point in both inputs: J = ∂f/∂u + ∂f/∂u_prev. Returns
  // the cotangents of (u[, u_prev]).
  Injection inj = loop.getInjection();
  auto reverse = [&](OpBuilder &lb, Location ll, Value g, Ctx &c) -> FailureOr<SmallVector<Value>> {
    TokenEmitter ln(lb, ll, t);
    IRMapping a = acts;
    SmallVector<Value> args = bodyArgs(u, p, bm1, uPrev);
    args.push_back(g);
    FailureOr<SmallVector<Value>> du = run(lb, loop.getReverse(), args, c, &a, skip);
    if (failed(du))
      return failure();
    SmallVector<Value> out;
    for (Value d : *du)
      out.push_back(ln.castTo(d, stateTy));
    return out;
  };
  Value inf = nn.cst(std::numeric_limits<double>::infinity());
  SmallVector<Value> init{c1, v, inf};
  auto solve = b.create<scf::WhileOp>(
      loc, ValueRange(init).getTypes(), init,
      [&](OpBuilder &bb, Location l, ValueRange a) {
        Value more = bb.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, a[0], steps);
        Value moving = bb.create<arith::CmpFOp>(l, arith::CmpFPredicate::OGT, a[2], tol);
        bb.create<scf::ConditionOp>(l, bb.create<arith::AndIOp>(l, more, moving), a);
      },
      [&](OpBuilder &lb, Location l, ValueRange a) {
        Loss ln(lb, l, t);
        Ctx none{ctx.params, {}, {}};
        FailureOr<SmallVector<Value>> du = reverse(lb, l, a[1], none);
        if (failed(du)) {
          ok = failure();
          lb.create<scf::YieldOp>(l, a);
          return;
        }
        Value sum = withPrev ? ln.castTo(ln.add((*du)[0], (*du)[1]), stateTy) : (*du)[0];
        Value gj = inj == Injection::mul ? ln.castTo(ln.mul(sum, p), stateTy) : sum;
        // g' = v + λ gJ + (1 − λ) g
        Value next = ln.ew({v, gj, a[1]}, v, [&](OpBuilder &nb, Location nl, ValueRange e) {
          Value one = nb.create<arith::ConstantOp>(nl, t, nb.getFloatAttr(t, 1.0));
          Value keep = nb.create<arith::SubFOp>(nl, one, lambda);
          Value r = nb.create<arith::AddFOp>(nl, e[0], nb.create<arith::MulFOp>(nl, lambda, e[1]));
          return nb.create<arith::AddFOp>(nl, r, nb.create<arith::MulFOp>(nl, keep, e[2]));
        });
        Value d = ln.ew({next, a[1]}, v, [](OpBuilder &nb, Location nl, ValueRange e) -> Value {
          return nb.create<arith::SubFOp>(nl, e[0], e[1]);
        });
        Value rel = lb.create<math::SqrtOp>(
            l, lb.create<arith::DivFOp>(l, dotAll(ln, d, d), dotAll(ln, next, next)));
        lb.create<scf::YieldOp>(
            l, ValueRange{lb.create<arith::AddIOp>(l, a[0], c1), ln.castTo(next, stateTy), rel});
      });
  if (failed(ok))
    return failure();

  Value g = nn.ew({solve.getResult(1)}, v, [&](OpBuilder &nb, Location nl, ValueRange e) -> Value {
    return nb.create<arith::MulFOp>(nl, lambda, e[0]);
  });
  FailureOr<SmallVector<Value>> du = reverse(b, loc, nn.castTo(g, stateTy), grads);
  if (failed(du))
    return failure();
  Value dp = grads.dp;
  SmallVector<Value> states{yPrev, yPrev2}; // the states under u and u_prev
  for (auto [d, state] : llvm::zip(*du, states)) {
    if (inj == Injection::add)
      dp = nn.castTo(nn.add(dp, d), stateTy);
    else if (inj == Injection::mul)
      dp = nn.castTo(nn.add(dp, nn.mul(d, state)), stateTy);
  }
  if (failed(run(b, model.getEmbedReverse(), {z, nn.castTo(dp, stateTy)}, grads)))
    return failure();
  storeTensor(b, loc, grads.grad, f.getArgument(8));
  b.create<memref::StoreOp>(loc, indexToFloat(b, loc, solve.getResult(0), t), f.getArgument(9),
                            ValueRange{c0});
  b.create<memref::StoreOp>(loc, solve.getResult(2), f.getArgument(9), ValueRange{c1});
  b.create<func::ReturnOp>(loc);
  return success();
}

llvm::json::Object ModelLowering::fixedPointInfo() {
  LoopOp loop = model.getLoop();
  int64_t bytes = elem().getIntOrFloatBitWidth() / 8;
  int64_t state = cast<RankedTensorType>(loop.getInput().getType()).getDimSize(2) * bytes;
  int64_t tapeBytes = 0;
  for (Value v : tape.body)
    tapeBytes += cast<RankedTensorType>(v.getType()).getDimSize(2) * bytes;
  llvm::json::Object o{{key::kSolve, (model.getSymName() + "_solve").str()},
                       {key::kGradient, stringifyGradientMode(loop.getGradientMode()).str()},
                       // Bytes per token the training step keeps for the backward: bptt
                       // keeps T + 1 states and T iterations' tapes; the fixed-point modes
                       // keep Y_{b-1}, Y_b and one tape.
                       {key::kStateBytesPerToken, state},
                       {key::kTapeBytesPerToken, tapeBytes}};
  if (loop.hasInputInjection())
    o[key::kLossGradFixed] = (model.getSymName() + "_loss_grad_fixed").str();
  if (loop.getHaltTol())
    o[key::kUntil] = llvm::json::Object{{key::kTol, loop.getHaltTol()->convertToDouble()},
                                        {key::kMax, *loop.getHaltMax()}};
  if (loop.getGradientTol())
    o[key::kGradientTol] = loop.getGradientTol()->convertToDouble();
  if (loop.getGradientMax())
    o[key::kGradientMax] = *loop.getGradientMax();
  if (loop.getPhantomSteps())
    o[key::kPhantomSteps] = *loop.getPhantomSteps();
  if (loop.getDamping())
    o[key::kDamping] = loop.getDamping()->convertToDouble();
  return o;
}
