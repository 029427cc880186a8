//===- LayerNorm.cpp - unroll.layer_norm and its VJP to linalg --------------===//
//
// LayerNorm over the last dimension of a token batch: per-token moments,
// normalization, gain and bias; the VJP recomputes the moments. Either
// linalg on tensors (two reductions and three maps; the VJP nine ops: the
// GPU pipeline and the emulator take this form) or, with cpu-kernels, one
// call of the row kernels in runtime/cpu/LayerNorm.cpp.
//
//===----------------------------------------------------------------------===//
#include "CpuCall.h"
#include "unroll/Utils/Builders.h"
#include "unroll/Conversion/UnrollToLinalg/UnrollToLinalg.h"
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"

#include "mlir/Transforms/DialectConversion.h"
#include "unroll/runtime/CpuKernels.h"

using namespace mlir;
using namespace mlir::unroll;
using namespace mlir::unroll::lowering;

namespace {

struct LayerNormKernels : TokenEmitter {
  using TokenEmitter::TokenEmitter;

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
    Value ssq =
        generic({x, mean}, {id(3), tok}, m0(), tok, iters("ppr"),
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

  /// dx = rstd (ĝ − mean(ĝ) − x̂ mean(ĝ x̂)) (+ addend), ĝ = dy·g;
  /// dg = Σ dy x̂; db = Σ dy.
  std::array<Value, 3> layerNormVJP(Value x, Value g, Value dy, Value addend, double eps) {
    int64_t f = cast<RankedTensorType>(x.getType()).getDimSize(2);
    auto [mean, rstd] = moments(x, f, eps);
    auto m0 = [&] { return zeros2(x); };
    auto z3 = [&] { return zeros3(x, f); };
    AffineMap tok = map(3, {d(0), d(1)}), feat = map(3, {d(2)});
    Value xhat =
        generic({x, mean, rstd}, {id(3), tok, tok}, z3(), id(3), iters("ppp"),
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
    SmallVector<Value> ins{gh, xhat, s1, s2, rstd};
    SmallVector<AffineMap> maps{id(3), id(3), tok, tok, tok};
    if (addend) {
      ins.push_back(addend);
      maps.push_back(id(3));
    }
    Value dx = generic(ins, maps, z3(), id(3), iters("ppp"),
                       [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                         Value m1 = nb.create<arith::MulFOp>(l, a[2], invF);
                         Value m2 = nb.create<arith::MulFOp>(l, a[3], invF);
                         Value v = nb.create<arith::SubFOp>(l, a[0], m1);
                         v = nb.create<arith::SubFOp>(l, v, nb.create<arith::MulFOp>(l, a[1], m2));
                         v = nb.create<arith::MulFOp>(l, v, a[4]);
                         return addend ? nb.create<arith::AddFOp>(l, v, a[5]).getResult() : v;
                       });
    // Reductions over tokens: loops (b, i, f), f innermost.
    auto f0 = [&] { return full(tensorTy({f}), {}, 0.0); };
    Value dg = generic({dy, xhat}, {id(3), id(3)}, f0(), feat, iters("rrp"), fma);
    Value dbias = generic({dy}, {id(3)}, f0(), feat, iters("rrp"), sum);
    return {dx, dg, dbias};
  }
};

Type elementOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

/// LayerNorm (dy null: y) or its VJP (dx plus the addend if any, dgain,
/// dbias) as one call of the CPU row kernels.
SmallVector<Value> cpuLayerNorm(OpBuilder &b, Location loc, Operation *op, Value x, Value g,
                                Value bias, Value dy, Value addend, double eps) {
  Type el = elementOf(x);
  int64_t f = cast<RankedTensorType>(x.getType()).getDimSize(2);
  TokenEmitter nn(b, loc, el);
  Value bsz = nn.dim(x, 0), n = nn.dim(x, 1);
  CpuCall c(b, loc, el);
  c.push(bsz);
  c.push(n);
  c.push(f);
  c.input(x);
  c.input(g);
  if (dy) {
    c.input(dy);
    if (addend) {
      c.input(addend);
    } else {
      c.push(int64_t(0)); // no addend: a null address and its two strides
      c.push(int64_t(0));
      c.push(int64_t(0));
    }
    c.output({kDyn, kDyn, f}, ValueRange{bsz, n});
    c.output({f}, ValueRange{});
    c.output({f}, ValueRange{});
  } else {
    c.input(bias);
    c.output({kDyn, kDyn, f}, ValueRange{bsz, n});
  }
  c.pushDouble(eps);
  c.call(op, ::unroll::abi::layerNormName(el.isF32(), /*vjp=*/bool(dy)),
         dy ? ::unroll::abi::kLayerNormVJPArgs : ::unroll::abi::kLayerNormArgs);
  if (!dy)
    return {c.result(0)};
  return {c.result(0), c.result(1), c.result(2)};
}

struct LayerNormLowering : OpConversionPattern<LayerNormOp> {
  LayerNormLowering(MLIRContext *ctx, bool cpuKernels)
      : OpConversionPattern(ctx), cpuKernels(cpuKernels) {}
  LogicalResult matchAndRewrite(LayerNormOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    LayerNormKernels k(rewriter, op.getLoc(), elementOf(op.getX()));
    double eps = op.getEps().convertToDouble();
    Value y = cpuKernels ? cpuLayerNorm(rewriter, op.getLoc(), op, a.getX(), a.getGain(),
                                        a.getBias(), Value(), Value(), eps)[0]
                         : k.layerNorm(a.getX(), a.getGain(), a.getBias(), eps);
    rewriter.replaceOp(op, k.castTo(y, op.getType()));
    return success();
  }
  bool cpuKernels;
};

struct LayerNormVJPLowering : OpConversionPattern<LayerNormVJPOp> {
  LayerNormVJPLowering(MLIRContext *ctx, bool cpuKernels)
      : OpConversionPattern(ctx), cpuKernels(cpuKernels) {}
  LogicalResult matchAndRewrite(LayerNormVJPOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    LayerNormKernels k(rewriter, op.getLoc(), elementOf(op.getX()));
    double eps = op.getEps().convertToDouble();
    SmallVector<Value> r;
    if (cpuKernels) {
      r = cpuLayerNorm(rewriter, op.getLoc(), op, a.getX(), a.getGain(), Value(), a.getDy(),
                       a.getAddend(), eps);
    } else {
      auto v = k.layerNormVJP(a.getX(), a.getGain(), a.getDy(), a.getAddend(), eps);
      r.assign(v.begin(), v.end());
    }
    rewriter.replaceOp(op, {k.castTo(r[0], op.getDx().getType()),
                            k.castTo(r[1], op.getDgain().getType()),
                            k.castTo(r[2], op.getDbias().getType())});
    return success();
  }
  bool cpuKernels;
};

} // namespace

void mlir::unroll::populateLayerNormPatterns(RewritePatternSet &patterns, bool cpuKernels) {
  patterns.add<LayerNormLowering, LayerNormVJPLowering>(patterns.getContext(), cpuKernels);
}
