//===- EnergyEntryPoints.cpp - an energy's entry points -------------------===//
//
// Every derived `unroll.energy @E` becomes C-interface functions on memrefs:
//
//   @E_descend(Y_0, X, theta, Y_out, energies)   from Y_0, dim(energies) - 1
//                                         iterations of the steps, E(Y_t) each
//   @E_trace(X, theta, Y_out, energies)   the same from Y_0 = X (when X has
//                                         Y's type: the transformer energies)
//   @E_weights(Y, theta, A)               the first MM step's normalized weights
//   @E_descend_vjp(Y_0, X, theta, iterations, dY_T, dY_0, dX, grad)
//   @E_vjp(X, theta, iterations, dY_T, dX, grad)   Y_0 = X (differentiated
//                                         energies)
//   @E_adam(theta, grad, m, v, hyper, partial)   one Adam step (Adam.cpp), for
//                                         differentiated energies with trained
//                                         parameters
//
// The energy's terms and steps are copied into them as they are; the
// patterns of convert-unroll-to-linalg lower them afterwards.
//
//===----------------------------------------------------------------------===//
#include "EntryPoints.h"
#include "unroll/Conversion/UnrollToLinalg/UnrollToLinalg.h"
#include "unroll/Utils/Builders.h"

#include "mlir/IR/IRMapping.h"
#include "unroll/runtime/ModelInfo.h"

using namespace mlir;
using namespace mlir::unroll;
namespace key = ::unroll::info;
using namespace mlir::unroll::lowering;

namespace {

class EnergyLowering {
public:
  EnergyLowering(EnergyOp energy) : energy(energy) { table.collect(energy); }

