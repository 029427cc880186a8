//===- Pipelines.h - named unroll pipelines ---------------------*- C++ -*-===//
#ifndef UNROLL_PIPELINES_PIPELINES_H
#define UNROLL_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"

#include <string>

namespace mlir::unroll {
/// --lower-to-cpu: derive steps, lower to linalg, bufferize, and lower to the
/// LLVM dialect; the result is translated by unroll-translate.
void buildLowerToCPUPipeline(OpPassManager &pm);
/// --lower-to-gpu: the same front end, then one gpu.launch per fused loop
/// nest, NVVM kernels serialized for `chip` in `format` (bin|isa|fatbin) with
/// the CUDA toolkit at `cudaPath`, and host code calling the mgpu* runtime.
void buildLowerToGPUPipeline(OpPassManager &pm, const std::string &chip,
                             const std::string &format, const std::string &cudaPath,
                             int64_t blockSize);
/// --lower-to-gpu-emulated: --lower-to-gpu's kernel mapping with the kernels
/// run as host loops; the CPU oracle for the GPU lowering.
void buildLowerToGPUEmulatedPipeline(OpPassManager &pm);
/// Registers the named pipelines with the pass registry.
void registerUnrollPipelines();
} // namespace mlir::unroll

#endif
