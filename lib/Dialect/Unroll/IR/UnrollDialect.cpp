//===- UnrollDialect.cpp - unroll dialect registration -------------------===//
#include "unroll/Dialect/Unroll/IR/UnrollDialect.h"
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::unroll;

#include "unroll/Dialect/Unroll/IR/UnrollDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "unroll/Dialect/Unroll/IR/UnrollTypes.cpp.inc"

void UnrollDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "unroll/Dialect/Unroll/IR/UnrollTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "unroll/Dialect/Unroll/IR/UnrollOps.cpp.inc"
      >();
}
