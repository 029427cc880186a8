//===- KernelEnergy.cpp - kernel energies and their steps to linalg -------===//
//
// unroll.kernel_pairwise (the term's value) and the pieces of its steps:
// kernel_matrix, kernel_apply, inner, axpy, normalize, ratio, kernel_trace,
// pick, and their VJPs, on a token matrix [n, D] or, prompt by prompt, on a
// token batch [B, n, D]. Heads are column blocks of the projections; they
// are split by expand_shape ([.., n, H·r] -> [.., n, H, r]) so that every
// generic indexes them with plain loop dimensions. Weights are unbatched;
// their gradients sum over the batch.
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

using BodyFn = Emitter::BodyFn;

/// Building blocks over a leading batch dimension (nb = 1) or none (nb = 0).
struct KE {
  KE(OpBuilder &b, Location loc, Type t, unsigned nb)
      : b(b), loc(loc), t(t), nb(nb), e(b, loc, t, nb) {}
  OpBuilder &b;
  Location loc;
  Type t;
  unsigned nb;
  Emitter e;

  Value cst(double v) { return e.cst(v); }
  Value dim(Value v, int64_t i) { return b.create<tensor::DimOp>(loc, v, i); }
  AffineExpr d(unsigned i) { return b.getAffineDimExpr(i); }
  /// A map over `rank` loops: the batch loop (when batched) and then `r`.
  AffineMap at(unsigned rank, ArrayRef<AffineExpr> r) {
    SmallVector<AffineExpr> all;
    if (nb)
      all.push_back(d(0));
    all.append(r.begin(), r.end());
    return AffineMap::get(rank, 0, all, b.getContext());
  }
  /// The loop dimension `i` after the batch loop.
  AffineExpr l(unsigned i) { return d(nb + i); }
  /// A value per prompt, read in a generic over `rank` loops.
  AffineMap perPrompt(unsigned rank) { return at(rank, {}); }
  /// A shared [1] value, read in a generic over `rank` loops.
  AffineMap shared(unsigned rank) {
    return AffineMap::get(rank, 0, {b.getAffineConstantExpr(0)}, b.getContext());
  }
  AffineMap none(unsigned rank) { return AffineMap::get(rank, 0, {}, b.getContext()); }

  /// A tensor of the batch's shape prefix then `shape` (kDyn entries take
  /// `dyn` in order), filled with v.
  Value filled(Value tokens, ArrayRef<int64_t> shape, ArrayRef<Value> dyn, double v) {
    SmallVector<int64_t> s;
    SmallVector<Value> sizes;
    if (nb) {
      s.push_back(kDyn);
      sizes.push_back(dim(tokens, 0));
    }
    s.append(shape.begin(), shape.end());
    sizes.append(dyn.begin(), dyn.end());
    Value em = b.create<tensor::EmptyOp>(loc, RankedTensorType::get(s, t), sizes);
    return b.create<linalg::FillOp>(loc, cst(v), em).getResult(0);
  }
  /// A value per prompt (0-d or [B]) filled with v.
  Value perPromptInit(Value tokens, double v) { return filled(tokens, {}, {}, v); }

  Value generic(unsigned rank, ArrayRef<Value> ins, ArrayRef<AffineMap> maps, Value init,
                AffineMap out, StringRef iters, BodyFn body) {
    SmallVector<utils::IteratorType> it;
    for (char c : iters)
      it.push_back(c == 'p' ? utils::IteratorType::parallel : utils::IteratorType::reduction);
    return e.generic(rank, ins, maps, init, out, it, body);
  }
  /// "p" for the batch loop (when batched) followed by `rest`.
  std::string iters(StringRef rest) { return (nb ? "p" : "") + rest.str(); }

  /// [.., n, H·r] -> [.., n, H, r] (`width` = H·r).
  Value split(Value x, int64_t heads, int64_t width) {
    SmallVector<int64_t> st(nb + 1, kDyn);
    st.push_back(width);
    x = e.castTo(x, RankedTensorType::get(st, t));
    auto ty = cast<RankedTensorType>(x.getType());
    int64_t r = width / heads;
    SmallVector<int64_t> shape;
    SmallVector<OpFoldResult> sizes;
    SmallVector<ReassociationIndices> re;
    for (unsigned i = 0; i <= nb; ++i) {
      shape.push_back(ty.getDimSize(i));
      sizes.push_back(ty.isDynamicDim(i) ? OpFoldResult(dim(x, i))
                                         : b.getIndexAttr(ty.getDimSize(i)));
      re.push_back({int64_t(i)});
    }
    shape.append({heads, r});
    sizes.append({b.getIndexAttr(heads), b.getIndexAttr(r)});
    re.push_back({int64_t(nb) + 1, int64_t(nb) + 2});
    return b.create<tensor::ExpandShapeOp>(loc, RankedTensorType::get(shape, t), x, re, sizes);
  }
  /// [.., n, H, r] -> [.., n, H·r].
  Value join(Value x4) {
    SmallVector<ReassociationIndices> re;
    for (unsigned i = 0; i <= nb; ++i)
      re.push_back({int64_t(i)});
    re.push_back({int64_t(nb) + 1, int64_t(nb) + 2});
    return b.create<tensor::CollapseShapeOp>(loc, x4, re);
  }

