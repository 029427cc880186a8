//===- ModelOps.cpp - looped-transformer ops: verifiers and VJP rules -----===//
//
// unroll.model, unroll.loop and the GPT-2 pieces (linear, layer_norm,
// attention, gelu, add, position_embed): verifiers and gradient rules
// (VJPOpInterface).
//
//===----------------------------------------------------------------------===//
#include "Verify.h"
#include "unroll/Dialect/Unroll/IR/ScalarRegion.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <cmath>

using namespace mlir;
using namespace mlir::unroll;
using namespace mlir::unroll::detail;

//===----------------------------------------------------------------------===//
// Looped transformers
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::verify() {
  auto x = getX().getType(), y = getResult().getType();
  auto w = getWeight().getType(), b = getBias().getType();
  Type e = x.getElementType();
  if (w.getElementType() != e || b.getElementType() != e || y.getElementType() != e)
    return emitOpError("expected one element type for x, weight, bias and result");
  if (!w.hasStaticShape() || !b.hasStaticShape())
    return emitOpError() << "expected a static weight and bias, got " << w << " and " << b;
  if (x.isDynamicDim(2) || x.getDimSize(2) != w.getDimSize(1))
    return emitOpError() << "expected x with " << w.getDimSize(1) << " features to match weight "
                         << w << ", got " << x;
  if (b.getDimSize(0) != w.getDimSize(0))
    return emitOpError() << "expected a bias of " << w.getDimSize(0) << " entries, got " << b;
  if (y.isDynamicDim(2) || y.getDimSize(2) != w.getDimSize(0))
    return emitOpError() << "expected a result with " << w.getDimSize(0) << " features, got " << y;
  if (y.getDimSize(0) != x.getDimSize(0) || y.getDimSize(1) != x.getDimSize(1))
    return emitOpError() << "expected the result to keep x's batch and token "
                            "sizes, got "
                         << y;
  return success();
}

LogicalResult LayerNormOp::verify() {
  auto x = getX().getType();
  if (x.isDynamicDim(2))
    return emitOpError() << "expected a static feature size, got " << x;
  for (Value v : {getGain(), getBias()}) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t != RankedTensorType::get({x.getDimSize(2)}, x.getElementType()))
      return emitOpError() << "expected gain and bias of type "
                           << RankedTensorType::get({x.getDimSize(2)}, x.getElementType())
                           << ", got " << t;
  }
  double eps = getEps().convertToDouble();
  if (!(eps > 0.0))
    return emitOpError() << "expected eps > 0, got " << fmt(eps);
  return success();
}

LogicalResult LayerNormVJPOp::verify() {
  if (Value a = getAddend(); a && a.getType() != getDx().getType())
    return emitOpError() << "expected the addend to have dx's type " << getDx().getType()
                         << ", got " << a.getType();
  return success();
}

LogicalResult AttentionOp::verify() {
  auto q = getQkv().getType(), y = getResult().getType();
  int64_t h = getHeads();
  if (q.isDynamicDim(2) || q.getDimSize(2) % 3 != 0)
    return emitOpError() << "expected qkv with 3·D features, got " << q;
  int64_t d = q.getDimSize(2) / 3;
  if (d % h != 0)
    return emitOpError() << "expected " << h << " heads to divide D = " << d;
  if (y.getElementType() != q.getElementType() || y.isDynamicDim(2) || y.getDimSize(2) != d ||
      y.getDimSize(0) != q.getDimSize(0) || y.getDimSize(1) != q.getDimSize(1))
    return emitOpError() << "expected a result of D = " << d
                         << " features and qkv's batch and token sizes, got " << y;
  return success();
}

LogicalResult PositionEmbedOp::verify() {
  auto x = getX().getType(), t = getTable().getType();
  if (!t.hasStaticShape() || x.isDynamicDim(2) || t.getDimSize(1) != x.getDimSize(2) ||
      t.getElementType() != x.getElementType())
    return emitOpError() << "expected a static [positions, " << x.getDimSize(2) << "] table, got "
                         << t;
  if (!x.isDynamicDim(1) && x.getDimSize(1) > t.getDimSize(0))
    return emitOpError() << "expected at most " << t.getDimSize(0) << " tokens for the table, got "
                         << x.getDimSize(1);
  return success();
}

