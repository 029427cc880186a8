// RUN: unroll-opt %s --pass-pipeline='builtin.module(func.func(unroll-gpu-promote-accumulators))' --split-input-file | FileCheck %s
// A reduction's accumulator element travels in a register (iter_arg):
// loaded once before the loop, stored once after; nests promote outward.

// CHECK-LABEL: func.func @sum
// CHECK:         memref.store %{{.*}}, %[[ACC:.*]][%[[I:.*]]] : memref<4xf32>
// CHECK:         %[[INIT:.*]] = memref.load %[[ACC]][%[[I]]]
// CHECK:         %[[R:.*]] = scf.for {{.*}} iter_args(%[[A:.*]] = %[[INIT]]) -> (f32) {
// CHECK:           %[[INNER:.*]] = scf.for {{.*}} iter_args(%[[B:.*]] = %[[A]]) -> (f32) {
// CHECK-NOT:         memref.load %[[ACC]]
// CHECK:             arith.addf %[[B]]
// CHECK-NOT:         memref.store
// CHECK:           scf.yield %[[INNER]]
// CHECK:         memref.store %[[R]], %[[ACC]][%[[I]]]
func.func @sum(%x: memref<?x?xf32>, %i: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cst = arith.constant 0.0 : f32
  %n = memref.dim %x, %c0 : memref<?x?xf32>
  %acc = memref.alloc() : memref<4xf32>
  memref.store %cst, %acc[%i] : memref<4xf32>
  scf.for %a = %c0 to %n step %c1 {
    scf.for %b = %c0 to %n step %c1 {
      %v = memref.load %x[%a, %b] : memref<?x?xf32>
      %s0 = memref.load %acc[%i] : memref<4xf32>
      %s = arith.addf %s0, %v : f32
      memref.store %s, %acc[%i] : memref<4xf32>
    }
  }
  %r = memref.load %acc[%i] : memref<4xf32>
  memref.dealloc %acc : memref<4xf32>
  return %r : f32
}

// -----

// Refused: the index varies with the loop; the loop reads the buffer at
// another index too (it may be the same element); the buffer is a function
// argument (it may alias %x).
// CHECK-LABEL: func.func @refused
// CHECK-NOT:     iter_args
func.func @refused(%x: memref<?xf32>, %out: memref<4xf32>, %i: index, %j: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %acc = memref.alloc(%n) : memref<?xf32>
  scf.for %k = %c0 to %n step %c1 {
    %v = memref.load %x[%k] : memref<?xf32>
    memref.store %v, %acc[%k] : memref<?xf32>
  }
  scf.for %k = %c0 to %n step %c1 {
    %a = memref.load %acc[%i] : memref<?xf32>
    %b = memref.load %acc[%j] : memref<?xf32>
    %s = arith.addf %a, %b : f32
    memref.store %s, %acc[%i] : memref<?xf32>
  }
  scf.for %k = %c0 to %n step %c1 {
    %a = memref.load %out[%i] : memref<4xf32>
    %v = memref.load %x[%k] : memref<?xf32>
    %s = arith.addf %a, %v : f32
    memref.store %s, %out[%i] : memref<4xf32>
  }
  memref.dealloc %acc : memref<?xf32>
  return
}

// -----

// Refused: the buffer escapes (yielded), so the loop might reach it under
// another name.
// CHECK-LABEL: func.func @escapes
// CHECK-NOT:     iter_args
func.func @escapes(%x: memref<?xf32>, %c: i1) -> memref<f32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %acc = memref.alloc() : memref<f32>
  %other = scf.if %c -> memref<f32> {
    scf.yield %acc : memref<f32>
  } else {
    %o = memref.alloc() : memref<f32>
    scf.yield %o : memref<f32>
  }
  scf.for %k = %c0 to %n step %c1 {
    %a = memref.load %acc[] : memref<f32>
    %v = memref.load %other[] : memref<f32>
    %s = arith.addf %a, %v : f32
    memref.store %s, %acc[] : memref<f32>
  }
  return %other : memref<f32>
}