  /// Σ over every element of token tensors a, c (same shape), restricted to
  /// the context rows (row < n − 1) with `context`: one value per prompt.
  Value rowsDot(Value a, Value c, bool context) {
    Value last = lastRow(a);
    unsigned r = nb + 2;
    return generic(r, {a, c}, {e.id2(), e.id2()}, perPromptInit(a, 0.0), perPrompt(r), iters("rr"),
                   [&](OpBuilder &bb, Location ll, ValueRange v) -> Value {
                     Value p = bb.create<arith::MulFOp>(ll, v[0], v[1]);
                     if (context)
                       p = bb.create<arith::SelectOp>(ll, isContext(bb, ll, nb, last), p,
                                                      zeroLike(bb, ll));
                     return bb.create<arith::AddFOp>(ll, v[2], p);
                   });
  }
  /// The index of the last token (the query of the concat encoding).
  Value lastRow(Value tokens) {
    return b.create<arith::SubIOp>(loc, dim(tokens, nb), b.create<arith::ConstantIndexOp>(loc, 1));
  }
  /// Inside a generic: is the row at loop `dimIdx` a context row?
  static Value isContext(OpBuilder &bb, Location ll, unsigned dimIdx, Value last) {
    Value i = bb.create<linalg::IndexOp>(ll, dimIdx);
    return bb.create<arith::CmpIOp>(ll, arith::CmpIPredicate::ult, i, last);
  }
  Value zeroLike(OpBuilder &bb, Location ll) {
    return bb.create<arith::ConstantOp>(ll, t, bb.getFloatAttr(t, 0.0));
  }
  /// a + c, elementwise, for token tensors (`tokens`) or weights.
  Value add(Value a, Value c, bool tokens) {
    Emitter w = tokens ? e : e.weights();
    return w.map2({a, c}, {w.id2(), w.id2()}, a,
                  [](OpBuilder &bb, Location ll, ValueRange v) -> Value {
                    return bb.create<arith::AddFOp>(ll, v[0], v[1]);
                  });
  }
  /// Elementwise over a token tensor's shape.
  Value tokenMap(ArrayRef<Value> ins, ArrayRef<AffineMap> maps, Value like, BodyFn body) {
    return e.map2(ins, maps, like, body);
  }
};

//===----------------------------------------------------------------------===//
// Kernel matrices
//===----------------------------------------------------------------------===//

/// Which pairs interact, inside a generic over (b?, h, i, j): the step's
/// mask, or (`energy`) the pairs the energy sums.
struct PairMask {
  MaskKind kind = MaskKind::none;
  bool energy = false, mean = false;
  Value last;  // n − 1, for context
  Value n;     // the token count, for mean
  Value graph; // n × n 0/1, for graph
  /// With `mean`: 1 / the number of keys row i reads (none: n, causal:
  /// i + 1, context: n − 1), inside a generic over (b?, h, i, j); else 1.
  Value rowWeight(OpBuilder &bb, Location ll, unsigned nb, Type t) const {
    Value one = bb.create<arith::ConstantOp>(ll, t, bb.getFloatAttr(t, 1.0));
    if (!mean)
      return one;
    Value count = kind == MaskKind::causal
                      ? bb.create<arith::AddIOp>(ll, bb.create<linalg::IndexOp>(ll, nb + 1),
                                                 bb.create<arith::ConstantIndexOp>(ll, 1))
                            .getResult()
                  : kind == MaskKind::context ? last
                                              : n;
    Value c = bb.create<arith::UIToFPOp>(ll, t,
                                         bb.create<arith::IndexCastOp>(ll, bb.getI64Type(), count));
    // No keys (a context of none): the row is masked out anyway.
    Value safe = bb.create<arith::MaximumFOp>(ll, c, one);
    return bb.create<arith::DivFOp>(ll, one, safe);
  }
  Value keep(OpBuilder &bb, Location ll, unsigned nb, Value gval) const {
    Value i = bb.create<linalg::IndexOp>(ll, nb + 1), j = bb.create<linalg::IndexOp>(ll, nb + 2);
    switch (kind) {
    case MaskKind::none:
      return bb.create<arith::ConstantIntOp>(ll, 1, 1);
    case MaskKind::causal:
      return bb.create<arith::CmpIOp>(ll, arith::CmpIPredicate::ule, j, i);
    case MaskKind::graph: {
      Value zero =
          bb.create<arith::ConstantOp>(ll, gval.getType(), bb.getFloatAttr(gval.getType(), 0.0));
      return bb.create<arith::CmpFOp>(ll, arith::CmpFPredicate::ONE, gval, zero);
    }
    case MaskKind::context: {
      Value cj = bb.create<arith::CmpIOp>(ll, arith::CmpIPredicate::ult, j, last);
      if (!energy)
        return cj;
      Value ci = bb.create<arith::CmpIOp>(ll, arith::CmpIPredicate::ult, i, last);
      return bb.create<arith::AndIOp>(ll, ci, cj);
    }
    }
    llvm_unreachable("mask kind");
  }
};

PairMask makePairMask(KE &x, Value src, MaskKind kind, std::optional<ElementsAttr> graph,
                      bool energy, bool mean) {
  PairMask m;
  m.kind = kind;
  m.energy = energy;
  m.mean = mean;
  m.n = x.dim(src, x.nb);
  if (kind == MaskKind::context)
    m.last = x.lastRow(src);
  if (kind == MaskKind::graph)
    m.graph = makeMask(x.e, kind, graph).graph;
  return m;
}

/// The pieces of K = m ∘ κ(q, k) that the matrix and its VJP share.
struct Kernels {
  Value q4, k4;   // [.., n, H, r] (k4 == q4 without a key)
  Value dot;      // [.., H, n, n] q_i · k_j
  Value sqq, sqk; // [.., H, n] ½‖q_i‖², ½‖k_j‖² (rho kernels)
  Value k;        // [.., H, n, n] the masked kernel
  PairMask mask;
  int64_t heads;
};

/// Σ_e a4[b, i, h, e] c4[b, j, h, e] over loops (b?, h, i, j, e).
Value headDots(KE &x, Value a4, Value c4, Value like, int64_t heads) {
  Value n = x.dim(like, x.nb);
  unsigned r = x.nb + 4;
  Value init = x.filled(like, {heads, kDyn, kDyn}, {n, n}, 0.0);
  return x.generic(r, {a4, c4},
                   {x.at(r, {x.l(1), x.l(0), x.l(3)}), x.at(r, {x.l(2), x.l(0), x.l(3)})}, init,
                   x.at(r, {x.l(0), x.l(1), x.l(2)}), x.iters("pppr"), TokenEmitter::fma);
}

/// ½ Σ_e a4[b, i, h, e]² over loops (b?, h, i, e): [.., H, n].
Value halfSquares(KE &x, Value a4, Value like, int64_t heads) {
  unsigned r = x.nb + 3;
  Value init = x.filled(like, {heads, kDyn}, {x.dim(like, x.nb)}, 0.0);
  Value half = x.cst(0.5);
  return x.generic(r, {a4}, {x.at(r, {x.l(1), x.l(0), x.l(2)})}, init, x.at(r, {x.l(0), x.l(1)}),
                   x.iters("ppr"), [&](OpBuilder &bb, Location ll, ValueRange v) -> Value {
                     Value s = bb.create<arith::MulFOp>(ll, v[0], v[0]);
                     s = bb.create<arith::MulFOp>(ll, half, s);
                     return bb.create<arith::AddFOp>(ll, v[1], s);
                   });
}

