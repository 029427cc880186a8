//===- SparseCoding.cpp - sparse coding to linalg -------------------------===//
//
// The terms, steps and VJPs of sparse coding, whose input X holds the
// measurements b (rows) and Y the codes x:
//
//   unroll.lsq         ½‖X − Y Aᵀ‖²
//   unroll.l1          λ‖Y‖₁ [+ ι(Y ≥ 0)]
//   unroll.ista_step   Y' = η_{λ/L}(Y + (X − Y Aᵀ) A / L)
//   unroll.lista_step  layer k of a learned ISTA (LISTA-CP, TiLISTA, ALISTA)
//   unroll.extrapolate FISTA's Z = Y + μ_k (Y − Y_prev)
//
// On a token matrix [n, d] or, per prompt, a batch [B, n, d]. L = ‖A v‖²
// with v from the power method on AᵀA. A step inside a loop that A is
// defined outside of (a descent, its backward sweep) computes L before the
// outermost such loop: once per descent, not once per step.
//
//===----------------------------------------------------------------------===//
#include "unroll/Utils/Builders.h"
#include "unroll/Conversion/UnrollToLinalg/UnrollToLinalg.h"
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Transforms/DialectConversion.h"

#include <limits>

using namespace mlir;
using namespace mlir::unroll;
using namespace mlir::unroll::lowering;

namespace {

/// The elementwise sum of `v` over every prompt and entry: one scalar.
Value sumAll(Emitter &e, ArrayRef<Value> ins, Emitter::BodyFn term) {
  SmallVector<AffineMap> maps(ins.size(), e.id2());
  return e.reduceAll(
      ins, maps,
      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        return add(b, l, a.back(), term(b, l, a.drop_back()));
      },
      e.nb + 2);
}

/// k · v for a scalar Value k.
Value scaledBy(Emitter &e, Value v, Value k) {
  return e.map2({v}, {e.id2()}, v, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
    return mul(b, l, k, a[0]);
  });
}

/// λ_max(AᵀA) by the power method: L = ‖A v‖² and the unit vector v [n, 1].
struct Lipschitz {
  Value L, v;
};

/// Moves b's insertion point before the outermost loop around it that `a` is
/// defined outside of (nothing moves when there is none). What is built there
/// from `a` alone is then computed once for the whole loop.
void insertBeforeInvariantLoops(OpBuilder &b, Value a) {
  Operation *outermost = nullptr;
  for (Operation *p = b.getInsertionBlock()->getParentOp(); p && isa<LoopLikeOpInterface>(p);
       p = p->getParentOp()) {
    if (p->isAncestor(a.getParentRegion()->getParentOp()))
      break; // a is defined in this loop
    outermost = p;
  }
  if (outermost)
    b.setInsertionPoint(outermost);
}

Lipschitz powerMethod(Emitter &e, Value a, int64_t iterations) {
  OpBuilder::InsertionGuard guard(e.b);
  insertBeforeInvariantLoops(e.b, a);
  Emitter we = e.weights();
  OpBuilder &b = e.b;
  Location loc = e.loc;
  Value n = we.dim(a, 1), one = we.idx(1);
  // A fixed start with no structure a dictionary is likely to be orthogonal
  // to: v_i = 1.5 + sin(i · 12.9898).
  Value init = we.filled({n, one}, 0.0);
  Value v0 = we.generic(
      2, {}, {}, init, we.id2(), Emitter::par(2),
      [&](OpBuilder &nb, Location l, ValueRange) -> Value {
        Value i = nb.create<linalg::IndexOp>(l, 0);
        Value f = nb.create<arith::UIToFPOp>(
            l, e.t, nb.create<arith::IndexCastUIOp>(l, nb.getI64Type(), i));
        Value s = nb.create<math::SinOp>(
            l, mul(nb, l, f, nb.create<arith::ConstantOp>(l, e.t, nb.getFloatAttr(e.t, 12.9898))));
        return add(nb, l, s, nb.create<arith::ConstantOp>(l, e.t, nb.getFloatAttr(e.t, 1.5)));
      });
  auto normalize = [&](Emitter &le, Value u) {
    Value sq = le.reduceAll(
        {u}, {le.id2()},
        [](OpBuilder &nb, Location l, ValueRange x) -> Value {
          return add(nb, l, x[1], mul(nb, l, x[0], x[0]));
        },
        2);
    Value inv =
        le.b.create<arith::DivFOp>(le.loc, le.cst(1.0), le.b.create<math::SqrtOp>(le.loc, sq));
    return le.map2({u}, {le.id2()}, u, [&](OpBuilder &nb, Location l, ValueRange x) -> Value {
      return mul(nb, l, x[0], inv);
    });
  };
  Value v = normalize(we, v0);
  auto loop = b.create<scf::ForOp>(loc, we.idx(0), we.idx(iterations), one, ValueRange{v},
                                   [&](OpBuilder &lb, Location ll, Value, ValueRange it) {
                                     Emitter le(lb, ll, e.t);
                                     Value u = le.matmulTransposeA(a, le.matmul(a, it[0]));
                                     lb.create<scf::YieldOp>(ll, le.dynamic(normalize(le, u)));
                                   });
  v = loop.getResult(0);
  Value av = we.matmul(a, v);
  Value L = we.reduceAll(
      {av}, {we.id2()},
      [](OpBuilder &nb, Location l, ValueRange x) -> Value {
        return add(nb, l, x[1], mul(nb, l, x[0], x[0]));
      },
      2);
  return {L, v};
}

