//===- Buffers.h - which buffers live where on the GPU path ------*- C++ -*-===//
#ifndef UNROLL_TRANSFORMS_GPU_BUFFERS_H
#define UNROLL_TRANSFORMS_GPU_BUFFERS_H

#include "mlir/IR/Value.h"

namespace mlir::unroll {
/// Buffers of index or i1 elements are the host's deallocation bookkeeping
/// (bufferization's ownership arrays); every other buffer lives in device
/// memory on the GPU path (SerialKernels.cpp).
bool isHostBuffer(Value memref);
} // namespace mlir::unroll

#endif
