//===- ModelEntryPoints.cpp - a looped transformer's entry points ---------===//
//
// A differentiated `unroll.model @M` becomes these C-interface functions:
//
//   @M_forward(Z, theta, b, preds)            preds[t] = head(Y_t), t < b
//   @M_loss_grad(Z, ys, theta, b, T, losses, grad)
//   @M_forward_tape(Z, preds, theta, b, T, ws) the last T iterations' predictions,
//   @M_vjp_tape(Z, dpreds, theta, b, T, ws, grad)   and their VJP from the
//                                             workspace ws the first left
//   @M_adam(theta, grad, m, v, lr/bc1, sqrt(bc2), beta1, beta2, eps, partial)
//
// The loss is the mean over the last min(T, b) iterations of the MSE of the
// predictions at the x positions (even token indices) against ys. The first
// b - T iterations run without gradient; the window's states are stored and
// the backward pass walks them in reverse (truncated back-propagation through
// the loop). The reverse regions written by --unroll-differentiate start with
// a copy of the forward ops; the window's forward iterations store the
// activations those regions' VJPs read (the tape, Tape.cpp), so the backward
// skips the copy instead of recomputing the block. With recompute-window, or
// when a body's activations are not token tensors [B, n, F], only the states
// are stored and the backward recomputes each block from its input.
//
// The model's ops are copied into these functions as they are; the patterns
// of convert-unroll-to-linalg lower them afterwards.
//
//===----------------------------------------------------------------------===//
#include "ModelLowering.h"
#include "unroll/Utils/Builders.h"
#include "unroll/Utils/Markers.h"

#include "mlir/IR/IRMapping.h"
#include "unroll/runtime/ModelInfo.h"

using namespace mlir;
using namespace mlir::unroll;
namespace key = ::unroll::info;
using namespace mlir::unroll::lowering;

LogicalResult ModelLowering::emit(OpBuilder &b) {
  Location loc = model.getLoc();
  StringRef name = model.getSymName();
  Type t = elem();
  emitAdam(b, loc, name, t);
  if (EnergyOp energy = loopEnergy(); energy && failed(emitEnergyTrace(b, energy)))
    return failure();
  // A loop that reads its input as data has no fixed-point entry points
  // (the verifier refuses until(...) and the fixed-point gradients there).
  bool fixedPoint = !model.getLoop().readsData();
  if (fixedPoint && failed(emitSolve(b)))
    return failure();
  if (fixedPoint && model.getLoop().hasInputInjection() && failed(emitFixedGrad(b)))
    return failure();
  auto promptTy = model.getPrompt().getType();
  RankedTensorType stateTy = stateType();
  LoopOp loop = model.getLoop();
  Type i64 = b.getI64Type();
  auto idx = [&](Value v) { return b.create<arith::IndexCastOp>(loc, b.getIndexType(), v); };

  // @M_forward(Z, theta, b, preds[b, B, n F]) (F = 1 but with encoding(dense))
  {
    OpBuilder::InsertionGuard g(b);
    func::FuncOp f = makeEntry(b, loc, (name + "_forward").str(),
                               {dynMemref(3, t), dynMemref(1, t), i64, dynMemref(3, t)});
    Loss nn(b, loc, t, encoding());
    Ctx ctx{paramTensors(b, loc, f.getArgument(1), table, t), {}};
    Value z = memrefToTensor(b, loc, f.getArgument(0), promptTy);
    FailureOr<Value> p = embed(b, z, ctx);
    if (failed(p))
      return failure();
    Value nb = idx(f.getArgument(2));
    Value c0 = b.create<arith::ConstantIndexOp>(loc, 0),
          c1 = b.create<arith::ConstantIndexOp>(loc, 1);
    Value bsz = nn.dim(z, 0), n = predWidth(b, loc, nn.dim(z, 1));
    Value preds0 =
        b.create<tensor::EmptyOp>(loc, nn.tensorTy({kDyn, kDyn, kDyn}), ValueRange{nb, bsz, n});
    LogicalResult ok = success();
    // (Y_t, predictions[, Y_{t-1}]), Y_{-1} = Y_0.
    SmallVector<Value> init{initState(nn, *p), preds0};
    if (carriesPrevious())
      init.push_back(init[0]);
    auto forLoop = b.create<scf::ForOp>(
        loc, c0, nb, c1, init, [&](OpBuilder &lb, Location ll, Value tIdx, ValueRange it) {
          Loss ln(lb, ll, t, encoding());
          Value u = inject(ln, it[0], *p);
          Value uPrev = carriesPrevious() ? inject(ln, it[2], *p) : Value();
          FailureOr<SmallVector<Value>> y =
              run(lb, loop.getBody(), bodyArgs(u, *p, tIdx, uPrev), ctx);
          FailureOr<Value> pred = failed(y) ? FailureOr<Value>(failure()) : head(lb, (*y)[0], ctx);
          if (failed(y) || failed(pred)) {
            ok = failure();
            lb.create<scf::YieldOp>(ll, it);
            return;
          }
          Value p2 = lb.create<tensor::CollapseShapeOp>(
              ll, *pred, ArrayRef<ReassociationIndices>{{0}, {1, 2}});
          SmallVector<OpFoldResult> off{tIdx, lb.getIndexAttr(0), lb.getIndexAttr(0)};
          SmallVector<OpFoldResult> sz{lb.getIndexAttr(1), bsz, n};
          SmallVector<OpFoldResult> st(3, lb.getIndexAttr(1));
          Value preds = lb.create<tensor::InsertSliceOp>(ll, p2, it[1], off, sz, st);
          SmallVector<Value> next{ln.castTo((*y)[0], stateTy), preds};
          if (carriesPrevious())
            next.push_back(it[0]);
          lb.create<scf::YieldOp>(ll, next);
        });
    if (failed(ok))
      return failure();
    storeTensor(b, loc, forLoop.getResult(1), f.getArgument(3));
    b.create<func::ReturnOp>(loc);
  }

  if (failed(emitGradient(b, GradientEntry::Loss)))
    return failure();
  if (vjp && (failed(emitGradient(b, GradientEntry::ForwardTape)) ||
              failed(emitGradient(b, GradientEntry::VjpTape))))
    return failure();
  return success();
}