LoopOp ModelOp::getLoop() {
  for (Operation &op : getBody().front())
    if (auto l = dyn_cast<LoopOp>(op))
      return l;
  return {};
}

OutputOp ModelOp::getOutput() {
  Block &b = getBody().front();
  return b.empty() ? OutputOp() : dyn_cast<OutputOp>(b.back());
}

bool mlir::unroll::isIndexArithmetic(Operation *op) {
  return op->getDialect() && op->getDialect()->getNamespace() == "arith" &&
         op->getNumResults() == 1 && op->getResult(0).getType().isIndex() &&
         llvm::all_of(op->getOperandTypes(), [](Type t) { return t.isIndex(); });
}

/// Ops allowed in the read-in, loop body and head: parameters and the ops
/// with a gradient rule (the GPT-2 pieces and the descent steps); in a loop
/// body also `unroll.descend`, which --unroll-inline-descent replaces by
/// steps.
static bool isModelStepOp(Operation *op, bool inLoop) {
  if (isa<ParamOp, VJPOpInterface>(op))
    return true;
  // In a loop body: descents, and index arithmetic on the iteration index
  // (what --unroll-inline-descent writes for steps(k) > 1).
  return inLoop && (isa<DescendOp>(op) || isIndexArithmetic(op));
}
static constexpr const char *kSupported =
    "param, linear, layer_norm, attention, gelu, add, position_embed, mm_step, grad_step, "
    "prox_nonneg, the kernel energies' steps";

LogicalResult ModelOp::verifyRegions() {
  Block &body = getBody().front();
  if (body.getNumArguments() != 1)
    return emitOpError() << "expected the body to take the prompt tokens Z, got "
                         << body.getNumArguments() << " arguments";
  auto z = dyn_cast<RankedTensorType>(body.getArgument(0).getType());
  if (!z || z.getRank() != 3 || z.isDynamicDim(2) ||
      !isa<Float32Type, Float64Type>(z.getElementType()))
    return emitOpError() << "expected Z to be a [B, n, d] f32 or f64 tensor with "
                            "static d, got "
                         << body.getArgument(0).getType();
  if (failed(detail::verifyTensorSize(*this, z, "prompt tokens Z")))
    return failure();
  if (getEncoding() == Encoding::concat && z.getDimSize(2) < 2)
    return emitOpError() << "expected concat tokens (x, y) of at least 2 features, got " << z;
  if (body.empty() || !isa<OutputOp>(body.back()))
    return emitOpError("expected the body to end with 'unroll.output'");
  unsigned loops = 0;
  for (Operation &op : body.without_terminator()) {
    if (isa<LoopOp>(op)) {
      ++loops;
      continue;
    }
    if (!isModelStepOp(&op, /*inLoop=*/false))
      return op.emitOpError() << "is not supported in a model body (supported: " << kSupported
                              << ", one loop)";
    for (Type t : op.getResultTypes())
      if (auto rt = dyn_cast<RankedTensorType>(t); rt && rt.getElementType() != z.getElementType())
        return op.emitOpError() << "expected element type " << z.getElementType();
  }
  if (loops != 1)
    return emitOpError() << "expected exactly one 'unroll.loop', got " << loops;
  auto out = getOutput().getPredictions().getType();
  if (getEncoding() == Encoding::dense ? out.isDynamicDim(2)
                                       : out.isDynamicDim(2) || out.getDimSize(2) != 1)
    return emitOpError() << "expected predictions [B, n, "
                         << (getEncoding() == Encoding::dense ? "F" : "1") << "], got " << out;
  // The head must depend on the loop's result, not on values before it other
  // than parameters (it is re-run on every iterate the loss sees).
  LoopOp loop = getLoop();
  if (auto e = loop.getEnergyAttr(); e && !SymbolTable::lookupNearestSymbolFrom<EnergyOp>(*this, e))
    return loop.emitOpError() << "expected '" << e.getValue() << "' to name an 'unroll.energy'";
  for (Operation *op = loop->getNextNode(); op && op != &body.back(); op = op->getNextNode())
    for (Value v : op->getOperands()) {
      Operation *d = v.getDefiningOp();
      if (v == loop.getResult() || isa_and_nonnull<ParamOp>(d) ||
          (d && d->getBlock() == &body && loop->isBeforeInBlock(d)))
        continue;
      return op->emitOpError("expected the read-out to use only the loop's "
                             "result, parameters and read-out values");
    }
  return verifyParams(getOperation());
}

