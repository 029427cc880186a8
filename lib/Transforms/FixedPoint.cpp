//===- FixedPoint.cpp - unroll-fixed-point --------------------------------===//
//
// Sets the `until` (halting) and `gradient` clauses of every unroll.loop
// from pass options, so that what the IR chose can be overridden from
// unroll-opt (--lower-to-cpu="gradient=phantom:5:0.5 until=1e-4:500").
// The spellings are the ones unroll-run's --gradient takes.
//
//===----------------------------------------------------------------------===//
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"
#include "unroll/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

#include "llvm/ADT/StringExtras.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_UNROLLFIXEDPOINT
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;
using namespace mlir::unroll;

namespace {

/// The clause values an option spells, before they are put on a loop.
struct Spec {
  GradientMode mode = GradientMode::bptt;
  std::optional<double> tol, damping;
  std::optional<int64_t> max, steps;
};

FailureOr<double> number(StringRef s) {
  double v;
  if (s.trim().getAsDouble(v))
    return failure();
  return v;
}

FailureOr<int64_t> integer(StringRef s) {
  int64_t v;
  if (s.trim().getAsInteger(10, v))
    return failure();
  return v;
}

/// "implicit:1e-6:100", "phantom:5:0.5", "jfb", "bptt".
FailureOr<Spec> parseGradient(StringRef text, std::string &error) {
  SmallVector<StringRef> parts;
  text.split(parts, ':');
  Spec s;
  std::optional<GradientMode> m = symbolizeGradientMode(parts[0].trim());
  if (!m) {
    error = "expected gradient=bptt|implicit[:TOL[:MAX]]|jfb|phantom[:K[:TAU]], got '" +
            text.str() + "'";
    return failure();
  }
  s.mode = *m;
  size_t most = s.mode == GradientMode::implicit || s.mode == GradientMode::phantom ? 3 : 1;
  if (parts.size() > most) {
    error = "gradient=" + parts[0].str() + " takes " +
            (most == 1 ? "no parameters" : "at most two parameters") + ", got '" + text.str() + "'";
    return failure();
  }
  auto bad = [&](StringRef what, StringRef got) {
    error = "expected " + what.str() + " in gradient=" + text.str() + ", got '" + got.str() + "'";
    return failure();
  };
  if (s.mode == GradientMode::implicit) {
    if (parts.size() > 1 && failed(number(parts[1])))
      return bad("a tolerance", parts[1]);
    if (parts.size() > 1)
      s.tol = *number(parts[1]);
    if (parts.size() > 2 && failed(integer(parts[2])))
      return bad("an iteration cap", parts[2]);
    if (parts.size() > 2)
      s.max = *integer(parts[2]);
  }
  if (s.mode == GradientMode::phantom) {
    if (parts.size() > 1 && failed(integer(parts[1])))
      return bad("a step count K", parts[1]);
    if (parts.size() > 1)
      s.steps = *integer(parts[1]);
    if (parts.size() > 2 && failed(number(parts[2])))
      return bad("a damping tau", parts[2]);
    if (parts.size() > 2)
      s.damping = *number(parts[2]);
  }
  return s;
}

struct FixedPointPass : public unroll::impl::UnrollFixedPointBase<FixedPointPass> {
  using UnrollFixedPointBase::UnrollFixedPointBase;

  void runOnOperation() override {
    std::string error;
    std::optional<Spec> grad;
    if (!gradient.empty()) {
      FailureOr<Spec> s = parseGradient(gradient, error);
      if (failed(s)) {
        getOperation().emitError() << "unroll-fixed-point: " << error;
        return signalPassFailure();
      }
      grad = *s;
    }
    std::optional<std::pair<double, int64_t>> halt;
    bool dropHalt = until == "none";
    if (!until.empty() && !dropHalt) {
      auto [tol, max] = StringRef(until).split(':');
      FailureOr<double> t = number(tol);
      FailureOr<int64_t> m = integer(max);
      if (failed(t) || failed(m)) {
        getOperation().emitError()
            << "unroll-fixed-point: expected until=TOL:MAX (e.g. 1e-4:500) or until=none, got '"
            << until << "'";
        return signalPassFailure();
      }
      halt = {*t, *m};
    }
    Builder b(&getContext());
    bool failedVerify = false;
    getOperation().walk([&](LoopOp loop) {
      if (grad && grad->mode != GradientMode::bptt && !loop.hasInputInjection()) {
        // A module may hold a weight-tied model beside looped ones: it keeps
        // its gradient, and says so.
        loop.emitWarning() << "keeps gradient(" << stringifyGradientMode(loop.getGradientMode())
                           << "): gradient=" << gradient
                           << " needs input injection (this loop's fixed point would not "
                              "depend on the prompt)";
      } else if (grad) {
        loop.setGradientAttr(GradientModeAttr::get(&getContext(), grad->mode));
        auto f64 = [&](std::optional<double> v) { return v ? b.getF64FloatAttr(*v) : FloatAttr(); };
        auto i64 = [&](std::optional<int64_t> v) {
          return v ? b.getI64IntegerAttr(*v) : IntegerAttr();
        };
        loop.setGradientTolAttr(f64(grad->tol));
        loop.setGradientMaxAttr(i64(grad->max));
        loop.setPhantomStepsAttr(i64(grad->steps));
        loop.setDampingAttr(f64(grad->damping));
      }
      if (halt) {
        loop.setHaltTolAttr(b.getF64FloatAttr(halt->first));
        loop.setHaltMaxAttr(b.getI64IntegerAttr(halt->second));
      } else if (dropHalt) {
        loop.removeHaltTolAttr();
        loop.removeHaltMaxAttr();
      }
      // The override must leave a loop its verifier accepts (a located error).
      if (failed(loop.verifyFixedPoint()))
        failedVerify = true;
    });
    if (failedVerify)
      signalPassFailure();
  }
};

} // namespace
