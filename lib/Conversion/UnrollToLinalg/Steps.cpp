//===- Steps.cpp - descent steps and their VJPs to linalg -----------------===//
//
// unroll.mm_step (paper and certified variants, every weight form and mask),
// unroll.grad_step (a fixed or a learnable step size), unroll.prox_nonneg
// and their VJPs, on a token matrix [n, d] or, prompt by prompt, on a token
// batch [B, n, d] (a model's loop body descending an energy). Parameters
// are unbatched; their gradients sum over the batch.
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

//===----------------------------------------------------------------------===//
// The gradient step's matrix and step size
//===----------------------------------------------------------------------===//

/// The step size of a gradient step: the `alpha` attribute, or the value of
/// its learnable `step` operand (a tensor [1]) read at run time.
struct StepSize {
  double value;
  Value dynamic; // a scalar of the element type, or null
  /// α·k as a scalar Value.
  Value times(Emitter &e, double k) {
    return dynamic ? mul(e.b, e.loc, dynamic, e.cst(k)) : e.cst(value * k);
  }
};
template <typename Op> StepSize stepSizeOf(Emitter &e, Op op, Value step) {
  StepSize s{op.getAlpha().convertToDouble(), Value()};
  if (step)
    s.dynamic = e.b.create<tensor::ExtractOp>(e.loc, step, ValueRange{e.idx(0)});
  return s;
}

/// W_s = (1 − αc) I − α (W + Wᵀ)/2: the FFN gradient step's matrix (P1 eq. 16).
Value stepMatrix(Emitter &e, Value w, StepSize alpha, double c) {
  Emitter we = e.weights();
  Value one =
      alpha.dynamic ? sub(e.b, e.loc, e.cst(1.0), alpha.times(e, c)) : e.cst(1.0 - alpha.value * c);
  Value zero = e.cst(0.0), ha = alpha.times(e, 0.5);
  return we.map2({w, w}, {we.id2(), we.tr2()}, w,
                 [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                   Value d = identityEntry(b, l, one, zero);
                   Value s = add(b, l, a[0], a[1]);
                   return sub(b, l, d, mul(b, l, ha, s));
                 });
}