/// The pieces of an ISTA step, shared by the step and its VJP.
struct Ista {
  Lipschitz lip;
  Value t, theta; // 1/L and λ/L (scalars)
  Value r, g, v;  // R = X − Y Aᵀ, G = R A, V = Y + t G
};

Ista istaPieces(Emitter &e, Value y, Value x, Value a, double lambda, int64_t iterations) {
  Ista p;
  p.lip = powerMethod(e, a, iterations);
  p.t = e.b.create<arith::DivFOp>(e.loc, e.cst(1.0), p.lip.L);
  p.theta = mul(e.b, e.loc, e.cst(lambda), p.t);
  Value ya = e.tokWT(y, a);
  p.r = e.map2({x, ya}, {e.id2(), e.id2()}, x, [](OpBuilder &b, Location l, ValueRange v) -> Value {
    return sub(b, l, v[0], v[1]);
  });
  p.g = e.tokW(p.r, a);
  Value t = p.t;
  p.v =
      e.map2({y, p.g}, {e.id2(), e.id2()}, y, [&](OpBuilder &b, Location l, ValueRange v) -> Value {
        return add(b, l, v[0], mul(b, l, t, v[1]));
      });
  return p;
}

/// Is v past the threshold (|v| > θ, or v > θ one-sided)?
Value active(OpBuilder &b, Location l, Value v, Value theta, bool nonneg) {
  Value mag = nonneg ? v : b.create<math::AbsFOp>(l, v).getResult();
  return b.create<arith::CmpFOp>(l, arith::CmpFPredicate::OGT, mag, theta);
}
/// sign(v) (1 for the one-sided threshold).
Value signOf(OpBuilder &b, Location l, Type t, Value v, bool nonneg) {
  Value one = b.create<arith::ConstantOp>(l, t, b.getFloatAttr(t, 1.0));
  if (nonneg)
    return one;
  Value neg = b.create<arith::CmpFOp>(l, arith::CmpFPredicate::OLT, v,
                                      b.create<arith::ConstantOp>(l, t, b.getFloatAttr(t, 0.0)));
  return b.create<arith::SelectOp>(l, neg, b.create<arith::NegFOp>(l, one), one);
}

Value softThreshold(Emitter &e, Value v, Value theta, bool nonneg);

Value istaStep(Emitter &e, IstaStepOp op, Value y, Value x, Value a) {
  Ista p = istaPieces(e, y, x, a, op.getLambda().convertToDouble(), op.getPowerIterations());
  return softThreshold(e, p.v, p.theta, op.getNonneg());
}

