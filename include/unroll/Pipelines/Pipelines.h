//===- Pipelines.h - named unroll pipelines ---------------------*- C++ -*-===//
#ifndef UNROLL_PIPELINES_PIPELINES_H
#define UNROLL_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"

namespace mlir::unroll {
/// --lower-to-cpu: derive steps, lower to linalg, bufferize, and lower to the
/// LLVM dialect; the result is translated by unroll-translate.
void buildLowerToCPUPipeline(OpPassManager &pm);
/// Registers the named pipelines with the pass registry.
void registerUnrollPipelines();
} // namespace mlir::unroll

#endif
