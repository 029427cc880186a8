//===- Linear.cpp - unroll.linear and its VJP to linalg ---------------------===//
//
// y = x Wᵀ + b over the last dimension of a token batch, and (dx, dW, db).
// Token tensors stay 3-d ([B, n, F]): reshaping [B, n] <-> [B·n] trips MLIR
// 19's bufferization of an expand_shape with two dynamic sizes in a group.
// On the CPU, unroll-cpu-gemm later turns these contractions into calls of
// the GEMM kernel.
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

struct LinearKernels : TokenEmitter {
  using TokenEmitter::TokenEmitter;

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
    Value dx = generic({dy, w}, {map(4, {d(0), d(1), d(2)}), map(4, {d(2), d(3)})}, zeros3(x, k),
                       map(4, {d(0), d(1), d(3)}), iters("pprp"), fma);
    // dW[o,k] = Σ_{b,i} dy[b,i,o] x[b,i,k]      loops (b, i, o, k)
    Value dw = generic({dy, x}, {map(4, {d(0), d(1), d(2)}), map(4, {d(0), d(1), d(3)})},
                       full(wt, {}, 0.0), map(4, {d(2), d(3)}), iters("rrpp"), fma);
    // db[o] = Σ_{b,i} dy[b,i,o]                 loops (b, i, o)
    Value db =
        generic({dy}, {id(3)}, full(tensorTy({o}), {}, 0.0), map(3, {d(2)}), iters("rrp"), sum);
    return {dx, dw, db};
  }
};

Type elementOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

struct LinearLowering : OpConversionPattern<LinearOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(LinearOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    LinearKernels k(rewriter, op.getLoc(), elementOf(op.getX()));
    rewriter.replaceOp(op, k.castTo(k.linear(a.getX(), a.getWeight(), a.getBias()), op.getType()));
    return success();
  }
};

struct LinearVJPLowering : OpConversionPattern<LinearVJPOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(LinearVJPOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    LinearKernels k(rewriter, op.getLoc(), elementOf(op.getX()));
    auto r = k.linearVJP(a.getX(), a.getWeight(), a.getDy());
    rewriter.replaceOp(op, {k.castTo(r[0], op.getDx().getType()),
                            k.castTo(r[1], op.getDweight().getType()),
                            k.castTo(r[2], op.getDbias().getType())});
    return success();
  }
};

} // namespace

void mlir::unroll::populateLinearPatterns(RewritePatternSet &patterns) {
  patterns.add<LinearLowering, LinearVJPLowering>(patterns.getContext());
}