/// @M_loss_grad(Z, ys, theta, b, T, losses[min(T, b)], grad[num_params]);
/// or the vector-Jacobian product of the last W = min(T, b) iterations'
/// predictions, for callers with a loss of their own (python/unroll), in
/// two halves so that the loop runs once for a forward and its backward:
///   @M_forward_tape(Z, preds[W, B, n], theta, b, T, ws) runs the loop (the
///     first b − W iterations without gradient, as the loss's window),
///     writes the window's predictions, and leaves the window's states and
///     tape in the workspace ws (its size: model info "window_workspace");
///   @M_vjp_tape(Z, dpreds[W, B, n], theta, b, T, ws, grad) from them: the
///     gradient of Σ_w <dpreds[w], preds[w]> for the parameters, through
///     the window's iterations. With T = b, @M_forward's VJP.
LogicalResult ModelLowering::emitGradient(OpBuilder &b, GradientEntry kind) {
  const bool cotangent = kind != GradientEntry::Loss;
  const bool toTape = kind == GradientEntry::ForwardTape, fromTape = kind == GradientEntry::VjpTape;
  Location loc = model.getLoc();
  StringRef name = model.getSymName();
  Type t = elem();
  auto promptTy = model.getPrompt().getType();
  RankedTensorType stateTy = stateType();
  LoopOp loop = model.getLoop();
  auto inputTy = cast<RankedTensorType>(loop.getInput().getType());
  Type i64 = b.getI64Type();
  auto idx = [&](Value v) { return b.create<arith::IndexCastOp>(loc, b.getIndexType(), v); };
  OpBuilder::InsertionGuard g(b);
  MemRefType m1 = dynMemref(1, t), m2 = dynMemref(2, t), m3 = dynMemref(3, t);
  func::FuncOp f =
      kind == GradientEntry::Loss
          ? makeEntry(b, loc, (name + "_loss_grad").str(), {m3, m2, m1, i64, i64, m1, m1})
      : toTape ? makeEntry(b, loc, (name + "_forward_tape").str(), {m3, m3, m1, i64, i64, m1})
               : makeEntry(b, loc, (name + "_vjp_tape").str(), {m3, m3, m1, i64, i64, m1, m1});
  Loss nn(b, loc, t, encoding());
  Ctx ctx{paramTensors(b, loc, f.getArgument(2), table, t), {}};
  Value z = memrefToTensor(b, loc, f.getArgument(0), promptTy);
  // ys [B, k] (the loss's targets), or the predictions' cotangent [W, B, n]
  // (@M_forward_tape: its predictions, written).
  Value ys = toTape ? Value()
                    : memrefToTensor(b, loc, f.getArgument(1),
                                     cotangent ? nn.tensorTy({kDyn, kDyn, kDyn})
                                               : nn.tensorTy({kDyn, kDyn}));
  Value c0 = b.create<arith::ConstantIndexOp>(loc, 0),
        c1 = b.create<arith::ConstantIndexOp>(loc, 1);
  Value nb = idx(f.getArgument(3)), nT = idx(f.getArgument(4));
  Value lossesOut = cotangent ? Value() : f.getArgument(5);
  Value gradOut = toTape ? Value() : f.getArgument(6);
  Value ws = toTape || fromTape ? f.getArgument(5) : Value();
  Value tw = b.create<arith::MinUIOp>(loc, nb, nT);
  Value nfree = b.create<arith::SubIOp>(loc, nb, tw);
  FailureOr<Value> pOr = embed(b, z, ctx);
  if (failed(pOr))
    return failure();
  Value p = nn.castTo(*pOr, inputTy);
  LogicalResult ok = success();
  auto fail = [&](OpBuilder &lb, Location ll, ValueRange it) {
    ok = failure();
    lb.create<scf::YieldOp>(ll, it);
  };

  // Iterations without gradient: (Y_t[, Y_{t-1}]).
  const bool withPrev = carriesPrevious();
  SmallVector<Value> freeInit{initState(nn, p)};
  if (withPrev)
    freeInit.push_back(freeInit[0]);
  // @M_vjp_tape runs no loop: its states come from the workspace.
  auto freeLoop = b.create<scf::ForOp>(
      loc, c0, fromTape ? c0 : nfree, c1, freeInit,
      [&](OpBuilder &lb, Location ll, Value k, ValueRange it) {
        Loss ln(lb, ll, t, encoding());
        Value uPrev = withPrev ? inject(ln, it[1], p) : Value();
        FailureOr<SmallVector<Value>> y =
            run(lb, loop.getBody(), bodyArgs(inject(ln, it[0], p), p, k, uPrev), ctx);
        if (failed(y))
          return fail(lb, ll, it);
        SmallVector<Value> next{ln.castTo((*y)[0], stateTy)};
        if (withPrev)
          next.push_back(it[0]);
        lb.create<scf::YieldOp>(ll, next);
      });
  Value yFree = freeLoop.getResult(0);
  // The state before the window's first one (what its first iteration
  // takes as u_prev).
  Value yFreePrev = withPrev ? freeLoop.getResult(1) : Value();

  // The window, forward: store Y_{b-T} .. Y_b and each iterate's loss.
  Value bsz = nn.dim(z, 0), n = nn.dim(z, 1);
  int64_t dState = stateTy.getDimSize(2);
  auto statesTy = nn.tensorTy({kDyn, kDyn, kDyn, dState});
  Value twp1 = b.create<arith::AddIOp>(loc, tw, c1);
  auto stateSlice = [&](OpBuilder &lb, Value i) {
    return std::make_tuple(
        SmallVector<OpFoldResult>{i, lb.getIndexAttr(0), lb.getIndexAttr(0), lb.getIndexAttr(0)},
        SmallVector<OpFoldResult>{lb.getIndexAttr(1), bsz, n, lb.getIndexAttr(dState)},
        SmallVector<OpFoldResult>(4, lb.getIndexAttr(1)));
  };
  Value states = b.create<tensor::EmptyOp>(loc, statesTy, ValueRange{twp1, bsz, n});
  {
    auto [o, s, st] = stateSlice(b, c0);
    states = b.create<tensor::InsertSliceOp>(loc, yFree, states, o, s, st);
  }
  // The tape: [T, B, n, F] per activation the VJPs read.
  auto tapeSlice = [&](OpBuilder &lb, Value i, Value v) {
    int64_t f = cast<RankedTensorType>(v.getType()).getDimSize(2);
    return std::make_tuple(
        SmallVector<OpFoldResult>{i, lb.getIndexAttr(0), lb.getIndexAttr(0), lb.getIndexAttr(0)},
        SmallVector<OpFoldResult>{lb.getIndexAttr(1), bsz, n, lb.getIndexAttr(f)},
        SmallVector<OpFoldResult>(4, lb.getIndexAttr(1)));
  };
  // The workspace: the states [W + 1, B, n, D], each tape [W, B, n, F], and
  // the state before the window [B, n, D] where the body takes u_prev, back
  // to back, row-major.
  SmallVector<Value> wsViews;
  if (ws) {
    Value off = c0;
    auto view = [&](ArrayRef<Value> dims) {
      SmallVector<OpFoldResult> sizes, strides(dims.size());
      Value stride = c1;
      for (int i = dims.size() - 1; i >= 0; --i) {
        strides[i] = stride;
        stride = b.create<arith::MulIOp>(loc, stride, dims[i]);
      }
      for (Value d : dims)
        sizes.push_back(d);
      SmallVector<int64_t> dyn(dims.size(), kDyn), dynStrides(dims.size(), kDyn);
      dynStrides.back() = 1;
      strides.back() = b.getIndexAttr(1);
      auto ty = MemRefType::get(dyn, t, StridedLayoutAttr::get(b.getContext(), kDyn, dynStrides));
      Value v = b.create<memref::ReinterpretCastOp>(loc, ty, ws, OpFoldResult(off), sizes, strides);
      off = b.create<arith::AddIOp>(loc, off, stride);
      return v;
    };
    auto cst = [&](int64_t v) { return b.create<arith::ConstantIndexOp>(loc, v).getResult(); };
    wsViews.push_back(view({twp1, bsz, n, cst(dState)}));
    for (Value v : tape.body)
      wsViews.push_back(view({tw, bsz, n, cst(cast<RankedTensorType>(v.getType()).getDimSize(2))}));
    if (withPrev)
      wsViews.push_back(view({bsz, n, cst(dState)}));
  }
  Value invBK = cotangent ? Value()
                          : b.create<arith::DivFOp>(loc, nn.cst(1.0),
                                                    nn.count(bsz, nn.dim(ys, 1))).getResult();
  SmallVector<Value> winInit{yFree, states};
  if (withPrev)
    winInit.push_back(yFreePrev);
  const unsigned tape0 = withPrev ? 3 : 2; // where the tapes start among the carried values
  // @M_forward_tape writes the tape in place in the workspace.
  auto writable = [&](Value view, Type to) -> Value {
    auto mt = cast<MemRefType>(view.getType());
    Value v = b.create<bufferization::ToTensorOp>(
        loc, RankedTensorType::get(mt.getShape(), mt.getElementType()), view, /*restrict=*/true,
        /*writable=*/true);
    return v.getType() == to ? v : b.create<tensor::CastOp>(loc, to, v).getResult();
  };
  for (auto [i, v] : llvm::enumerate(tape.body)) {
    auto ty = nn.tensorTy({kDyn, kDyn, kDyn, cast<RankedTensorType>(v.getType()).getDimSize(2)});
    winInit.push_back(toTape ? writable(wsViews[1 + i], ty)
                             : b.create<tensor::EmptyOp>(loc, ty, ValueRange{tw, bsz, n}));
  }
  // @M_forward_tape also carries the window's predictions [W, B, n F], last.
  Value nPred = predWidth(b, loc, n);
  if (toTape)
    winInit.push_back(b.create<tensor::EmptyOp>(loc, nn.tensorTy({kDyn, kDyn, kDyn}),
                                                ValueRange{tw, bsz, nPred}));
  auto winLoop = b.create<scf::ForOp>(
      loc, c0, fromTape ? c0 : tw, c1, winInit,
      [&](OpBuilder &lb, Location ll, Value w, ValueRange it) {
        Loss ln(lb, ll, t, encoding());
        IRMapping acts;
        Value k = lb.create<arith::AddIOp>(ll, nfree, w);
        Value uPrev = withPrev ? inject(ln, it[2], p) : Value();
        FailureOr<SmallVector<Value>> y =
            run(lb, loop.getBody(), bodyArgs(inject(ln, it[0], p), p, k, uPrev), ctx, &acts);
        if (failed(y))
          return fail(lb, ll, it);
        Value yn = ln.castTo((*y)[0], stateTy);
        FailureOr<Value> pred = head(lb, yn, ctx);
        if (failed(pred))
          return fail(lb, ll, it);
        if (!cotangent) {
          Value l = lb.create<arith::MulFOp>(ll, ln.sqErr(*pred, ys), invBK);
          lb.create<memref::StoreOp>(ll, l, lossesOut, ValueRange{w});
        }
        auto [o, s, st] = stateSlice(lb, lb.create<arith::AddIOp>(ll, w, c1));
        Value sts = lb.create<tensor::InsertSliceOp>(ll, yn, it[1], o, s, st);
        SmallVector<Value> next{yn, sts};
        if (withPrev)
          next.push_back(it[0]);
        for (auto [i, v] : llvm::enumerate(tape.body)) {
          Value a = acts.lookup(v);
          auto [to, ts, tst] = tapeSlice(lb, w, a);
          // Once lowered, the producer writes into the tape directly
          // (writeMarkedSlicesInPlace, after convert-unroll-to-linalg).
          auto ins = lb.create<tensor::InsertSliceOp>(ll, a, it[tape0 + i], to, ts, tst);
          ins->setAttr(kInPlaceAttr, lb.getUnitAttr());
          next.push_back(ins);
        }
        if (toTape) {
          Value p2 = lb.create<tensor::CollapseShapeOp>(
              ll, *pred, ArrayRef<ReassociationIndices>{{0}, {1, 2}});
          SmallVector<OpFoldResult> off{w, lb.getIndexAttr(0), lb.getIndexAttr(0)};
          SmallVector<OpFoldResult> sz{lb.getIndexAttr(1), bsz, nPred};
          SmallVector<OpFoldResult> st1(3, lb.getIndexAttr(1));
          next.push_back(lb.create<tensor::InsertSliceOp>(ll, p2, it.back(), off, sz, st1));
        }
        lb.create<scf::YieldOp>(ll, next);
      });
  states = winLoop.getResult(1);
  SmallVector<Value> tapes(winLoop.getResults().drop_front(tape0));
  if (toTape) {
    if (failed(ok))
      return failure();
    // Predictions out; the states and tape into the workspace.
    storeTensor(b, loc, tapes.pop_back_val(), f.getArgument(1));
    storeTensor(b, loc, states, wsViews[0]);
    for (auto [i, tp] : llvm::enumerate(tapes))
      storeTensor(b, loc, tp, wsViews[1 + i]);
    if (withPrev)
      storeTensor(b, loc, yFreePrev, wsViews.back());
    b.create<func::ReturnOp>(loc);
    return success();
  }
  if (fromTape) {
    states = memrefToTensor(b, loc, wsViews[0], statesTy);
    for (size_t i = 0; i < tapes.size(); ++i)
      tapes[i] = memrefToTensor(b, loc, wsViews[1 + i], tapes[i].getType());
    if (withPrev)
      yFreePrev = memrefToTensor(b, loc, wsViews.back(), stateTy);
  }

  // The window, backward.
  Value coef;
  if (!cotangent) {
    Value twF =
        b.create<arith::SIToFPOp>(loc, t, b.create<arith::IndexCastOp>(loc, b.getI64Type(), tw));
    coef = b.create<arith::DivFOp>(loc, b.create<arith::MulFOp>(loc, nn.cst(2.0), invBK), twF);
  }
  Value grad0 = nn.full(nn.tensorTy({table.numParams}), {}, 0.0);
  Value zerosP = nn.fullLike(p, 0.0);
  Value zerosY = loop.readsData() ? nn.fullLike(yFree, 0.0) : zerosP;
  Injection inj = loop.getInjection();
  // Carried: (gradient, dY for Y_{w+1}, dP[, dY for Y_w from the step
  // after, which took it as u_prev]).
  SmallVector<Value> backInit{grad0, zerosY, zerosP};
  if (withPrev)
    backInit.push_back(zerosY);
  auto backLoop = b.create<scf::ForOp>(
      loc, c0, tw, c1, backInit, [&](OpBuilder &lb, Location ll, Value i, ValueRange it) {
        Loss ln(lb, ll, t, encoding());
        Ctx c{ctx.params, it[0], it[2]};
        Value w = lb.create<arith::SubIOp>(ll, lb.create<arith::SubIOp>(ll, tw, c1), i);
        auto extract = [&](Value at) {
          auto [o, s, st] = stateSlice(lb, at);
          return lb.create<tensor::ExtractSliceOp>(ll, stateTy, states, o, s, st).getResult();
        };
        Value yw = extract(lb.create<arith::AddIOp>(ll, w, c1)), yprev = extract(w);
        Value yprev2; // Y_{w-1}: the free loop's last state before the window's first
        if (withPrev) {
          Value first = lb.create<arith::CmpIOp>(ll, arith::CmpIPredicate::eq, w, c0);
          Value before = extract(
              lb.create<arith::SelectOp>(ll, first, c0, lb.create<arith::SubIOp>(ll, w, c1)));
          yprev2 = lb.create<arith::SelectOp>(ll, first, yFreePrev, before);
        }
        FailureOr<Value> pred = head(lb, yw, c);
        if (failed(pred))
          return fail(lb, ll, it);
        Value dpred;
        if (cotangent) {
          // dpreds[w] [B, n F] as the head's [B, n, F].
          SmallVector<OpFoldResult> off{w, lb.getIndexAttr(0), lb.getIndexAttr(0)};
          SmallVector<OpFoldResult> sz{lb.getIndexAttr(1), ln.dim(ys, 1), ln.dim(ys, 2)};
          SmallVector<OpFoldResult> st(3, lb.getIndexAttr(1));
          Value row = lb.create<tensor::ExtractSliceOp>(ll, ln.tensorTy({kDyn, kDyn}), ys, off, sz, st);
          dpred = ln.castTo(lb.create<tensor::ExpandShapeOp>(
                                ll, ln.tensorTy({kDyn, kDyn, outputs()}), row,
                                ArrayRef<ReassociationIndices>{{0}, {1, 2}}),
                            pred->getType());
        } else {
          dpred = ln.sqErrVJP(*pred, ys, coef);
        }
        FailureOr<SmallVector<Value>> dyh = run(lb, model.getHeadReverse(), {yw, dpred}, c);
        if (failed(dyh))
          return fail(lb, ll, it);
        Value dy = ln.add(it[1], ln.castTo((*dyh)[0], stateTy));
        // The block's activations from the tape (or, without one, the
        // reverse region's copy of the forward ops recomputes them).
        IRMapping acts;
        for (auto [rv, tp] : llvm::zip(tape.rev, tapes)) {
          auto [to, ts, tst] = tapeSlice(lb, w, rv);
          acts.map(rv, lb.create<tensor::ExtractSliceOp>(ll, cast<RankedTensorType>(rv.getType()),
                                                         tp, to, ts, tst)
                           .getResult());
        }
        Value k = lb.create<arith::AddIOp>(ll, nfree, w);
        SmallVector<Value> revArgs =
            bodyArgs(inject(ln, yprev, p), p, k, withPrev ? inject(ln, yprev2, p) : Value());
        revArgs.push_back(dy);
        FailureOr<SmallVector<Value>> du =
            run(lb, loop.getReverse(), revArgs, c, &acts, tape.empty() ? nullptr : &tape.primal);
        if (failed(du))
          return fail(lb, ll, it);
        // c.dp holds what the body's own use of P added (its center term).
        Value dp = c.dp;
        // A body input's cotangent to its state's (and P's) through the
        // injection.
        auto throughInjection = [&](Value d, Value state) {
          d = ln.castTo(d, stateTy);
          if (inj == Injection::add) {
            dp = ln.add(dp, d);
          } else if (inj == Injection::mul) {
            dp = ln.add(dp, ln.mul(d, state));
            d = ln.mul(d, p);
          }
          return ln.castTo(d, stateTy);
        };
        Value dyNext = throughInjection((*du)[0], yprev);
        SmallVector<Value> next{c.grad, dyNext, Value()};
        if (withPrev) {
          next[1] = ln.castTo(ln.add(dyNext, it[3]), stateTy);
          next.push_back(throughInjection((*du)[1], yprev2));
        }
        next[2] = ln.castTo(dp, inputTy);
        lb.create<scf::YieldOp>(ll, next);
      });
  if (failed(ok))
    return failure();
  Value dp = backLoop.getResult(2);
  ctx.grad = backLoop.getResult(0);
  if (inj == Injection::none && !loop.readsData()) {
    // Y_0 = P (and Y_{-1} = Y_0): if the window reaches back to it, P gets
    // the state's gradient.
    Value whole = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, nfree, c0);
    Value withY = nn.add(dp, backLoop.getResult(1));
    if (withPrev)
      withY = nn.add(withY, backLoop.getResult(3));
    dp = b.create<arith::SelectOp>(loc, whole, withY, dp);
  }
  if (failed(run(b, model.getEmbedReverse(), {z, dp}, ctx)))
    return failure();
  storeTensor(b, loc, ctx.grad, gradOut);
  b.create<func::ReturnOp>(loc);
  return success();
}

