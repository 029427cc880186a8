//===- ModelToLinalg.cpp - looped transformers to linalg-on-tensors -------===//
//
// A differentiated `unroll.model @M` becomes two C-interface functions:
//
//   @M_forward(Z, theta, b, preds)            preds[t] = head(Y_t), t < b
//   @M_loss_grad(Z, ys, theta, b, T, losses, grad)
//   @M_adam(theta, grad, m, v, lr/bc1, sqrt(bc2), beta1, beta2, eps, partial)
//
// The loss is the mean over the last min(T, b) iterations of the MSE of the
// predictions at the x positions (even token indices) against ys. The first
// b - T iterations run without gradient; the window's states are stored and
// the backward pass walks them in reverse (truncated back-propagation through
// the loop). The reverse regions written by --unroll-differentiate start with
// a copy of the forward ops; the window's forward iterations store the
// activations those regions' VJPs read (the tape), so the backward skips the
// copy instead of recomputing the block. With recompute-window, or when a
// body's activations are not token tensors [B, n, F], only the states are
// stored and the backward recomputes each block from its input.
//
//===----------------------------------------------------------------------===//
#include "Emitter.h"

#include "mlir/IR/IRMapping.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::unroll;
using namespace mlir::unroll::lowering;

namespace {

using utils::IteratorType;
constexpr int64_t kDyn = ShapedType::kDynamic;

/// Linalg emitters for token batches [B, n, F] and the step ops' kernels.
class NN {
public:
  NN(OpBuilder &b, Location loc, Type t) : e(b, loc, t), b(b), loc(loc), t(t) {}

  Value cst(double v) { return e.cst(v); }
  /// The size of dim i. Never a tensor.dim of an expand_shape: MLIR 19's
  /// canonicalizer folds that to `floordiv kDynamic` when a reassociation
  /// group has two dynamic sizes ([B·n] -> [B, n]); use its output_shape.
  Value dim(Value v, int64_t i) {
    while (auto c = v.getDefiningOp<tensor::CastOp>())
      v = c.getSource();
    if (auto ex = v.getDefiningOp<tensor::ExpandShapeOp>()) {
      ArrayRef<int64_t> st = ex.getStaticOutputShape();
      if (st[i] != kDyn)
        return b.create<arith::ConstantIndexOp>(loc, st[i]);
      int64_t k = llvm::count_if(st.take_front(i), ShapedType::isDynamic);
      return ex.getOutputShape()[k];
    }
    return b.create<tensor::DimOp>(loc, v, i);
  }
  RankedTensorType tensorTy(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, t);
  }
  /// A tensor of `ty` filled with `v`; `dyn` are the sizes of its dynamic dims.
  Value full(RankedTensorType ty, ValueRange dyn, double v) {
    Value em = b.create<tensor::EmptyOp>(loc, ty, dyn);
    return b.create<linalg::FillOp>(loc, cst(v), em).getResult(0);
  }
  /// Dynamic sizes of `v` (in order).
  SmallVector<Value> dynSizes(Value v) {
    SmallVector<Value> s;
    auto ty = cast<RankedTensorType>(v.getType());
    for (int64_t i = 0; i < ty.getRank(); ++i)
      if (ty.isDynamicDim(i))
        s.push_back(dim(v, i));
    return s;
  }
  Value fullLike(Value v, double x) {
    return full(cast<RankedTensorType>(v.getType()), dynSizes(v), x);
  }
  Value castTo(Value v, Type to) { return e.castTo(v, to); }

  AffineMap map(unsigned rank, ArrayRef<AffineExpr> r) {
    return AffineMap::get(rank, 0, r, b.getContext());
  }
  AffineExpr d(unsigned i) { return b.getAffineDimExpr(i); }
  AffineExpr c(int64_t v) { return b.getAffineConstantExpr(v); }
  AffineMap id(unsigned rank) { return b.getMultiDimIdentityMap(rank); }

  using BodyFn = Emitter::BodyFn;
  Value generic(ArrayRef<Value> ins, ArrayRef<AffineMap> maps, Value init,
                AffineMap outMap, ArrayRef<IteratorType> iters, BodyFn body) {
    SmallVector<AffineMap> all(maps.begin(), maps.end());
    all.push_back(outMap);
    return b
        .create<linalg::GenericOp>(
            loc, init.getType(), ins, ValueRange{init}, all, iters,
            [&](OpBuilder &nb, Location nl, ValueRange a) {
              nb.create<linalg::YieldOp>(nl, body(nb, nl, a));
            })
        .getResult(0);
  }
  /// Elementwise over `like`'s shape; all inputs indexed like it.
  Value ew(ArrayRef<Value> ins, Value like, BodyFn body) {
    unsigned r = cast<RankedTensorType>(like.getType()).getRank();
    SmallVector<AffineMap> maps(ins.size(), id(r));
    return generic(ins, maps, fullLike(like, 0.0), id(r),
                   SmallVector<IteratorType>(r, IteratorType::parallel), body);
  }
  static SmallVector<IteratorType> iters(StringRef pr) {
    SmallVector<IteratorType> it;
    for (char ch : pr)
      it.push_back(ch == 'p' ? IteratorType::parallel : IteratorType::reduction);
    return it;
  }

  /// A [B, n, F] tensor of zeros with x's batch and token sizes.
  Value zeros3(Value x, int64_t f) {
    return full(tensorTy({kDyn, kDyn, f}), {dim(x, 0), dim(x, 1)}, 0.0);
  }
  /// A [B, n] tensor of zeros.
  Value zeros2(Value x) { return full(tensorTy({kDyn, kDyn}), {dim(x, 0), dim(x, 1)}, 0.0); }
  static Value fma(OpBuilder &nb, Location l, ValueRange a) {
    return nb.create<arith::AddFOp>(l, a[2], nb.create<arith::MulFOp>(l, a[0], a[1]));
  }
  static Value sum(OpBuilder &nb, Location l, ValueRange a) {
    return nb.create<arith::AddFOp>(l, a[1], a[0]);
  }

  //===--------------------------------------------------------------------===//
  // Linear (token tensors stay 3-d: reshaping [B, n] <-> [B·n] trips MLIR
  // 19's bufferization of expand_shape with two dynamic sizes in a group)
  //===--------------------------------------------------------------------===//

  Value linear(Value x, Value w, Value bias) {
    int64_t o = cast<RankedTensorType>(w.getType()).getDimSize(0);
    // The accumulator starts at the bias, then y[b,i,o] += x[b,i,k] W[o,k].
    Value init = generic({bias}, {map(3, {d(2)})}, zeros3(x, o), id(3), iters("ppp"),
                         [](OpBuilder &, Location, ValueRange a) { return a[0]; });
    return generic({x, w}, {map(4, {d(0), d(1), d(3)}), map(4, {d(2), d(3)})}, init,
                   map(4, {d(0), d(1), d(2)}), iters("pppr"), fma);
  }

