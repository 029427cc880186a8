//===- EnergyToLinalg.cpp - energies to linalg-on-tensors functions -------===//
//
// Every derived `unroll.energy @E` becomes two C-interface functions on
// memrefs (@E_trace, @E_weights) whose bodies compute the energy terms and
// the step ops with linalg on tensors.
//
//===----------------------------------------------------------------------===//
#include "Emitter.h"
#include "unroll/Dialect/Unroll/IR/ScalarRegion.h"

#include "mlir/IR/IRMapping.h"

#include <limits>

using namespace mlir;
using namespace mlir::unroll;
using namespace mlir::unroll::lowering;

namespace {

//===----------------------------------------------------------------------===//
// Pairwise geometry and masks
//===----------------------------------------------------------------------===//

/// The mask of a pairwise term / MM step, turned into a scalar predicate
/// usable inside a 2-d linalg.generic body.
struct Mask {
  MaskKind kind = MaskKind::none;
  Value graph; // n × n tensor of 0/1 in the element type, for kind == graph

  /// Extra generic inputs this mask needs (the graph) with their maps.
  void addInputs(Emitter &e, SmallVector<Value> &ins,
                 SmallVector<AffineMap> &maps) const {
    if (kind == MaskKind::graph) {
      ins.push_back(graph);
      maps.push_back(e.id2());
    }
  }
  /// i1 "pair (i, j) interacts"; `gval` is the graph entry if any.
  Value keep(OpBuilder &b, Location loc, Value gval) const {
    switch (kind) {
    case MaskKind::none:
      return b.create<arith::ConstantIntOp>(loc, 1, 1);
    case MaskKind::causal: {
      Value i = b.create<linalg::IndexOp>(loc, 0);
      Value j = b.create<linalg::IndexOp>(loc, 1);
      return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ule, j, i);
    }
    case MaskKind::graph: {
      Value zero = b.create<arith::ConstantOp>(loc, gval.getType(),
                                               b.getFloatAttr(gval.getType(), 0));
      return b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::ONE, gval, zero);
    }
    }
    llvm_unreachable("mask kind");
  }
};

Mask makeMask(Emitter &e, MaskKind kind, std::optional<ElementsAttr> graph) {
  Mask m;
  m.kind = kind;
  if (kind != MaskKind::graph)
    return m;
  auto ints = cast<DenseIntElementsAttr>(*graph);
  auto shape = cast<ShapedType>(ints.getType()).getShape();
  SmallVector<Attribute> vals;
  for (const APInt &v : ints.getValues<APInt>())
    vals.push_back(e.b.getFloatAttr(e.t, v.isZero() ? 0.0 : 1.0));
  auto ty = RankedTensorType::get(shape, e.t);
  m.graph = e.b.create<arith::ConstantOp>(e.loc, ty,
                                          DenseElementsAttr::get(ty, vals));
  return m;
}

/// Inlines a scalar region (one arg) at the builder; its yielded value #idx.
Value inlineScalarRegion(OpBuilder &b, Region &r, Value z, unsigned idx = 0) {
  IRMapping map;
  map.map(r.front().getArgument(0), z);
  for (Operation &op : r.front()) {
    if (auto y = dyn_cast<YieldOp>(op))
      return map.lookup(y.getValues()[idx]);
    b.clone(op, map);
  }
  llvm_unreachable("scalar region without yield");
}

/// What the attention weights of an MM step (or of its VJP) are made of.
struct AttnSpec {
  WeightForm form;
  MaskKind mask;
  std::optional<ElementsAttr> graph;
  Region *weight; // rho' (and, for a VJP, rho'') region for form(general)
};
AttnSpec specOf(MMStepOp op) {
  return {op.getForm(), op.getMask(), op.getGraph(), &op.getWeightBody()};
}
AttnSpec specOf(MMStepVJPOp op) {
  return {op.getForm(), op.getMask(), op.getGraph(), &op.getWeightBody()};
}

