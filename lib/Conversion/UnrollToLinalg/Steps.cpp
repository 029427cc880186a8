//===- Steps.cpp - descent steps and their VJPs to linalg -----------------===//
//
// unroll.mm_step (paper and certified variants, every weight form and mask),
// unroll.grad_step, unroll.prox_nonneg and their VJPs, on token matrices.
//
//===----------------------------------------------------------------------===//
#include "Pairwise.h"
#include "unroll/Conversion/UnrollToLinalg/UnrollToLinalg.h"
#include "unroll/Dialect/Unroll/IR/ScalarRegion.h"

#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::unroll;
using namespace mlir::unroll::lowering;

namespace {

/// W_s = (1 − αc) I − α (W + Wᵀ)/2: the FFN gradient step's matrix (P1 eq. 16).
Value stepMatrix(Emitter &e, Value w, double alpha, double c) {
  Value one = e.cst(1.0 - alpha * c), zero = e.cst(0.0), ha = e.cst(0.5 * alpha);
  return e.map2({w, w}, {e.id2(), e.tr2()}, w,
                [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                  Value d = identityEntry(b, l, one, zero);
                  Value s = b.create<arith::AddFOp>(l, a[0], a[1]);
                  return b.create<arith::SubFOp>(l, d, b.create<arith::MulFOp>(l, ha, s));
                });
}

//===----------------------------------------------------------------------===//
// VJPs of the steps
//===----------------------------------------------------------------------===//

Value matmulTransposeA(Emitter &e, Value a, Value bm) {
  Value out = e.filled({e.dim(a, 1), e.dim(bm, 1)}, 0.0);
  return e.b
      .create<linalg::MatmulTransposeAOp>(e.loc, ValueRange{e.dynamic(a), e.dynamic(bm)},
                                          ValueRange{out})
      .getResult(0);
}

/// (dY, dW_a) of Y' = A Y, A = row-normalize(m ∘ w(z)), z_ij = ½|u_i − u_j|²,
/// u = y W_a. dY = Aᵀ dY' + dU W_aᵀ, dW_a = Yᵀ dU, where dU comes from
/// dA = dY' Yᵀ through the normalization and w'(z) = rho''(z).
std::pair<Value, Value> mmStepVJP(Emitter &e, MMStepVJPOp op, Value y, Value proj, Value dy) {
  AttnSpec spec = specOf(op);
  Value u = proj ? e.matmul(y, proj) : y;
  Mask m = makeMask(e, op.getMask(), op.getGraph());
  Value a = attentionMatrix(e, spec, y, proj);
  Value dyd = matmulTransposeA(e, a, dy);
  Value da = e.matmulTransposeB(dy, y);
  // rd_i = Σ_k dA_ik A_ik: dA through the row normalization.
  Value rd = e.rowReduce(
      {da, a}, {e.id2(), e.id2()}, a, 0.0, [](OpBuilder &b, Location l, ValueRange v) -> Value {
        return b.create<arith::AddFOp>(l, v[2], b.create<arith::MulFOp>(l, v[0], v[1]));
      });
  Value zero = e.cst(0.0);
  Value du;
  if (op.getForm() == WeightForm::softmax) {
    // logits u_i·u_j: dl = A (dA − rd); dU = (dl + dlᵀ) U.
    Value dl =
        e.map2({a, da, rd}, {e.id2(), e.id2(), e.row2()}, a,
               [](OpBuilder &b, Location l, ValueRange v) -> Value {
                 return b.create<arith::MulFOp>(l, v[0], b.create<arith::SubFOp>(l, v[1], v[2]));
               });
    Value g = e.map2({dl, dl}, {e.id2(), e.tr2()}, dl,
                     [](OpBuilder &b, Location l, ValueRange v) -> Value {
                       return b.create<arith::AddFOp>(l, v[0], v[1]);
                     });
    du = e.matmul(g, u);
  } else {
    Value dz;
    if (op.getForm() == WeightForm::reweighted_softmax) {
      // w = exp(−z) up to row factors: dz = −A (dA − rd).
      dz = e.map2({a, da, rd}, {e.id2(), e.id2(), e.row2()}, a,
                  [](OpBuilder &b, Location l, ValueRange v) -> Value {
                    Value t =
                        b.create<arith::MulFOp>(l, v[0], b.create<arith::SubFOp>(l, v[1], v[2]));
                    return b.create<arith::NegFOp>(l, t);
                  });
    } else {
      // dz = m rho''(z) (dA − rd) / s, s the row sums of the weights.
      Value w = generalWeights(e, spec, u, m);
      Value s =
          e.rowReduce({w}, {e.id2()}, w, 0.0, [](OpBuilder &b, Location l, ValueRange v) -> Value {
            return b.create<arith::AddFOp>(l, v[1], v[0]);
          });
      Value wp = generalWeights(e, spec, u, m, /*idx=*/1);
      dz = e.map2({wp, da, rd, s}, {e.id2(), e.id2(), e.row2(), e.row2()}, a,
                  [&](OpBuilder &b, Location l, ValueRange v) -> Value {
                    Value t =
                        b.create<arith::MulFOp>(l, v[0], b.create<arith::SubFOp>(l, v[1], v[2]));
                    Value q = b.create<arith::DivFOp>(l, t, v[3]);
                    Value pos = b.create<arith::CmpFOp>(l, arith::CmpFPredicate::OGT, v[3], zero);
                    return b.create<arith::SelectOp>(l, pos, q, zero);
                  });
    }
    // du_i = Σ_j G_ij (u_i − u_j), G = dz + dzᵀ.
    Value g = e.map2({dz, dz}, {e.id2(), e.tr2()}, dz,
                     [](OpBuilder &b, Location l, ValueRange v) -> Value {
                       return b.create<arith::AddFOp>(l, v[0], v[1]);
                     });
    Value gs =
        e.rowReduce({g}, {e.id2()}, g, 0.0, [](OpBuilder &b, Location l, ValueRange v) -> Value {
          return b.create<arith::AddFOp>(l, v[1], v[0]);
        });
    Value gu = e.matmul(g, u);
    du = e.map2({u, gs, gu}, {e.id2(), e.row2(), e.id2()}, u,
                [](OpBuilder &b, Location l, ValueRange v) -> Value {
                  return b.create<arith::SubFOp>(l, b.create<arith::MulFOp>(l, v[1], v[0]), v[2]);
                });
  }
  Value dyu = proj ? e.matmulTransposeB(du, proj) : du;
  Value dx = e.map2({dyd, dyu}, {e.id2(), e.id2()}, dyd,
                    [](OpBuilder &b, Location l, ValueRange v) -> Value {
                      return b.create<arith::AddFOp>(l, v[0], v[1]);
                    });
  return {dx, proj ? matmulTransposeA(e, y, du) : Value()};
}

/// Y' = Y W_s + αc C with W_s = (1 − αc) I − α (W + Wᵀ)/2 (symmetric):
/// dY = dY' W_s, dW = −α/2 (dW_s + dW_sᵀ) with dW_s = Yᵀ dY', dC = αc dY'.
std::array<Value, 3> gradStepVJP(Emitter &e, GradStepVJPOp op, Value y, Value w, Value dy) {
  double alpha = op.getAlpha().convertToDouble(), c = op.getCoeff().convertToDouble();
  Value ws = stepMatrix(e, w, alpha, c);
  Value dx = e.matmul(dy, ws);
  Value dws = matmulTransposeA(e, y, dy);
  Value nha = e.cst(-0.5 * alpha), ac = e.cst(alpha * c);
  Value dw = e.map2(
      {dws, dws}, {e.id2(), e.tr2()}, dws, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        return b.create<arith::MulFOp>(l, nha, b.create<arith::AddFOp>(l, a[0], a[1]));
      });
  Value dc = e.map2({dy}, {e.id2()}, dy, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
    return b.create<arith::MulFOp>(l, ac, a[0]);
  });
  return {dx, dw, dc};
}

