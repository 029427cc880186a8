//===- Pairwise.cpp - token-pair geometry of energies and MM steps --------===//
#include "Pairwise.h"
#include "unroll/Conversion/UnrollToLinalg/UnrollToLinalg.h"

#include "mlir/IR/IRMapping.h"

#include <limits>

using namespace mlir;
using namespace mlir::unroll;

namespace mlir::unroll::lowering {

void Mask::addInputs(Emitter &e, SmallVector<Value> &ins, SmallVector<AffineMap> &maps) const {
  if (kind == MaskKind::graph) {
    ins.push_back(graph);
    maps.push_back(e.pair2());
  }
}

Value Mask::keep(OpBuilder &b, Location loc, Value gval) const {
  switch (kind) {
  case MaskKind::none:
    return b.create<arith::ConstantIntOp>(loc, 1, 1);
  case MaskKind::causal: {
    Value i = b.create<linalg::IndexOp>(loc, nb);
    Value j = b.create<linalg::IndexOp>(loc, nb + 1);
    return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ule, j, i);
  }
  case MaskKind::graph: {
    Value zero =
        b.create<arith::ConstantOp>(loc, gval.getType(), b.getFloatAttr(gval.getType(), 0));
    return b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::ONE, gval, zero);
  }
  }
  llvm_unreachable("mask kind");
}

Mask makeMask(Emitter &e, MaskKind kind, std::optional<ElementsAttr> graph) {
  Mask m;
  m.kind = kind;
  m.nb = e.nb;
  if (kind != MaskKind::graph)
    return m;
  auto ints = cast<DenseIntElementsAttr>(*graph);
  auto shape = cast<ShapedType>(ints.getType()).getShape();
  SmallVector<Attribute> vals;
  for (const APInt &v : ints.getValues<APInt>())
    vals.push_back(e.b.getFloatAttr(e.t, v.isZero() ? 0.0 : 1.0));
  auto ty = RankedTensorType::get(shape, e.t);
  m.graph = e.b.create<arith::ConstantOp>(e.loc, ty, DenseElementsAttr::get(ty, vals));
  return m;
}

/// Inlines a scalar region (one arg) at the builder; its yielded value #idx.
Value inlineScalarRegion(OpBuilder &b, Region &r, Value z, unsigned idx) {
  IRMapping map;
  map.map(r.front().getArgument(0), z);
  for (Operation &op : r.front()) {
    if (auto y = dyn_cast<YieldOp>(op))
      return map.lookup(y.getValues()[idx]);
    b.clone(op, map);
  }
  llvm_unreachable("scalar region without yield");
}

AttnSpec specOf(MMStepOp op) {
  return {op.getForm(), op.getMask(), op.getGraph(), &op.getWeightBody()};
}
AttnSpec specOf(MMStepVJPOp op) {
  return {op.getForm(), op.getMask(), op.getGraph(), &op.getWeightBody()};
}

/// z_ij = max(0, ½|u_i|² + ½|u_j|² − u_i·u_j) = ½|u_i − u_j|² for U = Y W_a.
Value pairwiseZ(Emitter &e, Value u) {
  Value sq =
      e.rowReduce({u}, {e.id2()}, u, 0.0, [](OpBuilder &b, Location l, ValueRange a) -> Value {
        Value p = b.create<arith::MulFOp>(l, a[0], a[0]);
        return b.create<arith::AddFOp>(l, a[1], p);
      });
  Value g = e.gram(u, u);
  Value half = e.cst(0.5), zero = e.cst(0.0);
  return e.map2({g, sq, sq}, {e.id2(), e.row2(), e.col2()}, g,
                [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                  Value s = b.create<arith::AddFOp>(l, a[1], a[2]);
                  Value hs = b.create<arith::MulFOp>(l, half, s);
                  Value z = b.create<arith::SubFOp>(l, hs, a[0]);
                  return b.create<arith::MaximumFOp>(l, z, zero);
                });
}

/// Masked, unnormalized weights w_ij = m_ij rho'(z_ij) of a general MM step
/// (or m_ij rho''(z_ij) with idx = 1 on a VJP's region).
Value generalWeights(Emitter &e, const AttnSpec &op, Value u, const Mask &m, unsigned idx) {
  Value z = pairwiseZ(e, u);
  SmallVector<Value> ins{z};
  SmallVector<AffineMap> maps{e.id2()};
  m.addInputs(e, ins, maps);
  Value zero = e.cst(0.0);
  return e.map2(ins, maps, z, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
    Value w = inlineScalarRegion(b, *op.weight, a[0], idx);
    Value keep = m.keep(b, l, m.graph ? a[1] : Value());
    return b.create<arith::SelectOp>(l, keep, w, zero);
  });
}