/// Y W_s + αc C.
Value emitGradStep(Emitter &e, GradStepOp op, Value y, Value w, Value center, Value step) {
  StepSize alpha = stepSizeOf(e, op, step);
  double c = op.getCoeff().convertToDouble();
  Value r = e.tokW(y, stepMatrix(e, w, alpha, c));
  if (center && c != 0.0) {
    Value ac = alpha.times(e, c);
    r = e.map2({r, center}, {e.id2(), e.id2()}, r,
               [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                 return add(b, l, a[0], mul(b, l, ac, a[1]));
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
// The certified MM step
//===----------------------------------------------------------------------===//

/// The certified step's pieces, shared by the step and its VJP:
/// Y' = Y − G / L, G = deg ∘ V − w̃ V + c (Y − C), V = Y S, w̃ = w + wᵀ,
/// deg_i = Σ_j w̃_ij, S = W_a W_aᵀ, L = 2 max_i deg_i ‖W_a‖_F² + c (per
/// prompt: Gershgorin and λ_max(S) ≤ ‖W_a‖_F² bound the majorizer's
/// Hessian).
struct Certified {
  Value u, w, wt, deg, degMax, s, v, frob; // s, frob null/1 without a projection
  Value wsym, yq, qnorm;                   // with a quadratic term W: (W + Wᵀ)/2, Y Wsym, ‖Wsym‖_F
};

Certified certifiedPieces(Emitter &e, const AttnSpec &spec, Value y, Value proj, Value quad = {}) {
  Certified p;
  p.u = proj ? e.tokW(y, proj) : y;
  Mask m = makeMask(e, spec.mask, spec.graph);
  p.w = generalWeights(e, spec, p.u, m);
  p.wt =
      e.map2({p.w, p.w}, {e.id2(), e.tr2()}, p.w,
             [](OpBuilder &b, Location l, ValueRange a) -> Value { return add(b, l, a[0], a[1]); });
  p.deg = e.rowReduce(
      {p.wt}, {e.id2()}, p.wt, 0.0,
      [](OpBuilder &b, Location l, ValueRange a) -> Value { return add(b, l, a[1], a[0]); });
  // max_i deg_i (degrees are >= 0, so 0 is a valid initial maximum).
  p.degMax = e.rowsReduce(
      {p.deg}, {e.map(e.nb + 1, e.nb ? ArrayRef<unsigned>{0, 1} : ArrayRef<unsigned>{0})},
      [](OpBuilder &b, Location l, ValueRange a) -> Value {
        return b.create<arith::MaximumFOp>(l, a[1], a[0]);
      },
      y);
  p.v = y;
  p.frob = e.cst(1.0);
  if (proj) {
    Emitter we = e.weights();
    p.s = we.matmulTransposeB(proj, proj);
    p.v = e.tokW(y, p.s);
    p.frob = we.reduceAll(
        {proj}, {we.id2()},
        [](OpBuilder &b, Location l, ValueRange a) -> Value {
          return add(b, l, a[1], mul(b, l, a[0], a[0]));
        },
        2);
  }
  if (quad) {
    Emitter we = e.weights();
    Value half = e.cst(0.5);
    p.wsym = we.map2({quad, quad}, {we.id2(), we.tr2()}, quad,
                     [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                       return mul(b, l, half, add(b, l, a[0], a[1]));
                     });
    p.yq = e.tokW(y, p.wsym);
    Value sq = we.reduceAll(
        {p.wsym}, {we.id2()},
        [](OpBuilder &b, Location l, ValueRange a) -> Value {
          return add(b, l, a[1], mul(b, l, a[0], a[0]));
        },
        2);
    p.qnorm = e.b.create<math::SqrtOp>(e.loc, sq);
  }
  return p;
}

/// L = 2 max_i deg_i ‖W_a‖_F² (+ ‖Wsym‖_F) + c per prompt.
Value lipschitz(Emitter &e, const Certified &p, double c, Value like) {
  Value two = e.cst(2.0), cc = e.cst(c), frob = p.frob;
  Value extra = p.qnorm ? add(e.b, e.loc, cc, p.qnorm) : cc;
  return e.perPrompt(
      {p.degMax},
      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        return add(b, l, mul(b, l, mul(b, l, two, a[0]), frob), extra);
      },
      like);
}

/// Certified variant: Y − (L_w̃ Y S + c (Y − C) [+ Y Wsym]) / L.
Value certifiedStep(Emitter &e, MMStepOp op, Value y, Value proj, Value center, Value quad) {
  Certified p = certifiedPieces(e, specOf(op), y, proj, quad);
  double c = op.getCoeff().convertToDouble();
  Value lip = lipschitz(e, p, c, y);
  Value wys = e.pairTok(p.wt, p.v);
  SmallVector<Value> ins{y, p.v, wys, p.deg, lip};
  SmallVector<AffineMap> maps{e.id2(), e.id2(), e.id2(), e.row2(), e.perPromptMap(2)};
  Value ctr = op.getCenter() ? center : Value();
  if (ctr) {
    ins.push_back(ctr);
    maps.push_back(e.id2());
  }
  if (p.yq) {
    ins.push_back(p.yq);
    maps.push_back(e.id2());
  }
  Value cc = e.cst(c), zero = e.cst(0.0);
  return e.map2(ins, maps, y, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
    // grad = deg_i (YS)_ij − (w̃ YS)_ij + c (y_ij − c_ij) [+ (Y Wsym)_ij]
    Value g = sub(b, l, mul(b, l, a[3], a[1]), a[2]);
    Value r = ctr ? sub(b, l, a[0], a[5]) : a[0];
    g = add(b, l, g, mul(b, l, cc, r));
    if (p.yq)
      g = add(b, l, g, a[ctr ? 6 : 5]);
    Value pos = b.create<arith::CmpFOp>(l, arith::CmpFPredicate::OGT, a[4], zero);
    Value stepv = b.create<arith::DivFOp>(l, g, a[4]);
    stepv = b.create<arith::SelectOp>(l, pos, stepv, zero);
    return sub(b, l, a[0], stepv);
  });
}

/// The certified step's VJP. With D = dY', dG = −D/L and dL = Σ D∘G / L²
/// per prompt:
///   dV = deg ∘ dG − w̃ dG,  ddeg_i = Σ_k dG_ik V_ik + dL 2F [i = argmax deg],
///   dw̃ = ddeg_i − dG Vᵀ,   dw = dw̃ + dw̃ᵀ,  dz = m ρ''(z) dw,
///   dU from dz through z_ij = ½‖u_i − u_j‖²,
///   dY = D + c dG + dU W_aᵀ + dV S,  dC = −c dG,
///   dW_a = Yᵀ dU + (dS + dSᵀ) W_a + 2 dF W_a with dS = Yᵀ dV, dF = Σ dL 2 max deg.
/// The maximum passes its gradient to the row attaining it, shared equally
/// among rows that tie (exact where one row attains it, and where tied rows
/// tie identically, as the two rows of a two-token step always do).
std::array<Value, 4> certifiedVJP(Emitter &e, MMStepVJPOp op, Value y, Value proj, Value dy,
                                  Value center, Value quad) {
  AttnSpec spec = specOf(op);
  Certified p = certifiedPieces(e, spec, y, proj, quad);
  double c = op.getCoeff().convertToDouble();
  Value lip = lipschitz(e, p, c, y);
  Value zero = e.cst(0.0), cc = e.cst(c), two = e.cst(2.0);
  // G and dG.
  Value wv = e.pairTok(p.wt, p.v);
  SmallVector<Value> gIns{y, p.v, wv, p.deg};
  SmallVector<AffineMap> gMaps{e.id2(), e.id2(), e.id2(), e.row2()};
  if (center) {
    gIns.push_back(center);
    gMaps.push_back(e.id2());
  }
  if (p.yq) {
    gIns.push_back(p.yq);
    gMaps.push_back(e.id2());
  }
  Value g = e.map2(gIns, gMaps, y, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
    Value r = center ? sub(b, l, a[0], a[4]) : a[0];
    Value gv = add(b, l, sub(b, l, mul(b, l, a[3], a[1]), a[2]), mul(b, l, cc, r));
    return p.yq ? add(b, l, gv, a[center ? 5 : 4]) : gv;
  });
  Value dg = e.map2({dy, lip}, {e.id2(), e.perPromptMap(2)}, dy,
                    [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                      Value pos = b.create<arith::CmpFOp>(l, arith::CmpFPredicate::OGT, a[1], zero);
                      Value q = b.create<arith::DivFOp>(l, b.create<arith::NegFOp>(l, a[0]), a[1]);
                      return b.create<arith::SelectOp>(l, pos, q, zero);
                    });
  // dL per prompt, and its share of ddeg: k = dL · 2F at the arg-max row.
  Value dgl = e.fullReduce(
      {dy, g}, {e.id2(), e.id2()},
      [](OpBuilder &b, Location l, ValueRange a) -> Value {
        return add(b, l, a[2], mul(b, l, a[0], a[1]));
      },
      y);
  Value frob = p.frob;
  Value dl = e.perPrompt(
      {dgl, lip},
      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        Value pos = b.create<arith::CmpFOp>(l, arith::CmpFPredicate::OGT, a[1], zero);
        Value q = b.create<arith::DivFOp>(l, a[0], mul(b, l, a[1], a[1]));
        return b.create<arith::SelectOp>(l, pos, q, zero);
      },
      y);
  // Rows that attain the maximum share its gradient (two rows of a
  // two-token step always tie: their degrees are the same sum).
  Value one = e.cst(1.0);
  Value ties = e.rowsReduce(
      {p.deg, p.degMax},
      {e.map(e.nb + 1, e.nb ? ArrayRef<unsigned>{0, 1} : ArrayRef<unsigned>{0}), e.perPromptMap(1)},
      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        Value at = b.create<arith::CmpFOp>(l, arith::CmpFPredicate::OEQ, a[0], a[1]);
        return add(b, l, a[2], b.create<arith::SelectOp>(l, at, one, zero));
      },
      y);
  Value kdeg = e.perPrompt(
      {dl, ties},
      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        Value k = mul(b, l, mul(b, l, two, a[0]), frob);
        return b.create<arith::DivFOp>(l, k, b.create<arith::MaximumFOp>(l, a[1], one));
      },
      y);
  // ddeg from G, then dw̃ = ddeg_i − (dG Vᵀ)_ij.
  Value ddegG = e.rowReduce({dg, p.v}, {e.id2(), e.id2()}, dg, 0.0,
                            [](OpBuilder &b, Location l, ValueRange a) -> Value {
                              return add(b, l, a[2], mul(b, l, a[0], a[1]));
                            });
  Value dgv = e.gram(dg, p.v);
  Value dwt = e.map2({dgv, ddegG, p.deg, p.degMax, kdeg},
                     {e.id2(), e.row2(), e.row2(), e.perPromptMap(2), e.perPromptMap(2)}, dgv,
                     [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                       Value atMax =
                           b.create<arith::CmpFOp>(l, arith::CmpFPredicate::OEQ, a[2], a[3]);
                       Value fromL = b.create<arith::SelectOp>(l, atMax, a[4], zero);
                       return sub(b, l, add(b, l, a[1], fromL), a[0]);
                     });
  Value dw =
      e.map2({dwt, dwt}, {e.id2(), e.tr2()}, dwt,
             [](OpBuilder &b, Location l, ValueRange a) -> Value { return add(b, l, a[0], a[1]); });
  // dz = m ρ''(z) dw, then dU.
  Mask m = makeMask(e, spec.mask, spec.graph);
  Value wpp = generalWeights(e, spec, p.u, m, /*idx=*/1);
  Value dz =
      e.map2({wpp, dw}, {e.id2(), e.id2()}, dw,
             [](OpBuilder &b, Location l, ValueRange a) -> Value { return mul(b, l, a[0], a[1]); });
  Value g2 =
      e.map2({dz, dz}, {e.id2(), e.tr2()}, dz,
             [](OpBuilder &b, Location l, ValueRange a) -> Value { return add(b, l, a[0], a[1]); });
  Value gs =
      e.rowReduce({g2}, {e.id2()}, g2, 0.0, [](OpBuilder &b, Location l, ValueRange a) -> Value {
        return add(b, l, a[1], a[0]);
      });
  Value gu = e.pairTok(g2, p.u);
  Value du = e.map2({p.u, gs, gu}, {e.id2(), e.row2(), e.id2()}, p.u,
                    [](OpBuilder &b, Location l, ValueRange a) -> Value {
                      return sub(b, l, mul(b, l, a[1], a[0]), a[2]);
                    });
  // dV = deg ∘ dG − w̃ dG.
  Value wdg = e.pairTok(p.wt, dg);
  Value dv = e.map2({dg, p.deg, wdg}, {e.id2(), e.row2(), e.id2()}, dg,
                    [](OpBuilder &b, Location l, ValueRange a) -> Value {
                      return sub(b, l, mul(b, l, a[1], a[0]), a[2]);
                    });
  // dY.
  Value fromU = proj ? e.tokWT(du, proj) : du;
  Value fromV = proj ? e.tokW(dv, p.s) : dv;
  SmallVector<Value> dxIns{dy, dg, fromU, fromV};
  if (quad)
    dxIns.push_back(e.tokW(dg, p.wsym)); // through Y Wsym
  SmallVector<AffineMap> dxMaps(dxIns.size(), e.id2());
  Value dx = e.map2(dxIns, dxMaps, dy, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
    Value r = add(b, l, add(b, l, a[0], mul(b, l, cc, a[1])), add(b, l, a[2], a[3]));
    return quad ? add(b, l, r, a[4]) : r;
  });
  // Σ over the prompts of dL (the weights are shared).
  Emitter we = e.weights();
  Value dlTotal = e.nb == 0 ? dl
                            : we.reduceAll(
                                  {dl}, {we.map(1, {0})},
                                  [](OpBuilder &b, Location l, ValueRange a) -> Value {
                                    return add(b, l, a[1], a[0]);
                                  },
                                  1);
  Value dquad;
  if (quad) {
    // dWsym = Yᵀ dG + dL Wsym / ‖Wsym‖_F; dW = (dWsym + dWsymᵀ) / 2.
    Value half = e.cst(0.5);
    Value ydg = e.tokTTokW(y, dg);
    Value k = e.b.create<arith::SelectOp>(
        e.loc, e.b.create<arith::CmpFOp>(e.loc, arith::CmpFPredicate::OGT, p.qnorm, zero),
        e.b.create<arith::DivFOp>(e.loc, dlTotal, p.qnorm), zero);
    Value dws = we.map2({ydg, p.wsym}, {we.id2(), we.id2()}, ydg,
                        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                          return add(b, l, a[0], mul(b, l, k, a[1]));
                        });
    dquad = we.map2({dws, dws}, {we.id2(), we.tr2()}, dws,
                    [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                      return mul(b, l, half, add(b, l, a[0], a[1]));
                    });
  }
  Value dcenter;
  if (center)
    dcenter = e.map2({dg}, {e.id2()}, dg, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
      return b.create<arith::NegFOp>(l, mul(b, l, cc, a[0]));
    });
  Value dproj;
  if (proj) {
    // dF = Σ over the prompts of dL · 2 max deg.
    Value dfPrompt = e.perPrompt(
        {dl, p.degMax},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          return mul(b, l, mul(b, l, two, a[0]), a[1]);
        },
        y);
    Value df = e.nb == 0 ? dfPrompt
                         : we.reduceAll(
                               {dfPrompt}, {we.map(1, {0})},
                               [](OpBuilder &b, Location l, ValueRange a) -> Value {
                                 return add(b, l, a[1], a[0]);
                               },
                               1);
    Value ds = e.tokTTokW(y, dv);
    Value dss = we.map2(
        {ds, ds}, {we.id2(), we.tr2()}, ds,
        [](OpBuilder &b, Location l, ValueRange a) -> Value { return add(b, l, a[0], a[1]); });
    Value fromS = we.matmul(dss, proj);
    Value fromUw = e.tokTTokW(y, du);
    dproj = we.map2({fromUw, fromS, proj}, {we.id2(), we.id2(), we.id2()}, proj,
                    [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                      Value f = mul(b, l, mul(b, l, two, df), a[2]);
                      return add(b, l, add(b, l, a[0], a[1]), f);
                    });
  }
  return {dx, dproj, dcenter, dquad};
}