/// The kernel's region (rho' or, for a VJP, (rho', rho'')) and its output
/// `idx` at z, or q·k for the linear kernel.
/// The source's features [lo, hi) (all without `features`).
Value sourceFeatures(KE &x, Value src, std::optional<ArrayRef<int64_t>> features) {
  if (!features)
    return src;
  auto st = cast<RankedTensorType>(src.getType());
  unsigned r = st.getRank();
  int64_t lo = (*features)[0], hi = (*features)[1];
  SmallVector<OpFoldResult> off(r, x.b.getIndexAttr(0)), sz, str(r, x.b.getIndexAttr(1));
  for (unsigned i = 0; i + 1 < r; ++i)
    sz.push_back(x.dim(src, i));
  sz.push_back(x.b.getIndexAttr(hi - lo));
  off.back() = x.b.getIndexAttr(lo);
  SmallVector<int64_t> shape(st.getShape());
  shape.back() = hi - lo;
  return x.b.create<tensor::ExtractSliceOp>(x.loc, RankedTensorType::get(shape, x.t), src, off, sz,
                                            str);
}

/// The gradient of the source from that of its features [lo, hi).
Value sourceGradient(KE &x, Value dfeat, Value src, std::optional<ArrayRef<int64_t>> features) {
  if (!features)
    return dfeat;
  auto st = cast<RankedTensorType>(src.getType());
  unsigned r = st.getRank();
  SmallVector<Value> dyn;
  for (unsigned i = 0; i < r; ++i)
    if (st.isDynamicDim(i))
      dyn.push_back(x.dim(src, i));
  Value zeros = x.b.create<linalg::FillOp>(x.loc, x.cst(0.0),
                                           x.b.create<tensor::EmptyOp>(x.loc, st, dyn).getResult())
                    .getResult(0);
  SmallVector<OpFoldResult> off(r, x.b.getIndexAttr(0)), sz, str(r, x.b.getIndexAttr(1));
  for (unsigned i = 0; i + 1 < r; ++i)
    sz.push_back(x.dim(src, i));
  sz.push_back(x.b.getIndexAttr((*features)[1] - (*features)[0]));
  off.back() = x.b.getIndexAttr((*features)[0]);
  SmallVector<int64_t> shape(st.getShape());
  shape.back() = (*features)[1] - (*features)[0];
  dfeat = x.e.castTo(dfeat, RankedTensorType::get(shape, x.t));
  return x.b.create<tensor::InsertSliceOp>(x.loc, dfeat, zeros, off, sz, str);
}

Kernels emitKernels(KE &x, Value src, Value wq, Value wk, KernelKind kind, Region *weight,
                    unsigned idx, int64_t heads, MaskKind maskKind,
                    std::optional<ElementsAttr> graph, bool energy,
                    std::optional<ArrayRef<int64_t>> features, bool mean) {
  Kernels K;
  K.heads = heads;
  src = sourceFeatures(x, src, features);
  int64_t width = cast<RankedTensorType>(wq.getType()).getDimSize(1);
  K.q4 = x.split(x.e.tokW(src, wq), heads, width);
  K.k4 = wk ? x.split(x.e.tokW(src, wk), heads, width) : K.q4;
  K.dot = headDots(x, K.q4, K.k4, src, heads);
  K.mask = makePairMask(x, src, maskKind, graph, energy, mean);
  bool linear = kind == KernelKind::linear;
  if (!linear) {
    K.sqq = halfSquares(x, K.q4, src, heads);
    K.sqk = wk ? halfSquares(x, K.k4, src, heads) : K.sqq;
  }
  unsigned r = x.nb + 3;
  SmallVector<Value> ins{K.dot};
  SmallVector<AffineMap> maps{x.at(r, {x.l(0), x.l(1), x.l(2)})};
  if (!linear) {
    ins.append({K.sqq, K.sqk});
    maps.append({x.at(r, {x.l(0), x.l(1)}), x.at(r, {x.l(0), x.l(2)})});
  }
  if (K.mask.graph) {
    ins.push_back(K.mask.graph);
    maps.push_back(AffineMap::get(r, 0, {x.l(1), x.l(2)}, x.b.getContext()));
  }
  Value zero = x.cst(0.0);
  Value n = x.dim(src, x.nb);
  K.k = x.generic(r, ins, maps, x.filled(src, {heads, kDyn, kDyn}, {n, n}, 0.0),
                  x.at(r, {x.l(0), x.l(1), x.l(2)}), x.iters("ppp"),
                  [&](OpBuilder &bb, Location ll, ValueRange v) -> Value {
                    Value w = v[0];
                    if (!linear) {
                      Value z = bb.create<arith::AddFOp>(ll, v[1], v[2]);
                      z = bb.create<arith::SubFOp>(ll, z, v[0]);
                      z = bb.create<arith::MaximumFOp>(ll, z, zero);
                      w = inlineScalarRegion(bb, *weight, z, idx);
                    }
                    Value keep =
                        K.mask.keep(bb, ll, x.nb, K.mask.graph ? v[linear ? 1 : 3] : Value());
                    if (K.mask.mean)
                      w = bb.create<arith::MulFOp>(ll, w, K.mask.rowWeight(bb, ll, x.nb, x.t));
                    return bb.create<arith::SelectOp>(ll, keep, w, zero);
                  });
  return K;
}

/// R4[b, i, h, e] = Σ_j K[b, h, i, j] U4[b, j, h, e] over loops (b?, i, h, e, j).
Value applyHeads(KE &x, Value k, Value u4) {
  auto ut = cast<RankedTensorType>(u4.getType());
  int64_t heads = ut.getDimSize(x.nb + 1), r = ut.getDimSize(x.nb + 2);
  unsigned rank = x.nb + 4;
  Value init = x.filled(u4, {kDyn, heads, r}, {x.dim(u4, x.nb)}, 0.0);
  return x.generic(rank, {k, u4},
                   {x.at(rank, {x.l(1), x.l(0), x.l(3)}), x.at(rank, {x.l(3), x.l(1), x.l(2)})},
                   init, x.at(rank, {x.l(0), x.l(1), x.l(2)}), x.iters("pppr"), TokenEmitter::fma);
}