/// z_ij = max(0, ½|u_i|² + ½|u_j|² − u_i·u_j) = ½|u_i − u_j|² for U = Y W_a.
Value pairwiseZ(Emitter &e, Value u) {
  Value sq = e.rowReduce({u}, {e.id2()}, u, 0.0,
                         [](OpBuilder &b, Location l, ValueRange a) -> Value {
                           Value p = b.create<arith::MulFOp>(l, a[0], a[0]);
                           return b.create<arith::AddFOp>(l, a[1], p);
                         });
  Value g = e.matmulTransposeB(u, u);
  Value half = e.cst(0.5), zero = e.cst(0.0);
  return e.map2({g, sq, sq}, {e.id2(), e.row2(), e.col2()}, g,
                [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                  Value s = b.create<arith::AddFOp>(l, a[1], a[2]);
                  Value hs = b.create<arith::MulFOp>(l, half, s);
                  Value z = b.create<arith::SubFOp>(l, hs, a[0]);
                  return b.create<arith::MaximumFOp>(l, z, zero);
                });
}

//===----------------------------------------------------------------------===//
// Energy terms → scalars
//===----------------------------------------------------------------------===//

Value emitPairwiseEnergy(Emitter &e, PairwiseOp op, Value y, Value proj) {
  Value u = proj ? e.matmul(y, proj) : y;
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
  return e.fullReduce(ins, maps, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
    Value r = inlineScalarRegion(b, *rhoR, a[0]);
    Value keep = m.keep(b, l, m.graph ? a[1] : Value());
    Value v = b.create<arith::SelectOp>(l, keep, r, zero);
    return b.create<arith::AddFOp>(l, a.back(), v);
  });
}

Value emitQuadraticEnergy(Emitter &e, Value y, Value w) {
  Value yw = e.matmul(y, w);
  Value half = e.cst(0.5);
  return e.fullReduce({yw, y}, {e.id2(), e.id2()},
                      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                        Value p = b.create<arith::MulFOp>(l, a[0], a[1]);
                        p = b.create<arith::MulFOp>(l, half, p);
                        return b.create<arith::AddFOp>(l, a[2], p);
                      });
}

Value emitSqNormEnergy(Emitter &e, Value y, Value center, double coeff) {
  Value hc = e.cst(0.5 * coeff);
  SmallVector<Value> ins{y};
  SmallVector<AffineMap> maps{e.id2()};
  if (center) {
    ins.push_back(center);
    maps.push_back(e.id2());
  }
  return e.fullReduce(ins, maps, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
    Value d = center ? b.create<arith::SubFOp>(l, a[0], a[1]).getResult() : a[0];
    Value p = b.create<arith::MulFOp>(l, d, d);
    p = b.create<arith::MulFOp>(l, hc, p);
    return b.create<arith::AddFOp>(l, a.back(), p);
  });
}

Value emitNonNegEnergy(Emitter &e, Value y) {
  Value inf = e.cst(std::numeric_limits<double>::infinity()), zero = e.cst(0.0);
  return e.fullReduce({y}, {e.id2()}, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
    Value neg = b.create<arith::CmpFOp>(l, arith::CmpFPredicate::OLT, a[0], zero);
    Value v = b.create<arith::SelectOp>(l, neg, inf, zero);
    return b.create<arith::AddFOp>(l, a[1], v);
  });
}

//===----------------------------------------------------------------------===//
// Steps → tensors
//===----------------------------------------------------------------------===//

/// Masked, unnormalized weights w_ij = m_ij rho'(z_ij) of a general MM step
/// (or m_ij rho''(z_ij) with idx = 1 on a VJP's region).
Value generalWeights(Emitter &e, const AttnSpec &op, Value u, const Mask &m,
                     unsigned idx = 0) {
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

/// Inside a 2-d linalg.generic body: `onDiag` where i == j, else `offDiag`.
Value identityEntry(OpBuilder &b, Location l, Value onDiag, Value offDiag) {
  Value i = b.create<linalg::IndexOp>(l, 0);
  Value j = b.create<linalg::IndexOp>(l, 1);
  Value diag = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, i, j);
  return b.create<arith::SelectOp>(l, diag, onDiag, offDiag);
}

