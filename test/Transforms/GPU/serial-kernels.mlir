// RUN: unroll-opt %s --unroll-gpu-serial-kernels --unroll-gpu-async --split-input-file | FileCheck %s
// Host code between kernels that touches buffers becomes one-thread kernels
// (a whole host loop nest is one kernel, not one per iteration); values it
// computes reach later device code through a device scalar and host control
// flow through unroll_gpu_read_*. Then: one stream per function, launches
// and allocations on it, one wait before the return.

// CHECK-LABEL: func.func @loss
// CHECK:         %[[S:.*]] = gpu.wait async
// CHECK:         gpu.alloc async [%[[S]]] () : memref<f32>
// CHECK:         gpu.launch async [%[[S]]] blocks({{.*}}) in ({{.*}} = %[[ONE:.*]], {{.*}} = %[[ONE]], {{.*}} = %[[ONE]]) threads
// CHECK:           memref.store
// CHECK:           scf.for
// CHECK:             scf.for
// CHECK:           memref.load %[[ACC:.*]][] : memref<f32>
// CHECK:           arith.mulf
// CHECK:           memref.store {{.*}}, %arg1[%c0] : memref<?xf32>
// CHECK:           gpu.terminator
// CHECK-NOT:     gpu.launch
// CHECK:         gpu.wait [%[[S]]]
// CHECK-NEXT:    return
func.func @loss(%x: memref<?x?xf32>, %out: memref<?xf32>, %scale: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cst = arith.constant 0.0 : f32
  %n = memref.dim %x, %c0 : memref<?x?xf32>
  %m = memref.dim %x, %c1 : memref<?x?xf32>
  %acc = memref.alloc() : memref<f32>
  memref.store %cst, %acc[] : memref<f32>
  scf.for %i = %c0 to %n step %c1 {
    scf.for %j = %c0 to %m step %c1 {
      %v = memref.load %x[%i, %j] : memref<?x?xf32>
      %a = memref.load %acc[] : memref<f32>
      %sq = arith.mulf %v, %v : f32
      %s = arith.addf %a, %sq : f32
      memref.store %s, %acc[] : memref<f32>
    }
  }
  %t = memref.load %acc[] : memref<f32>
  %r = arith.mulf %t, %scale : f32
  memref.store %r, %out[%c0] : memref<?xf32>
  memref.dealloc %acc : memref<f32>
  return
}

// -----

// A branch on a device value: the comparison runs in the kernel and the
// host reads the flag back (the one kind of place where a call waits
// early); so does a value the function returns.
// CHECK-LABEL: func.func private @unroll_gpu_read_i8(index) -> i8
// CHECK-LABEL: func.func @branch
// CHECK:         gpu.launch async
// CHECK:           %[[V:.*]] = memref.load %arg0[%c0] : memref<?xf32>
// CHECK:           %[[C:.*]] = arith.cmpf olt, %[[V]]
// CHECK:           %[[E:.*]] = arith.extui %[[C]] : i1 to i8
// CHECK:           memref.store %[[E]], %[[SLOT:.*]][] : memref<i8>
// CHECK:         %[[P:.*]] = memref.extract_aligned_pointer_as_index %[[SLOT]]
// CHECK:         %[[H:.*]] = call @unroll_gpu_read_i8(%[[P]])
// CHECK:         %[[B:.*]] = arith.trunci %[[H]] : i8 to i1
// CHECK:         scf.if %[[B]]
func.func @branch(%x: memref<?xf32>, %flag: memref<?xi1>) {
  %c0 = arith.constant 0 : index
  %cst = arith.constant 0.0 : f32
  %v = memref.load %x[%c0] : memref<?xf32>
  %neg = arith.cmpf olt, %v, %cst : f32
  scf.if %neg {
    memref.store %neg, %flag[%c0] : memref<?xi1>
  }
  return
}

// -----

// CHECK-LABEL: func.func @returned
// CHECK:         gpu.launch async
// CHECK:         %[[R:.*]] = call @unroll_gpu_read_f32
// CHECK:         gpu.wait
// CHECK-NEXT:    return %[[R]] : f32
func.func @returned(%x: memref<?xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %v = memref.load %x[%c0] : memref<?xf32>
  return %v : f32
}
