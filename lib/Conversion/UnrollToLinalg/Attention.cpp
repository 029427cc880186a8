//===- Attention.cpp - causal multi-head attention to linalg ----------------===//
//
// unroll.attention and unroll.attention_vjp: either linalg on tensors (the
// scores, causal mask, softmax and weighted sum as generics over
// [B, H, n, n]; the GPU pipeline and the emulator take this form) or, with
// cpu-kernels, one call each of the CPU kernels in runtime/cpu/Attention.cpp
// (whose signatures runtime/include/unroll/runtime/CpuKernels.h declares).
//
//===----------------------------------------------------------------------===//
#include "CpuCall.h"
#include "unroll/Utils/Builders.h"
#include "unroll/Conversion/UnrollToLinalg/UnrollToLinalg.h"
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Transforms/DialectConversion.h"
#include "unroll/runtime/CpuKernels.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::unroll;
using namespace mlir::unroll::lowering;

namespace {

struct AttentionKernels : TokenEmitter {
  using TokenEmitter::TokenEmitter;

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
    s.q5 =
        b.create<tensor::ExpandShapeOp>(loc, tensorTy({kDyn, kDyn, 3, heads, hd}), qkv,
                                        ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3, 4}}, shape);
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
    Value sc =
        generic({s.q5, s.q5},
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
    return b.create<tensor::CollapseShapeOp>(loc, o4,
                                             ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3}});
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
    Value d4 =
        b.create<tensor::ExpandShapeOp>(loc, tensorTy({kDyn, kDyn, s.h, s.hd}), dy,
                                        ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3}}, shape);
    auto ty4 = tensorTy({kDyn, s.h, kDyn, kDyn});
    auto z4 = [&] { return full(ty4, {s.bsz, s.n, s.n}, 0.0); };
    AffineMap out5 = map(5, {d(0), d(1), d(2), d(3)});
    // dA[b, h, i, j] = Σ_e dO[b, i, h, e] v[b, j, h, e]   loops (b, h, i, j, e)
    Value da = generic({d4, s.q5},
                       {map(5, {d(0), d(2), d(1), d(4)}), map(5, {d(0), d(3), c(2), d(1), d(4)})},
                       z4(), out5, iters("ppppr"), fma);
    // dV[b, j, h, e] = Σ_i A[b, h, i, j] dO[b, i, h, e]   loops (b, h, i, j, e)
    Value dv =
        generic({a, d4}, {map(5, {d(0), d(1), d(2), d(3)}), map(5, {d(0), d(2), d(1), d(4)})},
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
    Value d5 =
        generic({dq, dk, dv}, {pick, pick, pick}, z5, id(5), iters("ppppp"),
                [](OpBuilder &nb, Location l, ValueRange v) -> Value {
                  Value which = nb.create<linalg::IndexOp>(l, 2);
                  Value c0 = nb.create<arith::ConstantIndexOp>(l, 0);
                  Value c1 = nb.create<arith::ConstantIndexOp>(l, 1);
                  Value isQ = nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, which, c0);
                  Value isK = nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, which, c1);
                  Value kv = nb.create<arith::SelectOp>(l, isK, v[1], v[2]);
                  return nb.create<arith::SelectOp>(l, isQ, v[0], kv);
                });
    return b.create<tensor::CollapseShapeOp>(loc, d5,
                                             ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3, 4}});
  }
};

/// Attention (dy null) or its VJP as one call of the CPU kernels
/// (runtime/cpu/Attention.cpp; linked into the library by unroll-translate).
Value cpuAttention(OpBuilder &b, Location loc, Operation *op, Value qkv, Value dy, int64_t heads) {
  auto ty = cast<RankedTensorType>(qkv.getType());
  Type el = ty.getElementType();
  int64_t width = ty.getDimSize(2) / 3, hd = width / heads;
  TokenEmitter nn(b, loc, el);
  Value bsz = nn.dim(qkv, 0), n = nn.dim(qkv, 1);
  CpuCall c(b, loc, el);
  c.push(bsz);
  c.push(n);
  c.push(heads);
  c.push(hd);
  c.input(qkv);
  if (dy)
    c.input(dy);
  // The result: out [B, n, D] or dqkv [B, n, 3D], a new dense buffer.
  c.output({kDyn, kDyn, dy ? 3 * width : width}, ValueRange{bsz, n});
  c.call(op, ::unroll::abi::attentionName(el.isF32(), /*vjp=*/bool(dy)),
         dy ? ::unroll::abi::kAttentionVJPArgs : ::unroll::abi::kAttentionArgs);
  return c.result(0);
}

Type elementOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

struct AttentionLowering : OpConversionPattern<AttentionOp> {
  AttentionLowering(MLIRContext *ctx, bool cpuKernels)
      : OpConversionPattern(ctx), cpuKernels(cpuKernels) {}
  LogicalResult matchAndRewrite(AttentionOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    AttentionKernels k(rewriter, op.getLoc(), elementOf(op.getQkv()));
    Value y = cpuKernels
                  ? cpuAttention(rewriter, op.getLoc(), op, a.getQkv(), Value(), op.getHeads())
                  : k.attention(a.getQkv(), op.getHeads());
    rewriter.replaceOp(op, k.castTo(y, op.getType()));
    return success();
  }
  bool cpuKernels;
};

struct AttentionVJPLowering : OpConversionPattern<AttentionVJPOp> {
  AttentionVJPLowering(MLIRContext *ctx, bool cpuKernels)
      : OpConversionPattern(ctx), cpuKernels(cpuKernels) {}
  LogicalResult matchAndRewrite(AttentionVJPOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    AttentionKernels k(rewriter, op.getLoc(), elementOf(op.getQkv()));
    Value d = cpuKernels
                  ? cpuAttention(rewriter, op.getLoc(), op, a.getQkv(), a.getDy(), op.getHeads())
                  : k.attentionVJP(a.getQkv(), a.getDy(), op.getHeads());
    rewriter.replaceOp(op, k.castTo(d, op.getType()));
    return success();
  }
  bool cpuKernels;
};

} // namespace

void mlir::unroll::populateAttentionPatterns(RewritePatternSet &patterns, bool cpuKernels) {
  patterns.add<AttentionLowering, AttentionVJPLowering>(patterns.getContext(), cpuKernels);
}