/// @M_energy_trace(Z, theta, b, energies[b + 1, B], starts[b, B]): the
/// energy (with X = P) of every prompt at the states Y_0 .. Y_b of the loop
/// and, in starts, at the point u_t each iteration's steps start from (u_t
/// = Y_{t-1} with injection(none); Y_{t-1} + P with injection(add)).
LogicalResult ModelLowering::emitEnergyTrace(OpBuilder &b, EnergyOp energy) {
  OpBuilder::InsertionGuard g(b);
  Location loc = model.getLoc();
  Type t = elem(), i64 = b.getI64Type();
  LoopOp loop = model.getLoop();
  RankedTensorType stateTy = stateType();
  func::FuncOp f =
      makeEntry(b, loc, (model.getSymName() + "_energy_trace").str(),
                {dynMemref(3, t), dynMemref(1, t), i64, dynMemref(2, t), dynMemref(2, t)});
  Loss nn(b, loc, t, encoding());
  Ctx ctx{paramTensors(b, loc, f.getArgument(1), table, t), {}, {}};
  Value z = memrefToTensor(b, loc, f.getArgument(0), model.getPrompt().getType());
  FailureOr<Value> p = embed(b, z, ctx);
  if (failed(p))
    return failure();
  Value nb = b.create<arith::IndexCastOp>(loc, b.getIndexType(), f.getArgument(2));
  Value c0 = b.create<arith::ConstantIndexOp>(loc, 0),
        c1 = b.create<arith::ConstantIndexOp>(loc, 1);
  Value bsz = nn.dim(z, 0);
  auto rowsTy = nn.tensorTy({kDyn, kDyn});
  auto insertRow = [&](OpBuilder &lb, Location ll, Value row, Value into, Value at) -> Value {
    SmallVector<OpFoldResult> off{at, lb.getIndexAttr(0)}, sz{lb.getIndexAttr(1), bsz},
        st(2, lb.getIndexAttr(1));
    return lb.create<tensor::InsertSliceOp>(ll, row, into, off, sz, st);
  };
  Value y0 = nn.castTo(initState(nn, *p), stateTy);
  FailureOr<Value> e0 = energyOf(b, energy, y0, *p, ctx);
  if (failed(e0))
    return failure();
  Value energies =
      b.create<tensor::EmptyOp>(loc, rowsTy, ValueRange{b.create<arith::AddIOp>(loc, nb, c1), bsz});
  energies = insertRow(b, loc, *e0, energies, c0);
  Value starts = b.create<tensor::EmptyOp>(loc, rowsTy, ValueRange{nb, bsz});
  LogicalResult ok = success();
  const bool withPrev = carriesPrevious();
  SmallVector<Value> init{y0, energies, starts};
  if (withPrev)
    init.push_back(y0);
  auto forLoop = b.create<scf::ForOp>(
      loc, c0, nb, c1, init, [&](OpBuilder &lb, Location ll, Value tIdx, ValueRange it) {
        Loss ln(lb, ll, t, encoding());
        Value u = ln.castTo(inject(ln, it[0], *p), stateTy);
        Value uPrev = withPrev ? ln.castTo(inject(ln, it[3], *p), stateTy) : Value();
        FailureOr<Value> eu = energyOf(lb, energy, u, *p, ctx);
        FailureOr<SmallVector<Value>> y =
            failed(eu) ? FailureOr<SmallVector<Value>>(failure())
                       : run(lb, loop.getBody(), bodyArgs(u, *p, tIdx, uPrev), ctx);
        Value yn = failed(y) ? Value() : ln.castTo((*y)[0], stateTy);
        FailureOr<Value> ey = yn ? energyOf(lb, energy, yn, *p, ctx) : FailureOr<Value>(failure());
        if (failed(ey)) {
          ok = failure();
          lb.create<scf::YieldOp>(ll, it);
          return;
        }
        Value next = lb.create<arith::AddIOp>(ll, tIdx, c1);
        SmallVector<Value> carried{yn, insertRow(lb, ll, *ey, it[1], next),
                                   insertRow(lb, ll, *eu, it[2], tIdx)};
        if (withPrev)
          carried.push_back(it[0]);
        lb.create<scf::YieldOp>(ll, carried);
      });
  if (failed(ok))
    return failure();
  storeTensor(b, loc, forLoop.getResult(1), f.getArgument(3));
  storeTensor(b, loc, forLoop.getResult(2), f.getArgument(4));
  b.create<func::ReturnOp>(loc);
  return success();
}

