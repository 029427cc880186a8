//===- Elementwise.cpp - gelu, add and position_embed to linalg -----------===//
//
// The elementwise ops of a block and their VJPs: the tanh GELU, sums
// (residuals in models; summed cotangents in models and energies) and the
// learned position embedding (a broadcast add; its VJP sums over the batch).
//
//===----------------------------------------------------------------------===//
#include "unroll/Utils/Builders.h"
#include "unroll/Conversion/UnrollToLinalg/UnrollToLinalg.h"
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"

#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::unroll;
using namespace mlir::unroll::lowering;

namespace {

struct ElementwiseKernels : TokenEmitter {
  using TokenEmitter::TokenEmitter;

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
    Value half = cst(0.5), one = cst(1.0), cc = cst(kGeluC), ca = cst(kGeluA),
          c3a = cst(3 * kGeluA);
    return ew({x, dy}, x, [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
      Value xx = nb.create<arith::MulFOp>(l, a[0], a[0]);
      Value x3 = nb.create<arith::MulFOp>(l, xx, a[0]);
      Value in = nb.create<arith::AddFOp>(l, a[0], nb.create<arith::MulFOp>(l, ca, x3));
      Value t = nb.create<math::TanhOp>(l, nb.create<arith::MulFOp>(l, cc, in));
      Value p1 = nb.create<arith::MulFOp>(l, half, nb.create<arith::AddFOp>(l, one, t));
      Value sech2 = nb.create<arith::SubFOp>(l, one, nb.create<arith::MulFOp>(l, t, t));
      Value du = nb.create<arith::MulFOp>(
          l, cc, nb.create<arith::AddFOp>(l, one, nb.create<arith::MulFOp>(l, c3a, xx)));
      Value p2 = nb.create<arith::MulFOp>(l, nb.create<arith::MulFOp>(l, half, a[0]),
                                          nb.create<arith::MulFOp>(l, sech2, du));
      return nb.create<arith::MulFOp>(l, a[1], nb.create<arith::AddFOp>(l, p1, p2));
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
    return generic({x, rowsT}, {id(3), map(3, {d(1), d(2)})}, fullLike(x, 0.0), id(3), iters("ppp"),
                   [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                     return nb.create<arith::AddFOp>(l, a[0], a[1]);
                   });
  }
  Value positionEmbedVJP(Value dy, Value table) {
    auto tt = cast<RankedTensorType>(table.getType());
    int64_t f = tt.getDimSize(1);
    // s[i, f] = Σ_b dy[b, i, f]   loops (b, i, f)
    Value s =
        generic({dy}, {id(3)}, full(tensorTy({kDyn, f}), {dim(dy, 1)}, 0.0), map(3, {d(1), d(2)}),
                iters("rpp"), [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                  return nb.create<arith::AddFOp>(l, a[1], a[0]);
                });
    SmallVector<OpFoldResult> off{b.getIndexAttr(0), b.getIndexAttr(0)};
    SmallVector<OpFoldResult> sz{dim(dy, 1), b.getIndexAttr(f)};
    SmallVector<OpFoldResult> st{b.getIndexAttr(1), b.getIndexAttr(1)};
    return b.create<tensor::InsertSliceOp>(loc, s, full(tt, {}, 0.0), off, sz, st);
  }
};

Type elementOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

struct GeluLowering : OpConversionPattern<GeluOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(GeluOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    ElementwiseKernels k(rewriter, op.getLoc(), elementOf(op.getX()));
    Value y = k.gelu(a.getX());
    // Marked for the GPU GEMM pass (cuBLASLt's GELU epilogue); a fusion
    // that rebuilds the op drops the mark, and the op is then left alone.
    y.getDefiningOp()->setAttr(kGeluAttr, rewriter.getUnitAttr());
    rewriter.replaceOp(op, k.castTo(y, op.getType()));
    return success();
  }
};

struct GeluVJPLowering : OpConversionPattern<GeluVJPOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(GeluVJPOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    ElementwiseKernels k(rewriter, op.getLoc(), elementOf(op.getX()));
    Value dx = k.geluVJP(a.getX(), a.getDy());
    dx.getDefiningOp()->setAttr(kGeluVJPAttr, rewriter.getUnitAttr()); // as kGeluAttr
    rewriter.replaceOp(op, k.castTo(dx, op.getType()));
    return success();
  }
};

/// Any rank: token batches through TokenEmitter, token matrices (energies'
/// summed cotangents) through Emitter.
struct AddLowering : OpConversionPattern<AddOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(AddOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Type el = elementOf(op.getLhs());
    Value sum;
    if (op.getType().getRank() == 2) {
      Emitter e(rewriter, op.getLoc(), el);
      sum = e.map2({a.getLhs(), a.getRhs()}, {e.id2(), e.id2()}, a.getLhs(),
                   [](OpBuilder &nb, Location l, ValueRange v) -> Value {
                     return nb.create<arith::AddFOp>(l, v[0], v[1]);
                   });
    } else {
      TokenEmitter k(rewriter, op.getLoc(), el);
      sum = k.add(a.getLhs(), a.getRhs());
    }
    rewriter.replaceOp(op, Emitter(rewriter, op.getLoc(), el).castTo(sum, op.getType()));
    return success();
  }
};

struct PositionEmbedLowering : OpConversionPattern<PositionEmbedOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(PositionEmbedOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    ElementwiseKernels k(rewriter, op.getLoc(), elementOf(op.getX()));
    rewriter.replaceOp(op, k.castTo(k.positionEmbed(a.getX(), a.getTable()), op.getType()));
    return success();
  }
};

struct PositionEmbedVJPLowering : OpConversionPattern<PositionEmbedVJPOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(PositionEmbedVJPOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    ElementwiseKernels k(rewriter, op.getLoc(), elementOf(op.getDy()));
    Value d = k.positionEmbedVJP(a.getDy(), a.getTable());
    rewriter.replaceOp(op, k.castTo(d, op.getType()));
    return success();
  }
};

} // namespace

void mlir::unroll::populateElementwisePatterns(RewritePatternSet &patterns) {
  patterns.add<GeluLowering, GeluVJPLowering, AddLowering, PositionEmbedLowering,
               PositionEmbedVJPLowering>(patterns.getContext());
}