LogicalResult LoopOp::verifyRegions() {
  if (getWindow() > getIterations())
    return emitOpError() << "expected window T <= iterations b, got T = " << getWindow()
                         << " > b = " << getIterations();
  Block &b = getBody().front();
  Type in = getInput().getType(), state = getStateType();
  unsigned na = b.getNumArguments();
  bool typesOk = na >= 1 && na <= 4;
  for (unsigned i = 0; typesOk && i < na; ++i)
    typesOk = i == 2   ? b.getArgument(i).getType().isIndex()
              : i == 1 ? b.getArgument(i).getType() == in
                       : b.getArgument(i).getType() == state;
  if (!typesOk)
    return emitOpError() << "expected the body to take the state " << state
                         << ", optionally then the loop's input P " << in
                         << ", the iteration index (index) and the previous iteration's input "
                            "u_prev";
  auto y = b.empty() ? YieldOp() : dyn_cast<YieldOp>(b.back());
  if (!y || y.getValues().size() != 1 || y.getValues()[0].getType() != state)
    return emitOpError() << "expected the body to yield the next state of type " << state;
  if (readsData() && failed(verifyDataInput()))
    return failure();
  for (Operation &op : b.without_terminator())
    if (!isModelStepOp(&op, /*inLoop=*/true))
      return op.emitOpError() << "is not supported in a loop body (supported: " << kSupported
                              << ", descend)";
  if (failed(verifyFixedPoint()))
    return failure();
  if (!getReverse().empty()) {
    Block &rev = getReverse().front();
    if (rev.getNumArguments() != b.getNumArguments() + 1)
      return emitOpError() << "expected the reverse region to take the body's arguments and dY";
    auto ry = rev.empty() ? YieldOp() : dyn_cast<YieldOp>(rev.back());
    if (!ry || ry.getValues().size() != (takesPrevious() ? 2u : 1u))
      return emitOpError() << "expected the reverse region to yield du"
                           << (takesPrevious() ? " and du_prev" : "");
  }
  return success();
}

/// A loop whose state differs from its input: Y_0 = 0 and P is data that
/// every iteration reads.
LogicalResult LoopOp::verifyDataInput() {
  auto in = cast<RankedTensorType>(getInput().getType());
  RankedTensorType state = getStateType();
  if (getInjection() != Injection::none)
    return emitOpError() << "expected injection(none) for a state " << state
                         << " of another type than its input " << in
                         << " (injection(" << stringifyInjection(getInjection())
                         << ") needs one type)";
  if (getBody().getNumArguments() < 2)
    return emitOpError() << "expected the body to take the input P (its second argument): a "
                            "state of another type starts at 0 and reads P as data";
  if (state.getElementType() != in.getElementType() || state.getShape()[0] != in.getShape()[0] ||
      state.getShape()[1] != in.getShape()[1])
    return emitOpError() << "expected a state with the input's element type, batch and token "
                            "sizes, got "
                         << state << " for " << in;
  if (getHaltTol() || getGradientMode() != GradientMode::bptt)
    return emitOpError() << "expected no until(...) and gradient(bptt) for a loop that reads its "
                            "input as data (its fixed-point entry points take one type)";
  return success();
}