  void emit(OpBuilder &b);
  llvm::json::Object info();
  MMStepOp firstStep() {
    MMStepOp first;
    energy.getSteps().walk([&](MMStepOp m) {
      if (!first)
        first = m;
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
  /// One iteration of the steps at layer index `layer` (used when the
  /// steps take one).
  Value stepValue(OpBuilder &b, Value y, Value x, ArrayRef<Value> ptensors, Value layer,
                  Value prev = {});
  /// A differentiated energy with trained (not fixed) parameters gets @E_adam.
  bool hasAdam() {
    return !energy.getReverse().empty() &&
           llvm::any_of(table.params, [](const ParamInfo &p) { return !p.fixed; });
  }
  /// Do the steps carry the previous iterate (FISTA's second loop state)?
  bool hasPrev() {
    return !energy.getSteps().empty() && energy.getSteps().front().getNumArguments() == 4;
  }
  /// Runs a steps or reverse region; returns its first yielded value (the
  /// second, if any, into `second`).
  Value runRegion(OpBuilder &b, Region &region, ArrayRef<Value> args, ArrayRef<Value> pt,
                  Grads &grads, Value *second = nullptr);
  /// @E_trace (Y_0 = X) or, with `fromStart`, @E_descend.
  void emitTrace(OpBuilder &b, bool fromStart);
  /// @E_vjp (Y_0 = X) or, with `fromStart`, @E_descend_vjp.
  void emitVJP(OpBuilder &b, bool fromStart);
  /// Does X have Y's type (so that Y_0 = X makes sense)?
  bool inputIsTokens() { return energy.getInput().getType() == energy.getTokenType(); }
  /// An entry function `name(tokens, theta, extra...)` with the builder at
  /// its start; `y` gets the token tensor, `pt` the parameter tensors.
  func::FuncOp beginEntry(OpBuilder &b, StringRef name, ArrayRef<Type> extra, Value &y,
                          SmallVector<Value> &pt);

  EnergyOp energy;
  ParamTable table;
};

func::FuncOp EnergyLowering::beginEntry(OpBuilder &b, StringRef name, ArrayRef<Type> extra,
                                        Value &y, SmallVector<Value> &pt) {
  SmallVector<Type> args{dynMemref(2, elem()), dynMemref(1, elem())};
  args.append(extra.begin(), extra.end());
  Location loc = energy.getLoc();
  func::FuncOp f = makeEntry(b, loc, name, args);
  y = memrefToTensor(b, loc, f.getArgument(0), energy.getTokenType());
  pt = paramTensors(b, loc, f.getArgument(1), table, elem());
  return f;
}

Value EnergyLowering::energyValue(OpBuilder &b, Value y, Value x, ArrayRef<Value> pt) {
  Block &body = energy.getBody().front();
  IRMapping map;
  map.map(body.getArgument(0), y);
  map.map(body.getArgument(1), x);
  Value total;
  for (Operation &op : body.without_terminator()) {
    if (auto p = dyn_cast<ParamOp>(op)) {
      map.map(p.getResult(), pt[table.indexOf(p.getName())]);
      continue;
    }
    // A term is copied as it is and read as a scalar (its pattern lowers it
    // to the term's value; the casts fold away).
    Operation *term = b.clone(op, map);
    if (term->getNumResults() != 1 || !isa<EnergyType>(term->getResult(0).getType()))
      continue;
    Value v =
        b.create<UnrealizedConversionCastOp>(op.getLoc(), elem(), term->getResult(0)).getResult(0);
    total = total ? b.create<arith::AddFOp>(op.getLoc(), total, v).getResult() : v;
  }
  return total;
}

Value EnergyLowering::stepValue(OpBuilder &b, Value y, Value x, ArrayRef<Value> pt, Value layer,
                                Value prev) {
  Grads none;
  return runRegion(b, energy.getSteps(), {y, x, layer, prev}, pt, none);
}

Value EnergyLowering::runRegion(OpBuilder &b, Region &region, ArrayRef<Value> args,
                                ArrayRef<Value> pt, Grads &grads, Value *second) {
  Block &blk = region.front();
  IRMapping map;
  for (auto [arg, v] : llvm::zip(blk.getArguments(), args))
    map.map(arg, v);
  for (Operation &op : blk) {
    if (auto yield = dyn_cast<YieldOp>(op)) {
      if (second && yield.getValues().size() > 1)
        *second = map.lookup(yield.getValues()[1]);
      return map.lookup(yield.getValues()[0]);
    }
    if (auto p = dyn_cast<ParamOp>(op)) {
      map.map(p.getResult(), pt[table.indexOf(p.getName())]);
    } else if (auto acc = dyn_cast<AccumulateGradOp>(op)) {
      Value g = map.lookup(acc.getGrad());
      if (auto p = acc.getParam().getDefiningOp<ParamOp>()) {
        const ParamInfo &info = table[p.getName()];
        Emitter e(b, op.getLoc(), elem());
        g = e.castTo(g, info.type);
        grads.theta = accumulateInto(b, op.getLoc(), grads.theta, info, g);
      } else {
        // The input X.
        Emitter e(b, op.getLoc(), elem());
        Value sum = e.map2({grads.x, g}, {e.id2(), e.id2()}, grads.x,
                           [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                             return nb.create<arith::AddFOp>(l, a[0], a[1]);
                           });
        grads.x = e.castTo(sum, grads.x.getType());
      }
    } else {
      // Steps and their VJPs are copied as they are; convert-unroll-to-linalg
      // lowers them.
      b.clone(op, map);
    }
  }
  llvm_unreachable("region without yield");
}

void EnergyLowering::emit(OpBuilder &b) {
  Location loc = energy.getLoc();
  StringRef name = energy.getSymName();

  emitTrace(b, /*fromStart=*/true);
  if (inputIsTokens())
    emitTrace(b, /*fromStart=*/false);
  if (!energy.getReverse().empty()) {
    emitVJP(b, /*fromStart=*/true);
    if (inputIsTokens())
      emitVJP(b, /*fromStart=*/false);
  }
  // The learned unrollings train with the library's Adam, as models do.
  if (hasAdam())
    emitAdam(b, loc, name, elem());

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
  storeTensor(b, loc, buildAttentionWeights(b, first, y, proj), f.getArgument(2));
  b.create<func::ReturnOp>(loc);
}

/// The start of @E_descend / @E_descend_vjp: (Y_0, X, theta, extra...), or
/// of @E_trace / @E_vjp: (X, theta, extra...) with Y_0 = X. Sets y0, x and
/// the parameter tensors; returns the function and the index of its first
/// extra argument.
std::pair<func::FuncOp, unsigned> beginDescent(OpBuilder &b, EnergyOp energy, ParamTable &table,
                                               StringRef name, bool fromStart, ArrayRef<Type> extra,
                                               Value &y0, Value &x, SmallVector<Value> &pt) {
  Type t = energy.getTokenType().getElementType();
  Location loc = energy.getLoc();
  SmallVector<Type> args;
  if (fromStart)
    args.push_back(dynMemref(2, t));
  args.append({dynMemref(2, t), dynMemref(1, t)});
  args.append(extra.begin(), extra.end());
  func::FuncOp f = makeEntry(b, loc, name, args);
  unsigned k = fromStart ? 1 : 0;
  x = memrefToTensor(b, loc, f.getArgument(k), energy.getInput().getType());
  y0 = fromStart ? memrefToTensor(b, loc, f.getArgument(0), energy.getTokenType()) : x;
  pt = paramTensors(b, loc, f.getArgument(k + 1), table, t);
  return {f, k + 2};
}

void EnergyLowering::emitTrace(OpBuilder &b, bool fromStart) {
  Location loc = energy.getLoc();
  OpBuilder::InsertionGuard g(b);
  Value y0, x;
  SmallVector<Value> pt;
  auto [f, k] = beginDescent(b, energy, table,
                             (energy.getSymName() + (fromStart ? "_descend" : "_trace")).str(),
                             fromStart, {dynMemref(2, elem()), dynMemref(1, elem())}, y0, x, pt);
  Value yOut = f.getArgument(k), eOut = f.getArgument(k + 1);
  Value c0 = b.create<arith::ConstantIndexOp>(loc, 0);
  Value c1 = b.create<arith::ConstantIndexOp>(loc, 1);
  b.create<memref::StoreOp>(loc, energyValue(b, y0, x, pt), eOut, ValueRange{c0});
  Value n = b.create<memref::DimOp>(loc, eOut, 0);
  // With a second loop state the loop carries (Y_t, Y_{t-1}), Y_{-1} = Y_0.
  bool prev = hasPrev();
  SmallVector<Value> init{y0};
  if (prev)
    init.push_back(y0);
  auto loop = b.create<scf::ForOp>(
      loc, c1, n, c1, init, [&](OpBuilder &lb, Location ll, Value t, ValueRange iter) {
        Value next = stepValue(lb, iter[0], x, pt, lb.create<arith::SubIOp>(ll, t, c1),
                               prev ? iter[1] : Value());
        next = Emitter(lb, ll, elem()).castTo(next, iter[0].getType());
        lb.create<memref::StoreOp>(ll, energyValue(lb, next, x, pt), eOut, ValueRange{t});
        SmallVector<Value> carry{next};
        if (prev)
          carry.push_back(iter[0]);
        lb.create<scf::YieldOp>(ll, carry);
      });
  storeTensor(b, loc, loop.getResult(0), yOut);
  b.create<func::ReturnOp>(loc);
}

/// @E_descend_vjp(Y_0, X, theta, iterations, dY_T, dY_0, dX, grad): the
/// vector-Jacobian product of (Y_0, X) -> Y_T (T = iterations steps) with
/// the cotangent dY_T, for Y_0, X and the parameters; @E_vjp(X, theta,
/// iterations, dY_T, dX, grad) the same from Y_0 = X. The forward stores
/// every state; the backward runs the reverse region from the last step to
/// the first.
void EnergyLowering::emitVJP(OpBuilder &b, bool fromStart) {
  Location loc = energy.getLoc();
  Type t = elem();
  OpBuilder::InsertionGuard g(b);
  Value y0, x;
  SmallVector<Value> pt;
  SmallVector<Type> extra{b.getI64Type(), dynMemref(2, t), dynMemref(2, t)};
  if (fromStart)
    extra.push_back(dynMemref(2, t));
  extra.push_back(dynMemref(1, t));
  auto [f, k] = beginDescent(b, energy, table,
                             (energy.getSymName() + (fromStart ? "_descend_vjp" : "_vjp")).str(),
                             fromStart, extra, y0, x, pt);
  Emitter e(b, loc, t);
  Type tokTy = energy.getTokenType(), inTy = energy.getInput().getType();
  Value iters = b.create<arith::IndexCastOp>(loc, b.getIndexType(), f.getArgument(k));
  Value dyT = memrefToTensor(b, loc, f.getArgument(k + 1), tokTy);
  Value c0 = b.create<arith::ConstantIndexOp>(loc, 0),
        c1 = b.create<arith::ConstantIndexOp>(loc, 1);
  Value n = e.dim(y0, 0), d = e.dim(y0, 1);
  auto statesTy =
      RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic, ShapedType::kDynamic}, t);
  auto slice = [&](OpBuilder &lb, Value i) {
    return std::make_tuple(SmallVector<OpFoldResult>{i, lb.getIndexAttr(0), lb.getIndexAttr(0)},
                           SmallVector<OpFoldResult>{lb.getIndexAttr(1), n, d},
                           SmallVector<OpFoldResult>(3, lb.getIndexAttr(1)));
  };
  Value xd = e.dynamic(y0);
  Value states = b.create<tensor::EmptyOp>(
      loc, statesTy, ValueRange{b.create<arith::AddIOp>(loc, iters, c1), n, d});
  {
    auto [o, sz, st] = slice(b, c0);
    states = b.create<tensor::InsertSliceOp>(loc, xd, states, o, sz, st);
  }
  // A second loop state (Y_{t-1}, Y_{-1} = Y_0) is carried forward and, in
  // the backward loop, read back from the stored states; its cotangent
  // reaches Y_{t-1} one iteration later (`pend`).
  bool prev = hasPrev();
  auto fwd = b.create<scf::ForOp>(
      loc, c0, iters, c1, ValueRange{y0, states, y0},
      [&](OpBuilder &lb, Location ll, Value i, ValueRange it) {
        Emitter le(lb, ll, t);
        Value y = le.castTo(stepValue(lb, it[0], x, pt, i, prev ? it[2] : Value()), tokTy);
        auto [o, sz, st] = slice(lb, lb.create<arith::AddIOp>(ll, i, c1));
        Value s2 = lb.create<tensor::InsertSliceOp>(ll, le.dynamic(y), it[1], o, sz, st);
        lb.create<scf::YieldOp>(ll, ValueRange{y, s2, it[0]});
      });
  states = fwd.getResult(1);
  int64_t numParams = std::max<int64_t>(table.numParams, 1);
  auto gTy = RankedTensorType::get({numParams}, t);
  Value g0 = b.create<linalg::FillOp>(loc, e.cst(0.0),
                                      b.create<tensor::EmptyOp>(loc, gTy, ValueRange{}).getResult())
                 .getResult(0);
  Value dx0 = e.castTo(e.filled({e.dim(x, 0), e.dim(x, 1)}, 0.0), inTy);
  Value pend0 = e.castTo(e.filled({n, d}, 0.0), tokTy);
  auto bwd = b.create<scf::ForOp>(
      loc, c0, iters, c1, ValueRange{g0, dx0, dyT, pend0},
      [&](OpBuilder &lb, Location ll, Value i, ValueRange it) {
        Emitter le(lb, ll, t);
        Value tIdx = lb.create<arith::SubIOp>(ll, lb.create<arith::SubIOp>(ll, iters, c1), i);
        auto [o, sz, st] = slice(lb, tIdx);
        auto sTy = RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic}, t);
        Value yt = lb.create<tensor::ExtractSliceOp>(ll, sTy, states, o, sz, st);
        Value yPrev;
        if (prev) {
          // Y_{t-1}: state max(t - 1, 0) (Y_{-1} = Y_0).
          Value tm1 = lb.create<arith::MaxSIOp>(ll, lb.create<arith::SubIOp>(ll, tIdx, c1), c0);
          auto [po, psz, pst] = slice(lb, tm1);
          yPrev =
              le.castTo(lb.create<tensor::ExtractSliceOp>(ll, sTy, states, po, psz, pst), tokTy);
        }
        Grads gr{it[0], it[1]};
        Value dPrev;
        Value dy = runRegion(lb, energy.getReverse(), {le.castTo(yt, tokTy), x, it[2], tIdx, yPrev},
                             pt, gr, &dPrev);
        Value pend = it[3];
        if (prev) {
          // c_t = dY_t (this step) + the cotangent Y_t got as step t+1's Y_prev.
          dy = le.map2({dy, it[3]}, {le.id2(), le.id2()}, dy,
                       [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                         return nb.create<arith::AddFOp>(l, a[0], a[1]);
                       });
          pend = dPrev;
        }
        lb.create<scf::YieldOp>(ll, ValueRange{gr.theta, le.castTo(gr.x, inTy),
                                               le.castTo(dy, tokTy), le.castTo(pend, tokTy)});
      });
  unsigned next = k + 2;
  Value dx = bwd.getResult(1), dy0 = bwd.getResult(2);
  if (prev) // Y_{-1} = Y_0: the first step's Y_prev cotangent is Y_0's too.
    dy0 = e.map2({dy0, bwd.getResult(3)}, {e.id2(), e.id2()}, dy0,
                 [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                   return nb.create<arith::AddFOp>(l, a[0], a[1]);
                 });
  if (fromStart) {
    storeTensor(b, loc, dy0, f.getArgument(next++));
  } else {
    // Y_0 = X: the gradient reaching Y_0 is X's too.
    dx = e.map2({dx, dy0}, {e.id2(), e.id2()}, x,
                [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                  return nb.create<arith::AddFOp>(l, a[0], a[1]);
                });
  }
  storeTensor(b, loc, dx, f.getArgument(next++));
  if (table.numParams > 0)
    storeTensor(b, loc, bwd.getResult(0), f.getArgument(next));
  b.create<func::ReturnOp>(loc);
}

