//===- Passes.h - unroll conversion passes ----------------------*- C++ -*-===//
#ifndef UNROLL_CONVERSION_PASSES_H
#define UNROLL_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::unroll {

#define GEN_PASS_DECL
#include "unroll/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "unroll/Conversion/Passes.h.inc"
} // namespace mlir::unroll

#endif
