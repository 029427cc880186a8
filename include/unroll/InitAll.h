//===- InitAll.h - register what unroll's tools use -------------*- C++ -*-===//
#ifndef UNROLL_INITALL_H
#define UNROLL_INITALL_H

#include "mlir/IR/DialectRegistry.h"

namespace mlir::unroll {
/// Dialects (and their external interface models) that unroll's tools parse
/// or produce.
void registerUnrollDialects(DialectRegistry &registry);
/// The project's passes and named pipelines.
void registerAllUnrollPasses();
} // namespace mlir::unroll

#endif
