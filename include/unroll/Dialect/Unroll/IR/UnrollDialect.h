//===- UnrollDialect.h - unroll dialect -------------------------*- C++ -*-===//
#ifndef UNROLL_DIALECT_UNROLL_IR_UNROLLDIALECT_H
#define UNROLL_DIALECT_UNROLL_IR_UNROLLDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Dialect.h"

#include "unroll/Dialect/Unroll/IR/UnrollDialect.h.inc"

#endif