/// dV = dY' where v is past the threshold; dθ = −Σ dY' sign(v) there;
/// dt = Σ dV ∘ G + λ dθ. Then, with V = Y + t (X A − Y AᵀA):
/// dY = dV − t (dV Aᵀ) A, dX = t dV Aᵀ,
/// dA = t (Rᵀ dV − (dV Aᵀ)ᵀ Y) − 2 t² dt (A v) vᵀ (dL/dA = 2 A v vᵀ).
std::array<Value, 3> istaVJP(Emitter &e, IstaStepVJPOp op, Value y, Value x, Value a, Value dy) {
  double lambda = op.getLambda().convertToDouble();
  bool nonneg = op.getNonneg();
  Ista p = istaPieces(e, y, x, a, lambda, op.getPowerIterations());
  Value zero = e.cst(0.0);
  Value dv = e.map2(
      {p.v, dy}, {e.id2(), e.id2()}, dy, [&](OpBuilder &b, Location l, ValueRange v) -> Value {
        return b.create<arith::SelectOp>(l, active(b, l, v[0], p.theta, nonneg), v[1], zero);
      });
  Value dtheta = sumAll(e, {p.v, dy}, [&](OpBuilder &b, Location l, ValueRange v) -> Value {
    Value s = signOf(b, l, e.t, v[0], nonneg);
    Value on = b.create<arith::SelectOp>(l, active(b, l, v[0], p.theta, nonneg), v[1], zero);
    return b.create<arith::NegFOp>(l, mul(b, l, s, on));
  });
  Value dvg = sumAll(e, {dv, p.g}, [](OpBuilder &b, Location l, ValueRange v) -> Value {
    return mul(b, l, v[0], v[1]);
  });
  Value dt = add(e.b, e.loc, dvg, mul(e.b, e.loc, e.cst(lambda), dtheta));
  Value dva = e.tokWT(dv, a);
  Value dva2 = e.tokW(dva, a);
  Value dyOut = e.map2({dv, dva2}, {e.id2(), e.id2()}, dv,
                       [&](OpBuilder &b, Location l, ValueRange v) -> Value {
                         return sub(b, l, v[0], mul(b, l, p.t, v[1]));
                       });
  Value dx = e.map2({dva}, {e.id2()}, dva, [&](OpBuilder &b, Location l, ValueRange v) -> Value {
    return mul(b, l, p.t, v[0]);
  });
  Emitter we = e.weights();
  Value rdv = e.tokTTokW(p.r, dv), dvay = e.tokTTokW(dva, y);
  Value outer = we.matmulTransposeB(we.matmul(a, p.lip.v), p.lip.v);
  // −2 t² dt
  Value k = mul(e.b, e.loc, e.cst(-2.0), mul(e.b, e.loc, mul(e.b, e.loc, p.t, p.t), dt));
  Value da = we.map2({rdv, dvay, outer}, {we.id2(), we.id2(), we.id2()}, rdv,
                     [&](OpBuilder &b, Location l, ValueRange v) -> Value {
                       return add(b, l, mul(b, l, p.t, sub(b, l, v[0], v[1])), mul(b, l, k, v[2]));
                     });
  return {dyOut, dx, da};
}

/// Layer k of a learned ISTA: its step size, threshold and weights.
struct Layer {
  Value k;            // min(layer, K − 1)
  Value gamma, theta; // scalars
  Value w, w2;        // [m, n] and (LISTA's uncoupled form) [n, n]
  Value p;            // support selection: the fraction min(1.2 (k + 1), 13) / 100
};

/// `weight` itself, or its slice k of a per-layer stack [K, ...].
Value sliceLayer(Emitter &e, Value weight, Value k) {
  auto wt = cast<RankedTensorType>(weight.getType());
  if (wt.getRank() != 3)
    return weight;
  OpBuilder &b = e.b;
  auto sliceTy = RankedTensorType::get(wt.getShape().drop_front(), wt.getElementType());
  return b.create<tensor::ExtractSliceOp>(
      e.loc, sliceTy, weight, SmallVector<OpFoldResult>{k, b.getIndexAttr(0), b.getIndexAttr(0)},
      SmallVector<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(wt.getDimSize(1)),
                                b.getIndexAttr(wt.getDimSize(2))},
      SmallVector<OpFoldResult>(3, b.getIndexAttr(1)));
}

