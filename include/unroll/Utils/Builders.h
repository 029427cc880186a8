//===- Builders.h - linalg-on-tensors building blocks -----------*- C++ -*-===//
//
// Small constructors for linalg generics, matmuls, fills and reductions on
// tensors, shared by the conversion patterns of convert-unroll-to-linalg
// (lib/Conversion/UnrollToLinalg) and the entry points that
// convert-unroll-to-entry-points builds around them (losses, injection,
// gradient accumulation).
//
//   Emitter       2-d token matrices [n, d] (energies and their steps)
//   TokenEmitter  3-d token batches [B, n, F] (models)
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_UTILS_BUILDERS_H
#define UNROLL_UTILS_BUILDERS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::unroll::lowering {

//===----------------------------------------------------------------------===//
// Emitter: token matrices [n, d], or batches of them [B, n, d]
//===----------------------------------------------------------------------===//

/// The building blocks of energies and their steps. With `batch` = 1 every
/// token tensor carries a leading batch dimension (a model's loop body
/// descending an energy prompt by prompt): maps, reductions and products
/// range over (b, i, j) instead of (i, j), weights stay unbatched, and what
/// is a scalar per token matrix (an energy, a step size) is a tensor [B].
/// With `batch` = 0 the IR is that of a single token matrix.
class Emitter {
public:
  Emitter(OpBuilder &b, Location loc, Type elem, unsigned batch = 0)
      : b(b), loc(loc), t(elem), nb(batch) {}
  /// The same builder for unbatched operands (weights).
  Emitter weights() { return Emitter(b, loc, t, 0); }

  Value cst(double v) { return b.create<arith::ConstantOp>(loc, t, b.getFloatAttr(t, v)); }
  Value idx(int64_t v) { return b.create<arith::ConstantIndexOp>(loc, v); }
  Value dim(Value v, int64_t i) { return b.create<tensor::DimOp>(loc, v, i); }
  /// The batch sizes of a token tensor (none when unbatched).
  SmallVector<Value> batchDims(Value v) {
    SmallVector<Value> s;
    for (unsigned i = 0; i < nb; ++i)
      s.push_back(dim(v, i));
    return s;
  }

  /// A dynamically shaped tensor filled with `v`.
  Value filled(ArrayRef<Value> sizes, double v) {
    SmallVector<int64_t> shape(sizes.size(), ShapedType::kDynamic);
    Value e = b.create<tensor::EmptyOp>(loc, shape, t, sizes);
    return b.create<linalg::FillOp>(loc, cst(v), e).getResult(0);
  }
  /// Casts to the fully dynamic shape of the same rank (scalars as they are).
  Value dynamic(Value v) {
    auto rt = dyn_cast<RankedTensorType>(v.getType());
    if (!rt)
      return v;
    SmallVector<int64_t> shape(rt.getRank(), ShapedType::kDynamic);
    auto to = RankedTensorType::get(shape, t);
    return rt == to ? v : b.create<tensor::CastOp>(loc, to, v).getResult();
  }
  Value castTo(Value v, Type to) {
    return v.getType() == to ? v : b.create<tensor::CastOp>(loc, to, v).getResult();
  }

  //===--------------------------------------------------------------------===//
  // Unbatched 2-d products (weights, and token matrices when unbatched)
  //===--------------------------------------------------------------------===//

  /// A [m, k] · B [k, n].
  Value matmul(Value a, Value bm) {
    Value out = filled({dim(a, 0), dim(bm, 1)}, 0.0);
    return b.create<linalg::MatmulOp>(loc, ValueRange{dynamic(a), dynamic(bm)}, ValueRange{out})
        .getResult(0);
  }
  /// A [m, k] · B[n, k]^T.
  Value matmulTransposeB(Value a, Value bm) {
    Value out = filled({dim(a, 0), dim(bm, 0)}, 0.0);
    return b
        .create<linalg::MatmulTransposeBOp>(loc, ValueRange{dynamic(a), dynamic(bm)},
                                            ValueRange{out})
        .getResult(0);
  }
  /// A[k, m]^T · B [k, n].
  Value matmulTransposeA(Value a, Value bm) {
    Value out = filled({dim(a, 1), dim(bm, 1)}, 0.0);
    return b
        .create<linalg::MatmulTransposeAOp>(loc, ValueRange{dynamic(a), dynamic(bm)},
                                            ValueRange{out})
        .getResult(0);
  }