/// Inside a linalg.generic body over (batch..., i, j) with `first` = the
/// number of batch loops: `onDiag` where i == j, else `offDiag`.
Value identityEntry(OpBuilder &b, Location l, Value onDiag, Value offDiag, unsigned first) {
  Value i = b.create<linalg::IndexOp>(l, first);
  Value j = b.create<linalg::IndexOp>(l, first + 1);
  Value diag = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, i, j);
  return b.create<arith::SelectOp>(l, diag, onDiag, offDiag);
}

/// Row-normalizes non-negative weights; a row summing to 0 (every pair masked
/// or underflowed) becomes the identity row, i.e. that token stays put.
Value normalizeRows(Emitter &e, Value w) {
  Value s =
      e.rowReduce({w}, {e.id2()}, w, 0.0, [](OpBuilder &b, Location l, ValueRange a) -> Value {
        return b.create<arith::AddFOp>(l, a[1], a[0]);
      });
  Value zero = e.cst(0.0), one = e.cst(1.0);
  return e.map2({w, s}, {e.id2(), e.row2()}, w,
                [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                  Value idv = identityEntry(b, l, one, zero, e.nb);
                  Value q = b.create<arith::DivFOp>(l, a[0], a[1]);
                  Value pos = b.create<arith::CmpFOp>(l, arith::CmpFPredicate::OGT, a[1], zero);
                  return b.create<arith::SelectOp>(l, pos, q, idv);
                });
}

/// Normalized weights softmax_j(logit_ij) with logit_ij = u_i·u_j (− ½|u_j|²
/// for the reweighted form), masked pairs excluded, max-subtracted.
Value softmaxWeights(Emitter &e, const AttnSpec &op, Value u, const Mask &m) {
  Value g = e.gram(u, u);
  Value logits = g;
  if (op.form == WeightForm::reweighted_softmax) {
    Value sq =
        e.rowReduce({u}, {e.id2()}, u, 0.0, [](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value p = b.create<arith::MulFOp>(l, a[0], a[0]);
          return b.create<arith::AddFOp>(l, a[1], p);
        });
    Value half = e.cst(0.5);
    logits = e.map2({g, sq}, {e.id2(), e.col2()}, g,
                    [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                      Value h = b.create<arith::MulFOp>(l, half, a[1]);
                      return b.create<arith::SubFOp>(l, a[0], h);
                    });
  }
  Value ninf = e.cst(-std::numeric_limits<double>::infinity()), zero = e.cst(0.0);
  SmallVector<Value> ins{logits};
  SmallVector<AffineMap> maps{e.id2()};
  m.addInputs(e, ins, maps);
  Value masked = e.map2(ins, maps, logits, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
    Value keep = m.keep(b, l, m.graph ? a[1] : Value());
    return b.create<arith::SelectOp>(l, keep, a[0], ninf);
  });
  Value mx = e.rowReduce({masked}, {e.id2()}, masked, -std::numeric_limits<double>::infinity(),
                         [](OpBuilder &b, Location l, ValueRange a) -> Value {
                           return b.create<arith::MaximumFOp>(l, a[1], a[0]);
                         });
  Value ex = e.map2({masked, mx}, {e.id2(), e.row2()}, masked,
                    [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                      Value fin = b.create<arith::CmpFOp>(l, arith::CmpFPredicate::OGT, a[0], ninf);
                      Value d = b.create<arith::SubFOp>(l, a[0], a[1]);
                      Value x = b.create<math::ExpOp>(l, d);
                      return b.create<arith::SelectOp>(l, fin, x, zero);
                    });
  return normalizeRows(e, ex);
}

/// The normalized attention matrix of an MM step at Y.
Value attentionMatrix(Emitter &e, const AttnSpec &op, Value y, Value proj) {
  Value u = proj ? e.tokW(y, proj) : y;
  Mask m = makeMask(e, op.mask, op.graph);
  if (op.form == WeightForm::general)
    return normalizeRows(e, generalWeights(e, op, u, m));
  return softmaxWeights(e, op, u, m);
}

} // namespace mlir::unroll::lowering

Value mlir::unroll::buildAttentionWeights(OpBuilder &b, MMStepOp step, Value y, Value proj) {
  auto ty = cast<RankedTensorType>(y.getType());
  lowering::Emitter e(b, step.getLoc(), ty.getElementType(), ty.getRank() - 2);
  return lowering::attentionMatrix(e, lowering::specOf(step), y, proj);
}