Value proxVJP(Emitter &e, Value y, Value dy) {
  Value zero = e.cst(0.0);
  return e.map2({y, dy}, {e.id2(), e.id2()}, y,
                [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                  Value pos = b.create<arith::CmpFOp>(l, arith::CmpFPredicate::OGT, a[0], zero);
                  return b.create<arith::SelectOp>(l, pos, a[1], zero);
                });
}

/// Certified variant: Y − (L_w̃ Y S + c (Y − C)) / L, w̃ = w + wᵀ,
/// S = W_a W_aᵀ, L = 2 max_i deg_i ‖W_a‖_F² + c (Gershgorin and
/// λ_max(S) ≤ ‖W_a‖_F² bound the majorizer's Hessian).
Value certifiedStep(Emitter &e, MMStepOp op, Value y, Value proj, Value center) {
  Value u = proj ? e.matmul(y, proj) : y;
  Mask m = makeMask(e, op.getMask(), op.getGraph());
  Value w = generalWeights(e, specOf(op), u, m);
  Value ws =
      e.map2({w, w}, {e.id2(), e.tr2()}, w, [](OpBuilder &b, Location l, ValueRange a) -> Value {
        return b.create<arith::AddFOp>(l, a[0], a[1]);
      });
  Value deg =
      e.rowReduce({ws}, {e.id2()}, ws, 0.0, [](OpBuilder &b, Location l, ValueRange a) -> Value {
        return b.create<arith::AddFOp>(l, a[1], a[0]);
      });
  // max_i deg_i (degrees are >= 0, so 0 is a valid initial maximum).
  Value degMax = e.fullReduce(
      {deg}, {e.map(1, {0})},
      [](OpBuilder &b, Location l, ValueRange a) -> Value {
        return b.create<arith::MaximumFOp>(l, a[1], a[0]);
      },
      /*rank=*/1);
  Value ys = y;
  Value frob = e.cst(1.0);
  if (proj) {
    Value s = e.matmulTransposeB(proj, proj);
    ys = e.matmul(y, s);
    frob = e.fullReduce({proj}, {e.id2()}, [](OpBuilder &b, Location l, ValueRange a) -> Value {
      Value p = b.create<arith::MulFOp>(l, a[0], a[0]);
      return b.create<arith::AddFOp>(l, a[1], p);
    });
  }
  double c = op.getCoeff().convertToDouble();
  Value two = e.cst(2.0), cc = e.cst(c), zero = e.cst(0.0);
  Value lip = e.b.create<arith::MulFOp>(e.loc, two, degMax);
  lip = e.b.create<arith::MulFOp>(e.loc, lip, frob);
  lip = e.b.create<arith::AddFOp>(e.loc, lip, cc);
  Value wys = e.matmul(ws, ys);
  SmallVector<Value> ins{y, ys, wys, deg};
  SmallVector<AffineMap> maps{e.id2(), e.id2(), e.id2(), e.row2()};
  Value ctr = op.getCenter() ? center : Value();
  if (ctr) {
    ins.push_back(ctr);
    maps.push_back(e.id2());
  }
  return e.map2(ins, maps, y, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
    // grad = deg_i (YS)_ij − (w̃ YS)_ij + c (y_ij − c_ij)
    Value g = b.create<arith::MulFOp>(l, a[3], a[1]);
    g = b.create<arith::SubFOp>(l, g, a[2]);
    Value r = ctr ? b.create<arith::SubFOp>(l, a[0], a[4]).getResult() : a[0];
    g = b.create<arith::AddFOp>(l, g, b.create<arith::MulFOp>(l, cc, r));
    Value pos = b.create<arith::CmpFOp>(l, arith::CmpFPredicate::OGT, lip, zero);
    Value stepv = b.create<arith::DivFOp>(l, g, lip);
    stepv = b.create<arith::SelectOp>(l, pos, stepv, zero);
    return b.create<arith::SubFOp>(l, a[0], stepv);
  });
}

