//===- Passes.h - unroll transformation passes ------------------*- C++ -*-===//
#ifndef UNROLL_TRANSFORMS_PASSES_H
#define UNROLL_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::unroll {
#define GEN_PASS_DECL
#include "unroll/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

#endif