//===----------------------------------------------------------------------===//
// VJPs of the steps
//===----------------------------------------------------------------------===//

/// (dY, dW_a) of Y' = A Y, A = row-normalize(m ∘ w(z)), z_ij = ½|u_i − u_j|²,
/// u = y W_a. dY = Aᵀ dY' + dU W_aᵀ, dW_a = Yᵀ dU, where dU comes from
/// dA = dY' Yᵀ through the normalization and w'(z) = rho''(z).
std::pair<Value, Value> mmStepVJP(Emitter &e, MMStepVJPOp op, Value y, Value proj, Value dy) {
  AttnSpec spec = specOf(op);
  Value u = proj ? e.tokW(y, proj) : y;
  Mask m = makeMask(e, op.getMask(), op.getGraph());
  Value a = attentionMatrix(e, spec, y, proj);
  Value dyd = e.pairTTok(a, dy);
  Value da = e.gram(dy, y);
  // rd_i = Σ_k dA_ik A_ik: dA through the row normalization.
  Value rd = e.rowReduce({da, a}, {e.id2(), e.id2()}, a, 0.0,
                         [](OpBuilder &b, Location l, ValueRange v) -> Value {
                           return add(b, l, v[2], mul(b, l, v[0], v[1]));
                         });
  Value zero = e.cst(0.0);
  Value du;
  if (op.getForm() == WeightForm::softmax) {
    // logits u_i·u_j: dl = A (dA − rd); dU = (dl + dlᵀ) U.
    Value dl = e.map2({a, da, rd}, {e.id2(), e.id2(), e.row2()}, a,
                      [](OpBuilder &b, Location l, ValueRange v) -> Value {
                        return mul(b, l, v[0], sub(b, l, v[1], v[2]));
                      });
    Value g = e.map2(
        {dl, dl}, {e.id2(), e.tr2()}, dl,
        [](OpBuilder &b, Location l, ValueRange v) -> Value { return add(b, l, v[0], v[1]); });
    du = e.pairTok(g, u);
  } else {
    Value dz;
    if (op.getForm() == WeightForm::reweighted_softmax) {
      // w = exp(−z) up to row factors: dz = −A (dA − rd).
      dz = e.map2({a, da, rd}, {e.id2(), e.id2(), e.row2()}, a,
                  [](OpBuilder &b, Location l, ValueRange v) -> Value {
                    Value t = mul(b, l, v[0], sub(b, l, v[1], v[2]));
                    return b.create<arith::NegFOp>(l, t);
                  });
    } else {
      // dz = m rho''(z) (dA − rd) / s, s the row sums of the weights.
      Value w = generalWeights(e, spec, u, m);
      Value s =
          e.rowReduce({w}, {e.id2()}, w, 0.0, [](OpBuilder &b, Location l, ValueRange v) -> Value {
            return add(b, l, v[1], v[0]);
          });
      Value wp = generalWeights(e, spec, u, m, /*idx=*/1);
      dz = e.map2({wp, da, rd, s}, {e.id2(), e.id2(), e.row2(), e.row2()}, a,
                  [&](OpBuilder &b, Location l, ValueRange v) -> Value {
                    Value t = mul(b, l, v[0], sub(b, l, v[1], v[2]));
                    Value q = b.create<arith::DivFOp>(l, t, v[3]);
                    Value pos = b.create<arith::CmpFOp>(l, arith::CmpFPredicate::OGT, v[3], zero);
                    return b.create<arith::SelectOp>(l, pos, q, zero);
                  });
    }
    // du_i = Σ_j G_ij (u_i − u_j), G = dz + dzᵀ.
    Value g = e.map2(
        {dz, dz}, {e.id2(), e.tr2()}, dz,
        [](OpBuilder &b, Location l, ValueRange v) -> Value { return add(b, l, v[0], v[1]); });
    Value gs =
        e.rowReduce({g}, {e.id2()}, g, 0.0, [](OpBuilder &b, Location l, ValueRange v) -> Value {
          return add(b, l, v[1], v[0]);
        });
    Value gu = e.pairTok(g, u);
    du = e.map2({u, gs, gu}, {e.id2(), e.row2(), e.id2()}, u,
                [](OpBuilder &b, Location l, ValueRange v) -> Value {
                  return sub(b, l, mul(b, l, v[1], v[0]), v[2]);
                });
  }
  Value dyu = proj ? e.tokWT(du, proj) : du;
  Value dx =
      e.map2({dyd, dyu}, {e.id2(), e.id2()}, dyd,
             [](OpBuilder &b, Location l, ValueRange v) -> Value { return add(b, l, v[0], v[1]); });
  return {dx, proj ? e.tokTTokW(y, du) : Value()};
}

