//===- VJPOps.cpp - verifiers of the VJP ops ------------------------------===//
//
// The VJP ops are written by --unroll-differentiate; their shapes follow
// from the forward ops they come from, so only unroll.accumulate_grad, which
// names what it accumulates into, has a verifier.
//
//===----------------------------------------------------------------------===//
#include "Verify.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace mlir::unroll;
using namespace mlir::unroll::detail;

LogicalResult AccumulateGradOp::verify() {
  // An input whose gradient the lowering collects: an energy's X (argument 1
  // of its regions) or the injected input P of a loop body (argument 1).
  auto arg = dyn_cast<BlockArgument>(getParam());
  bool input = arg && arg.getArgNumber() == 1 &&
               isa_and_nonnull<EnergyOp, LoopOp>(arg.getOwner()->getParentOp());
  if (!getParam().getDefiningOp<ParamOp>() && !input)
    return emitOpError("expected the gradient of an 'unroll.param' or of an "
                       "energy's input X");
  if (getParam().getType() != getGrad().getType())
    return emitOpError() << "expected a gradient of type " << getParam().getType() << ", got "
                         << getGrad().getType();
  return success();
}
