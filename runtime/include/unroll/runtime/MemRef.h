//===- MemRef.h - MLIR C-interface memref descriptors ----------*- C++ -*-===//
//
// compiled.so entry points take pointers to these descriptors (the layout
// MLIR's `llvm.emit_c_interface` uses; see docs/abi.md).
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_RUNTIME_MEMREF_H
#define UNROLL_RUNTIME_MEMREF_H

#include <cstdint>
#include <vector>

namespace unroll {

template <typename T, int N> struct MemRef {
  T *allocated;
  T *aligned;
  int64_t offset;
  int64_t sizes[N];
  int64_t strides[N];
};

/// A dense row-major descriptor over `data` with the given sizes.
template <typename T, int N> MemRef<T, N> makeMemRef(T *data, const int64_t (&sizes)[N]) {
  MemRef<T, N> m;
  m.allocated = m.aligned = data;
  m.offset = 0;
  int64_t stride = 1;
  for (int i = N - 1; i >= 0; --i) {
    m.sizes[i] = sizes[i];
    m.strides[i] = stride;
    stride *= sizes[i];
  }
  return m;
}

} // namespace unroll

#endif