/// The built-in rho of a kernel kind as a region, or the op's own (custom).
Region *rhoRegion(KernelKind kind, Region &own, Region &scratch, Type t, Location loc) {
  if (kind == KernelKind::custom)
    return &own;
  // KernelKind's rho kinds follow RhoKind's order, one place later.
  buildBuiltinRho(scratch, static_cast<int>(kind) - 1, t, loc);
  return &scratch;
}

int64_t widthOf(Value w) { return cast<RankedTensorType>(w.getType()).getDimSize(1); }
Type elementOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }
unsigned batchOf(Value tokens) { return cast<RankedTensorType>(tokens.getType()).getRank() - 2; }

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

struct KernelPairwiseLowering : OpConversionPattern<KernelPairwiseOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(KernelPairwiseOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    KE x(rewriter, op.getLoc(), elementOf(op.getY()), batchOf(op.getY()));
    // The kernel is rho'(z): differentiate rho (built in or the user's).
    Region rho, rhoPrime;
    Region *weight = nullptr;
    if (op.getKernel() != KernelKind::linear) {
      Region *r = rhoRegion(op.getKernel(), op.getRhoBody(), rho, x.t, op.getLoc());
      differentiateScalarRegion(*r, rhoPrime, op.getLoc());
      weight = &rhoPrime;
    }
    int64_t heads = op.getHeads();
    Kernels K =
        emitKernels(x, a.getSource(), a.getQuery(), a.getKey(), op.getKernel(), weight, 0, heads,
                    op.getMask(), op.getGraph(), /*energy=*/true, op.getFeatures(), op.getMean());
    Value u4 = x.split(x.e.tokW(a.getY(), a.getValue()), heads, widthOf(a.getValue()));
    Value r4 = applyHeads(x, K.k, u4);
    // E = ½ Σ U4 ∘ R4 per prompt, over loops (b?, i, h, e).
    unsigned rank = x.nb + 3;
    Value half = x.cst(0.5);
    Value energy = x.generic(
        rank, {u4, r4},
        {x.at(rank, {x.l(0), x.l(1), x.l(2)}), x.at(rank, {x.l(0), x.l(1), x.l(2)})},
        x.perPromptInit(a.getY(), 0.0), x.perPrompt(rank), x.iters("rrr"),
        [&](OpBuilder &bb, Location ll, ValueRange v) -> Value {
          Value p = bb.create<arith::MulFOp>(ll, v[0], v[1]);
          return bb.create<arith::AddFOp>(ll, v[2], bb.create<arith::MulFOp>(ll, half, p));
        });
    if (x.nb == 0)
      energy = rewriter.create<tensor::ExtractOp>(op.getLoc(), energy, ValueRange{});
    replaceTerm(rewriter, op, energy);
    return success();
  }
};

struct KernelMatrixLowering : OpConversionPattern<KernelMatrixOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(KernelMatrixOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    KE x(rewriter, op.getLoc(), elementOf(op.getSource()), batchOf(op.getSource()));
    Kernels K = emitKernels(x, a.getSource(), a.getQuery(), a.getKey(), op.getKernel(),
                            &op.getWeightBody(), 0, op.getHeads(), op.getMask(), op.getGraph(),
                            /*energy=*/false, op.getFeatures(), op.getMean());
    rewriter.replaceOp(op, x.e.castTo(K.k, op.getType()));
    return success();
  }
};