/// What @M_forward_tape leaves in its workspace, per token of the batch
/// (B n): W + 1 states of width `state`, W values of each `tape` width, and
/// one more state where `previous`. Its size in elements is
/// B n ((W + 1) state + W Σ tape + (previous ? state : 0)).
llvm::json::Value ModelLowering::windowWorkspaceInfo() {
  if (!vjp)
    return nullptr;
  llvm::json::Array widths;
  for (Value v : tape.body)
    widths.push_back(cast<RankedTensorType>(v.getType()).getDimSize(2));
  return llvm::json::Object{
      {"state", stateType().getDimSize(2)},
      {"tape", std::move(widths)},
      {"previous", carriesPrevious()}};
}

llvm::json::Object ModelLowering::info() {
  LoopOp loop = model.getLoop();
  int64_t blocks = 0, total = table.numParams;
  for (auto &p : table.params)
    if (StringRef(p.name).starts_with("_backbone.transformer.h.") ||
        StringRef(p.name).starts_with("_backbone.transformer.ln_f."))
      blocks += p.type.getNumElements();
  int64_t positions = -1;
  model.walk([&](PositionEmbedOp pe) {
    positions = cast<RankedTensorType>(pe.getTable().getType()).getDimSize(0);
  });
  int64_t layers = 0, heads = 0;
  loop.getBody().walk([&](AttentionOp a) {
    ++layers;
    heads = a.getHeads();
  });
  int64_t tokenDim = cast<RankedTensorType>(model.getPrompt().getType()).getDimSize(2);
  llvm::json::Object o{
      {key::kName, model.getSymName().str()},
      {key::kForward, (model.getSymName() + "_forward").str()},
      {key::kLossGrad, (model.getSymName() + "_loss_grad").str()},
      {key::kAdam, (model.getSymName() + "_adam").str()},
      {"forward_tape", vjp ? llvm::json::Value((model.getSymName() + "_forward_tape").str())
                           : llvm::json::Value(nullptr)},
      {"vjp_tape", vjp ? llvm::json::Value((model.getSymName() + "_vjp_tape").str())
                       : llvm::json::Value(nullptr)},
      {"window_workspace", windowWorkspaceInfo()},
      // The x dimension d; the tokens have d + 1 features under concat.
      {key::kPromptDim, tokenDim - (encoding() == Encoding::concat ? 1 : 0)},
      {key::kTokenDim, tokenDim},
      {key::kEncoding, stringifyEncoding(model.getEncoding()).str()},
      {"width", stateType().getDimSize(2)},
      // Features per prediction (preds are [b, B, n outputs]); 1 but with
      // encoding(dense).
      {key::kOutputs, outputs()},
      {"layers", layers},
      {"heads", heads},
      {key::kIterations, loop.getIterations()},
      {key::kWindow, loop.getWindow()},
      {"injection", stringifyInjection(loop.getInjection()).str()},
      {"window_activations", tape.empty() ? "recomputed" : "stored"},
      {key::kFixedPoint, loop.readsData() ? llvm::json::Value(nullptr)
                                          : llvm::json::Value(fixedPointInfo())},
      {key::kNumParams, table.numParams},
      {"param_counts", llvm::json::Object{{"total", total}, {"blocks_and_ln_f", blocks}}},
      {key::kParams, table.toJson()}};
  if (positions > 0)
    o[key::kPositions] = positions;
  if (EnergyOp e = loopEnergy()) {
    // The energy the loop descends, and what an independent evaluator needs
    // to recompute its terms and steps.
    MinimizeOp min = e.getMinimize();
    int64_t steps = 0;
    MMStepOp first;
    loop.getBody().walk([&](MMStepOp m) {
      if (!steps++)
        first = m;
    });
    auto km = kernelAndMask(e);
    llvm::json::Object eo{{key::kName, e.getSymName().str()},
                          {key::kTrace, (model.getSymName() + "_energy_trace").str()},
                          {"schedule", stringifySchedule(min.getSchedule()).str()},
                          {"attention", stringifyAttentionVariant(min.getAttention()).str()},
                          {"steps_per_iteration", steps},
                          {"learnable_alpha", min.getLearnable()},
                          {"input", loop.getBody().getNumArguments() >= 2 ? "P" : "none"},
                          {"rho", km.first},
                          {"mask", km.second},
                          {"terms", energyTermsJson(e)}};
    if (first)
      eo["weight_form"] = stringifyWeightForm(first.getForm()).str();
    addStepSizeInfo(min, eo);
    eo[key::kIterations] = min.getIterations();
    o[key::kEnergy] = std::move(eo);
  }
  return o;
}

FailureOr<llvm::json::Object> mlir::unroll::lowering::lowerModel(OpBuilder &b, ModelOp model,
                                                                 bool recomputeWindow, bool vjp) {
  ModelLowering lowering(model, recomputeWindow);
  lowering.vjp = vjp;
  if (failed(lowering.emit(b)))
    return failure();
  return lowering.info();
}
