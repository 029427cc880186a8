// RUN: unroll-opt %s --unroll-gpu-stage-arguments | FileCheck %s
//
// Entry points copy every memref argument into a GPU-visible buffer on
// entry, unless it lies in resident state (unroll_state_resident: buffers
// from unroll_state_alloc, used in place); only arguments the function may
// write are copied back, and only when they were copied in.

// CHECK:       func.func private @unroll_state_resident(index) -> i32
// CHECK-LABEL: func @entry
// CHECK-SAME:  (%[[IN:.*]]: memref<?x4xf32>, %[[OUT:.*]]: memref<?x4xf32>)
// CHECK:       %[[PIN:.*]] = memref.extract_aligned_pointer_as_index %[[IN]]
// CHECK:       %[[RIN:.*]] = call @unroll_state_resident(%[[PIN]])
// CHECK:       %[[CIN:.*]] = arith.cmpi eq, %[[RIN]], %{{.*}} : i32
// CHECK:       %[[BIN:.*]] = scf.if %[[CIN]] -> (memref<?x4xf32>) {
// CHECK:         %[[D0:.*]] = memref.dim %[[IN]], %c0
// CHECK:         %[[A:.*]] = memref.alloc(%[[D0]]) {alignment = 64 : i64} : memref<?x4xf32>
// CHECK:         memref.copy %[[IN]], %[[A]]
// CHECK:         scf.yield %[[A]]
// CHECK:       } else {
// CHECK:         scf.yield %[[IN]]
// CHECK:       %[[COUT:.*]] = arith.cmpi eq
// CHECK:       %[[BOUT:.*]] = scf.if %[[COUT]]
// CHECK:         memref.copy %[[OUT]], %{{.*}}
// CHECK:       linalg.copy ins(%[[BIN]] : memref<?x4xf32>) outs(%[[BOUT]] : memref<?x4xf32>)
// CHECK:       scf.if %[[CIN]] {
// CHECK-NOT:     memref.copy %[[BIN]], %[[IN]]
// CHECK:         memref.dealloc %[[BIN]]
// CHECK:       scf.if %[[COUT]] {
// CHECK-NEXT:    memref.copy %[[BOUT]], %[[OUT]]
// CHECK-NEXT:    memref.dealloc %[[BOUT]]
// CHECK:       return
func.func @entry(%in: memref<?x4xf32>, %out: memref<?x4xf32>) attributes {llvm.emit_c_interface} {
  linalg.copy ins(%in : memref<?x4xf32>) outs(%out : memref<?x4xf32>)
  return
}

// Writes through a view count as writes.
// CHECK-LABEL: func @view
// CHECK:       memref.subview
// CHECK:       memref.copy %{{.*}}, %arg0
func.func @view(%a: memref<8xf32>) attributes {llvm.emit_c_interface} {
  %s = memref.subview %a[2] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 2>>
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%s : memref<4xf32, strided<[1], offset: 2>>)
  return
}

// Helpers without the C interface are left alone.
// CHECK-LABEL: func @helper
// CHECK-NOT:   memref.alloc
func.func @helper(%a: memref<8xf32>) {
  return
}
