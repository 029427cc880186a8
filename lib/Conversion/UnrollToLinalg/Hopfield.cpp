//===- Hopfield.cpp - modern Hopfield retrieval to linalg -----------------===//
//
// The term, step and VJP of modern Hopfield retrieval, whose input X is a
// memory of patterns (rows) and Y the queries:
//
//   unroll.lse        −β⁻¹ Σ_q log Σ_i exp(β x_i·y_q)
//   unroll.cccp_step  Y' = softmax(β Y Xᵀ) X / c
//
// On a token matrix [n, d] or, per prompt, a batch [B, n, d].
//
//===----------------------------------------------------------------------===//
#include "unroll/Utils/Builders.h"
#include "unroll/Conversion/UnrollToLinalg/UnrollToLinalg.h"
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"

#include "mlir/Transforms/DialectConversion.h"

#include <limits>

using namespace mlir;
using namespace mlir::unroll;
using namespace mlir::unroll::lowering;

namespace {


/// β Y Xᵀ, its row maxima and the rows' Σ exp(β s − max).
struct Logits {
  Value s, mx, sum;
};

Logits logits(Emitter &e, Value y, Value x, double beta) {
  Logits p;
  Value bt = e.cst(beta);
  Value g = e.gram(y, x);
  p.s = e.map2({g}, {e.id2()}, g, [&](OpBuilder &b, Location l, ValueRange v) -> Value {
    return mul(b, l, bt, v[0]);
  });
  p.mx = e.rowReduce({p.s}, {e.id2()}, p.s, -std::numeric_limits<double>::infinity(),
                     [](OpBuilder &b, Location l, ValueRange v) -> Value {
                       return b.create<arith::MaximumFOp>(l, v[1], v[0]);
                     });
  p.sum = e.rowReduce({p.s, p.mx}, {e.id2(), e.row2()}, p.s, 0.0,
                      [](OpBuilder &b, Location l, ValueRange v) -> Value {
                        return add(b, l, v[2], b.create<math::ExpOp>(l, sub(b, l, v[0], v[1])));
                      });
  return p;
}

/// softmax_i(β y_q·x_i) for every query q: [.., q, N].
Value softmaxRows(Emitter &e, const Logits &p) {
  return e.map2({p.s, p.mx, p.sum}, {e.id2(), e.row2(), e.row2()}, p.s,
                [](OpBuilder &b, Location l, ValueRange v) -> Value {
                  Value ex = b.create<math::ExpOp>(l, sub(b, l, v[0], v[1]));
                  return b.create<arith::DivFOp>(l, ex, v[2]);
                });
}


Value scaled(Emitter &e, Value v, double k) {
  if (k == 1.0)
    return v;
  Value c = e.cst(k);
  return e.map2({v}, {e.id2()}, v, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
    return mul(b, l, c, a[0]);
  });
}

Value lseEnergy(Emitter &e, Value y, Value x, double beta) {
  Logits p = logits(e, y, x, beta);
  Value nib = e.cst(-1.0 / beta);
  AffineMap rows = e.rows1();
  return e.rowsReduce(
      {p.mx, p.sum}, {rows, rows},
      [&](OpBuilder &b, Location l, ValueRange v) -> Value {
        Value lse = add(b, l, v[0], b.create<math::LogOp>(l, v[1]));
        return add(b, l, v[2], mul(b, l, nib, lse));
      },
      y);
}

/// Y' = P X / c, P = softmax(β Y Xᵀ): dP = dY' Xᵀ / c, dS = P ∘ (dP − Σ_i
/// P dP) (the logits' cotangent), dY = β dS X, dX = Pᵀ dY' / c + β dSᵀ Y.
std::array<Value, 2> cccpVJP(Emitter &e, CccpStepVJPOp op, Value y, Value x, Value dy) {
  double beta = op.getBeta().convertToDouble(), c = op.getCoeff().convertToDouble();
  Value pm = softmaxRows(e, logits(e, y, x, beta));
  Value dp = scaled(e, e.gram(dy, x), 1.0 / c);
  Value r = e.rowReduce({pm, dp}, {e.id2(), e.id2()}, pm, 0.0,
                        [](OpBuilder &b, Location l, ValueRange v) -> Value {
                          return add(b, l, v[2], mul(b, l, v[0], v[1]));
                        });
  Value ds = e.map2({pm, dp, r}, {e.id2(), e.id2(), e.row2()}, pm,
                    [](OpBuilder &b, Location l, ValueRange v) -> Value {
                      return mul(b, l, v[0], sub(b, l, v[1], v[2]));
                    });
  Value dyOut = scaled(e, e.pairTok(ds, x), beta);
  Value dxA = scaled(e, e.pairTTok(pm, dy), 1.0 / c), dxB = scaled(e, e.pairTTok(ds, y), beta);
  Value dx =
      e.map2({dxA, dxB}, {e.id2(), e.id2()}, dxA,
             [](OpBuilder &b, Location l, ValueRange v) -> Value { return add(b, l, v[0], v[1]); });
  return {dyOut, dx};
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

struct LseLowering : OpConversionPattern<LseOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(LseOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e = emitterFor(rewriter, op, op.getY());
    replaceTerm(rewriter, op, lseEnergy(e, a.getY(), a.getX(), op.getBeta().convertToDouble()));
    return success();
  }
};

struct CccpStepLowering : OpConversionPattern<CccpStepOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(CccpStepOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e = emitterFor(rewriter, op, op.getY());
    Value pm = softmaxRows(e, logits(e, a.getY(), a.getX(), op.getBeta().convertToDouble()));
    Value r = scaled(e, e.pairTok(pm, a.getX()), 1.0 / op.getCoeff().convertToDouble());
    rewriter.replaceOp(op, e.castTo(r, op.getType()));
    return success();
  }
};

struct CccpStepVJPLowering : OpConversionPattern<CccpStepVJPOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(CccpStepVJPOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e = emitterFor(rewriter, op, op.getY());
    auto r = cccpVJP(e, op, a.getY(), a.getX(), a.getDy());
    rewriter.replaceOp(op, ValueRange{e.castTo(r[0], op.getDx().getType()),
                                      e.castTo(r[1], op.getDinput().getType())});
    return success();
  }
};

} // namespace

void mlir::unroll::populateHopfieldPatterns(RewritePatternSet &patterns) {
  patterns.add<LseLowering, CccpStepLowering, CccpStepVJPLowering>(patterns.getContext());
}