Value emitGradStep(Emitter &e, GradStepOp op, Value y, Value w, Value center) {
  double alpha = op.getAlpha().convertToDouble(), c = op.getCoeff().convertToDouble();
  Value r = e.matmul(y, stepMatrix(e, w, alpha, c));
  if (center && c != 0.0) {
    Value ac = e.cst(alpha * c);
    r = e.map2({r, center}, {e.id2(), e.id2()}, r,
               [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                 return b.create<arith::AddFOp>(l, a[0], b.create<arith::MulFOp>(l, ac, a[1]));
               });
  }
  return r;
}

Value emitRelu(Emitter &e, Value y) {
  Value zero = e.cst(0.0);
  return e.map2({y}, {e.id2()}, y, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
    return b.create<arith::MaximumFOp>(l, a[0], zero);
  });
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

Type elementOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

struct MMStepLowering : OpConversionPattern<MMStepOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(MMStepOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e(rewriter, op.getLoc(), elementOf(op.getY()));
    Value y = a.getY(), proj = a.getProj();
    Value r = op.getVariant() == AttentionVariant::certified
                  ? certifiedStep(e, op, y, proj, a.getCenter())
                  : e.matmul(attentionMatrix(e, specOf(op), y, proj), y);
    rewriter.replaceOp(op, e.castTo(r, op.getType()));
    return success();
  }
};