struct KernelMatrixVJPLowering : OpConversionPattern<KernelMatrixVJPOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(KernelMatrixVJPOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    KE x(rewriter, op.getLoc(), elementOf(op.getSource()), batchOf(op.getSource()));
    bool linear = op.getKernel() == KernelKind::linear;
    int64_t heads = op.getHeads();
    Value whole = a.getSource();
    // ρ″ at z (the region's second output) for rho kernels; the mask.
    Kernels K = emitKernels(x, whole, a.getQuery(), a.getKey(), op.getKernel(), &op.getWeightBody(),
                            linear ? 0 : 1, heads, op.getMask(), op.getGraph(),
                            /*energy=*/false, op.getFeatures(), op.getMean());
    Value src = sourceFeatures(x, whole, op.getFeatures());
    unsigned r3 = x.nb + 3;
    Value n = x.dim(src, x.nb);
    // dz = dK m (linear: the kernel is q·k itself) or dK m ρ″(z).
    Value dz = x.generic(
        r3, {a.getDk(), K.k},
        {x.at(r3, {x.l(0), x.l(1), x.l(2)}), x.at(r3, {x.l(0), x.l(1), x.l(2)})},
        x.filled(src, {heads, kDyn, kDyn}, {n, n}, 0.0), x.at(r3, {x.l(0), x.l(1), x.l(2)}),
        x.iters("ppp"), [&](OpBuilder &bb, Location ll, ValueRange v) -> Value {
          if (!linear) // K holds m ρ″(z)
            return bb.create<arith::MulFOp>(ll, v[0], v[1]);
          Value keep = K.mask.keep(bb, ll, x.nb, Value());
          Value g = v[0];
          if (K.mask.mean)
            g = bb.create<arith::MulFOp>(ll, g, K.mask.rowWeight(bb, ll, x.nb, x.t));
          return bb.create<arith::SelectOp>(ll, keep, g, x.zeroLike(bb, ll));
        });
    if (linear && K.mask.graph) {
      // The graph's zeros: K is 0 there, dz must be too.
      dz = x.generic(r3, {dz, K.mask.graph},
                     {x.at(r3, {x.l(0), x.l(1), x.l(2)}),
                      AffineMap::get(r3, 0, {x.l(1), x.l(2)}, rewriter.getContext())},
                     x.filled(src, {heads, kDyn, kDyn}, {n, n}, 0.0),
                     x.at(r3, {x.l(0), x.l(1), x.l(2)}), x.iters("ppp"),
                     [&](OpBuilder &bb, Location ll, ValueRange v) -> Value {
                       return bb.create<arith::MulFOp>(ll, v[0], v[1]);
                     });
    }
    auto q4t = cast<RankedTensorType>(K.q4.getType());
    int64_t rr = q4t.getDimSize(x.nb + 2);
    unsigned r5 = x.nb + 4;
    // Σ_j dz[b, h, i, j] c4[b, j, h, e] -> [b, i, h, e] (rows), or
    // Σ_i dz[b, h, i, j] c4[b, i, h, e] -> [b, j, h, e] (columns), over
    // loops (b?, out-token, h, e, other-token).
    auto contract = [&](Value c4, bool rows) {
      Value init = x.filled(src, {kDyn, heads, rr}, {n}, 0.0);
      AffineMap dzMap =
          rows ? x.at(r5, {x.l(1), x.l(0), x.l(3)}) : x.at(r5, {x.l(1), x.l(3), x.l(0)});
      return x.generic(r5, {dz, c4}, {dzMap, x.at(r5, {x.l(3), x.l(1), x.l(2)})}, init,
                       x.at(r5, {x.l(0), x.l(1), x.l(2)}), x.iters("pppr"), TokenEmitter::fma);
    };
    // Σ_j dz[b, h, i, j] (rows) or Σ_i (columns) -> [b, h, token].
    auto degree = [&](bool rows) {
      Value init = x.filled(src, {heads, kDyn}, {n}, 0.0);
      AffineMap dzMap =
          rows ? x.at(r3, {x.l(0), x.l(1), x.l(2)}) : x.at(r3, {x.l(0), x.l(2), x.l(1)});
      return x.generic(r3, {dz}, {dzMap}, init, x.at(r3, {x.l(0), x.l(1)}), x.iters("ppr"),
                       TokenEmitter::sum);
    };
    Value dq4, dk4;
    if (linear) {
      dq4 = contract(K.k4, /*rows=*/true);  // Σ_j dz_ij k_j
      dk4 = contract(K.q4, /*rows=*/false); // Σ_i dz_ij q_i
    } else {
      // ∂z_ij/∂q_i = q_i − k_j, ∂z_ij/∂k_j = k_j − q_i.
      auto scaledMinus = [&](Value own4, Value deg, Value cross4) {
        unsigned r4 = x.nb + 3;
        return x.generic(r4, {own4, deg, cross4},
                         {x.at(r4, {x.l(0), x.l(1), x.l(2)}), x.at(r4, {x.l(1), x.l(0)}),
                          x.at(r4, {x.l(0), x.l(1), x.l(2)})},
                         x.filled(src, {kDyn, heads, rr}, {n}, 0.0),
                         x.at(r4, {x.l(0), x.l(1), x.l(2)}), x.iters("ppp"),
                         [&](OpBuilder &bb, Location ll, ValueRange v) -> Value {
                           Value s = bb.create<arith::MulFOp>(ll, v[0], v[1]);
                           return bb.create<arith::SubFOp>(ll, s, v[2]);
                         });
      };
      dq4 = scaledMinus(K.q4, degree(true), contract(K.k4, true));
      dk4 = scaledMinus(K.k4, degree(false), contract(K.q4, false));
    }
    Value dq = x.join(dq4), dk = x.join(dk4);
    auto srcTy = op.getDsource().getType();
    Value dsrc, dquery, dkey;
    if (a.getKey()) {
      dsrc = x.add(x.e.tokWT(dq, a.getQuery()), x.e.tokWT(dk, a.getKey()), true);
      dquery = x.e.tokTTokW(src, dq);
      dkey = x.e.tokTTokW(src, dk);
    } else {
      Value both = x.add(dq, dk, true);
      dsrc = x.e.tokWT(both, a.getQuery());
      dquery = x.e.tokTTokW(src, both);
    }
    dsrc = x.e.castTo(sourceGradient(x, dsrc, whole, op.getFeatures()), srcTy);
    SmallVector<Value> results{dsrc, x.e.castTo(dquery, op.getDquery().getType())};
    if (dkey)
      results.push_back(x.e.castTo(dkey, op.getDkey().getType()));
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct KernelApplyLowering : OpConversionPattern<KernelApplyOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(KernelApplyOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    KE x(rewriter, op.getLoc(), elementOf(op.getZ()), batchOf(op.getZ()));
    int64_t heads = cast<RankedTensorType>(op.getKernels().getType()).getDimSize(x.nb);
    Value u4 = x.split(x.e.tokW(a.getZ(), a.getValue()), heads, widthOf(a.getValue()));
    Value r = x.join(applyHeads(x, a.getKernels(), u4));
    rewriter.replaceOp(op, x.e.castTo(x.e.tokWT(r, a.getValue()), op.getType()));
    return success();
  }
};

struct KernelApplyVJPLowering : OpConversionPattern<KernelApplyVJPOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(KernelApplyVJPOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    KE x(rewriter, op.getLoc(), elementOf(op.getZ()), batchOf(op.getZ()));
    Value k = a.getKernels(), z = a.getZ(), wv = a.getValue(), c = a.getDy();
    int64_t heads = cast<RankedTensorType>(k.getType()).getDimSize(x.nb);
    Value u4 = x.split(x.e.tokW(z, wv), heads, widthOf(wv));
    Value cw4 = x.split(x.e.tokW(c, wv), heads, widthOf(wv));
    // dK[b, h, i, j] = Σ_e CW4[b, i, h, e] U4[b, j, h, e]
    Value dk = headDots(x, cw4, u4, z, heads);
    // dU4[b, j, h, e] = Σ_i K[b, h, i, j] CW4[b, i, h, e]
    auto ut = cast<RankedTensorType>(u4.getType());
    int64_t rv = ut.getDimSize(x.nb + 2);
    unsigned r5 = x.nb + 4;
    Value du4 = x.generic(r5, {k, cw4},
                          {x.at(r5, {x.l(1), x.l(3), x.l(0)}), x.at(r5, {x.l(3), x.l(1), x.l(2)})},
                          x.filled(z, {kDyn, heads, rv}, {x.dim(z, x.nb)}, 0.0),
                          x.at(r5, {x.l(0), x.l(1), x.l(2)}), x.iters("pppr"), TokenEmitter::fma);
    Value du = x.join(du4);
    Value r = x.join(applyHeads(x, k, u4));
    Value dz = x.e.castTo(x.e.tokWT(du, wv), op.getDz().getType());
    Value dw = x.add(x.e.tokTTokW(z, du), x.e.tokTTokW(c, r), false);
    rewriter.replaceOp(op, {x.e.castTo(dk, op.getDkernels().getType()), dz,
                            x.e.castTo(dw, op.getDvalue().getType())});
    return success();
  }
};