Layer layerOf(Emitter &e, Value layer, Value gamma, Value theta, Value weight, Value w2,
              bool support) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  auto gt = cast<RankedTensorType>(gamma.getType());
  Layer l;
  l.k = b.create<arith::MinUIOp>(loc, layer, e.idx(gt.getDimSize(0) - 1));
  l.gamma = b.create<tensor::ExtractOp>(loc, gamma, ValueRange{l.k});
  l.theta = b.create<tensor::ExtractOp>(loc, theta, ValueRange{l.k});
  l.w = sliceLayer(e, weight, l.k);
  if (w2)
    l.w2 = sliceLayer(e, w2, l.k);
  if (support) {
    Value kf =
        b.create<arith::SIToFPOp>(loc, e.t, b.create<arith::IndexCastOp>(loc, b.getI64Type(), l.k));
    Value pct = mul(b, loc, e.cst(1.2), add(b, loc, kf, e.cst(1.0)));
    l.p = mul(b, loc, b.create<arith::MinimumFOp>(loc, pct, e.cst(13.0)), e.cst(0.01));
  }
  return l;
}

/// CP form: R = X − Y Aᵀ, G = R W_k, V = Y + γ_k G. Uncoupled (w2):
/// R unused, G = X W_k, V = γ_k G + Y W2_k.
std::array<Value, 3> listaPieces(Emitter &e, const Layer &l, Value y, Value x, Value a) {
  if (l.w2) {
    Value g = e.tokW(x, l.w);
    Value v = e.map2({g, e.tokW(y, l.w2)}, {e.id2(), e.id2()}, g,
                     [&](OpBuilder &b, Location lc, ValueRange a2) -> Value {
                       return add(b, lc, mul(b, lc, l.gamma, a2[0]), a2[1]);
                     });
    return {Value(), g, v};
  }
  Value ya = e.tokWT(y, a);
  Value r =
      e.map2({x, ya}, {e.id2(), e.id2()}, x, [](OpBuilder &b, Location lc, ValueRange v) -> Value {
        return sub(b, lc, v[0], v[1]);
      });
  Value g = e.tokW(r, l.w);
  Value v =
      e.map2({y, g}, {e.id2(), e.id2()}, y, [&](OpBuilder &b, Location lc, ValueRange a2) -> Value {
        return add(b, lc, a2[0], mul(b, lc, l.gamma, a2[1]));
      });
  return {r, g, v};
}

/// η_θ(v) = sign(v) max(|v| − θ, 0) elementwise (one-sided with `nonneg`).
Value softThreshold(Emitter &e, Value v, Value theta, bool nonneg) {
  Value zero = e.cst(0.0);
  return e.map2({v}, {e.id2()}, v, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
    Value s = signOf(b, l, e.t, a[0], nonneg);
    Value shrunk = mul(b, l, s, sub(b, l, mul(b, l, s, a[0]), theta));
    return b.create<arith::SelectOp>(l, active(b, l, a[0], theta, nonneg), shrunk, zero);
  });
}

/// A map over the rows space (batch..., i) of `like` [.., rows, n].
Value mapRows(Emitter &e, ArrayRef<Value> ins, Value like, Emitter::BodyFn body) {
  SmallVector<Value> sizes = e.batchDims(like);
  sizes.push_back(e.dim(like, e.nb));
  SmallVector<AffineMap> maps(ins.size(), e.rows1());
  return e.generic(e.nb + 1, ins, maps, e.filled(sizes, 0.0), e.rows1(), Emitter::par(e.nb + 1),
                   body);
}