  /// (dx, dW, db) of y = x Wᵀ + b.
  std::array<Value, 3> linearVJP(Value x, Value w, Value dy) {
    auto wt = cast<RankedTensorType>(w.getType());
    int64_t o = wt.getDimSize(0), k = wt.getDimSize(1);
    // Loop orders keep every inner loop contiguous (the last dim of each
    // operand), so it vectorizes.
    // dx[b,i,k] = Σ_o dy[b,i,o] W[o,k]          loops (b, i, o, k)
    Value dx = generic({dy, w}, {map(4, {d(0), d(1), d(2)}), map(4, {d(2), d(3)})},
                       zeros3(x, k), map(4, {d(0), d(1), d(3)}), iters("pprp"), fma);
    // dW[o,k] = Σ_{b,i} dy[b,i,o] x[b,i,k]      loops (b, i, o, k)
    Value dw = generic({dy, x}, {map(4, {d(0), d(1), d(2)}), map(4, {d(0), d(1), d(3)})},
                       full(wt, {}, 0.0), map(4, {d(2), d(3)}), iters("rrpp"), fma);
    // db[o] = Σ_{b,i} dy[b,i,o]                 loops (b, i, o)
    Value db = generic({dy}, {id(3)}, full(tensorTy({o}), {}, 0.0),
                       map(3, {d(2)}), iters("rrp"), sum);
    return {dx, dw, db};
  }

  //===--------------------------------------------------------------------===//
  // LayerNorm over the last dimension
  //===--------------------------------------------------------------------===//

  /// Per-token mean and 1/sqrt(var + eps) of x [B, n, F], as [B, n].
  std::pair<Value, Value> moments(Value x, int64_t f, double eps) {
    // Every generic gets a fresh init: a shared one would be copied by
    // bufferization.
    auto m0 = [&] { return zeros2(x); };
    Value invF = cst(1.0 / f), ep = cst(eps);
    AffineMap tok = map(3, {d(0), d(1)});
    Value s = generic({x}, {id(3)}, m0(), tok, iters("ppr"), sum);
    Value mean = generic({s}, {id(2)}, m0(), id(2), iters("pp"),
                         [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                           return nb.create<arith::MulFOp>(l, a[0], invF);
                         });
    Value ssq = generic({x, mean}, {id(3), tok}, m0(), tok, iters("ppr"),
                        [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                          Value c = nb.create<arith::SubFOp>(l, a[0], a[1]);
                          return nb.create<arith::AddFOp>(l, a[2], nb.create<arith::MulFOp>(l, c, c));
                        });
    Value rstd = generic({ssq}, {id(2)}, m0(), id(2), iters("pp"),
                         [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                           Value v = nb.create<arith::MulFOp>(l, a[0], invF);
                           return nb.create<math::RsqrtOp>(l, nb.create<arith::AddFOp>(l, v, ep));
                         });
    return {mean, rstd};
  }

  Value layerNorm(Value x, Value g, Value bias, double eps) {
    int64_t f = cast<RankedTensorType>(x.getType()).getDimSize(2);
    auto [mean, rstd] = moments(x, f, eps);
    AffineMap tok = map(3, {d(0), d(1)}), feat = map(3, {d(2)});
    return generic({x, mean, rstd, g, bias}, {id(3), tok, tok, feat, feat}, zeros3(x, f), id(3),
                   iters("ppp"), [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                     Value c = nb.create<arith::SubFOp>(l, a[0], a[1]);
                     Value h = nb.create<arith::MulFOp>(l, c, a[2]);
                     return nb.create<arith::AddFOp>(l, nb.create<arith::MulFOp>(l, h, a[3]), a[4]);
                   });
  }

  /// dx = rstd (ĝ − mean(ĝ) − x̂ mean(ĝ x̂)), ĝ = dy·g; dg = Σ dy x̂; db = Σ dy.
  std::array<Value, 3> layerNormVJP(Value x, Value g, Value dy, double eps) {
    int64_t f = cast<RankedTensorType>(x.getType()).getDimSize(2);
    auto [mean, rstd] = moments(x, f, eps);
    auto m0 = [&] { return zeros2(x); };
    auto z3 = [&] { return zeros3(x, f); };
    AffineMap tok = map(3, {d(0), d(1)}), feat = map(3, {d(2)});
    Value xhat = generic({x, mean, rstd}, {id(3), tok, tok}, z3(), id(3), iters("ppp"),
                         [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                           return nb.create<arith::MulFOp>(l, nb.create<arith::SubFOp>(l, a[0], a[1]), a[2]);
                         });
    Value gh = generic({dy, g}, {id(3), feat}, z3(), id(3), iters("ppp"),
                       [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                         return nb.create<arith::MulFOp>(l, a[0], a[1]);
                       });
    Value s1 = generic({gh}, {id(3)}, m0(), tok, iters("ppr"), sum);
    Value s2 = generic({gh, xhat}, {id(3), id(3)}, m0(), tok, iters("ppr"), fma);
    Value invF = cst(1.0 / f);
    Value dx = generic({gh, xhat, s1, s2, rstd}, {id(3), id(3), tok, tok, tok}, z3(), id(3),
                       iters("ppp"), [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                         Value m1 = nb.create<arith::MulFOp>(l, a[2], invF);
                         Value m2 = nb.create<arith::MulFOp>(l, a[3], invF);
                         Value v = nb.create<arith::SubFOp>(l, a[0], m1);
                         v = nb.create<arith::SubFOp>(l, v, nb.create<arith::MulFOp>(l, a[1], m2));
                         return nb.create<arith::MulFOp>(l, v, a[4]);
                       });
    // Reductions over tokens: loops (b, i, f), f innermost.
    auto f0 = [&] { return full(tensorTy({f}), {}, 0.0); };
    Value dg = generic({dy, xhat}, {id(3), id(3)}, f0(), feat, iters("rrp"), fma);
    Value dbias = generic({dy}, {id(3)}, f0(), feat, iters("rrp"), sum);
    return {dx, dg, dbias};
  }

  //===--------------------------------------------------------------------===//
  // Causal multi-head attention
  //===--------------------------------------------------------------------===//

