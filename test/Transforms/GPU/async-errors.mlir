// RUN: unroll-opt %s --unroll-gpu-async -verify-diagnostics
// Without unroll-gpu-serial-kernels before it, host code that reads a
// device buffer is refused at the op (a host load of device memory would
// crash the process when it runs).
func.func @host_load(%x: memref<?xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %buf = memref.alloc() : memref<4xf32>
  // expected-error@+1 {{'memref.load' op host code reads or writes a device buffer (unroll-gpu-async)}}
  %v = memref.load %buf[%c0] : memref<4xf32>
  memref.dealloc %buf : memref<4xf32>
  return %v : f32
}