  //===--------------------------------------------------------------------===//
  // Products of token tensors (batched when nb = 1)
  //===--------------------------------------------------------------------===//

  /// y [.., n, d] · w [d, k] (w a weight).
  Value tokW(Value y, Value w) {
    if (nb == 0)
      return matmul(y, w);
    return contract({y, w}, {{0, 1, 3}, {3, 2}}, {0, 1, 2}, 4, "pppr",
                    {dim(y, 0), dim(y, 1), dim(w, 1)});
  }
  /// y [.., n, k] · w[d, k]^T (w a weight).
  Value tokWT(Value y, Value w) {
    if (nb == 0)
      return matmulTransposeB(y, w);
    return contract({y, w}, {{0, 1, 3}, {2, 3}}, {0, 1, 2}, 4, "pppr",
                    {dim(y, 0), dim(y, 1), dim(w, 0)});
  }
  /// a [.., n, k] · c[.., m, k]^T per token matrix: [.., n, m].
  Value gram(Value a, Value c) {
    if (nb == 0)
      return matmulTransposeB(a, c);
    return contract({a, c}, {{0, 1, 3}, {0, 2, 3}}, {0, 1, 2}, 4, "pppr",
                    {dim(a, 0), dim(a, 1), dim(c, 1)});
  }
  /// A [.., n, m] · y [.., m, d] per token matrix.
  Value pairTok(Value a, Value y) {
    if (nb == 0)
      return matmul(a, y);
    return contract({a, y}, {{0, 1, 3}, {0, 3, 2}}, {0, 1, 2}, 4, "pppr",
                    {dim(a, 0), dim(a, 1), dim(y, 2)});
  }
  /// A[.., m, n]^T · y [.., m, d] per token matrix: [.., n, d].
  Value pairTTok(Value a, Value y) {
    if (nb == 0)
      return matmulTransposeA(a, y);
    return contract({a, y}, {{0, 3, 1}, {0, 3, 2}}, {0, 1, 2}, 4, "pppr",
                    {dim(a, 0), dim(a, 2), dim(y, 2)});
  }
  /// Σ over the batch of y[.., n, p]^T · d [.., n, q]: a weight's [p, q].
  Value tokTTokW(Value y, Value d) {
    if (nb == 0)
      return matmulTransposeA(y, d);
    // (b, n, p, q): reductions over b and n.
    return contract({y, d}, {{0, 1, 2}, {0, 1, 3}}, {2, 3}, 4, "rrpp", {dim(y, 2), dim(d, 2)});
  }

  using BodyFn = function_ref<Value(OpBuilder &, Location, ValueRange)>;

  /// A linalg.generic over `rank` loops producing one tensor of `outSizes`
  /// (indexed by `outMap`) from `ins` (indexed by `inMaps`). The body gets
  /// the input scalars followed by the output (accumulator) scalar.
  Value generic(unsigned rank, ArrayRef<Value> ins, ArrayRef<AffineMap> inMaps, Value init,
                AffineMap outMap, ArrayRef<utils::IteratorType> iters, BodyFn body) {
    SmallVector<AffineMap> maps(inMaps.begin(), inMaps.end());
    maps.push_back(outMap);
    SmallVector<Value> dins;
    for (Value v : ins)
      dins.push_back(dynamic(v));
    return b
        .create<linalg::GenericOp>(loc, init.getType(), dins, ValueRange{init}, maps, iters,
                                   [&](OpBuilder &nb, Location nl, ValueRange args) {
                                     nb.create<linalg::YieldOp>(nl, body(nb, nl, args));
                                   })
        .getResult(0);
  }