  struct Heads {
    Value q5; // [B, n, 3, H, hd]
    int64_t h, hd;
    Value bsz, n;
  };
  Heads split(Value qkv, int64_t heads) {
    int64_t d3 = cast<RankedTensorType>(qkv.getType()).getDimSize(2);
    int64_t hd = d3 / 3 / heads;
    Heads s{{}, heads, hd, dim(qkv, 0), dim(qkv, 1)};
    SmallVector<OpFoldResult> shape{s.bsz, s.n, b.getIndexAttr(3), b.getIndexAttr(heads),
                                    b.getIndexAttr(hd)};
    s.q5 = b.create<tensor::ExpandShapeOp>(loc, tensorTy({kDyn, kDyn, 3, heads, hd}), qkv,
                                           ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3, 4}},
                                           shape);
    return s;
  }
  Value i1Causal(OpBuilder &nb, Location l, unsigned iDim, unsigned jDim) {
    Value i = nb.create<linalg::IndexOp>(l, iDim), j = nb.create<linalg::IndexOp>(l, jDim);
    return nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::ule, j, i);
  }
  /// A[b, h, i, j] = softmax_{j <= i}(q_i · k_j / sqrt(hd)).
  Value probs(const Heads &s) {
    auto ty4 = tensorTy({kDyn, s.h, kDyn, kDyn});
    auto z4 = [&] { return full(ty4, {s.bsz, s.n, s.n}, 0.0); };
    // (b, h, i, j, e)
    Value sc = generic({s.q5, s.q5},
                       {map(5, {d(0), d(2), c(0), d(1), d(4)}), map(5, {d(0), d(3), c(1), d(1), d(4)})},
                       z4(), map(5, {d(0), d(1), d(2), d(3)}), iters("ppppr"), fma);
    Value scale = cst(1.0 / std::sqrt(double(s.hd)));
    Value ninf = cst(-std::numeric_limits<double>::infinity()), zero = cst(0.0);
    auto ty3 = tensorTy({kDyn, s.h, kDyn});
    AffineMap m4 = id(4), r3 = map(4, {d(0), d(1), d(2)});
    Value mx = generic({sc}, {m4}, full(ty3, {s.bsz, s.n}, -INFINITY), r3, iters("pppr"),
                       [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                         Value z = nb.create<arith::MulFOp>(l, a[0], scale);
                         Value m = nb.create<arith::MaximumFOp>(l, a[1], z);
                         return nb.create<arith::SelectOp>(l, i1Causal(nb, l, 2, 3), m, a[1]);
                       });
    Value ex = generic({sc, mx}, {m4, r3}, z4(), m4, iters("pppp"),
                       [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                         Value z = nb.create<arith::MulFOp>(l, a[0], scale);
                         Value x = nb.create<math::ExpOp>(l, nb.create<arith::SubFOp>(l, z, a[1]));
                         return nb.create<arith::SelectOp>(l, i1Causal(nb, l, 2, 3), x, zero);
                       });
    (void)ninf;
    Value sum = generic({ex}, {m4}, full(ty3, {s.bsz, s.n}, 0.0), r3, iters("pppr"),
                        [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                          return nb.create<arith::AddFOp>(l, a[1], a[0]);
                        });
    return generic({ex, sum}, {m4, r3}, z4(), m4, iters("pppp"),
                   [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                     return nb.create<arith::DivFOp>(l, a[0], a[1]);
                   });
  }
  /// [B, n, H, hd] zeros.
  Value zeros4(const Heads &s) {
    return full(tensorTy({kDyn, kDyn, s.h, s.hd}), {s.bsz, s.n}, 0.0);
  }
  Value mergeHeads(Value o4) {
    return b.create<tensor::CollapseShapeOp>(loc, o4, ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3}});
  }
  Value attention(Value qkv, int64_t heads) {
    Heads s = split(qkv, heads);
    Value a = probs(s);
    // O[b, i, h, e] = Σ_j A[b, h, i, j] v[b, j, h, e]   loops (b, i, h, j, e)
    Value o = generic({a, s.q5},
                      {map(5, {d(0), d(2), d(1), d(3)}), map(5, {d(0), d(3), c(2), d(2), d(4)})},
                      zeros4(s), map(5, {d(0), d(1), d(2), d(4)}), iters("ppprp"), fma);
    return mergeHeads(o);
  }

  Value attentionVJP(Value qkv, Value dy, int64_t heads) {
    Heads s = split(qkv, heads);
    Value a = probs(s);
    SmallVector<OpFoldResult> shape{s.bsz, s.n, b.getIndexAttr(s.h), b.getIndexAttr(s.hd)};
    Value d4 = b.create<tensor::ExpandShapeOp>(loc, tensorTy({kDyn, kDyn, s.h, s.hd}), dy,
                                               ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3}},
                                               shape);
    auto ty4 = tensorTy({kDyn, s.h, kDyn, kDyn});
    auto z4 = [&] { return full(ty4, {s.bsz, s.n, s.n}, 0.0); };
    AffineMap out5 = map(5, {d(0), d(1), d(2), d(3)});
    // dA[b, h, i, j] = Σ_e dO[b, i, h, e] v[b, j, h, e]   loops (b, h, i, j, e)
    Value da = generic({d4, s.q5},
                       {map(5, {d(0), d(2), d(1), d(4)}), map(5, {d(0), d(3), c(2), d(1), d(4)})},
                       z4(), out5, iters("ppppr"), fma);
    // dV[b, j, h, e] = Σ_i A[b, h, i, j] dO[b, i, h, e]   loops (b, h, i, j, e)
    Value dv = generic({a, d4},
                       {map(5, {d(0), d(1), d(2), d(3)}), map(5, {d(0), d(2), d(1), d(4)})},
                       zeros4(s), map(5, {d(0), d(3), d(1), d(4)}), iters("pprpp"), fma);
    // dS = A (dA − Σ_j A dA) / sqrt(hd)
    auto ty3 = tensorTy({kDyn, s.h, kDyn});
    AffineMap m4 = id(4), r3 = map(4, {d(0), d(1), d(2)});
    Value rs = generic({a, da}, {m4, m4}, full(ty3, {s.bsz, s.n}, 0.0), r3, iters("pppr"), fma);
    Value scale = cst(1.0 / std::sqrt(double(s.hd)));
    Value ds = generic({a, da, rs}, {m4, m4, r3}, z4(), m4, iters("pppp"),
                       [&](OpBuilder &nb, Location l, ValueRange v) -> Value {
                         Value t = nb.create<arith::SubFOp>(l, v[1], v[2]);
                         t = nb.create<arith::MulFOp>(l, v[0], t);
                         return nb.create<arith::MulFOp>(l, t, scale);
                       });
    // dQ[b, i, h, e] = Σ_j dS[b, h, i, j] k[b, j, h, e]   loops (b, i, h, j, e)
    Value dq = generic({ds, s.q5},
                       {map(5, {d(0), d(2), d(1), d(3)}), map(5, {d(0), d(3), c(1), d(2), d(4)})},
                       zeros4(s), map(5, {d(0), d(1), d(2), d(4)}), iters("ppprp"), fma);
    // dK[b, j, h, e] = Σ_i dS[b, h, i, j] q[b, i, h, e]   loops (b, h, i, j, e)
    Value dk = generic({ds, s.q5},
                       {map(5, {d(0), d(1), d(2), d(3)}), map(5, {d(0), d(2), c(0), d(1), d(4)})},
                       zeros4(s), map(5, {d(0), d(3), d(1), d(4)}), iters("pprpp"), fma);
    // Interleave into [B, n, 3, H, hd] and flatten.
    AffineMap pick = map(5, {d(0), d(1), d(3), d(4)});
    Value z5 = full(tensorTy({kDyn, kDyn, 3, s.h, s.hd}), {s.bsz, s.n}, 0.0);
    Value d5 = generic({dq, dk, dv}, {pick, pick, pick}, z5, id(5), iters("ppppp"),
                       [](OpBuilder &nb, Location l, ValueRange v) -> Value {
                         Value which = nb.create<linalg::IndexOp>(l, 2);
                         Value c0 = nb.create<arith::ConstantIndexOp>(l, 0);
                         Value c1 = nb.create<arith::ConstantIndexOp>(l, 1);
                         Value isQ = nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, which, c0);
                         Value isK = nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, which, c1);
                         Value kv = nb.create<arith::SelectOp>(l, isK, v[1], v[2]);
                         return nb.create<arith::SelectOp>(l, isQ, v[0], kv);
                       });
    return b.create<tensor::CollapseShapeOp>(loc, d5, ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3, 4}});
  }

  //===--------------------------------------------------------------------===//
  // GELU, sums, positions
  //===--------------------------------------------------------------------===//

  static constexpr double kGeluC = 0.7978845608028654; // sqrt(2/pi)
  static constexpr double kGeluA = 0.044715;

  Value gelu(Value x) {
    Value half = cst(0.5), one = cst(1.0), cc = cst(kGeluC), ca = cst(kGeluA);
    return ew({x}, x, [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
      Value x3 = nb.create<arith::MulFOp>(l, nb.create<arith::MulFOp>(l, a[0], a[0]), a[0]);
      Value in = nb.create<arith::AddFOp>(l, a[0], nb.create<arith::MulFOp>(l, ca, x3));
      Value th = nb.create<math::TanhOp>(l, nb.create<arith::MulFOp>(l, cc, in));
      Value hx = nb.create<arith::MulFOp>(l, half, a[0]);
      return nb.create<arith::MulFOp>(l, hx, nb.create<arith::AddFOp>(l, one, th));
    });
  }
  /// d/dx [½x(1 + tanh u)] = ½(1 + t) + ½x(1 − t²) c (1 + 3a x²), u = c(x + a x³).
  Value geluVJP(Value x, Value dy) {
    Value half = cst(0.5), one = cst(1.0), cc = cst(kGeluC), ca = cst(kGeluA), c3a = cst(3 * kGeluA);
    return ew({x, dy}, x, [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
      Value xx = nb.create<arith::MulFOp>(l, a[0], a[0]);
      Value x3 = nb.create<arith::MulFOp>(l, xx, a[0]);
      Value in = nb.create<arith::AddFOp>(l, a[0], nb.create<arith::MulFOp>(l, ca, x3));
      Value t = nb.create<math::TanhOp>(l, nb.create<arith::MulFOp>(l, cc, in));
      Value p1 = nb.create<arith::MulFOp>(l, half, nb.create<arith::AddFOp>(l, one, t));
      Value sech2 = nb.create<arith::SubFOp>(l, one, nb.create<arith::MulFOp>(l, t, t));
      Value du = nb.create<arith::MulFOp>(l, cc, nb.create<arith::AddFOp>(l, one, nb.create<arith::MulFOp>(l, c3a, xx)));
      Value p2 = nb.create<arith::MulFOp>(l, nb.create<arith::MulFOp>(l, half, a[0]),
                                          nb.create<arith::MulFOp>(l, sech2, du));
      return nb.create<arith::MulFOp>(l, a[1], nb.create<arith::AddFOp>(l, p1, p2));
    });
  }
  Value add(Value x, Value y) {
    return ew({x, y}, x, [](OpBuilder &nb, Location l, ValueRange a) -> Value {
      return nb.create<arith::AddFOp>(l, a[0], a[1]);
    });
  }
  Value mul(Value x, Value y) {
    return ew({x, y}, x, [](OpBuilder &nb, Location l, ValueRange a) -> Value {
      return nb.create<arith::MulFOp>(l, a[0], a[1]);
    });
  }
  /// The first n rows of the table, n = x's token count.
  Value tableRows(Value x, Value table) {
    int64_t f = cast<RankedTensorType>(table.getType()).getDimSize(1);
    SmallVector<OpFoldResult> off{b.getIndexAttr(0), b.getIndexAttr(0)};
    SmallVector<OpFoldResult> sz{dim(x, 1), b.getIndexAttr(f)};
    SmallVector<OpFoldResult> st{b.getIndexAttr(1), b.getIndexAttr(1)};
    return b.create<tensor::ExtractSliceOp>(loc, tensorTy({kDyn, f}), table, off, sz, st);
  }
  Value positionEmbed(Value x, Value table) {
    Value rowsT = tableRows(x, table);
    return generic({x, rowsT}, {id(3), map(3, {d(1), d(2)})}, fullLike(x, 0.0), id(3),
                   iters("ppp"), [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                     return nb.create<arith::AddFOp>(l, a[0], a[1]);
                   });
  }
  Value positionEmbedVJP(Value dy, Value table) {
    auto tt = cast<RankedTensorType>(table.getType());
    int64_t f = tt.getDimSize(1);
    // s[i, f] = Σ_b dy[b, i, f]   loops (b, i, f)
    Value s = generic({dy}, {id(3)}, full(tensorTy({kDyn, f}), {dim(dy, 1)}, 0.0),
                      map(3, {d(1), d(2)}), iters("rpp"),
                      [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                        return nb.create<arith::AddFOp>(l, a[1], a[0]);
                      });
    SmallVector<OpFoldResult> off{b.getIndexAttr(0), b.getIndexAttr(0)};
    SmallVector<OpFoldResult> sz{dim(dy, 1), b.getIndexAttr(f)};
    SmallVector<OpFoldResult> st{b.getIndexAttr(1), b.getIndexAttr(1)};
    return b.create<tensor::InsertSliceOp>(loc, s, full(tt, {}, 0.0), off, sz, st);
  }

  //===--------------------------------------------------------------------===//
  // Loss at the x positions (even token indices)
  //===--------------------------------------------------------------------===//

  /// Σ_{b,i} (pred[b, 2i, 0] − ys[b, i])² as a scalar.
  Value sqErr(Value pred, Value ys) {
    Value init = b.create<linalg::FillOp>(loc, cst(0.0), b.create<tensor::EmptyOp>(loc, ArrayRef<int64_t>{}, t).getResult())
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
                     Value g = nb.create<arith::MulFOp>(l, coef, nb.create<arith::SubFOp>(l, a[0], a[1]));
                     return nb.create<arith::SelectOp>(l, even, g, zero);
                   });
  }

  Emitter e;
  OpBuilder &b;
  Location loc;
  Type t;
};