/// LISTA-CPSS's support: 1 where |v| is among the round(p n) largest
/// magnitudes of its row (n entries, static; the cut by bisection, 50
/// halvings) and past the threshold θ, else 0. An entry the threshold would
/// zero stays zero: only entries that survive it skip its shrinkage.
Value supportMask(Emitter &e, Value v, Value p, Value theta, int64_t n, bool nonneg) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  Value want = b.create<math::RoundOp>(loc, mul(b, loc, p, e.cst((double)n)));
  auto mag = [&](OpBuilder &nb, Location l, Value x) -> Value {
    return nonneg ? x : nb.create<math::AbsFOp>(l, x).getResult();
  };
  Value hi0 =
      e.rowReduce({v}, {e.id2()}, v, 0.0, [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
        return nb.create<arith::MaximumFOp>(l, a[1], mag(nb, l, a[0]));
      });
  Value lo0 =
      mapRows(e, {hi0}, v, [&](OpBuilder &, Location, ValueRange) -> Value { return e.cst(0.0); });
  auto loop = b.create<scf::ForOp>(
      loc, e.idx(0), e.idx(50), e.idx(1), ValueRange{e.dynamic(lo0), e.dynamic(hi0)},
      [&](OpBuilder &lb, Location ll, Value, ValueRange it) {
        Emitter le(lb, ll, e.t, e.nb);
        Value half = le.cst(0.5), one = le.cst(1.0), zero = le.cst(0.0);
        Value mid =
            mapRows(le, {it[0], it[1]}, v, [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
              return mul(nb, l, half, add(nb, l, a[0], a[1]));
            });
        Value cnt =
            le.rowReduce({v, mid}, {le.id2(), le.row2()}, v, 0.0,
                         [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                           Value ge = nb.create<arith::CmpFOp>(l, arith::CmpFPredicate::OGE,
                                                               mag(nb, l, a[0]), a[1]);
                           return add(nb, l, a[2], nb.create<arith::SelectOp>(l, ge, one, zero));
                         });
        auto pick = [&](bool lower) {
          return mapRows(le, {cnt, mid, lower ? it[0] : it[1]}, v,
                         [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                           Value enough =
                               nb.create<arith::CmpFOp>(l, arith::CmpFPredicate::OGE, a[0], want);
                           // enough: the cut may rise (lo = mid); else it must fall (hi = mid)
                           return lower ? nb.create<arith::SelectOp>(l, enough, a[1], a[2])
                                        : nb.create<arith::SelectOp>(l, enough, a[2], a[1]);
                         });
        };
        lb.create<scf::YieldOp>(ll, ValueRange{le.dynamic(pick(true)), le.dynamic(pick(false))});
      });
  Value lo = loop.getResult(0);
  Value one = e.cst(1.0), zero = e.cst(0.0), half = e.cst(0.5);
  return e.map2(
      {v, lo}, {e.id2(), e.row2()}, v, [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
        Value in = nb.create<arith::CmpFOp>(l, arith::CmpFPredicate::OGE, mag(nb, l, a[0]), a[1]);
        Value any = nb.create<arith::CmpFOp>(l, arith::CmpFPredicate::OGT, want, half);
        Value on = nb.create<arith::AndIOp>(l, nb.create<arith::AndIOp>(l, in, any),
                                            active(nb, l, a[0], theta, nonneg));
        return nb.create<arith::SelectOp>(l, on, one, zero);
      });
}

/// The code size n of a learned layer (static: the verifier checks it).
template <typename Op> int64_t codeSize(Op op) { return op.getY().getType().getShape().back(); }

/// The layer's output: v where selected (support), else η_θ(v).
Value listaOutput(Emitter &e, const Layer &l, Value v, Value sel, bool nonneg) {
  Value t = softThreshold(e, v, l.theta, nonneg);
  if (!sel)
    return t;
  Value half = e.cst(0.5);
  return e.map2({v, t, sel}, {e.id2(), e.id2(), e.id2()}, v,
                [&](OpBuilder &b, Location lc, ValueRange a) -> Value {
                  Value on = b.create<arith::CmpFOp>(lc, arith::CmpFPredicate::OGT, a[2], half);
                  return b.create<arith::SelectOp>(lc, on, a[0], a[1]);
                });
}