  AffineMap map(unsigned rank, ArrayRef<unsigned> dims) {
    SmallVector<AffineExpr> e;
    for (unsigned d : dims)
      e.push_back(b.getAffineDimExpr(d));
    return AffineMap::get(rank, 0, e, b.getContext());
  }
  /// Over the token-pair space (batch..., i, j): (batch..., i, j).
  AffineMap id2() { return withBatch(2, {0, 1}); }
  /// (batch..., j, i)
  AffineMap tr2() { return withBatch(2, {1, 0}); }
  /// (batch..., i)
  AffineMap row2() { return withBatch(2, {0}); }
  /// The per-row space (batch..., i) as the identity over nb + 1 loops.
  AffineMap rows1() { return map(nb + 1, nb ? ArrayRef<unsigned>{0, 1} : ArrayRef<unsigned>{0}); }
  /// (batch..., j)
  AffineMap col2() { return withBatch(2, {1}); }
  /// (i, j) without the batch: an n × n graph shared by every prompt.
  AffineMap pair2() { return map(nb + 2, {nb, nb + 1}); }
  /// The batch index alone, over a space of nb + `inner` loops.
  AffineMap batchOf(unsigned inner) { return withBatch(inner, {}); }
  /// How a per-prompt value (a scalar unbatched, a tensor [B] batched) is
  /// read inside a generic over nb + `inner` loops.
  AffineMap perPromptMap(unsigned inner) { return nb ? batchOf(inner) : scalar(nb + inner); }
  /// Elementwise arithmetic on per-prompt values: `body` on the scalars
  /// themselves (unbatched) or a generic over the batch.
  Value perPrompt(ArrayRef<Value> vals, BodyFn body, Value like) {
    if (nb == 0)
      return body(b, loc, vals);
    SmallVector<AffineMap> maps(vals.size(), batchOf(0));
    return generic(nb, vals, maps, filled(batchDims(like), 0.0), batchOf(0), par(nb), body);
  }
  AffineMap scalar(unsigned rank) { return AffineMap::get(rank, 0, {}, b.getContext()); }

  static SmallVector<utils::IteratorType> par(unsigned n) {
    return SmallVector<utils::IteratorType>(n, utils::IteratorType::parallel);
  }
  /// Parallel over the first `p` loops, reduction over the rest.
  static SmallVector<utils::IteratorType> parRed(unsigned p, unsigned n) {
    SmallVector<utils::IteratorType> it(n, utils::IteratorType::reduction);
    for (unsigned i = 0; i < p; ++i)
      it[i] = utils::IteratorType::parallel;
    return it;
  }

  /// Elementwise over a token-pair or token tensor [.., n, m] (the shape of
  /// `like`).
  Value map2(ArrayRef<Value> ins, ArrayRef<AffineMap> maps, Value like, BodyFn body) {
    SmallVector<Value> sizes = batchDims(like);
    sizes.append({dim(like, nb), dim(like, nb + 1)});
    Value init = filled(sizes, 0.0);
    return generic(nb + 2, ins, maps, init, id2(), par(nb + 2), body);
  }
  /// Row reduction: out[.., i] = combine(out[.., i], f(row values)).
  Value rowReduce(ArrayRef<Value> ins, ArrayRef<AffineMap> maps, Value like, double initV,
                  BodyFn body) {
    SmallVector<Value> sizes = batchDims(like);
    sizes.push_back(dim(like, nb));
    Value init = filled(sizes, initV);
    return generic(nb + 2, ins, maps, init, row2(), parRed(nb + 1, nb + 2), body);
  }
  /// Reduction of each token matrix's (i, j) space: a scalar (the element,
  /// unbatched) or one value per prompt [B] (batched). `like` gives the
  /// batch size.
  Value fullReduce(ArrayRef<Value> ins, ArrayRef<AffineMap> maps, BodyFn body, Value like = {}) {
    return reduceInner(ins, maps, body, 2, like);
  }
  /// The same over a per-token space (.., i), e.g. the largest degree.
  Value rowsReduce(ArrayRef<Value> ins, ArrayRef<AffineMap> maps, BodyFn body, Value like = {}) {
    return reduceInner(ins, maps, body, 1, like);
  }
  /// Full reduction of an unbatched `rank`-d space to a scalar (weights).
  Value reduceAll(ArrayRef<Value> ins, ArrayRef<AffineMap> maps, BodyFn body, unsigned rank) {
    Value init =
        b.create<linalg::FillOp>(loc, cst(0.0),
                                 b.create<tensor::EmptyOp>(loc, ArrayRef<int64_t>{}, t).getResult())
            .getResult(0);
    Value r = generic(rank, ins, maps, init, scalar(rank), parRed(0, rank), body);
    return b.create<tensor::ExtractOp>(loc, r, ValueRange{});
  }