struct InnerLowering : OpConversionPattern<InnerOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(InnerOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    KE x(rewriter, op.getLoc(), elementOf(op.getLhs()), batchOf(op.getLhs()));
    Value s = x.rowsDot(a.getLhs(), a.getRhs(), op.getOverContext());
    rewriter.replaceOp(op, x.e.castTo(s, op.getType()));
    return success();
  }
};

/// ds · other on the rows of `inner` (0 on the query row with context).
Value scaleRows(KE &x, Value ds, Value other, bool context) {
  Value last = x.lastRow(other);
  unsigned r = x.nb + 2;
  return x.tokenMap({ds, other}, {x.perPrompt(r), x.e.id2()}, other,
                    [&](OpBuilder &bb, Location ll, ValueRange v) -> Value {
                      Value p = bb.create<arith::MulFOp>(ll, v[0], v[1]);
                      if (!context)
                        return p;
                      return bb.create<arith::SelectOp>(ll, KE::isContext(bb, ll, x.nb, last), p,
                                                        x.zeroLike(bb, ll));
                    });
}

struct InnerVJPLowering : OpConversionPattern<InnerVJPOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(InnerVJPOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    KE x(rewriter, op.getLoc(), elementOf(op.getLhs()), batchOf(op.getLhs()));
    bool ctx = op.getOverContext();
    Type ty = op.getLhs().getType();
    rewriter.replaceOp(op, {x.e.castTo(scaleRows(x, a.getDs(), a.getRhs(), ctx), ty),
                            x.e.castTo(scaleRows(x, a.getDs(), a.getLhs(), ctx), ty)});
    return success();
  }
};

/// c v for a value per prompt (0-d or [B]) or a [1].
Value scaleBy(KE &x, Value v, double c) {
  if (c == 1.0)
    return v;
  auto vt = cast<RankedTensorType>(v.getType());
  unsigned r = vt.getRank();
  Value k = x.cst(c);
  SmallVector<Value> sizes;
  for (unsigned i = 0; i < r; ++i)
    if (vt.isDynamicDim(i))
      sizes.push_back(x.dim(v, i));
  Value init = x.b.create<linalg::FillOp>(x.loc, x.cst(0.0),
                                          x.b.create<tensor::EmptyOp>(x.loc, vt, sizes).getResult())
                   .getResult(0);
  AffineMap id = x.b.getMultiDimIdentityMap(r);
  return x.generic(r, {v}, {id}, init, id, std::string(r, 'p'),
                   [&](OpBuilder &bb, Location ll, ValueRange a) -> Value {
                     return bb.create<arith::MulFOp>(ll, k, a[0]);
                   });
}

/// How the coefficient `a` of axpy is read over the token space: per prompt,
/// or a shared [1].
/// A per-prompt coefficient is 0-d (one token matrix) or a dynamic [B]; a
/// shared one a static [1].
bool perPromptCoefficient(KE &x, Value a) {
  auto t = cast<RankedTensorType>(a.getType());
  return t.getRank() == int64_t(x.nb) && (x.nb == 0 || t.isDynamicDim(0));
}
AffineMap coefficientMap(KE &x, Value a, unsigned rank) {
  return perPromptCoefficient(x, a) ? x.perPrompt(rank) : x.shared(rank);
}

struct AxpyLowering : OpConversionPattern<AxpyOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(AxpyOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    KE x(rewriter, op.getLoc(), elementOf(op.getX()), batchOf(op.getX()));
    unsigned r = x.nb + 2;
    SmallVector<Value> ins{a.getX()};
    SmallVector<AffineMap> maps{x.e.id2()};
    if (a.getA()) {
      ins.push_back(a.getA());
      maps.push_back(coefficientMap(x, a.getA(), r));
    }
    if (a.getY()) {
      ins.push_back(a.getY());
      maps.push_back(x.e.id2());
    }
    Value c = x.cst(op.getScale().convertToDouble());
    bool hasA = bool(a.getA()), hasY = bool(a.getY());
    Value out =
        x.tokenMap(ins, maps, a.getX(), [&](OpBuilder &bb, Location ll, ValueRange v) -> Value {
          Value s = bb.create<arith::MulFOp>(ll, c, v[0]);
          if (hasA)
            s = bb.create<arith::MulFOp>(ll, s, v[1]);
          if (hasY)
            s = bb.create<arith::AddFOp>(ll, s, v[hasA ? 2 : 1]);
          return s;
        });
    rewriter.replaceOp(op, x.e.castTo(out, op.getType()));
    return success();
  }
};

struct AxpyVJPLowering : OpConversionPattern<AxpyVJPOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(AxpyVJPOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    KE x(rewriter, op.getLoc(), elementOf(op.getX()), batchOf(op.getX()));
    unsigned r = x.nb + 2;
    Value c = x.cst(op.getScale().convertToDouble());
    SmallVector<Value> ins{a.getDy()};
    SmallVector<AffineMap> maps{x.e.id2()};
    if (a.getA()) {
      ins.push_back(a.getA());
      maps.push_back(coefficientMap(x, a.getA(), r));
    }
    bool hasA = bool(a.getA());
    Value dx =
        x.tokenMap(ins, maps, a.getDy(), [&](OpBuilder &bb, Location ll, ValueRange v) -> Value {
          Value s = bb.create<arith::MulFOp>(ll, c, v[0]);
          return hasA ? bb.create<arith::MulFOp>(ll, s, v[1]).getResult() : s;
        });
    SmallVector<Value> results{x.e.castTo(dx, op.getDx().getType())};
    if (hasA) {
      auto at = cast<RankedTensorType>(a.getA().getType());
      Value da;
      if (perPromptCoefficient(x, a.getA())) {
        da = x.rowsDot(a.getDy(), a.getX(), /*context=*/false);
      } else {
        // A shared coefficient: the sum over the whole batch, as a [1].
        Value s =
            x.e.reduceAll({a.getDy(), a.getX()}, {x.e.id2(), x.e.id2()}, TokenEmitter::fma, r);
        da = rewriter.create<tensor::FromElementsOp>(op.getLoc(), at, ValueRange{s});
      }
      results.push_back(x.e.castTo(scaleBy(x, da, op.getScale().convertToDouble()), at));
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};

} // namespace