llvm::json::Object EnergyLowering::info() {
  MinimizeOp min = energy.getMinimize();
  auto tok = energy.getTokenType();
  llvm::json::Array ps = table.toJson();
  PairwiseOp pw;
  bool memory = false; // X is a memory of rows of its own (a Hopfield lse term)
  for (Value t : min.getTerms()) {
    if (auto p = t.getDefiningOp<PairwiseOp>())
      pw = p;
    memory |= (bool)t.getDefiningOp<LseOp>();
  }
  std::string name = energy.getSymName().str();
  auto in = cast<RankedTensorType>(energy.getInput().getType());
  auto km = kernelAndMask(energy);
  llvm::json::Object o{
      {key::kName, name},
      {"descend", name + "_descend"},
      {key::kTrace,
       inputIsTokens() ? llvm::json::Value(name + "_trace") : llvm::json::Value(nullptr)},
      {"descend_vjp", energy.getReverse().empty() ? llvm::json::Value(nullptr)
                                                  : llvm::json::Value(name + "_descend_vjp")},
      {"input_dim",
       in.isDynamicDim(1) ? llvm::json::Value(nullptr) : llvm::json::Value(in.getDimSize(1))},
      // "paired": X's row i goes with Y's row i (measurements of a code, a
      // prompt's tokens); "own": X is a memory Y's rows all read (lse).
      {"input_rows", memory ? "own" : "paired"},
      {key::kWeights, firstStep() ? llvm::json::Value((energy.getSymName() + "_weights").str())
                                  : llvm::json::Value(nullptr)},
      {key::kAdam,
       hasAdam() ? llvm::json::Value(name + "_adam") : llvm::json::Value(nullptr)},
      // The steps take (Y, X) alone: one map Y <- f(Y; X, θ) at every
      // iteration, whose fixed point callers may differentiate implicitly.
      {"stationary",
       !energy.getSteps().empty() && energy.getSteps().front().getNumArguments() == 2},
      {key::kVjp, energy.getReverse().empty() || !inputIsTokens()
                      ? llvm::json::Value(nullptr)
                      : llvm::json::Value((energy.getSymName() + "_vjp").str())},
      {"weight_form", firstStep()
                          ? llvm::json::Value(stringifyWeightForm(firstStep().getForm()).str())
                          : llvm::json::Value(nullptr)},
      {key::kTokens,
       tok.isDynamicDim(0) ? llvm::json::Value(nullptr) : llvm::json::Value(tok.getDimSize(0))},
      {key::kDim,
       tok.isDynamicDim(1) ? llvm::json::Value(nullptr) : llvm::json::Value(tok.getDimSize(1))},
      {"schedule", stringifySchedule(min.getSchedule()).str()},
      {"attention", stringifyAttentionVariant(min.getAttention()).str()},
      {key::kIterations, min.getIterations()},
      {"rho", km.first.empty() ? llvm::json::Value(nullptr) : llvm::json::Value(km.first)},
      {"mask", km.second.empty() ? llvm::json::Value(nullptr) : llvm::json::Value(km.second)},
      {"terms", energyTermsJson(energy)},
      {key::kNumParams, table.numParams},
      {key::kParams, std::move(ps)}};
  if (min.getLearnable())
    o["learnable_alpha"] = true;
  addStepSizeInfo(min, o);
  for (Value t : min.getTerms())
    if (auto l = t.getDefiningOp<LsqOp>())
      o["power_iterations"] = l.getPowerIterations();
  if (pw && pw.getGraph()) {
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