LogicalResult LoopOp::verifyFixedPoint() {
  using detail::fmt;
  auto num = [](std::optional<APFloat> a) { return a ? a->convertToDouble() : 0.0; };
  double haltTol = num(getHaltTol()), gradTol = num(getGradientTol()), damping = num(getDamping());
  if (!getHaltTol() != !getHaltMax())
    return emitOpError() << "expected until(tol = ..., max = ...) to give both";
  if (getHaltTol() && !(haltTol > 0.0 && std::isfinite(haltTol)))
    return emitOpError() << "expected until(tol) > 0, got " << fmt(haltTol);
  if (getHaltMax() && *getHaltMax() < 1)
    return emitOpError() << "expected until(max) >= 1, got " << *getHaltMax();
  GradientMode mode = getGradientMode();
  auto allow = [&](bool tol, bool max, bool steps, bool damping) -> LogicalResult {
    auto refuse = [&](StringRef key) {
      return emitOpError() << "gradient(" << stringifyGradientMode(mode) << ") takes no '" << key
                           << "'";
    };
    if (getGradientTol() && !tol)
      return refuse("tol");
    if (getGradientMax() && !max)
      return refuse("max");
    if (getPhantomSteps() && !steps)
      return refuse("steps");
    if (getDamping() && !damping)
      return refuse("damping");
    return success();
  };
  if (failed(mode == GradientMode::implicit  ? allow(true, true, false, true)
             : mode == GradientMode::phantom ? allow(false, false, true, true)
                                             : allow(false, false, false, false)))
    return failure();
  if (getGradientTol() && !(gradTol > 0.0 && std::isfinite(gradTol)))
    return emitOpError() << "expected gradient(tol) > 0, got " << fmt(gradTol);
  if (getGradientMax() && *getGradientMax() < 1)
    return emitOpError() << "expected gradient(max) >= 1, got " << *getGradientMax();
  if (getPhantomSteps() && *getPhantomSteps() < 1)
    return emitOpError() << "expected gradient(steps) >= 1, got " << *getPhantomSteps();
  if (getDamping() && !(damping > 0.0 && damping <= 1.0))
    return emitOpError() << "expected gradient(damping) in (0, 1], got " << fmt(damping);
  if (mode != GradientMode::bptt && !hasInputInjection())
    return emitOpError() << "gradient(" << stringifyGradientMode(mode)
                         << ") differentiates a fixed point Y* = M(Y*), which does not depend on "
                            "the prompt without input injection: use injection(add) or "
                            "injection(mul), or a body that takes P";
  return success();
}

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::buildVJP(OpBuilder &b, ReverseMode &rm) {
  auto v =
      b.create<LinearVJPOp>(getLoc(), getX().getType(), getWeight().getType(), getBias().getType(),
                            getX(), getWeight(), rm.cotangent(getResult()));
  return success(succeeded(rm.addCotangent(*this, getX(), v.getDx())) &&
                 succeeded(rm.addCotangent(*this, getWeight(), v.getDweight())) &&
                 succeeded(rm.addCotangent(*this, getBias(), v.getDbias())));
}

LogicalResult LayerNormOp::buildVJP(OpBuilder &b, ReverseMode &rm) {
  // x's cotangent so far (a pre-norm block's residual branch) is summed
  // into dx by the VJP itself: one pass over the rows fewer.
  auto v = b.create<LayerNormVJPOp>(
      getLoc(), getX().getType(), getGain().getType(), getBias().getType(), getX(), getGain(),
      rm.cotangent(getResult()), rm.takeCotangent(getX()), getEpsAttr());
  return success(succeeded(rm.addCotangent(*this, getX(), v.getDx())) &&
                 succeeded(rm.addCotangent(*this, getGain(), v.getDgain())) &&
                 succeeded(rm.addCotangent(*this, getBias(), v.getDbias())));
}

LogicalResult AttentionOp::buildVJP(OpBuilder &b, ReverseMode &rm) {
  auto v = b.create<AttentionVJPOp>(getLoc(), getQkv().getType(), getQkv(),
                                    rm.cotangent(getResult()), getHeadsAttr());
  return rm.addCotangent(*this, getQkv(), v.getDqkv());
}

LogicalResult GeluOp::buildVJP(OpBuilder &b, ReverseMode &rm) {
  auto v = b.create<GeluVJPOp>(getLoc(), getX().getType(), getX(), rm.cotangent(getResult()));
  return rm.addCotangent(*this, getX(), v.getDx());
}

LogicalResult AddOp::buildVJP(OpBuilder &, ReverseMode &rm) {
  Value dy = rm.cotangent(getResult());
  return success(succeeded(rm.addCotangent(*this, getLhs(), dy)) &&
                 succeeded(rm.addCotangent(*this, getRhs(), dy)));
}

LogicalResult PositionEmbedOp::buildVJP(OpBuilder &b, ReverseMode &rm) {
  Value dy = rm.cotangent(getResult());
  if (failed(rm.addCotangent(*this, getX(), dy)))
    return failure();
  auto v = b.create<PositionEmbedVJPOp>(getLoc(), getTable().getType(), dy, getTable());
  return rm.addCotangent(*this, getTable(), v.getDtable());
}