  OpBuilder &b;
  Location loc;
  Type t;
  unsigned nb; // leading batch dimensions of token tensors: 0 or 1

private:
  /// A map over (batch..., inner dims) selecting the batch dims and then
  /// `dims` of the inner ones.
  AffineMap withBatch(unsigned inner, ArrayRef<unsigned> dims) {
    SmallVector<unsigned> all;
    for (unsigned i = 0; i < nb; ++i)
      all.push_back(i);
    for (unsigned d : dims)
      all.push_back(nb + d);
    return map(nb + inner, all);
  }
  Value reduceInner(ArrayRef<Value> ins, ArrayRef<AffineMap> maps, BodyFn body, unsigned inner,
                    Value like) {
    if (nb == 0)
      return reduceAll(ins, maps, body, inner);
    Value init = filled(batchDims(like), 0.0);
    return generic(nb + inner, ins, maps, init, batchOf(inner), parRed(nb, nb + inner), body);
  }
  /// A contraction acc + a·b as a generic over `rank` loops (iterator kinds
  /// `iters`: p or r), output of `sizes` indexed by `out`.
  Value contract(ArrayRef<Value> ins, ArrayRef<SmallVector<unsigned>> inDims,
                 ArrayRef<unsigned> out, unsigned rank, StringRef iters, ArrayRef<Value> sizes) {
    SmallVector<AffineMap> maps;
    for (auto &d : inDims)
      maps.push_back(map(rank, d));
    SmallVector<utils::IteratorType> it;
    for (char c : iters)
      it.push_back(c == 'p' ? utils::IteratorType::parallel : utils::IteratorType::reduction);
    return generic(rank, ins, maps, filled(sizes, 0.0), map(rank, out), it,
                   [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                     return nb.create<arith::AddFOp>(l, a[2],
                                                     nb.create<arith::MulFOp>(l, a[0], a[1]));
                   });
  }
};

//===----------------------------------------------------------------------===//
// Shared by the patterns of energies, steps and their VJPs
//===----------------------------------------------------------------------===//

/// Scalar float arithmetic inside generic bodies.
inline Value add(OpBuilder &b, Location l, Value x, Value y) {
  return b.create<arith::AddFOp>(l, x, y);
}
inline Value sub(OpBuilder &b, Location l, Value x, Value y) {
  return b.create<arith::SubFOp>(l, x, y);
}
inline Value mul(OpBuilder &b, Location l, Value x, Value y) {
  return b.create<arith::MulFOp>(l, x, y);
}

/// An Emitter for the token tensor `y` of `op`: batched when it is
/// [B, n, d].
inline Emitter emitterFor(OpBuilder &b, Operation *op, Value y) {
  auto ty = cast<RankedTensorType>(y.getType());
  return Emitter(b, op->getLoc(), ty.getElementType(), ty.getRank() - 2);
}

/// Replaces `op` (an energy term) by its value `v` (a scalar, or a tensor [B]
/// of one value per prompt), viewed as the term type; the entry points read
/// it back through the opposite cast.
inline void replaceTerm(RewriterBase &rewriter, Operation *op, Value v) {
  rewriter.replaceOpWithNewOp<UnrealizedConversionCastOp>(op, op->getResult(0).getType(), v);
}

//===----------------------------------------------------------------------===//
// TokenEmitter: token batches
//===----------------------------------------------------------------------===//

using utils::IteratorType;
constexpr int64_t kDyn = ShapedType::kDynamic;

/// Linalg-on-tensors building blocks for token batches [B, n, F] (the
/// model ops' kernels and the training step's loss).
class TokenEmitter {
public:
  TokenEmitter(OpBuilder &b, Location loc, Type t) : e(b, loc, t), b(b), loc(loc), t(t) {}

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
  RankedTensorType tensorTy(ArrayRef<int64_t> shape) { return RankedTensorType::get(shape, t); }
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
  Value generic(ArrayRef<Value> ins, ArrayRef<AffineMap> maps, Value init, AffineMap outMap,
                ArrayRef<IteratorType> iters, BodyFn body) {
    SmallVector<AffineMap> all(maps.begin(), maps.end());
    all.push_back(outMap);
    return b
        .create<linalg::GenericOp>(loc, init.getType(), ins, ValueRange{init}, all, iters,
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

  Emitter e;
  OpBuilder &b;
  Location loc;
  Type t;
};

} // namespace mlir::unroll::lowering

#endif // UNROLL_UTILS_BUILDERS_H