/// A zero tensor of `like`'s static type with `v` at `k` (a scalar into a
/// vector [K], or a matrix into a stack [K, m, n]).
Value oneHot(Emitter &e, Value like, Value k, Value v) {
  auto ty = cast<RankedTensorType>(like.getType());
  Value zeros =
      e.b.create<linalg::FillOp>(e.loc, e.cst(0.0),
                                 e.b.create<tensor::EmptyOp>(e.loc, ty, ValueRange{}).getResult())
          .getResult(0);
  if (ty.getRank() == 1)
    return e.b.create<tensor::InsertOp>(e.loc, v, zeros, ValueRange{k});
  if (ty.getRank() == 2)
    return e.castTo(v, ty);
  OpBuilder &b = e.b;
  return b.create<tensor::InsertSliceOp>(
      e.loc, e.castTo(v, RankedTensorType::get(ty.getShape().drop_front(), ty.getElementType())),
      zeros, SmallVector<OpFoldResult>{k, b.getIndexAttr(0), b.getIndexAttr(0)},
      SmallVector<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(ty.getDimSize(1)),
                                b.getIndexAttr(ty.getDimSize(2))},
      SmallVector<OpFoldResult>(3, b.getIndexAttr(1)));
}

/// dV = dY' where v passes (selected, or past the threshold); dθ_k = −Σ
/// sign(v) dY' over the thresholded-through entries; dγ_k = Σ dV ∘ G.
/// CP form: dR = γ dV W_kᵀ; dY = dV − dR A, dX = dR, dW_k = γ Rᵀ dV,
/// dA = −dRᵀ Y. Uncoupled: dX = γ dV W_kᵀ, dW_k = γ Xᵀ dV, dY = dV W2_kᵀ,
/// dW2_k = Yᵀ dV, dA = 0.
SmallVector<Value> listaVJP(Emitter &e, ListaStepVJPOp op, Value y, Value x, Value a, Value w,
                            Value w2, Value gamma, Value theta, Value layer, Value dy) {
  bool nonneg = op.getNonneg();
  Layer l = layerOf(e, layer, gamma, theta, w, w2, op.getSupport());
  auto [r, g, v] = listaPieces(e, l, y, x, a);
  Value sel = op.getSupport() ? supportMask(e, v, l.p, l.theta, codeSize(op), nonneg) : Value();
  Value zero = e.cst(0.0), half = e.cst(0.5);
  SmallVector<Value> ins{v, dy};
  SmallVector<AffineMap> maps{e.id2(), e.id2()};
  if (sel)
    ins.push_back(sel), maps.push_back(e.id2());
  // thresholded-through: past θ and not selected
  auto through = [&](OpBuilder &b, Location lc, ValueRange a2) -> Value {
    Value act = active(b, lc, a2[0], l.theta, nonneg);
    if (!sel)
      return act;
    Value off = b.create<arith::CmpFOp>(lc, arith::CmpFPredicate::OLE, a2[2], half);
    return b.create<arith::AndIOp>(lc, act, off);
  };
  Value dv = e.generic(
      e.nb + 2, ins, maps,
      e.filled(
          [&] {
            SmallVector<Value> s = e.batchDims(v);
            s.append({e.dim(v, e.nb), e.dim(v, e.nb + 1)});
            return s;
          }(),
          0.0),
      e.id2(), Emitter::par(e.nb + 2), [&](OpBuilder &b, Location lc, ValueRange a2) -> Value {
        Value pass = through(b, lc, a2);
        if (sel)
          pass = b.create<arith::OrIOp>(
              lc, pass, b.create<arith::CmpFOp>(lc, arith::CmpFPredicate::OGT, a2[2], half));
        return b.create<arith::SelectOp>(lc, pass, a2[1], zero);
      });
  Value dth = sumAll(e, ins, [&](OpBuilder &b, Location lc, ValueRange a2) -> Value {
    Value on = b.create<arith::SelectOp>(lc, through(b, lc, a2), a2[1], zero);
    return b.create<arith::NegFOp>(lc, mul(b, lc, signOf(b, lc, e.t, a2[0], nonneg), on));
  });
  Value dga = sumAll(e, {dv, g}, [](OpBuilder &b, Location lc, ValueRange a2) -> Value {
    return mul(b, lc, a2[0], a2[1]);
  });
  Emitter we = e.weights();
  auto scale = [&](Emitter &em, Value t, Value k) {
    return em.map2({t}, {em.id2()}, t, [&](OpBuilder &b, Location lc, ValueRange a2) -> Value {
      return mul(b, lc, k, a2[0]);
    });
  };
  Value dyOut, dx, dwk, da, dw2;
  if (l.w2) {
    dx = scale(e, e.tokWT(dv, l.w), l.gamma);
    dwk = scale(we, e.tokTTokW(x, dv), l.gamma);
    dyOut = e.tokWT(dv, l.w2);
    dw2 = e.tokTTokW(y, dv);
    da = we.filled({we.idx(cast<RankedTensorType>(a.getType()).getDimSize(0)),
                    we.idx(cast<RankedTensorType>(a.getType()).getDimSize(1))},
                   0.0);
  } else {
    Value dr = scale(e, e.tokWT(dv, l.w), l.gamma);
    dyOut = e.map2(
        {dv, e.tokW(dr, a)}, {e.id2(), e.id2()}, dv,
        [](OpBuilder &b, Location lc, ValueRange a2) -> Value { return sub(b, lc, a2[0], a2[1]); });
    dx = dr;
    dwk = scale(we, e.tokTTokW(r, dv), l.gamma);
    da = scale(we, e.tokTTokW(dr, y), e.cst(-1.0));
  }
  SmallVector<Value> out{dyOut, dx, da, oneHot(e, w, l.k, dwk)};
  if (w2)
    out.push_back(oneHot(e, w2, l.k, dw2));
  out.append({oneHot(e, gamma, l.k, dga), oneHot(e, theta, l.k, dth)});
  return out;
}