/// Y' = Y W_s + αc C with W_s = (1 − αc) I − α (W + Wᵀ)/2 (symmetric):
/// dY = dY' W_s, dW = −α/2 (dW_s + dW_sᵀ) with dW_s = Yᵀ dY', dC = αc dY',
/// and, for a learnable α (Y' = Y − α G, G = c Y + Y (W + Wᵀ)/2 − c C),
/// dα = −Σ dY' ∘ G over every prompt.
std::array<Value, 4> gradStepVJP(Emitter &e, GradStepVJPOp op, Value y, Value w, Value dy,
                                 Value center, Value step) {
  StepSize alpha = stepSizeOf(e, op, step);
  double c = op.getCoeff().convertToDouble();
  Emitter we = e.weights();
  Value ws = stepMatrix(e, w, alpha, c);
  Value dx = e.tokW(dy, ws);
  Value dws = e.tokTTokW(y, dy);
  Value nha = alpha.times(e, -0.5), ac = alpha.times(e, c);
  Value dw = we.map2({dws, dws}, {we.id2(), we.tr2()}, dws,
                     [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                       return mul(b, l, nha, add(b, l, a[0], a[1]));
                     });
  Value dc = e.map2({dy}, {e.id2()}, dy, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
    return mul(b, l, ac, a[0]);
  });
  Value dstep;
  if (step) {
    Value half = e.cst(0.5), cc = e.cst(c);
    Value wsym = we.map2({w, w}, {we.id2(), we.tr2()}, w,
                         [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                           return mul(b, l, half, add(b, l, a[0], a[1]));
                         });
    Value yw = e.tokW(y, wsym);
    SmallVector<Value> ins{dy, y, yw};
    SmallVector<AffineMap> maps{e.id2(), e.id2(), e.id2()};
    if (center) {
      ins.push_back(center);
      maps.push_back(e.id2());
    }
    // −Σ dY' ∘ (c y + (Y Wsym) − c C) over (batch..., i, j).
    Value total = e.reduceAll(
        ins, maps,
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value r = center ? sub(b, l, a[1], a[3]) : a[1];
          Value gv = add(b, l, mul(b, l, cc, r), a[2]);
          return sub(b, l, a.back(), mul(b, l, a[0], gv));
        },
        e.nb + 2);
    dstep = e.b.create<tensor::FromElementsOp>(e.loc, RankedTensorType::get({1}, e.t),
                                               ValueRange{total});
  }
  return {dx, dw, dc, dstep};
}