//===----------------------------------------------------------------------===//
// Model → functions
//===----------------------------------------------------------------------===//

/// The activations of one loop iteration that the reverse region's VJPs
/// read. The reverse region (u, dY) -> du begins with a copy of the body's
/// ops (its primal part); `rev` are the primal values that its VJP part
/// reads, `body` the same values in the loop body.
struct Tape {
  SmallVector<Value> rev, body;
  DenseSet<Operation *> primal; // the reverse region's copy of the body
  bool empty() const { return rev.empty(); }
};

/// Matches the reverse region's primal ops to the body's ops: the same op,
/// attributes and result types on corresponding operands. Returns an empty
/// tape when an op has no counterpart or a tape value is not a token tensor
/// [B, n, F] (then the lowering recomputes).
Tape planTape(LoopOp loop) {
  Block &rev = loop.getReverse().front(), &body = loop.getBody().front();
  Tape t;
  DenseSet<Value> dual{rev.getArgument(1)};
  for (Operation &op : rev) {
    bool isDual = op.getNumResults() == 0 || op.getNumRegions() != 0 ||
                  llvm::any_of(op.getOperands(), [&](Value v) { return dual.contains(v); });
    if (isDual)
      dual.insert(op.result_begin(), op.result_end());
    else
      t.primal.insert(&op);
  }
  IRMapping toBody;
  toBody.map(rev.getArgument(0), body.getArgument(0));
  DenseSet<Operation *> matched;
  for (Operation &op : rev) {
    if (!t.primal.contains(&op))
      continue;
    Operation *match = nullptr;
    for (Operation &cand : body) {
      if (matched.contains(&cand) || cand.getName() != op.getName() ||
          cand.getAttrDictionary() != op.getAttrDictionary() ||
          cand.getResultTypes() != op.getResultTypes() ||
          cand.getNumOperands() != op.getNumOperands())
        continue;
      if (llvm::all_of(llvm::zip(op.getOperands(), cand.getOperands()), [&](auto pair) {
            return toBody.lookupOrDefault(std::get<0>(pair)) == std::get<1>(pair);
          })) {
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

/// Makes the op chain that computes `v` write into `slot` (an extract_slice
/// of the tensor that `v` is inserted into) instead of a new tensor, so that
/// bufferization writes it in place rather than copying it there: follows
/// destination operands from `v` back to a tensor.empty used only by that
/// chain and replaces it with `slot`. Leaves other chains alone.
void computeInto(Value v, Value slot) {
  Value root = v;
  while (auto r = dyn_cast<OpResult>(root)) {
    if (auto cast = dyn_cast<tensor::CastOp>(r.getOwner()))
      root = cast.getSource();
    else if (auto dps = dyn_cast<DestinationStyleOpInterface>(r.getOwner()))
      root = dps.getDpsInitOperand(r.getResultNumber())->get();
    else
      break;
    if (!root.hasOneUse())
      return;
  }
  auto empty = root.getDefiningOp<tensor::EmptyOp>();
  if (!empty || empty.getType() != slot.getType())
    return;
  empty.replaceAllUsesWith(slot);
  empty.erase();
}

class ModelLowering {
public:
  ModelLowering(ModelOp model, bool recomputeWindow, bool cpu) : model(model), cpu(cpu) {
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
  Value inject(NN &nn, Value y, Value p);
  /// Maps the model body's parameters (visible inside the loop's regions).
  void seedParams(IRMapping &map, Ctx &ctx) {
    for (auto p : model.getBody().front().getOps<ParamOp>())
      map.map(p.getResult(), ctx.params[table.indexOf(p.getName())]);
  }
  Value initState(NN &nn, Value p);

  /// Attention and its VJP as one call each of the CPU kernels
  /// (runtime/cpu/Attention.cpp); `dy` null for the forward.
  Value cpuAttention(OpBuilder &b, Location loc, Value qkv, Value dy, int64_t heads);

  ModelOp model;
  bool cpu; // --lower-to-cpu: attention and its VJP call the CPU kernels
  ParamTable table;
  Tape tape; // empty: the backward recomputes each block
};

Value ModelLowering::cpuAttention(OpBuilder &b, Location loc, Value qkv, Value dy,
                                  int64_t heads) {
  auto ty = cast<RankedTensorType>(qkv.getType());
  Type el = ty.getElementType();
  int64_t width = ty.getDimSize(2) / 3, hd = width / heads;
  NN nn(b, loc, el);
  Value bsz = nn.dim(qkv, 0), n = nn.dim(qkv, 1);
  auto c = [&](int64_t v) -> Value { return b.create<arith::ConstantIndexOp>(loc, v); };
  Value bytes = c(el.getIntOrFloatBitWidth() / 8);
  // An input tensor as a buffer, rows contiguous (any outer strides: a slice
  // of the window's tape is one); read only, so bufferization need not copy
  // it. Appends its address and (batch, token) strides to `args`.
  SmallVector<Value> args{bsz, n, c(heads), c(hd)};
  auto input = [&](Value t) {
    auto tt = cast<RankedTensorType>(t.getType());
    auto mt = MemRefType::get(tt.getShape(), el,
                              StridedLayoutAttr::get(b.getContext(), kDyn, {kDyn, kDyn, 1}));
    Value m = b.create<bufferization::ToMemrefOp>(loc, mt, t, /*read_only=*/true);
    auto meta = b.create<memref::ExtractStridedMetadataOp>(loc, m);
    args.push_back(b.create<arith::AddIOp>(loc, b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, m),
                                           b.create<arith::MulIOp>(loc, meta.getOffset(), bytes)));
    args.push_back(meta.getStrides()[0]);
    args.push_back(meta.getStrides()[1]);
  };
  input(qkv);
  if (dy)
    input(dy);
  // The result: out [B, n, D] or dqkv [B, n, 3D], a new dense buffer.
  int64_t outWidth = dy ? 3 * width : width;
  auto outTy = MemRefType::get({kDyn, kDyn, outWidth}, el);
  Value o = b.create<memref::AllocOp>(loc, outTy, ValueRange{bsz, n}, b.getI64IntegerAttr(64));
  args.push_back(b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, o));
  args.push_back(b.create<arith::MulIOp>(loc, n, c(outWidth)));
  args.push_back(c(outWidth));
  std::string name = std::string(dy ? "unroll_attention_vjp_" : "unroll_attention_") +
                     (el.isF32() ? "f32" : "f64");
  auto module = model->getParentOfType<ModuleOp>();
  if (!module.lookupSymbol(name)) {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(module.getBody());
    SmallVector<Type> types(args.size(), b.getIndexType());
    b.create<func::FuncOp>(loc, name, b.getFunctionType(types, {})).setPrivate();
  }
  b.create<func::CallOp>(loc, name, TypeRange{}, args);
  return b.create<bufferization::ToTensorOp>(loc, RankedTensorType::get({kDyn, kDyn, outWidth}, el),
                                             o, /*restrict=*/true, /*writable=*/true);
}

LogicalResult ModelLowering::emitOp(OpBuilder &b, Operation &op, IRMapping &map, Ctx &ctx) {
  NN nn(b, op.getLoc(), elem());
  auto get = [&](Value v) { return map.lookup(v); };
  auto set = [&](Value from, Value to) { map.map(from, nn.castTo(to, from.getType())); };
  if (auto p = dyn_cast<ParamOp>(op)) {
    map.map(p.getResult(), ctx.params[table.indexOf(p.getName())]);
  } else if (auto l = dyn_cast<LinearOp>(op)) {
    set(l, nn.linear(get(l.getX()), get(l.getWeight()), get(l.getBias())));
  } else if (auto n = dyn_cast<LayerNormOp>(op)) {
    set(n, nn.layerNorm(get(n.getX()), get(n.getGain()), get(n.getBias()),
                        n.getEps().convertToDouble()));
  } else if (auto a = dyn_cast<AttentionOp>(op)) {
    Type el = elem();
    set(a, cpu && (el.isF32() || el.isF64())
               ? cpuAttention(b, op.getLoc(), get(a.getQkv()), Value(), a.getHeads())
               : nn.attention(get(a.getQkv()), a.getHeads()));
  } else if (auto g = dyn_cast<GeluOp>(op)) {
    set(g, nn.gelu(get(g.getX())));
  } else if (auto s = dyn_cast<AddOp>(op)) {
    set(s, nn.add(get(s.getLhs()), get(s.getRhs())));
  } else if (auto pe = dyn_cast<PositionEmbedOp>(op)) {
    set(pe, nn.positionEmbed(get(pe.getX()), get(pe.getTable())));
  } else if (auto v = dyn_cast<LinearVJPOp>(op)) {
    auto r = nn.linearVJP(get(v.getX()), get(v.getWeight()), get(v.getDy()));
    set(v.getDx(), r[0]), set(v.getDweight(), r[1]), set(v.getDbias(), r[2]);
  } else if (auto v = dyn_cast<LayerNormVJPOp>(op)) {
    auto r = nn.layerNormVJP(get(v.getX()), get(v.getGain()), get(v.getDy()),
                             v.getEps().convertToDouble());
    set(v.getDx(), r[0]), set(v.getDgain(), r[1]), set(v.getDbias(), r[2]);
  } else if (auto v = dyn_cast<AttentionVJPOp>(op)) {
    Type el = elem();
    set(v, cpu && (el.isF32() || el.isF64())
               ? cpuAttention(b, op.getLoc(), get(v.getQkv()), get(v.getDy()), v.getHeads())
               : nn.attentionVJP(get(v.getQkv()), get(v.getDy()), v.getHeads()));
  } else if (auto v = dyn_cast<GeluVJPOp>(op)) {
    set(v, nn.geluVJP(get(v.getX()), get(v.getDy())));
  } else if (auto v = dyn_cast<PositionEmbedVJPOp>(op)) {
    set(v, nn.positionEmbedVJP(get(v.getDy()), get(v.getTable())));
  } else if (auto acc = dyn_cast<AccumulateGradOp>(op)) {
    if (!ctx.grad)
      return success(); // forward-only function
    const ParamInfo &p = table[acc.getParam().getDefiningOp<ParamOp>().getName()];
    int64_t numel = p.type.getNumElements();
    Value g = get(acc.getGrad());
    if (p.type.getRank() != 1) {
      ReassociationIndices all;
      for (int64_t i = 0; i < p.type.getRank(); ++i)
        all.push_back(i);
      g = b.create<tensor::CollapseShapeOp>(op.getLoc(), g, ArrayRef<ReassociationIndices>{all});
    }
    SmallVector<OpFoldResult> off{b.getIndexAttr(p.offset)}, sz{b.getIndexAttr(numel)},
        st{b.getIndexAttr(1)};
    Value cur = b.create<tensor::ExtractSliceOp>(op.getLoc(), nn.tensorTy({numel}), ctx.grad,
                                                 off, sz, st);
    Value sum = nn.ew({cur, g}, cur, [](OpBuilder &nb, Location l, ValueRange a) -> Value {
      return nb.create<arith::AddFOp>(l, a[0], a[1]);
    });
    ctx.grad = b.create<tensor::InsertSliceOp>(op.getLoc(), sum, ctx.grad, off, sz, st);
  } else {
    return op.emitOpError("cannot be lowered in a model");
  }
  return success();
}

FailureOr<SmallVector<Value>> ModelLowering::run(OpBuilder &b, Region &r, ValueRange args,
                                                 Ctx &ctx, IRMapping *given,
                                                 const DenseSet<Operation *> *skip) {
  Block &blk = r.front();
  IRMapping local;
  IRMapping &map = given ? *given : local;
  seedParams(map, ctx);
  for (auto [a, v] : llvm::zip(blk.getArguments(), args))
    map.map(a, v);
  for (Operation &op : blk) {
    if (auto y = dyn_cast<YieldOp>(op)) {
      SmallVector<Value> out;
      for (Value v : y.getValues())
        out.push_back(map.lookup(v));
      return out;
    }
    if (skip && skip->contains(&op))
      continue;
    if (failed(emitOp(b, op, map, ctx)))
      return failure();
  }
  return model.emitOpError("region without unroll.yield");
}

FailureOr<Value> ModelLowering::embed(OpBuilder &b, Value z, Ctx &ctx) {
  IRMapping map;
  map.map(model.getPrompt(), z);
  LoopOp loop = model.getLoop();
  for (Operation &op : model.getBody().front()) {
    if (&op == loop.getOperation())
      break;
    if (failed(emitOp(b, op, map, ctx)))
      return failure();
  }
  return map.lookup(loop.getInput());
}

FailureOr<Value> ModelLowering::head(OpBuilder &b, Value y, Ctx &ctx) {
  IRMapping map;
  LoopOp loop = model.getLoop();
  map.map(loop.getResult(), y);
  for (Operation &op : model.getBody().front()) {
    if (isa<ParamOp>(op)) {
      if (failed(emitOp(b, op, map, ctx)))
        return failure();
      continue;
    }
    if (!loop->isBeforeInBlock(&op) || isa<OutputOp>(op))
      continue;
    if (failed(emitOp(b, op, map, ctx)))
      return failure();
  }
  return map.lookup(model.getOutput().getPredictions());
}

Value ModelLowering::inject(NN &nn, Value y, Value p) {
  switch (model.getLoop().getInjection()) {
  case Injection::add:
    return nn.add(y, p);
  case Injection::mul:
    return nn.mul(y, p);
  case Injection::none:
    return y;
  }
  llvm_unreachable("injection");
}

Value ModelLowering::initState(NN &nn, Value p) {
  switch (model.getLoop().getInjection()) {
  case Injection::add:
    return nn.fullLike(p, 0.0);
  case Injection::mul:
    return nn.fullLike(p, 1.0);
  case Injection::none:
    return p;
  }
  llvm_unreachable("injection");
}

/// @M_adam(theta, grad, m, v, lr_bc1, sqrt_bc2, beta1, beta2, eps, partial[R]):
/// one Adam step in place, PyTorch's formulation as in runtime/Adam.h
/// (lr_bc1 = lr / (1 - beta1^t), sqrt_bc2 = sqrt(1 - beta2^t)):
///   m <- beta1 m + (1 - beta1) g,  v <- beta2 v + (1 - beta2) g^2,
///   theta <- theta - lr_bc1 m / (sqrt(v) / sqrt_bc2 + eps),
/// and the squared gradient norm as R partial sums, partial[r] = sum of g_i^2
/// over i = r mod R (neighbouring threads read neighbouring elements), for
/// the caller's finiteness check. With this entry a training run keeps its
/// weights and optimizer state where the kernels run (docs/gpu.md).
static void emitAdam(OpBuilder &b, Location loc, StringRef name, Type t) {
  OpBuilder::InsertionGuard g(b);
  MemRefType vec = dynMemref(1, t);
  func::FuncOp f = makeEntry(b, loc, (name + "_adam").str(),
                             {vec, vec, vec, vec, t, t, t, t, t, vec});
  Value theta = f.getArgument(0), grad = f.getArgument(1), m = f.getArgument(2),
        v = f.getArgument(3), lrBc1 = f.getArgument(4), sqrtBc2 = f.getArgument(5),
        beta1 = f.getArgument(6), beta2 = f.getArgument(7), eps = f.getArgument(8),
        partial = f.getArgument(9);
  Emitter e(b, loc, t);
  Value c0 = e.idx(0), c1 = e.idx(1), one = e.cst(1.0), zero = e.cst(0.0);
  Value n = b.create<memref::DimOp>(loc, theta, 0);
  b.create<scf::ParallelOp>(
      loc, ValueRange{c0}, ValueRange{n}, ValueRange{c1},
      [&](OpBuilder &pb, Location pl, ValueRange iv) {
        auto ld = [&](Value buf) { return pb.create<memref::LoadOp>(pl, buf, iv).getResult(); };
        auto mul = [&](Value x, Value y) { return pb.create<arith::MulFOp>(pl, x, y).getResult(); };
        auto add = [&](Value x, Value y) { return pb.create<arith::AddFOp>(pl, x, y).getResult(); };
        Value gi = ld(grad);
        Value mi = add(mul(beta1, ld(m)), mul(pb.create<arith::SubFOp>(pl, one, beta1), gi));
        Value vi = add(mul(beta2, ld(v)),
                       mul(pb.create<arith::SubFOp>(pl, one, beta2), mul(gi, gi)));
        Value den = add(pb.create<arith::DivFOp>(pl, pb.create<math::SqrtOp>(pl, vi), sqrtBc2), eps);
        Value step = pb.create<arith::DivFOp>(pl, mul(lrBc1, mi), den);
        Value th = pb.create<arith::SubFOp>(pl, ld(theta), step);
        pb.create<memref::StoreOp>(pl, mi, m, iv);
        pb.create<memref::StoreOp>(pl, vi, v, iv);
        pb.create<memref::StoreOp>(pl, th, theta, iv);
      });
  Value r = b.create<memref::DimOp>(loc, partial, 0);
  Value chunks = b.create<arith::CeilDivUIOp>(loc, n, r);
  b.create<scf::ParallelOp>(
      loc, ValueRange{c0}, ValueRange{r}, ValueRange{c1},
      [&](OpBuilder &pb, Location pl, ValueRange iv) {
        auto sum = pb.create<scf::ForOp>(
            pl, c0, chunks, c1, ValueRange{zero},
            [&](OpBuilder &fb, Location fl, Value j, ValueRange acc) {
              Value i = fb.create<arith::AddIOp>(fl, fb.create<arith::MulIOp>(fl, j, r), iv[0]);
              Value in = fb.create<arith::CmpIOp>(fl, arith::CmpIPredicate::ult, i, n);
              auto sq = fb.create<scf::IfOp>(
                  fl, in,
                  [&](OpBuilder &tb, Location tl) {
                    Value gi = tb.create<memref::LoadOp>(tl, grad, ValueRange{i});
                    tb.create<scf::YieldOp>(tl, ValueRange{tb.create<arith::MulFOp>(tl, gi, gi)});
                  },
                  [&](OpBuilder &eb, Location el) { eb.create<scf::YieldOp>(el, ValueRange{zero}); });
              fb.create<scf::YieldOp>(
                  fl, ValueRange{fb.create<arith::AddFOp>(fl, acc[0], sq.getResult(0))});
            });
        pb.create<memref::StoreOp>(pl, sum.getResult(0), partial, iv);
      });
  b.create<func::ReturnOp>(loc);
}

LogicalResult ModelLowering::emit(OpBuilder &b) {
  Location loc = model.getLoc();
  StringRef name = model.getSymName();
  Type t = elem();
  emitAdam(b, loc, name, t);
  auto promptTy = model.getPrompt().getType();
  auto stateTy = cast<RankedTensorType>(model.getLoop().getInput().getType());
  LoopOp loop = model.getLoop();
  Type i64 = b.getI64Type();
  auto idx = [&](Value v) { return b.create<arith::IndexCastOp>(loc, b.getIndexType(), v); };

  // @M_forward(Z, theta, b, preds[b, B, n])
  {
    OpBuilder::InsertionGuard g(b);
    func::FuncOp f = makeEntry(b, loc, (name + "_forward").str(),
                               {dynMemref(3, t), dynMemref(1, t), i64, dynMemref(3, t)});
    NN nn(b, loc, t);
    Ctx ctx{paramTensors(b, loc, f.getArgument(1), table, t), {}};
    Value z = memrefToTensor(b, loc, f.getArgument(0), promptTy);
    FailureOr<Value> p = embed(b, z, ctx);
    if (failed(p))
      return failure();
    Value nb = idx(f.getArgument(2));
    Value c0 = b.create<arith::ConstantIndexOp>(loc, 0), c1 = b.create<arith::ConstantIndexOp>(loc, 1);
    Value bsz = nn.dim(z, 0), n = nn.dim(z, 1);
    Value preds0 = b.create<tensor::EmptyOp>(loc, nn.tensorTy({kDyn, kDyn, kDyn}), ValueRange{nb, bsz, n});
    LogicalResult ok = success();
    auto forLoop = b.create<scf::ForOp>(
        loc, c0, nb, c1, ValueRange{initState(nn, *p), preds0},
        [&](OpBuilder &lb, Location ll, Value tIdx, ValueRange it) {
          NN ln(lb, ll, t);
          Value u = inject(ln, it[0], *p);
          FailureOr<SmallVector<Value>> y = run(lb, loop.getBody(), {u}, ctx);
          FailureOr<Value> pred = failed(y) ? FailureOr<Value>(failure()) : head(lb, (*y)[0], ctx);
          if (failed(y) || failed(pred)) {
            ok = failure();
            lb.create<scf::YieldOp>(ll, it);
            return;
          }
          Value p2 = lb.create<tensor::CollapseShapeOp>(ll, *pred, ArrayRef<ReassociationIndices>{{0}, {1, 2}});
          SmallVector<OpFoldResult> off{tIdx, lb.getIndexAttr(0), lb.getIndexAttr(0)};
          SmallVector<OpFoldResult> sz{lb.getIndexAttr(1), bsz, n};
          SmallVector<OpFoldResult> st(3, lb.getIndexAttr(1));
          Value preds = lb.create<tensor::InsertSliceOp>(ll, p2, it[1], off, sz, st);
          lb.create<scf::YieldOp>(ll, ValueRange{ln.castTo((*y)[0], stateTy), preds});
        });
    if (failed(ok))
      return failure();
    storeTensor(b, loc, forLoop.getResult(1), f.getArgument(3));
    b.create<func::ReturnOp>(loc);
  }

  // @M_loss_grad(Z, ys, theta, b, T, losses[min(T, b)], grad[num_params])
  OpBuilder::InsertionGuard g(b);
  func::FuncOp f = makeEntry(b, loc, (name + "_loss_grad").str(),
                             {dynMemref(3, t), dynMemref(2, t), dynMemref(1, t), i64, i64,
                              dynMemref(1, t), dynMemref(1, t)});
  NN nn(b, loc, t);
  Ctx ctx{paramTensors(b, loc, f.getArgument(2), table, t), {}};
  Value z = memrefToTensor(b, loc, f.getArgument(0), promptTy);
  Value ys = memrefToTensor(b, loc, f.getArgument(1), nn.tensorTy({kDyn, kDyn}));
  Value nb = idx(f.getArgument(3)), nT = idx(f.getArgument(4));
  Value lossesOut = f.getArgument(5), gradOut = f.getArgument(6);
  Value c0 = b.create<arith::ConstantIndexOp>(loc, 0), c1 = b.create<arith::ConstantIndexOp>(loc, 1);
  Value tw = b.create<arith::MinUIOp>(loc, nb, nT);
  Value nfree = b.create<arith::SubIOp>(loc, nb, tw);
  FailureOr<Value> pOr = embed(b, z, ctx);
  if (failed(pOr))
    return failure();
  Value p = nn.castTo(*pOr, stateTy);
  LogicalResult ok = success();
  auto fail = [&](OpBuilder &lb, Location ll, ValueRange it) {
    ok = failure();
    lb.create<scf::YieldOp>(ll, it);
  };

  // Iterations without gradient.
  auto freeLoop = b.create<scf::ForOp>(
      loc, c0, nfree, c1, ValueRange{initState(nn, p)},
      [&](OpBuilder &lb, Location ll, Value, ValueRange it) {
        NN ln(lb, ll, t);
        FailureOr<SmallVector<Value>> y = run(lb, loop.getBody(), {inject(ln, it[0], p)}, ctx);
        if (failed(y))
          return fail(lb, ll, it);
        lb.create<scf::YieldOp>(ll, ValueRange{ln.castTo((*y)[0], stateTy)});
      });
  Value yFree = freeLoop.getResult(0);

  // The window, forward: store Y_{b-T} .. Y_b and each iterate's loss.
  Value bsz = nn.dim(z, 0), n = nn.dim(z, 1);
  int64_t dState = stateTy.getDimSize(2);
  auto statesTy = nn.tensorTy({kDyn, kDyn, kDyn, dState});
  Value twp1 = b.create<arith::AddIOp>(loc, tw, c1);
  auto stateSlice = [&](OpBuilder &lb, Value i) {
    return std::make_tuple(SmallVector<OpFoldResult>{i, lb.getIndexAttr(0), lb.getIndexAttr(0), lb.getIndexAttr(0)},
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
    return std::make_tuple(SmallVector<OpFoldResult>{i, lb.getIndexAttr(0), lb.getIndexAttr(0), lb.getIndexAttr(0)},
                           SmallVector<OpFoldResult>{lb.getIndexAttr(1), bsz, n, lb.getIndexAttr(f)},
                           SmallVector<OpFoldResult>(4, lb.getIndexAttr(1)));
  };
  SmallVector<Value> winInit{yFree, states};
  for (Value v : tape.body)
    winInit.push_back(b.create<tensor::EmptyOp>(
        loc, nn.tensorTy({kDyn, kDyn, kDyn, cast<RankedTensorType>(v.getType()).getDimSize(2)}),
        ValueRange{tw, bsz, n}));
  Value k = nn.dim(ys, 1);
  Value bk = b.create<arith::IndexCastOp>(loc, b.getI64Type(), b.create<arith::MulIOp>(loc, bsz, k));
  Value invBK = b.create<arith::DivFOp>(loc, nn.cst(1.0), b.create<arith::SIToFPOp>(loc, t, bk));
  auto winLoop = b.create<scf::ForOp>(
      loc, c0, tw, c1, winInit,
      [&](OpBuilder &lb, Location ll, Value w, ValueRange it) {
        NN ln(lb, ll, t);
        IRMapping acts;
        FailureOr<SmallVector<Value>> y =
            run(lb, loop.getBody(), {inject(ln, it[0], p)}, ctx, &acts);
        if (failed(y))
          return fail(lb, ll, it);
        Value yn = ln.castTo((*y)[0], stateTy);
        FailureOr<Value> pred = head(lb, yn, ctx);
        if (failed(pred))
          return fail(lb, ll, it);
        Value l = lb.create<arith::MulFOp>(ll, ln.sqErr(*pred, ys), invBK);
        lb.create<memref::StoreOp>(ll, l, lossesOut, ValueRange{w});
        auto [o, s, st] = stateSlice(lb, lb.create<arith::AddIOp>(ll, w, c1));
        Value sts = lb.create<tensor::InsertSliceOp>(ll, yn, it[1], o, s, st);
        SmallVector<Value> next{yn, sts};
        for (auto [i, v] : llvm::enumerate(tape.body)) {
          Value a = acts.lookup(v);
          auto [to, ts, tst] = tapeSlice(lb, w, a);
          // The producer writes into the tape directly: the extract_slice
          // goes at the top of the iteration, before the chain that uses it.
          {
            OpBuilder::InsertionGuard g(lb);
            lb.setInsertionPointToStart(lb.getInsertionBlock());
            computeInto(a, lb.create<tensor::ExtractSliceOp>(
                               ll, cast<RankedTensorType>(a.getType()), it[2 + i], to, ts, tst));
          }
          next.push_back(lb.create<tensor::InsertSliceOp>(ll, a, it[2 + i], to, ts, tst));
        }
        lb.create<scf::YieldOp>(ll, next);
      });
  states = winLoop.getResult(1);
  SmallVector<Value> tapes(winLoop.getResults().drop_front(2));

  // The window, backward.
  Value twF = b.create<arith::SIToFPOp>(loc, t, b.create<arith::IndexCastOp>(loc, b.getI64Type(), tw));
  Value coef = b.create<arith::DivFOp>(loc, b.create<arith::MulFOp>(loc, nn.cst(2.0), invBK), twF);
  Value grad0 = nn.full(nn.tensorTy({table.numParams}), {}, 0.0);
  Value zerosP = nn.fullLike(p, 0.0);
  Injection inj = loop.getInjection();
  auto backLoop = b.create<scf::ForOp>(
      loc, c0, tw, c1, ValueRange{grad0, zerosP, zerosP},
      [&](OpBuilder &lb, Location ll, Value i, ValueRange it) {
        NN ln(lb, ll, t);
        Ctx c{ctx.params, it[0]};
        Value w = lb.create<arith::SubIOp>(ll, lb.create<arith::SubIOp>(ll, tw, c1), i);
        auto extract = [&](Value at) {
          auto [o, s, st] = stateSlice(lb, at);
          return lb.create<tensor::ExtractSliceOp>(ll, stateTy, states, o, s, st).getResult();
        };
        Value yw = extract(lb.create<arith::AddIOp>(ll, w, c1)), yprev = extract(w);
        FailureOr<Value> pred = head(lb, yw, c);
        if (failed(pred))
          return fail(lb, ll, it);
        Value dpred = ln.sqErrVJP(*pred, ys, coef);
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
        FailureOr<SmallVector<Value>> du = run(lb, loop.getReverse(), {inject(ln, yprev, p), dy},
                                               c, &acts, tape.empty() ? nullptr : &tape.primal);
        if (failed(du))
          return fail(lb, ll, it);
        Value d = ln.castTo((*du)[0], stateTy), dyNext = d, dp = it[2];
        if (inj == Injection::add) {
          dp = ln.add(dp, d);
        } else if (inj == Injection::mul) {
          dyNext = ln.mul(d, p);
          dp = ln.add(dp, ln.mul(d, yprev));
        }
        lb.create<scf::YieldOp>(ll, ValueRange{c.grad, ln.castTo(dyNext, stateTy), ln.castTo(dp, stateTy)});
      });
  if (failed(ok))
    return failure();
  Value dp = backLoop.getResult(2);
  ctx.grad = backLoop.getResult(0);
  if (inj == Injection::none) {
    // Y_0 = P: if the window reaches back to it, P gets the state's gradient.
    Value whole = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, nfree, c0);
    Value withY = nn.add(dp, backLoop.getResult(1));
    dp = b.create<arith::SelectOp>(loc, whole, withY, dp);
  }
  if (failed(run(b, model.getEmbedReverse(), {z, dp}, ctx)))
    return failure();
  storeTensor(b, loc, ctx.grad, gradOut);
  b.create<func::ReturnOp>(loc);
  return success();
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
  llvm::json::Object o{
      {"name", model.getSymName().str()},
      {"forward", (model.getSymName() + "_forward").str()},
      {"loss_grad", (model.getSymName() + "_loss_grad").str()},
      {"adam", (model.getSymName() + "_adam").str()},
      {"prompt_dim", cast<RankedTensorType>(model.getPrompt().getType()).getDimSize(2)},
      {"width", cast<RankedTensorType>(loop.getInput().getType()).getDimSize(2)},
      {"layers", layers},
      {"heads", heads},
      {"iterations", loop.getIterations()},
      {"window", loop.getWindow()},
      {"injection", stringifyInjection(loop.getInjection()).str()},
      {"window_activations", tape.empty() ? "recomputed" : "stored"},
      {"num_params", table.numParams},
      {"param_counts", llvm::json::Object{{"total", total}, {"blocks_and_ln_f", blocks}}},
      {"params", table.toJson()}};
  if (positions > 0)
    o["positions"] = positions;
  return o;
}

} // namespace

FailureOr<llvm::json::Object> mlir::unroll::lowering::lowerModel(OpBuilder &b, ModelOp model,
                                                                 bool recomputeWindow, bool cpu) {
  ModelLowering lowering(model, recomputeWindow, cpu);
  if (failed(lowering.emit(b)))
    return failure();
  return lowering.info();
}