namespace {

/// 1/‖Z‖ per prompt (0 where ‖Z‖² <= eps), the norm over the context rows
/// with `context`.
Value inverseNorm(KE &x, Value z, bool context, double eps) {
  Value s2 = x.rowsDot(z, z, context);
  Value e = x.cst(eps), zero = x.cst(0.0), one = x.cst(1.0);
  unsigned r = x.nb;
  AffineMap id = x.b.getMultiDimIdentityMap(r);
  return x.generic(r, {s2}, {id}, x.perPromptInit(z, 0.0), id, x.iters(""),
                   [&](OpBuilder &bb, Location ll, ValueRange v) -> Value {
                     Value ok = bb.create<arith::CmpFOp>(ll, arith::CmpFPredicate::OGT, v[0], e);
                     Value inv =
                         bb.create<arith::DivFOp>(ll, one, bb.create<math::SqrtOp>(ll, v[0]));
                     return bb.create<arith::SelectOp>(ll, ok, inv, zero);
                   });
}

struct NormalizeLowering : OpConversionPattern<NormalizeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(NormalizeOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    KE x(rewriter, op.getLoc(), elementOf(op.getZ()), batchOf(op.getZ()));
    Value inv = inverseNorm(x, a.getZ(), op.getOverContext(), op.getEps().convertToDouble());
    Value out = scaleRows(x, inv, a.getZ(), /*context=*/false);
    rewriter.replaceOp(op, x.e.castTo(out, op.getType()));
    return success();
  }
};

struct NormalizeVJPLowering : OpConversionPattern<NormalizeVJPOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(NormalizeVJPOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    KE x(rewriter, op.getLoc(), elementOf(op.getZ()), batchOf(op.getZ()));
    bool ctx = op.getOverContext();
    Value inv = inverseNorm(x, a.getZ(), ctx, op.getEps().convertToDouble());
    Value zh = scaleRows(x, inv, a.getZ(), /*context=*/false); // Ẑ
    Value t = x.rowsDot(a.getDy(), zh, /*context=*/false);     // ⟨dY, Ẑ⟩
    // dZ = (dY − [row of the norm] t Ẑ) / ‖Z‖
    Value last = x.lastRow(a.getZ());
    unsigned r = x.nb + 2;
    Value dz =
        x.tokenMap({a.getDy(), zh, t, inv}, {x.e.id2(), x.e.id2(), x.perPrompt(r), x.perPrompt(r)},
                   a.getZ(), [&](OpBuilder &bb, Location ll, ValueRange v) -> Value {
                     Value proj = bb.create<arith::MulFOp>(ll, v[2], v[1]);
                     if (ctx)
                       proj = bb.create<arith::SelectOp>(ll, KE::isContext(bb, ll, x.nb, last),
                                                         proj, x.zeroLike(bb, ll));
                     Value d = bb.create<arith::SubFOp>(ll, v[0], proj);
                     return bb.create<arith::MulFOp>(ll, d, v[3]);
                   });
    rewriter.replaceOp(op, x.e.castTo(dz, op.getDz().getType()));
    return success();
  }
};

/// Elementwise over values per prompt (0-d or [B]), all of `like`'s shape.
Value perPromptMap(KE &x, ArrayRef<Value> ins, Value like, BodyFn body) {
  unsigned r = cast<RankedTensorType>(like.getType()).getRank();
  AffineMap id = x.b.getMultiDimIdentityMap(r);
  SmallVector<AffineMap> maps(ins.size(), id);
  SmallVector<Value> sizes;
  for (unsigned i = 0; i < r; ++i)
    sizes.push_back(x.dim(like, i));
  Value init =
      x.b.create<linalg::FillOp>(
             x.loc, x.cst(0.0),
             x.b.create<tensor::EmptyOp>(x.loc, cast<RankedTensorType>(like.getType()), sizes)
                 .getResult())
          .getResult(0);
  return x.generic(r, ins, maps, init, id, std::string(r, 'p'), body);
}

/// Is a step taken: den > eps · scale (eps alone without a scale), and,
/// with a convergence test, residual > (eps · scale)² size?
Value stepTaken(OpBuilder &bb, Location ll, Value den, Value scale, Value residual, Value size,
                Value eps) {
  Value thr = scale ? bb.create<arith::MulFOp>(ll, eps, scale).getResult() : eps;
  Value ok = bb.create<arith::CmpFOp>(ll, arith::CmpFPredicate::OGT, den, thr);
  if (!residual)
    return ok;
  Value bound = bb.create<arith::MulFOp>(ll, bb.create<arith::MulFOp>(ll, thr, thr), size);
  Value moving = bb.create<arith::CmpFOp>(ll, arith::CmpFPredicate::OGT, residual, bound);
  return bb.create<arith::AndIOp>(ll, ok, moving);
}

unsigned perPromptRank(Value v) { return cast<RankedTensorType>(v.getType()).getRank(); }

/// The inputs of a ratio's test after num and den (and, for the VJP, dr):
/// the optional scale, residual and size, with where each sits.
struct RatioTest {
  int scale = -1, residual = -1, size = -1;
  void add(SmallVector<Value> &ins, Value sc, Value res, Value sz) {
    if (sc)
      scale = ins.size(), ins.push_back(sc);
    if (res) {
      residual = ins.size(), ins.push_back(res);
      size = ins.size(), ins.push_back(sz);
    }
  }
  Value taken(OpBuilder &bb, Location ll, ValueRange v, Value eps) const {
    auto at = [&](int i) { return i < 0 ? Value() : v[i]; };
    return stepTaken(bb, ll, v[1], at(scale), at(residual), at(size), eps);
  }
};