Value proxVJP(Emitter &e, Value y, Value dy) {
  Value zero = e.cst(0.0);
  return e.map2({y, dy}, {e.id2(), e.id2()}, y,
                [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                  Value pos = b.create<arith::CmpFOp>(l, arith::CmpFPredicate::OGT, a[0], zero);
                  return b.create<arith::SelectOp>(l, pos, a[1], zero);
                });
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

struct MMStepLowering : OpConversionPattern<MMStepOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(MMStepOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e = emitterFor(rewriter, op, op.getY());
    Value y = a.getY(), proj = a.getProj();
    Value r = op.getVariant() == AttentionVariant::certified
                  ? certifiedStep(e, op, y, proj, a.getCenter(), a.getQuad())
                  : e.pairTok(attentionMatrix(e, specOf(op), y, proj), y);
    rewriter.replaceOp(op, e.castTo(r, op.getType()));
    return success();
  }
};

struct GradStepLowering : OpConversionPattern<GradStepOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(GradStepOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e = emitterFor(rewriter, op, op.getY());
    Value r = emitGradStep(e, op, a.getY(), a.getWeight(), a.getCenter(), a.getStep());
    rewriter.replaceOp(op, e.castTo(r, op.getType()));
    return success();
  }
};

struct ProxNonNegLowering : OpConversionPattern<ProxNonNegOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ProxNonNegOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e = emitterFor(rewriter, op, op.getY());
    rewriter.replaceOp(op, e.castTo(emitRelu(e, a.getY()), op.getType()));
    return success();
  }
};