Value lsqEnergy(Emitter &e, Value y, Value x, Value a) {
  Value ya = e.tokWT(y, a);
  Value half = e.cst(0.5);
  return e.fullReduce(
      {x, ya}, {e.id2(), e.id2()},
      [&](OpBuilder &b, Location l, ValueRange v) -> Value {
        Value r = sub(b, l, v[0], v[1]);
        return add(b, l, v[2], mul(b, l, half, mul(b, l, r, r)));
      },
      y);
}

Value l1Energy(Emitter &e, Value y, double lambda, bool nonneg) {
  Value lam = e.cst(lambda), zero = e.cst(0.0);
  Value inf = e.cst(std::numeric_limits<double>::infinity());
  return e.fullReduce(
      {y}, {e.id2()},
      [&](OpBuilder &b, Location l, ValueRange v) -> Value {
        Value term = mul(b, l, lam, b.create<math::AbsFOp>(l, v[0]));
        if (nonneg) {
          Value neg = b.create<arith::CmpFOp>(l, arith::CmpFPredicate::OLT, v[0], zero);
          term = b.create<arith::SelectOp>(l, neg, inf, term);
        }
        return add(b, l, v[1], term);
      },
      y);
}

/// FISTA's μ_k = (t_k − 1) / t_{k+1}, t_0 = 1, t_{j+1} = (1 + √(1 + 4 t_j²)) / 2.
Value momentum(Emitter &e, Value k) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  auto next = [&](OpBuilder &nb, Location l, Value t) -> Value {
    Value one = nb.create<arith::ConstantOp>(l, e.t, nb.getFloatAttr(e.t, 1.0));
    Value four = nb.create<arith::ConstantOp>(l, e.t, nb.getFloatAttr(e.t, 4.0));
    Value half = nb.create<arith::ConstantOp>(l, e.t, nb.getFloatAttr(e.t, 0.5));
    Value r = nb.create<math::SqrtOp>(l, add(nb, l, one, mul(nb, l, four, mul(nb, l, t, t))));
    return mul(nb, l, half, add(nb, l, one, r));
  };
  auto loop = b.create<scf::ForOp>(loc, e.idx(0), k, e.idx(1), ValueRange{e.cst(1.0)},
                                   [&](OpBuilder &lb, Location ll, Value, ValueRange it) {
                                     lb.create<scf::YieldOp>(ll, next(lb, ll, it[0]));
                                   });
  Value tk = loop.getResult(0);
  return b.create<arith::DivFOp>(loc, sub(b, loc, tk, e.cst(1.0)), next(b, loc, tk));
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

struct LsqLowering : OpConversionPattern<LsqOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(LsqOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e = emitterFor(rewriter, op, op.getY());
    replaceTerm(rewriter, op, lsqEnergy(e, a.getY(), a.getX(), a.getDict()));
    return success();
  }
};

