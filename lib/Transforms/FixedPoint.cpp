//===- FixedPoint.cpp - unroll-fixed-point --------------------------------===//
//
// Sets the `until` (halting) and `gradient` clauses of every unroll.loop
// from pass options, so that what the IR chose can be overridden from
// unroll-opt (--lower-to-cpu="gradient=phantom:5:0.5 until=1e-4:500").
// The gradient spelling is the one unroll-run's --gradient takes, parsed by
// the same code (unroll/runtime/GradientSpec.h).
//
//===----------------------------------------------------------------------===//
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"
#include "unroll/Transforms/Passes.h"
#include "unroll/runtime/GradientSpec.h"

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

/// "implicit:1e-6:100", "phantom:5:0.5", "jfb", "bptt": the grammar
/// unroll-run's --gradient reads too (unroll/runtime/GradientSpec.h).
FailureOr<Spec> parseGradient(StringRef text, std::string &error) {
  ::unroll::GradientSpec g;
  std::string why;
  if (!::unroll::GradientSpec::parse(text.str(), g, why)) {
    error = "gradient=" + text.str() + ": " + why + " (expected " +
            ::unroll::GradientSpec::kGrammar + ")";
    return failure();
  }
  Spec s;
  switch (g.kind) {
  case ::unroll::GradientSpec::Bptt:
    s.mode = GradientMode::bptt;
    break;
  case ::unroll::GradientSpec::Jfb:
    s.mode = GradientMode::jfb;
    break;
  case ::unroll::GradientSpec::Implicit:
    s.mode = GradientMode::implicit;
    break;
  case ::unroll::GradientSpec::Phantom:
    s.mode = GradientMode::phantom;
    break;
  }
  s.tol = g.tol;
  s.max = g.max;
  s.steps = g.steps;
  s.damping = g.damping;
  return s;
}

struct FixedPointPass : public mlir::unroll::impl::UnrollFixedPointBase<FixedPointPass> {
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