/// Row-normalizes non-negative weights; a row summing to 0 (every pair masked
/// or underflowed) becomes the identity row, i.e. that token stays put.
Value normalizeRows(Emitter &e, Value w) {
  Value s = e.rowReduce({w}, {e.id2()}, w, 0.0,
                        [](OpBuilder &b, Location l, ValueRange a) -> Value {
                          return b.create<arith::AddFOp>(l, a[1], a[0]);
                        });
  Value zero = e.cst(0.0), one = e.cst(1.0);
  return e.map2({w, s}, {e.id2(), e.row2()}, w,
                [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                  Value idv = identityEntry(b, l, one, zero);
                  Value q = b.create<arith::DivFOp>(l, a[0], a[1]);
                  Value pos = b.create<arith::CmpFOp>(l, arith::CmpFPredicate::OGT, a[1], zero);
                  return b.create<arith::SelectOp>(l, pos, q, idv);
                });
}

/// Normalized weights softmax_j(logit_ij) with logit_ij = u_i·u_j (− ½|u_j|²
/// for the reweighted form), masked pairs excluded, max-subtracted.
Value softmaxWeights(Emitter &e, const AttnSpec &op, Value u, const Mask &m) {
  Value g = e.matmulTransposeB(u, u);
  Value logits = g;
  if (op.form == WeightForm::reweighted_softmax) {
    Value sq = e.rowReduce({u}, {e.id2()}, u, 0.0,
                           [](OpBuilder &b, Location l, ValueRange a) -> Value {
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
  Value mx = e.rowReduce({masked}, {e.id2()}, masked,
                         -std::numeric_limits<double>::infinity(),
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
  Value u = proj ? e.matmul(y, proj) : y;
  Mask m = makeMask(e, op.mask, op.graph);
  if (op.form == WeightForm::general)
    return normalizeRows(e, generalWeights(e, op, u, m));
  return softmaxWeights(e, op, u, m);
}

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
  return e.b.create<linalg::MatmulTransposeAOp>(e.loc, ValueRange{e.dynamic(a), e.dynamic(bm)},
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
  Value rd = e.rowReduce({da, a}, {e.id2(), e.id2()}, a, 0.0,
                         [](OpBuilder &b, Location l, ValueRange v) -> Value {
                           return b.create<arith::AddFOp>(l, v[2], b.create<arith::MulFOp>(l, v[0], v[1]));
                         });
  Value zero = e.cst(0.0);
  Value du;
  if (op.getForm() == WeightForm::softmax) {
    // logits u_i·u_j: dl = A (dA − rd); dU = (dl + dlᵀ) U.
    Value dl = e.map2({a, da, rd}, {e.id2(), e.id2(), e.row2()}, a,
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
                    Value t = b.create<arith::MulFOp>(l, v[0], b.create<arith::SubFOp>(l, v[1], v[2]));
                    return b.create<arith::NegFOp>(l, t);
                  });
    } else {
      // dz = m rho''(z) (dA − rd) / s, s the row sums of the weights.
      Value w = generalWeights(e, spec, u, m);
      Value s = e.rowReduce({w}, {e.id2()}, w, 0.0,
                            [](OpBuilder &b, Location l, ValueRange v) -> Value {
                              return b.create<arith::AddFOp>(l, v[1], v[0]);
                            });
      Value wp = generalWeights(e, spec, u, m, /*idx=*/1);
      dz = e.map2({wp, da, rd, s}, {e.id2(), e.id2(), e.row2(), e.row2()}, a,
                  [&](OpBuilder &b, Location l, ValueRange v) -> Value {
                    Value t = b.create<arith::MulFOp>(l, v[0], b.create<arith::SubFOp>(l, v[1], v[2]));
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
    Value gs = e.rowReduce({g}, {e.id2()}, g, 0.0,
                           [](OpBuilder &b, Location l, ValueRange v) -> Value {
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
  Value dw = e.map2({dws, dws}, {e.id2(), e.tr2()}, dws,
                    [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                      return b.create<arith::MulFOp>(l, nha, b.create<arith::AddFOp>(l, a[0], a[1]));
                    });
  Value dc = e.map2({dy}, {e.id2()}, dy, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
    return b.create<arith::MulFOp>(l, ac, a[0]);
  });
  return {dx, dw, dc};
}

Value proxVJP(Emitter &e, Value y, Value dy) {
  Value zero = e.cst(0.0);
  return e.map2({y, dy}, {e.id2(), e.id2()}, y, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
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
  Value ws = e.map2({w, w}, {e.id2(), e.tr2()}, w,
                    [](OpBuilder &b, Location l, ValueRange a) -> Value {
                      return b.create<arith::AddFOp>(l, a[0], a[1]);
                    });
  Value deg = e.rowReduce({ws}, {e.id2()}, ws, 0.0,
                          [](OpBuilder &b, Location l, ValueRange a) -> Value {
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
// Energy → functions
//===----------------------------------------------------------------------===//

class EnergyLowering {
public:
  EnergyLowering(EnergyOp energy) : energy(energy) { table.collect(energy); }

  void emit(OpBuilder &b);
  llvm::json::Object info();
  MMStepOp firstStep() {
    MMStepOp first;
    energy.getSteps().walk([&](MMStepOp m) {
      if (!first) first = m;
    });
    return first;
  }

private:
  Type elem() { return energy.getTokenType().getElementType(); }
  /// Gradients accumulated by a reverse region: the flat one of theta and
  /// the input's.
  struct Grads {
    Value theta, x;
  };
  Value energyValue(OpBuilder &b, Value y, Value x, ArrayRef<Value> ptensors);
  Value stepValue(OpBuilder &b, Value y, Value x, ArrayRef<Value> ptensors);
  Value runRegion(OpBuilder &b, Region &region, ArrayRef<Value> args, ArrayRef<Value> pt,
                  Grads &grads);
  void emitVJP(OpBuilder &b);
  /// An entry function `name(tokens, theta, extra...)` with the builder at
  /// its start; `y` gets the token tensor, `pt` the parameter tensors.
  func::FuncOp beginEntry(OpBuilder &b, StringRef name, ArrayRef<Type> extra,
                          Value &y, SmallVector<Value> &pt);

  EnergyOp energy;
  ParamTable table;
};

func::FuncOp EnergyLowering::beginEntry(OpBuilder &b, StringRef name,
                                        ArrayRef<Type> extra, Value &y,
                                        SmallVector<Value> &pt) {
  SmallVector<Type> args{dynMemref(2, elem()), dynMemref(1, elem())};
  args.append(extra.begin(), extra.end());
  Location loc = energy.getLoc();
  func::FuncOp f = makeEntry(b, loc, name, args);
  y = memrefToTensor(b, loc, f.getArgument(0), energy.getTokenType());
  pt = paramTensors(b, loc, f.getArgument(1), table, elem());
  return f;
}

Value EnergyLowering::energyValue(OpBuilder &b, Value y, Value x,
                                  ArrayRef<Value> pt) {
  Block &body = energy.getBody().front();
  IRMapping map;
  map.map(body.getArgument(0), y);
  map.map(body.getArgument(1), x);
  Value total;
  for (Operation &op : body.without_terminator()) {
    Emitter e(b, op.getLoc(), elem());
    auto get = [&](Value v) { return v ? map.lookup(v) : Value(); };
    Value v;
    if (auto p = dyn_cast<ParamOp>(op))
      map.map(p.getResult(), pt[table.indexOf(p.getName())]);
    else if (auto p = dyn_cast<PairwiseOp>(op))
      v = emitPairwiseEnergy(e, p, y, get(p.getProj()));
    else if (auto q = dyn_cast<QuadraticOp>(op))
      v = emitQuadraticEnergy(e, y, get(q.getWeight()));
    else if (auto r = dyn_cast<SqNormOp>(op))
      v = emitSqNormEnergy(e, y, get(r.getCenter()), r.getCoeff().convertToDouble());
    else if (isa<NonNegOp>(op))
      v = emitNonNegEnergy(e, y);
    if (v)
      total = total ? b.create<arith::AddFOp>(op.getLoc(), total, v).getResult() : v;
  }
  return total;
}

Value EnergyLowering::stepValue(OpBuilder &b, Value y, Value x,
                                ArrayRef<Value> pt) {
  Grads none;
  return runRegion(b, energy.getSteps(), {y, x}, pt, none);
}

Value EnergyLowering::runRegion(OpBuilder &b, Region &region, ArrayRef<Value> args,
                                ArrayRef<Value> pt, Grads &grads) {
  Block &blk = region.front();
  IRMapping map;
  for (auto [arg, v] : llvm::zip(blk.getArguments(), args))
    map.map(arg, v);
  auto get = [&](Value v) { return v ? map.lookup(v) : Value(); };
  auto set = [&](Emitter &e, Value res, Value v) { map.map(res, e.castTo(v, res.getType())); };
  for (Operation &op : blk) {
    Emitter e(b, op.getLoc(), elem());
    if (auto yield = dyn_cast<YieldOp>(op))
      return get(yield.getValues()[0]);
    if (auto p = dyn_cast<ParamOp>(op)) {
      map.map(p.getResult(), pt[table.indexOf(p.getName())]);
    } else if (auto mm = dyn_cast<MMStepOp>(op)) {
      Value yin = get(mm.getY()), proj = get(mm.getProj());
      set(e, mm, mm.getVariant() == AttentionVariant::certified
                     ? certifiedStep(e, mm, yin, proj, get(mm.getCenter()))
                     : e.matmul(attentionMatrix(e, specOf(mm), yin, proj), yin));
    } else if (auto g = dyn_cast<GradStepOp>(op)) {
      set(e, g, emitGradStep(e, g, get(g.getY()), get(g.getWeight()), get(g.getCenter())));
    } else if (auto p = dyn_cast<ProxNonNegOp>(op)) {
      set(e, p, emitRelu(e, get(p.getY())));
    } else if (auto v = dyn_cast<MMStepVJPOp>(op)) {
      auto [dx, dp] = mmStepVJP(e, v, get(v.getY()), get(v.getProj()), get(v.getDy()));
      set(e, v.getDx(), dx);
      if (v.getDproj())
        set(e, v.getDproj(), dp);
    } else if (auto v = dyn_cast<GradStepVJPOp>(op)) {
      auto r = gradStepVJP(e, v, get(v.getY()), get(v.getWeight()), get(v.getDy()));
      set(e, v.getDx(), r[0]);
      set(e, v.getDweight(), r[1]);
      set(e, v.getDcenter(), r[2]);
    } else if (auto v = dyn_cast<ProxNonNegVJPOp>(op)) {
      set(e, v, proxVJP(e, get(v.getY()), get(v.getDy())));
    } else if (auto add = dyn_cast<AddOp>(op)) {
      set(e, add, e.map2({get(add.getLhs()), get(add.getRhs())}, {e.id2(), e.id2()}, get(add.getLhs()),
                         [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                           return nb.create<arith::AddFOp>(l, a[0], a[1]);
                         }));
    } else if (auto acc = dyn_cast<AccumulateGradOp>(op)) {
      Value g = get(acc.getGrad());
      auto add2 = [&](Value cur, Value v) {
        return e.map2({cur, v}, {e.id2(), e.id2()}, cur,
                      [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                        return nb.create<arith::AddFOp>(l, a[0], a[1]);
                      });
      };
      if (auto p = acc.getParam().getDefiningOp<ParamOp>()) {
        const ParamInfo &info = table[p.getName()];
        int64_t numel = info.type.getNumElements();
        g = e.castTo(g, info.type);
        ReassociationIndices all{0, 1};
        Value flat = b.create<tensor::CollapseShapeOp>(op.getLoc(), g, ArrayRef<ReassociationIndices>{all});
        SmallVector<OpFoldResult> off{b.getIndexAttr(info.offset)}, sz{b.getIndexAttr(numel)},
            st{b.getIndexAttr(1)};
        auto ty = RankedTensorType::get({numel}, elem());
        Value cur = b.create<tensor::ExtractSliceOp>(op.getLoc(), ty, grads.theta, off, sz, st);
        Value sum = b.create<linalg::GenericOp>(
                         op.getLoc(), ty, ValueRange{cur, flat},
                         ValueRange{b.create<tensor::EmptyOp>(op.getLoc(), ty, ValueRange{})},
                         SmallVector<AffineMap>(3, b.getMultiDimIdentityMap(1)),
                         SmallVector<utils::IteratorType>{utils::IteratorType::parallel},
                         [](OpBuilder &nb, Location l, ValueRange a) {
                           nb.create<linalg::YieldOp>(l, ValueRange{nb.create<arith::AddFOp>(l, a[0], a[1])});
                         })
                        .getResult(0);
        grads.theta = b.create<tensor::InsertSliceOp>(op.getLoc(), sum, grads.theta, off, sz, st);
      } else {
        grads.x = e.castTo(add2(grads.x, g), grads.x.getType()); // the input X
      }
    } else {
      op.emitOpError("cannot be lowered in an energy");
      llvm_unreachable("verified energies only hold lowerable ops");
    }
  }
  llvm_unreachable("region without yield");
}

void EnergyLowering::emit(OpBuilder &b) {
  Location loc = energy.getLoc();
  StringRef name = energy.getSymName();

  // @E_trace(X, theta, Y_out, energies)
  {
    OpBuilder::InsertionGuard g(b);
    Value x;
    SmallVector<Value> pt;
    func::FuncOp f = beginEntry(b, (name + "_trace").str(),
                                {dynMemref(2, elem()), dynMemref(1, elem())}, x, pt);
    Value yOut = f.getArgument(2), eOut = f.getArgument(3);
    Value c0 = b.create<arith::ConstantIndexOp>(loc, 0);
    Value c1 = b.create<arith::ConstantIndexOp>(loc, 1);
    b.create<memref::StoreOp>(loc, energyValue(b, x, x, pt), eOut, ValueRange{c0});
    Value n = b.create<memref::DimOp>(loc, eOut, 0);
    auto loop = b.create<scf::ForOp>(
        loc, c1, n, c1, ValueRange{x},
        [&](OpBuilder &lb, Location ll, Value t, ValueRange iter) {
          Value next = stepValue(lb, iter[0], x, pt);
          lb.create<memref::StoreOp>(ll, energyValue(lb, next, x, pt), eOut,
                                     ValueRange{t});
          lb.create<scf::YieldOp>(ll, next);
        });
    storeTensor(b, loc, loop.getResult(0), yOut);
    b.create<func::ReturnOp>(loc);
  }

  // @E_weights(Y, params..., A)
  if (!energy.getReverse().empty())
    emitVJP(b);

  // @E_weights(Y, theta, A), for energies whose steps attend (hand-written
  // steps may not).
  MMStepOp first = firstStep();
  if (!first)
    return;
  OpBuilder::InsertionGuard g(b);
  Value y;
  SmallVector<Value> pt;
  func::FuncOp f = beginEntry(b, (name + "_weights").str(), {dynMemref(2, elem())}, y, pt);
  Value proj;
  if (first.getProj()) {
    auto p = cast<ParamOp>(first.getProj().getDefiningOp());
    proj = pt[table.indexOf(p.getName())];
  }
  Emitter e(b, first.getLoc(), elem());
  storeTensor(b, loc, attentionMatrix(e, specOf(first), y, proj), f.getArgument(2));
  b.create<func::ReturnOp>(loc);
}

/// @E_vjp(X, theta, iterations, dY_T, dX, grad): the vector-Jacobian product
/// of X -> Y_T (T = iterations steps) with the cotangent dY_T, for X and the
/// parameters. The forward stores every state; the backward runs the reverse
/// region from the last step to the first.
void EnergyLowering::emitVJP(OpBuilder &b) {
  Location loc = energy.getLoc();
  Type t = elem();
  OpBuilder::InsertionGuard g(b);
  Value x;
  SmallVector<Value> pt;
  func::FuncOp f = beginEntry(b, (energy.getSymName() + "_vjp").str(),
                              {b.getI64Type(), dynMemref(2, t), dynMemref(2, t), dynMemref(1, t)},
                              x, pt);
  Emitter e(b, loc, t);
  Type tokTy = energy.getTokenType();
  Value iters = b.create<arith::IndexCastOp>(loc, b.getIndexType(), f.getArgument(2));
  Value dyT = memrefToTensor(b, loc, f.getArgument(3), tokTy);
  Value c0 = b.create<arith::ConstantIndexOp>(loc, 0), c1 = b.create<arith::ConstantIndexOp>(loc, 1);
  Value n = e.dim(x, 0), d = e.dim(x, 1);
  auto statesTy = RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic, ShapedType::kDynamic}, t);
  auto slice = [&](OpBuilder &lb, Value i) {
    return std::make_tuple(SmallVector<OpFoldResult>{i, lb.getIndexAttr(0), lb.getIndexAttr(0)},
                           SmallVector<OpFoldResult>{lb.getIndexAttr(1), n, d},
                           SmallVector<OpFoldResult>(3, lb.getIndexAttr(1)));
  };
  Value xd = e.dynamic(x);
  Value states = b.create<tensor::EmptyOp>(loc, statesTy,
                                           ValueRange{b.create<arith::AddIOp>(loc, iters, c1), n, d});
  {
    auto [o, sz, st] = slice(b, c0);
    states = b.create<tensor::InsertSliceOp>(loc, xd, states, o, sz, st);
  }
  auto fwd = b.create<scf::ForOp>(
      loc, c0, iters, c1, ValueRange{x, states},
      [&](OpBuilder &lb, Location ll, Value i, ValueRange it) {
        Emitter le(lb, ll, t);
        Value y = le.castTo(stepValue(lb, it[0], x, pt), tokTy);
        auto [o, sz, st] = slice(lb, lb.create<arith::AddIOp>(ll, i, c1));
        Value s2 = lb.create<tensor::InsertSliceOp>(ll, le.dynamic(y), it[1], o, sz, st);
        lb.create<scf::YieldOp>(ll, ValueRange{y, s2});
      });
  states = fwd.getResult(1);
  int64_t numParams = std::max<int64_t>(table.numParams, 1);
  auto gTy = RankedTensorType::get({numParams}, t);
  Value g0 = b.create<linalg::FillOp>(loc, e.cst(0.0), b.create<tensor::EmptyOp>(loc, gTy, ValueRange{}).getResult())
                 .getResult(0);
  Value dx0 = e.castTo(e.filled({n, d}, 0.0), tokTy);
  auto bwd = b.create<scf::ForOp>(
      loc, c0, iters, c1, ValueRange{g0, dx0, dyT},
      [&](OpBuilder &lb, Location ll, Value i, ValueRange it) {
        Emitter le(lb, ll, t);
        Value tIdx = lb.create<arith::SubIOp>(ll, lb.create<arith::SubIOp>(ll, iters, c1), i);
        auto [o, sz, st] = slice(lb, tIdx);
        auto sTy = RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic}, t);
        Value yt = lb.create<tensor::ExtractSliceOp>(ll, sTy, states, o, sz, st);
        Grads gr{it[0], it[1]};
        Value dy = runRegion(lb, energy.getReverse(), {le.castTo(yt, tokTy), x, it[2]}, pt, gr);
        lb.create<scf::YieldOp>(ll, ValueRange{gr.theta, le.castTo(gr.x, tokTy), le.castTo(dy, tokTy)});
      });
  // Y_0 = X: the gradient reaching Y_0 is X's too.
  Value dx = e.map2({bwd.getResult(1), bwd.getResult(2)}, {e.id2(), e.id2()}, x,
                    [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                      return nb.create<arith::AddFOp>(l, a[0], a[1]);
                    });
  storeTensor(b, loc, dx, f.getArgument(4));
  if (table.numParams > 0)
    storeTensor(b, loc, bwd.getResult(0), f.getArgument(5));
  b.create<func::ReturnOp>(loc);
}

llvm::json::Object EnergyLowering::info() {
  MinimizeOp min = energy.getMinimize();
  auto tok = energy.getTokenType();
  llvm::json::Array ps = table.toJson();
  // Each term with what an independent evaluator needs to recompute it.
  auto paramName = [](Value v) -> llvm::json::Value {
    if (auto p = v ? v.getDefiningOp<ParamOp>() : ParamOp())
      return p.getName().str();
    return nullptr;
  };
  auto centerName = [&](Value v) -> llvm::json::Value {
    if (!v) return "zero";
    if (v == energy.getInput()) return "X";
    return paramName(v);
  };
  llvm::json::Array terms;
  PairwiseOp pw;
  for (Value t : min.getTerms()) {
    Operation *d = t.getDefiningOp();
    llvm::json::Object term{{"op", d->getName().stripDialect().str()}};
    if (auto p = dyn_cast<PairwiseOp>(d)) {
      pw = p;
      term["proj"] = paramName(p.getProj());
    } else if (auto q = dyn_cast<QuadraticOp>(d)) {
      term["weight"] = paramName(q.getWeight());
    } else if (auto r = dyn_cast<SqNormOp>(d)) {
      term["coeff"] = r.getCoeff().convertToDouble();
      term["center"] = centerName(r.getCenter());
    }
    terms.push_back(std::move(term));
  }
  llvm::json::Object o{
      {"name", energy.getSymName().str()},
      {"trace", (energy.getSymName() + "_trace").str()},
      {"weights", firstStep() ? llvm::json::Value((energy.getSymName() + "_weights").str())
                              : llvm::json::Value(nullptr)},
      {"vjp", energy.getReverse().empty() ? llvm::json::Value(nullptr)
                                          : llvm::json::Value((energy.getSymName() + "_vjp").str())},
      {"weight_form", firstStep() ? llvm::json::Value(stringifyWeightForm(firstStep().getForm()).str())
                                  : llvm::json::Value(nullptr)},
      {"tokens", tok.isDynamicDim(0) ? llvm::json::Value(nullptr)
                                     : llvm::json::Value(tok.getDimSize(0))},
      {"dim", tok.isDynamicDim(1) ? llvm::json::Value(nullptr)
                                  : llvm::json::Value(tok.getDimSize(1))},
      {"schedule", stringifySchedule(min.getSchedule()).str()},
      {"attention", stringifyAttentionVariant(min.getAttention()).str()},
      {"iterations", min.getIterations()},
      {"rho", stringifyRhoKind(pw.getRho()).str()},
      {"mask", stringifyMaskKind(pw.getMask()).str()},
      {"terms", std::move(terms)},
      {"num_params", table.numParams},
      {"params", std::move(ps)}};
  if (min.getAlpha())
    o["alpha"] = min.getAlpha()->convertToDouble();
  if (pw.getGraph()) {
    llvm::json::Array rows;
    auto ints = cast<DenseIntElementsAttr>(*pw.getGraph());
    int64_t n = cast<ShapedType>(ints.getType()).getDimSize(0), k = 0;
    llvm::json::Array row;
    for (const APInt &v : ints.getValues<APInt>()) {
      row.push_back(v.isZero() ? 0 : 1);
      if (++k % n == 0)
        rows.push_back(std::move(row)), row = llvm::json::Array();
    }
    o["graph"] = std::move(rows);
  }
  return o;
}

} // namespace

llvm::json::Object mlir::unroll::lowering::lowerEnergy(OpBuilder &b, EnergyOp energy) {
  EnergyLowering lowering(energy);
  lowering.emit(b);
  return lowering.info();
}