struct L1Lowering : OpConversionPattern<L1Op> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(L1Op op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e = emitterFor(rewriter, op, op.getY());
    replaceTerm(rewriter, op,
                l1Energy(e, a.getY(), op.getLambda().convertToDouble(), op.getNonneg()));
    return success();
  }
};

struct IstaStepLowering : OpConversionPattern<IstaStepOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(IstaStepOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e = emitterFor(rewriter, op, op.getY());
    Value r = istaStep(e, op, a.getY(), a.getX(), a.getDict());
    rewriter.replaceOp(op, e.castTo(r, op.getType()));
    return success();
  }
};

struct IstaStepVJPLowering : OpConversionPattern<IstaStepVJPOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(IstaStepVJPOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e = emitterFor(rewriter, op, op.getY());
    auto r = istaVJP(e, op, a.getY(), a.getX(), a.getDict(), a.getDy());
    rewriter.replaceOp(op, ValueRange{e.castTo(r[0], op.getDx().getType()),
                                      e.castTo(r[1], op.getDinput().getType()),
                                      e.castTo(r[2], op.getDdict().getType())});
    return success();
  }
};

struct ListaStepLowering : OpConversionPattern<ListaStepOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ListaStepOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e = emitterFor(rewriter, op, op.getY());
    Layer l = layerOf(e, a.getLayer(), a.getGamma(), a.getTheta(), a.getWeight(), a.getW2(),
                      op.getSupport());
    Value v = listaPieces(e, l, a.getY(), a.getX(), a.getDict())[2];
    Value sel =
        op.getSupport() ? supportMask(e, v, l.p, l.theta, codeSize(op), op.getNonneg()) : Value();
    rewriter.replaceOp(op, e.castTo(listaOutput(e, l, v, sel, op.getNonneg()), op.getType()));
    return success();
  }
};

struct ListaStepVJPLowering : OpConversionPattern<ListaStepVJPOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ListaStepVJPOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e = emitterFor(rewriter, op, op.getY());
    SmallVector<Value> r = listaVJP(e, op, a.getY(), a.getX(), a.getDict(), a.getWeight(),
                                    a.getW2(), a.getGamma(), a.getTheta(), a.getLayer(), a.getDy());
    for (auto [i, res] : llvm::enumerate(op->getResults()))
      r[i] = e.castTo(r[i], res.getType());
    rewriter.replaceOp(op, r);
    return success();
  }
};

/// Z = Y + μ_k (Y − Y_prev).
struct ExtrapolateLowering : OpConversionPattern<ExtrapolateOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ExtrapolateOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e = emitterFor(rewriter, op, op.getY());
    Value mu = momentum(e, a.getLayer());
    Value z = e.map2({a.getY(), a.getPrev()}, {e.id2(), e.id2()}, a.getY(),
                     [&](OpBuilder &b, Location l, ValueRange v) -> Value {
                       return add(b, l, v[0], mul(b, l, mu, sub(b, l, v[0], v[1])));
                     });
    rewriter.replaceOp(op, e.castTo(z, op.getType()));
    return success();
  }
};

/// dY = (1 + μ_k) dZ, dY_prev = −μ_k dZ.
struct ExtrapolateVJPLowering : OpConversionPattern<ExtrapolateVJPOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ExtrapolateVJPOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e = emitterFor(rewriter, op, op.getDy());
    Value mu = momentum(e, a.getLayer());
    Value dy = scaledBy(e, a.getDy(), add(e.b, e.loc, e.cst(1.0), mu));
    Value dprev = scaledBy(e, a.getDy(), e.b.create<arith::NegFOp>(e.loc, mu));
    rewriter.replaceOp(op, ValueRange{e.castTo(dy, op.getDx().getType()),
                                      e.castTo(dprev, op.getDprev().getType())});
    return success();
  }
};

} // namespace

void mlir::unroll::populateSparseCodingPatterns(RewritePatternSet &patterns) {
  patterns.add<LsqLowering, L1Lowering, IstaStepLowering, IstaStepVJPLowering, ListaStepLowering,
               ListaStepVJPLowering, ExtrapolateLowering, ExtrapolateVJPLowering>(
      patterns.getContext());
}
