//===- EnergyTerms.cpp - energy terms to scalars --------------------------===//
//
// unroll.pairwise, unroll.quadratic, unroll.sqnorm and unroll.nonneg become
// the value of the term at their Y: a linalg reduction to a scalar of the
// element type (or, on a token batch [B, n, d], to one value per prompt). The term's
// `!unroll.energy` result is replaced by an unrealized_conversion_cast of that scalar; the entry
// points read it back through the opposite cast, and the pass folds the pair.
//
//===----------------------------------------------------------------------===//
#include "Pairwise.h"
#include "unroll/Conversion/UnrollToLinalg/UnrollToLinalg.h"
#include "unroll/Dialect/Unroll/IR/ScalarRegion.h"

#include "mlir/Transforms/DialectConversion.h"

#include <limits>

using namespace mlir;
using namespace mlir::unroll;
using namespace mlir::unroll::lowering;

namespace {

Value emitPairwiseEnergy(Emitter &e, PairwiseOp op, Value y, Value proj) {
  Value u = proj ? e.tokW(y, proj) : y;
  Value z = pairwiseZ(e, u);
  Mask m = makeMask(e, op.getMask(), op.getGraph());
  Region rho;
  Region *rhoR = &op.getRhoBody();
  if (op.getRho() != RhoKind::custom) {
    buildBuiltinRho(rho, static_cast<int>(op.getRho()), e.t, op.getLoc());
    rhoR = &rho;
  }
  SmallVector<Value> ins{z};
  SmallVector<AffineMap> maps{e.id2()};
  m.addInputs(e, ins, maps);
  Value zero = e.cst(0.0);
  return e.fullReduce(
      ins, maps,
      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        Value r = inlineScalarRegion(b, *rhoR, a[0]);
        Value keep = m.keep(b, l, m.graph ? a[1] : Value());
        Value v = b.create<arith::SelectOp>(l, keep, r, zero);
        return b.create<arith::AddFOp>(l, a.back(), v);
      },
      y);
}

Value emitQuadraticEnergy(Emitter &e, Value y, Value w) {
  Value yw = e.tokW(y, w);
  Value half = e.cst(0.5);
  return e.fullReduce(
      {yw, y}, {e.id2(), e.id2()},
      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        Value p = b.create<arith::MulFOp>(l, a[0], a[1]);
        p = b.create<arith::MulFOp>(l, half, p);
        return b.create<arith::AddFOp>(l, a[2], p);
      },
      y);
}

Value emitSqNormEnergy(Emitter &e, Value y, Value center, double coeff) {
  Value hc = e.cst(0.5 * coeff);
  SmallVector<Value> ins{y};
  SmallVector<AffineMap> maps{e.id2()};
  if (center) {
    ins.push_back(center);
    maps.push_back(e.id2());
  }
  return e.fullReduce(
      ins, maps,
      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        Value d = center ? b.create<arith::SubFOp>(l, a[0], a[1]).getResult() : a[0];
        Value p = b.create<arith::MulFOp>(l, d, d);
        p = b.create<arith::MulFOp>(l, hc, p);
        return b.create<arith::AddFOp>(l, a.back(), p);
      },
      y);
}

Value emitNonNegEnergy(Emitter &e, Value y) {
  Value inf = e.cst(std::numeric_limits<double>::infinity()), zero = e.cst(0.0);
  return e.fullReduce(
      {y}, {e.id2()},
      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        Value neg = b.create<arith::CmpFOp>(l, arith::CmpFPredicate::OLT, a[0], zero);
        Value v = b.create<arith::SelectOp>(l, neg, inf, zero);
        return b.create<arith::AddFOp>(l, a[1], v);
      },
      y);
}

Type elementOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }
/// Token matrices [n, d]: unbatched; token batches [B, n, d]: one energy per
/// prompt.
unsigned batchOf(Value v) { return cast<RankedTensorType>(v.getType()).getRank() - 2; }

struct PairwiseLowering : OpConversionPattern<PairwiseOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(PairwiseOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e(rewriter, op.getLoc(), elementOf(op.getY()), batchOf(op.getY()));
    replaceTerm(rewriter, op, emitPairwiseEnergy(e, op, a.getY(), a.getProj()));
    return success();
  }
};

struct QuadraticLowering : OpConversionPattern<QuadraticOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(QuadraticOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e(rewriter, op.getLoc(), elementOf(op.getY()), batchOf(op.getY()));
    replaceTerm(rewriter, op, emitQuadraticEnergy(e, a.getY(), a.getWeight()));
    return success();
  }
};

struct SqNormLowering : OpConversionPattern<SqNormOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(SqNormOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e(rewriter, op.getLoc(), elementOf(op.getY()), batchOf(op.getY()));
    replaceTerm(rewriter, op,
                emitSqNormEnergy(e, a.getY(), a.getCenter(), op.getCoeff().convertToDouble()));
    return success();
  }
};

struct NonNegLowering : OpConversionPattern<NonNegOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(NonNegOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e(rewriter, op.getLoc(), elementOf(op.getY()), batchOf(op.getY()));
    replaceTerm(rewriter, op, emitNonNegEnergy(e, a.getY()));
    return success();
  }
};

} // namespace

void mlir::unroll::populateEnergyTermPatterns(RewritePatternSet &patterns) {
  patterns.add<PairwiseLowering, QuadraticLowering, SqNormLowering, NonNegLowering>(
      patterns.getContext());
}
