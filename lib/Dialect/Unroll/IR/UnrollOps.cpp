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
#include "unroll/Dialect/Unroll/IR/UnrollInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "unroll/Dialect/Unroll/IR/UnrollOps.cpp.inc"
