//===- UnrollOps.cpp - generated op, enum and interface definitions -------===//
//
// The hand-written parts live by level: EnergyOps.cpp, StepOps.cpp,
// ModelOps.cpp, VJPOps.cpp; the reverse-mode driver in ReverseMode.cpp.
//
//===----------------------------------------------------------------------===//
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::unroll;

#include "unroll/Dialect/Unroll/IR/UnrollEnums.cpp.inc"

//===----------------------------------------------------------------------===//
// unroll.loop's gradient(mode, key = value, ...): tol, max, steps and
// damping, in any order.
//===----------------------------------------------------------------------===//

static ParseResult parseGradient(OpAsmParser &p, GradientModeAttr &mode, FloatAttr &tol,
                                 IntegerAttr &max, IntegerAttr &steps, FloatAttr &damping) {
  Builder b(p.getContext());
  SMLoc modeAt = p.getCurrentLocation();
  StringRef name;
  if (p.parseKeyword(&name))
    return failure();
  std::optional<GradientMode> m = symbolizeGradientMode(name);
  if (!m)
    return p.emitError(modeAt) << "expected a gradient mode (bptt, implicit, jfb, phantom), got '"
                               << name << "'";
  mode = GradientModeAttr::get(p.getContext(), *m);
  while (succeeded(p.parseOptionalComma())) {
    SMLoc at = p.getCurrentLocation();
    StringRef key;
    if (p.parseKeyword(&key) || p.parseEqual())
      return failure();
    if (key == "tol" || key == "damping") {
      double v = 0;
      if (p.parseFloat(v))
        return failure();
      (key == "tol" ? tol : damping) = b.getF64FloatAttr(v);
    } else if (key == "max" || key == "steps") {
      int64_t v = 0;
      if (p.parseInteger(v))
        return failure();
      (key == "max" ? max : steps) = b.getI64IntegerAttr(v);
    } else {
      return p.emitError(at) << "expected one of tol, max, steps, damping in gradient(...), got '"
                             << key << "'";
    }
  }
  return success();
}

static void printGradient(OpAsmPrinter &p, Operation *, GradientModeAttr mode, FloatAttr tol,
                          IntegerAttr max, IntegerAttr steps, FloatAttr damping) {
  p << stringifyGradientMode(mode.getValue());
  if (tol) {
    p << ", tol = ";
    p.printAttributeWithoutType(tol);
  }
  if (max)
    p << ", max = " << max.getInt();
  if (steps)
    p << ", steps = " << steps.getInt();
  if (damping) {
    p << ", damping = ";
    p.printAttributeWithoutType(damping);
  }
}

//===----------------------------------------------------------------------===//
// unroll.loop's `: type(P) [-> type(Y)]` and unroll.descend's
// `: type(Y) [, type(X)]`: the second type only where it differs.
//===----------------------------------------------------------------------===//

static ParseResult parseStateType(OpAsmParser &p, Type &state, Type input) {
  state = input;
  if (succeeded(p.parseOptionalArrow()))
    return p.parseType(state);
  return success();
}

static void printStateType(OpAsmPrinter &p, Operation *, Type state, Type input) {
  if (state != input)
    p << "-> " << state;
}

static ParseResult parseInputType(OpAsmParser &p, Type &x, Type y) {
  x = y;
  if (succeeded(p.parseOptionalComma()))
    return p.parseType(x);
  return success();
}

static void printInputType(OpAsmPrinter &p, Operation *, Type x, Type y) {
  if (x != y)
    p << ", " << x;
}

#include "unroll/Dialect/Unroll/IR/UnrollInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "unroll/Dialect/Unroll/IR/UnrollOps.cpp.inc"