struct RatioLowering : OpConversionPattern<RatioOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(RatioOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    KE x(rewriter, op.getLoc(), elementOf(op.getNum()), perPromptRank(op.getNum()));
    Value eps = x.cst(op.getEps().convertToDouble()), zero = x.cst(0.0);
    SmallVector<Value> ins{a.getNum(), a.getDen()};
    RatioTest test;
    test.add(ins, a.getScale(), a.getResidual(), a.getSize());
    Value r =
        perPromptMap(x, ins, a.getNum(), [&](OpBuilder &bb, Location ll, ValueRange v) -> Value {
          Value q = bb.create<arith::DivFOp>(ll, v[0], v[1]);
          return bb.create<arith::SelectOp>(ll, test.taken(bb, ll, v, eps), q, zero);
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

struct RatioVJPLowering : OpConversionPattern<RatioVJPOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(RatioVJPOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    KE x(rewriter, op.getLoc(), elementOf(op.getNum()), perPromptRank(op.getNum()));
    Value eps = x.cst(op.getEps().convertToDouble()), zero = x.cst(0.0);
    SmallVector<Value> ins{a.getNum(), a.getDen(), a.getDr()};
    RatioTest test;
    test.add(ins, a.getScale(), a.getResidual(), a.getSize());
    auto part = [&](bool wrtNum) {
      return perPromptMap(
          x, ins, a.getNum(), [&](OpBuilder &bb, Location ll, ValueRange v) -> Value {
            Value g = bb.create<arith::DivFOp>(ll, v[2], v[1]); // dr / den
            if (!wrtNum) // −dr num / den² = −(dr / den)(num / den)
              g = bb.create<arith::NegFOp>(
                  ll, bb.create<arith::MulFOp>(ll, g, bb.create<arith::DivFOp>(ll, v[0], v[1])));
            return bb.create<arith::SelectOp>(ll, test.taken(bb, ll, v, eps), g, zero);
          });
    };
    rewriter.replaceOp(op, {part(true), part(false)});
    return success();
  }
};

struct KernelTraceLowering : OpConversionPattern<KernelTraceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(KernelTraceOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    auto kt = cast<RankedTensorType>(op.getKernels().getType());
    unsigned nb = kt.getRank() - 3;
    KE x(rewriter, op.getLoc(), kt.getElementType(), nb);
    int64_t heads = kt.getDimSize(nb);
    // ‖W_v,h‖²: W_v [D, H·r] -> [D, H, r].
    Value wv = a.getValue();
    auto wt = cast<RankedTensorType>(wv.getType());
    int64_t dd = wt.getDimSize(0), rv = wt.getDimSize(1) / heads;
    Value w3 = rewriter.create<tensor::ExpandShapeOp>(
        op.getLoc(), RankedTensorType::get({dd, heads, rv}, x.t), wv,
        ArrayRef<ReassociationIndices>{{0}, {1, 2}});
    Emitter we = x.e.weights();
    Value hz = we.filled({we.idx(heads)}, 0.0);
    Value wn = we.generic(
        3, {w3}, {we.map(3, {0, 1, 2})}, hz, we.map(3, {1}), Emitter::parRed(0, 3),
        [](OpBuilder &bb, Location ll, ValueRange v) -> Value {
          return bb.create<arith::AddFOp>(ll, v[1], bb.create<arith::MulFOp>(ll, v[0], v[0]));
        });
    wn = x.e.castTo(wn, RankedTensorType::get({heads}, x.t));
    // Σ_h Σ_i K[b, h, i, i] ‖W_v,h‖² over loops (b?, h, i).
    Value k = a.getKernels();
    Value last = rewriter.create<arith::SubIOp>(
        op.getLoc(), x.dim(k, nb + 1), rewriter.create<arith::ConstantIndexOp>(op.getLoc(), 1));
    unsigned r = nb + 2;
    bool ctx = op.getOverContext();
    Value init = nb ? x.filled(k, {}, {}, 0.0) : x.filled(k, {}, {}, 0.0);
    Value tr = x.generic(
        r, {k, wn},
        {x.at(r, {x.l(0), x.l(1), x.l(1)}), AffineMap::get(r, 0, {x.l(0)}, rewriter.getContext())},
        init, x.perPrompt(r), x.iters("rr"),
        [&](OpBuilder &bb, Location ll, ValueRange v) -> Value {
          Value p = bb.create<arith::MulFOp>(ll, v[0], v[1]);
          if (ctx)
            p = bb.create<arith::SelectOp>(ll, KE::isContext(bb, ll, nb + 1, last), p,
                                           x.zeroLike(bb, ll));
          return bb.create<arith::AddFOp>(ll, v[2], p);
        });
    rewriter.replaceOp(op, x.e.castTo(tr, op.getType()));
    return success();
  }
};

/// min(k, K − 1) as an index.
Value clampedIndex(OpBuilder &b, Location loc, Value k, int64_t entries) {
  Value lastEntry = b.create<arith::ConstantIndexOp>(loc, entries - 1);
  return b.create<arith::MinUIOp>(loc, k, lastEntry);
}

struct PickLowering : OpConversionPattern<PickOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(PickOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    int64_t entries = op.getValues().getType().getDimSize(0);
    Value i = clampedIndex(rewriter, loc, a.getLayer(), entries);
    Value v = rewriter.create<tensor::ExtractOp>(loc, a.getValues(), ValueRange{i});
    rewriter.replaceOpWithNewOp<tensor::FromElementsOp>(op, op.getType(), ValueRange{v});
    return success();
  }
};

struct PickVJPLowering : OpConversionPattern<PickVJPOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(PickVJPOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto vt = op.getValues().getType();
    Value i = clampedIndex(rewriter, loc, a.getLayer(), vt.getDimSize(0));
    Value g = rewriter.create<tensor::ExtractOp>(
        loc, a.getDy(), ValueRange{rewriter.create<arith::ConstantIndexOp>(loc, 0)});
    Emitter w(rewriter, loc, vt.getElementType());
    Value zero = w.cst(0.0);
    Value init =
        rewriter
            .create<linalg::FillOp>(
                loc, zero, rewriter.create<tensor::EmptyOp>(loc, vt, ValueRange{}).getResult())
            .getResult(0);
    AffineMap id = rewriter.getMultiDimIdentityMap(1);
    Value out = w.generic(1, {}, {}, init, id, Emitter::par(1),
                          [&](OpBuilder &bb, Location ll, ValueRange) -> Value {
                            Value j = bb.create<linalg::IndexOp>(ll, 0);
                            Value at = bb.create<arith::CmpIOp>(ll, arith::CmpIPredicate::eq, j, i);
                            return bb.create<arith::SelectOp>(ll, at, g, zero);
                          });
    rewriter.replaceOp(op, out);
    return success();
  }
};

} // namespace

void mlir::unroll::populateKernelEnergyPatterns(RewritePatternSet &patterns) {
  patterns.add<KernelPairwiseLowering, KernelMatrixLowering, KernelMatrixVJPLowering,
               KernelApplyLowering, KernelApplyVJPLowering, InnerLowering, InnerVJPLowering,
               AxpyLowering, AxpyVJPLowering, NormalizeLowering, NormalizeVJPLowering,
               RatioLowering, RatioVJPLowering, KernelTraceLowering, PickLowering, PickVJPLowering>(
      patterns.getContext());
}