struct GradStepLowering : OpConversionPattern<GradStepOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(GradStepOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e(rewriter, op.getLoc(), elementOf(op.getY()));
    Value r = emitGradStep(e, op, a.getY(), a.getWeight(), a.getCenter());
    rewriter.replaceOp(op, e.castTo(r, op.getType()));
    return success();
  }
};

struct ProxNonNegLowering : OpConversionPattern<ProxNonNegOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ProxNonNegOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e(rewriter, op.getLoc(), elementOf(op.getY()));
    rewriter.replaceOp(op, e.castTo(emitRelu(e, a.getY()), op.getType()));
    return success();
  }
};

struct MMStepVJPLowering : OpConversionPattern<MMStepVJPOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(MMStepVJPOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e(rewriter, op.getLoc(), elementOf(op.getY()));
    auto [dx, dp] = mmStepVJP(e, op, a.getY(), a.getProj(), a.getDy());
    SmallVector<Value> results{e.castTo(dx, op.getDx().getType())};
    if (op.getDproj())
      results.push_back(e.castTo(dp, op.getDproj().getType()));
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct GradStepVJPLowering : OpConversionPattern<GradStepVJPOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(GradStepVJPOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e(rewriter, op.getLoc(), elementOf(op.getY()));
    auto r = gradStepVJP(e, op, a.getY(), a.getWeight(), a.getDy());
    rewriter.replaceOp(op, {e.castTo(r[0], op.getDx().getType()),
                            e.castTo(r[1], op.getDweight().getType()),
                            e.castTo(r[2], op.getDcenter().getType())});
    return success();
  }
};

struct ProxNonNegVJPLowering : OpConversionPattern<ProxNonNegVJPOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ProxNonNegVJPOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e(rewriter, op.getLoc(), elementOf(op.getY()));
    rewriter.replaceOp(op, e.castTo(proxVJP(e, a.getY(), a.getDy()), op.getType()));
    return success();
  }
};

} // namespace

void mlir::unroll::populateStepPatterns(RewritePatternSet &patterns) {
  patterns.add<MMStepLowering, GradStepLowering, ProxNonNegLowering, MMStepVJPLowering,
               GradStepVJPLowering, ProxNonNegVJPLowering>(patterns.getContext());
}