struct MMStepVJPLowering : OpConversionPattern<MMStepVJPOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(MMStepVJPOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e = emitterFor(rewriter, op, op.getY());
    Value dx, dproj, dcenter, dquad;
    if (op.getVariant() == AttentionVariant::certified) {
      auto r = certifiedVJP(e, op, a.getY(), a.getProj(), a.getDy(), a.getCenter(), a.getQuad());
      dx = r[0], dproj = r[1], dcenter = r[2], dquad = r[3];
    } else {
      std::tie(dx, dproj) = mmStepVJP(e, op, a.getY(), a.getProj(), a.getDy());
    }
    SmallVector<Value> results{e.castTo(dx, op.getDx().getType())};
    if (op.getDproj())
      results.push_back(e.castTo(dproj, op.getDproj().getType()));
    if (op.getDcenter()) {
      if (!dcenter)
        return op.emitOpError("a center gradient needs variant(certified) and a center");
      results.push_back(e.castTo(dcenter, op.getDcenter().getType()));
    }
    if (op.getDquad())
      results.push_back(e.castTo(dquad, op.getDquad().getType()));
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct GradStepVJPLowering : OpConversionPattern<GradStepVJPOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(GradStepVJPOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e = emitterFor(rewriter, op, op.getY());
    auto r = gradStepVJP(e, op, a.getY(), a.getWeight(), a.getDy(), a.getCenter(), a.getStep());
    SmallVector<Value> results{e.castTo(r[0], op.getDx().getType()),
                               e.castTo(r[1], op.getDweight().getType()),
                               e.castTo(r[2], op.getDcenter().getType())};
    if (op.getDstep())
      results.push_back(r[3]);
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct ProxNonNegVJPLowering : OpConversionPattern<ProxNonNegVJPOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ProxNonNegVJPOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Emitter e = emitterFor(rewriter, op, op.getY());
    rewriter.replaceOp(op, e.castTo(proxVJP(e, a.getY(), a.getDy()), op.getType()));
    return success();
  }
};

} // namespace

void mlir::unroll::populateStepPatterns(RewritePatternSet &patterns) {
  patterns.add<MMStepLowering, GradStepLowering, ProxNonNegLowering, MMStepVJPLowering,
               GradStepVJPLowering, ProxNonNegVJPLowering>(patterns.getContext());
}
