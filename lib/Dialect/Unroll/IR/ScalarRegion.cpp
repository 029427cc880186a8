//===- ScalarRegion.cpp - check, evaluate and differentiate rho regions ---===//
#include "unroll/Dialect/Unroll/IR/ScalarRegion.h"
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <optional>

using namespace mlir;
using namespace mlir::unroll;

bool mlir::unroll::isSupportedScalarOp(Operation *op) {
  return isa<arith::ConstantOp, arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
             arith::NegFOp, arith::MaximumFOp, arith::MinimumFOp, math::ExpOp, math::LogOp,
             math::Log1pOp, math::SqrtOp, math::TanhOp, math::PowFOp, YieldOp>(op);
}

LogicalResult mlir::unroll::verifyScalarRegion(Operation *owner, Region &region, Type elemType,
                                               StringRef what) {
  if (!region.hasOneBlock())
    return owner->emitOpError() << "expected the " << what << " region to have one block";
  Block &b = region.front();
  if (b.getNumArguments() != 1 || b.getArgument(0).getType() != elemType)
    return owner->emitOpError() << "expected the " << what << " region to take one " << elemType
                                << " argument z";
  auto yield = b.empty() ? YieldOp() : dyn_cast<YieldOp>(b.back());
  if (!yield || yield.getValues().size() != 1 || yield.getValues()[0].getType() != elemType)
    return owner->emitOpError() << "expected the " << what << " region to yield one " << elemType;
  for (Operation &op : b) {
    if (!isSupportedScalarOp(&op))
      return op.emitOpError() << "is not supported in a " << what
                              << " region (supported: arith.constant/addf/subf/mulf/divf/negf/"
                                 "maximumf/minimumf, math.exp/log/log1p/sqrt/tanh/powf)";
    for (Type t : op.getResultTypes())
      if (t != elemType)
        return op.emitOpError() << "expected a scalar " << elemType << " result in a " << what
                                << " region, got " << t;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Hyper-dual interpreter
//===----------------------------------------------------------------------===//

namespace mlir::unroll {
static Dual2 operator+(Dual2 a, Dual2 b) { return {a.v + b.v, a.d + b.d, a.dd + b.dd}; }
static Dual2 operator-(Dual2 a, Dual2 b) { return {a.v - b.v, a.d - b.d, a.dd - b.dd}; }
static Dual2 operator*(Dual2 a, Dual2 b) {
  return {a.v * b.v, a.d * b.v + a.v * b.d, a.dd * b.v + 2 * a.d * b.d + a.v * b.dd};
}
/// f(a) for a scalar f with derivatives f1 = f'(a.v), f2 = f''(a.v).
static Dual2 chain(Dual2 a, double f, double f1, double f2) {
  return {f, f1 * a.d, f2 * a.d * a.d + f1 * a.dd};
}
static Dual2 recip(Dual2 b) {
  double r = 1.0 / b.v;
  return chain(b, r, -r * r, 2 * r * r * r);
}
} // namespace mlir::unroll

Dual2 mlir::unroll::evaluateScalarRegion(Region &region, double z) {
  Block &b = region.front();
  llvm::DenseMap<Value, Dual2> env;
  env[b.getArgument(0)] = {z, 1.0, 0.0};
  auto get = [&](Value v) { return env.lookup(v); };
  for (Operation &op : b) {
    if (auto y = dyn_cast<YieldOp>(op))
      return get(y.getValues()[0]);
    Dual2 r;
    llvm::TypeSwitch<Operation *>(&op)
        .Case([&](arith::ConstantOp c) {
          r = {cast<FloatAttr>(c.getValue()).getValueAsDouble(), 0, 0};
        })
        .Case([&](arith::AddFOp o) { r = get(o.getLhs()) + get(o.getRhs()); })
        .Case([&](arith::SubFOp o) { r = get(o.getLhs()) - get(o.getRhs()); })
        .Case([&](arith::MulFOp o) { r = get(o.getLhs()) * get(o.getRhs()); })
        .Case([&](arith::DivFOp o) { r = get(o.getLhs()) * recip(get(o.getRhs())); })
        .Case([&](arith::NegFOp o) { r = Dual2{} - get(o.getOperand()); })
        .Case([&](arith::MaximumFOp o) {
          Dual2 a = get(o.getLhs()), c = get(o.getRhs());
          r = a.v >= c.v ? a : c;
        })
        .Case([&](arith::MinimumFOp o) {
          Dual2 a = get(o.getLhs()), c = get(o.getRhs());
          r = a.v <= c.v ? a : c;
        })
        .Case([&](math::ExpOp o) {
          double e = std::exp(get(o.getOperand()).v);
          r = chain(get(o.getOperand()), e, e, e);
        })
        .Case([&](math::LogOp o) {
          double x = get(o.getOperand()).v;
          r = chain(get(o.getOperand()), std::log(x), 1 / x, -1 / (x * x));
        })
        .Case([&](math::Log1pOp o) {
          double x = get(o.getOperand()).v;
          r = chain(get(o.getOperand()), std::log1p(x), 1 / (1 + x), -1 / ((1 + x) * (1 + x)));
        })
        .Case([&](math::SqrtOp o) {
          double x = get(o.getOperand()).v, s = std::sqrt(x);
          r = chain(get(o.getOperand()), s, 0.5 / s, -0.25 / (s * x));
        })
        .Case([&](math::TanhOp o) {
          double t = std::tanh(get(o.getOperand()).v);
          r = chain(get(o.getOperand()), t, 1 - t * t, -2 * t * (1 - t * t));
        })
        .Case([&](math::PowFOp o) {
          Dual2 a = get(o.getLhs()), e = get(o.getRhs());
          if (e.d == 0 && e.dd == 0) { // constant exponent
            double p = e.v, x = a.v;
            r = chain(a, std::pow(x, p), p * std::pow(x, p - 1), p * (p - 1) * std::pow(x, p - 2));
          } else { // a^e = exp(e log a)
            Dual2 l = chain(a, std::log(a.v), 1 / a.v, -1 / (a.v * a.v));
            Dual2 m = e * l;
            double x = std::exp(m.v);
            r = chain(m, x, x, x);
          }
        })
        .Default([&](Operation *) { r = {NAN, NAN, NAN}; });
    env[op.getResult(0)] = r;
  }
  return {NAN, NAN, NAN};
}

//===----------------------------------------------------------------------===//
// Symbolic forward-mode differentiation
//===----------------------------------------------------------------------===//

namespace {
/// Emits tangent arithmetic, folding the zero tangent (null Value), products
/// with ±1 and double negation, so derived regions read like the math.
struct TangentBuilder {
  OpBuilder &b;
  Location loc;
  Type t;
  Value cst(double v) { return b.create<arith::ConstantOp>(loc, t, b.getFloatAttr(t, v)); }
  static std::optional<double> constOf(Value v) {
    if (auto c = v.getDefiningOp<arith::ConstantOp>())
      if (auto f = dyn_cast<FloatAttr>(c.getValue()))
        return f.getValueAsDouble();
    return std::nullopt;
  }
  Value neg(Value x) {
    if (!x)
      return {};
    if (auto n = x.getDefiningOp<arith::NegFOp>())
      return n.getOperand();
    if (auto c = constOf(x))
      return cst(-*c);
    return b.create<arith::NegFOp>(loc, x);
  }
  Value add(Value x, Value y) {
    if (!x)
      return y;
    if (!y)
      return x;
    return b.create<arith::AddFOp>(loc, x, y);
  }
  Value sub(Value x, Value y) {
    if (!y)
      return x;
    if (!x)
      return neg(y);
    return b.create<arith::SubFOp>(loc, x, y);
  }
  Value mul(Value x, Value y) { // x or y may be a zero tangent
    if (!x || !y)
      return {};
    for (auto [a, o] : {std::pair{x, y}, std::pair{y, x}}) {
      if (auto c = constOf(a)) {
        if (*c == 1.0)
          return o;
        if (*c == -1.0)
          return neg(o);
        if (*c == 0.0)
          return {};
      }
    }
    return b.create<arith::MulFOp>(loc, x, y);
  }
  Value div(Value x, Value y) {
    if (!x)
      return {};
    return b.create<arith::DivFOp>(loc, x, y);
  }
};
} // namespace

void mlir::unroll::differentiateScalarRegion(Region &src, Region &dst, Location loc,
                                             bool yieldPrimal) {
  Block &sb = src.front();
  Type t = sb.getArgument(0).getType();
  Block *db = new Block();
  dst.push_back(db);
  Value z = db->addArgument(t, loc);
  OpBuilder b(t.getContext()); // dst may not be attached to an op yet
  b.setInsertionPointToEnd(db);
  TangentBuilder tb{b, loc, t};

  IRMapping primal;
  primal.map(sb.getArgument(0), z);
  llvm::DenseMap<Value, Value> tangent; // absent = zero tangent
  tangent[sb.getArgument(0)] = tb.cst(1.0);
  auto P = [&](Value v) { return primal.lookup(v); };
  auto T = [&](Value v) { return tangent.lookup(v); };

  for (Operation &op : sb) {
    if (auto y = dyn_cast<YieldOp>(op)) {
      Value d = T(y.getValues()[0]);
      if (!d)
        d = tb.cst(0.0);
      if (yieldPrimal)
        b.create<YieldOp>(loc, ValueRange{P(y.getValues()[0]), d});
      else
        b.create<YieldOp>(loc, ValueRange{d});
      // Drop primal values the derivative does not use (all ops are pure).
      SmallVector<Operation *> ops;
      for (Operation &o : db->without_terminator())
        ops.push_back(&o);
      for (Operation *o : llvm::reverse(ops))
        if (o->use_empty())
          o->erase();
      return;
    }
    Operation *c = b.clone(op, primal);
    Value r = c->getResult(0), d;
    llvm::TypeSwitch<Operation *>(&op)
        .Case([&](arith::AddFOp o) { d = tb.add(T(o.getLhs()), T(o.getRhs())); })
        .Case([&](arith::SubFOp o) { d = tb.sub(T(o.getLhs()), T(o.getRhs())); })
        .Case([&](arith::MulFOp o) {
          d = tb.add(tb.mul(T(o.getLhs()), P(o.getRhs())), tb.mul(P(o.getLhs()), T(o.getRhs())));
        })
        .Case([&](arith::DivFOp o) { // (da - r db) / b
          d = tb.div(tb.sub(T(o.getLhs()), tb.mul(r, T(o.getRhs()))), P(o.getRhs()));
        })
        .Case([&](arith::NegFOp o) { d = tb.neg(T(o.getOperand())); })
        .Case([&](arith::MaximumFOp o) {
          Value da = T(o.getLhs()), dc = T(o.getRhs());
          if (da || dc) {
            Value ge = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGE, P(o.getLhs()),
                                               P(o.getRhs()));
            d = b.create<arith::SelectOp>(loc, ge, da ? da : tb.cst(0), dc ? dc : tb.cst(0));
          }
        })
        .Case([&](arith::MinimumFOp o) {
          Value da = T(o.getLhs()), dc = T(o.getRhs());
          if (da || dc) {
            Value le = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLE, P(o.getLhs()),
                                               P(o.getRhs()));
            d = b.create<arith::SelectOp>(loc, le, da ? da : tb.cst(0), dc ? dc : tb.cst(0));
          }
        })
        .Case([&](math::ExpOp o) { d = tb.mul(T(o.getOperand()), r); })
        .Case([&](math::LogOp o) { d = tb.div(T(o.getOperand()), P(o.getOperand())); })
        .Case([&](math::Log1pOp o) {
          if (Value a = T(o.getOperand()))
            d = tb.div(a, tb.add(P(o.getOperand()), tb.cst(1.0)));
        })
        .Case([&](math::SqrtOp o) {
          if (Value a = T(o.getOperand()))
            d = tb.div(a, tb.mul(tb.cst(2.0), r));
        })
        .Case([&](math::TanhOp o) {
          if (Value a = T(o.getOperand()))
            d = tb.mul(a, tb.sub(tb.cst(1.0), tb.mul(r, r)));
        })
        .Case([&](math::PowFOp o) { // d(a^e) = e a^(e-1) da + a^e log(a) de
          Value a = P(o.getLhs()), e = P(o.getRhs());
          if (Value da = T(o.getLhs())) {
            Value em1 = tb.sub(e, tb.cst(1.0));
            Value pw = b.create<math::PowFOp>(loc, a, em1);
            d = tb.mul(da, tb.mul(e, pw));
          }
          if (Value de = T(o.getRhs()))
            d = tb.add(d, tb.mul(de, tb.mul(r, b.create<math::LogOp>(loc, a))));
        })
        .Default([&](Operation *) {}); // constants: zero tangent
    if (d)
      tangent[op.getResult(0)] = d;
  }
}

void mlir::unroll::buildBuiltinRho(Region &dst, int rhoKind, Type t, Location loc) {
  Block *db = new Block();
  dst.push_back(db);
  Value z = db->addArgument(t, loc);
  OpBuilder b(t.getContext());
  b.setInsertionPointToEnd(db);
  auto cst = [&](double v) { return b.create<arith::ConstantOp>(loc, t, b.getFloatAttr(t, v)); };
  Value r;
  switch (static_cast<RhoKind>(rhoKind)) {
  case RhoKind::neg_exp: // -exp(-z)
    r = b.create<arith::NegFOp>(loc, b.create<math::ExpOp>(loc, b.create<arith::NegFOp>(loc, z)));
    break;
  case RhoKind::log_plus_two:
    r = b.create<math::LogOp>(loc, b.create<arith::AddFOp>(loc, z, cst(2.0)));
    break;
  case RhoKind::log_plus_one:
    r = b.create<math::LogOp>(loc, b.create<arith::AddFOp>(loc, z, cst(1.0)));
    break;
  case RhoKind::custom:
    llvm_unreachable("custom rho has its own region");
  }
  b.create<YieldOp>(loc, ValueRange{r});
}
