//===- UnrollOps.h - unroll dialect ops -------------------------*- C++ -*-===//
#ifndef UNROLL_DIALECT_UNROLL_IR_UNROLLOPS_H
#define UNROLL_DIALECT_UNROLL_IR_UNROLLOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "unroll/Dialect/Unroll/IR/ReverseMode.h"
#include "unroll/Dialect/Unroll/IR/UnrollDialect.h"

#include "unroll/Dialect/Unroll/IR/UnrollEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "unroll/Dialect/Unroll/IR/UnrollTypes.h.inc"

#include "unroll/Dialect/Unroll/IR/UnrollInterfaces.h.inc"

namespace mlir::unroll {
/// The kinds of an unroll.kernel_call's abi entries: what the callee gets
/// in that place (an index argument; an input's or an output's address
/// followed by the strides of its outer dimensions).
enum KernelAbiSlot : int64_t { kCallArg = 0, kCallIn = 1, kCallOut = 2 };

class MinimizeOp;
class LoopOp;
class OutputOp;
} // namespace mlir::unroll

#define GET_OP_CLASSES
#include "unroll/Dialect/Unroll/IR/UnrollOps.h.inc"

namespace mlir::unroll {
/// An arith op on index values alone (a loop body's iteration index
/// arithmetic): no gradient, recomputed wherever it is needed.
bool isIndexArithmetic(Operation *op);

/// Attaches bufferization's interface to unroll.kernel_call (KernelOps.cpp).
void registerKernelCallBufferization(DialectRegistry &registry);
} // namespace mlir::unroll

#endif // UNROLL_DIALECT_UNROLL_IR_UNROLLOPS_H
