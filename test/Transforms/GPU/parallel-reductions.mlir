// RUN: unroll-opt %s --pass-pipeline='builtin.module(func.func(unroll-gpu-parallel-reductions))' --split-input-file | FileCheck %s
// A one-thread kernel's full reduction gets a block of 256 threads: thread
// t sums iterations t, t + 256, ... from zero; gpu.all_reduce combines; the
// code before and after the loop runs in thread 0 with init + total.

// CHECK-LABEL: func.func @loss
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}} = %c1, {{.*}} = %c1) threads(%[[T:[^,]*]], {{.*}}) in ({{.*}} = %c256{{.*}}, {{.*}} = %c1, {{.*}} = %c1)
// CHECK:           %[[LB:.*]] = arith.addi %c0, %{{.*}} : index
// CHECK:           %[[P:.*]] = scf.for %{{.*}} = %[[LB]] to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %cst{{.*}}) -> (f32) {
// CHECK:             scf.for
// CHECK:           %[[TOT:.*]] = gpu.all_reduce add %[[P]] uniform
// CHECK:           %[[FIRST:.*]] = arith.cmpi eq, %[[T]], %c0
// CHECK:           scf.if %[[FIRST]] {
// CHECK:             memref.store %cst, %[[ACC:.*]][] : memref<f32>
// CHECK:             %[[INIT:.*]] = memref.load %[[ACC]][]
// CHECK:             %[[SUM:.*]] = arith.addf %[[INIT]], %[[TOT]] : f32
// CHECK:             memref.store %[[SUM]], %[[ACC]][]
// CHECK:             memref.store %{{.*}}, %arg1[%c0]
// CHECK:           }
// CHECK-NEXT:      gpu.terminator
func.func @loss(%x: memref<?x?xf32>, %out: memref<?xf32>, %scale: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cst = arith.constant 0.0 : f32
  %n = memref.dim %x, %c0 : memref<?x?xf32>
  %m = memref.dim %x, %c1 : memref<?x?xf32>
  %acc = memref.alloc() : memref<f32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %cst, %acc[] : memref<f32>
    %init = memref.load %acc[] : memref<f32>
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%a = %init) -> (f32) {
      %ri = scf.for %j = %c0 to %m step %c1 iter_args(%b = %a) -> (f32) {
        %v = memref.load %x[%i, %j] : memref<?x?xf32>
        %sq = arith.mulf %v, %v : f32
        %s = arith.addf %b, %sq : f32
        scf.yield %s : f32
      }
      scf.yield %ri : f32
    }
    memref.store %r, %acc[] : memref<f32>
    %t = memref.load %acc[] : memref<f32>
    %l = arith.mulf %t, %scale : f32
    memref.store %l, %out[%c0] : memref<?xf32>
    gpu.terminator
  }
  memref.dealloc %acc : memref<f32>
  return
}

// -----

// Left alone: the loop is not a sum (a product), or it writes memory.
// CHECK-LABEL: func.func @not_a_sum
// CHECK-NOT:     gpu.all_reduce
func.func @not_a_sum(%x: memref<?xf32>, %y: memref<?xf32>, %out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  %n = memref.dim %x, %c0 : memref<?xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%a = %one) -> (f32) {
      %v = memref.load %x[%i] : memref<?xf32>
      %p = arith.mulf %a, %v : f32
      scf.yield %p : f32
    }
    memref.store %r, %out[] : memref<f32>
    %s = scf.for %i = %c0 to %n step %c1 iter_args(%a = %one) -> (f32) {
      %v = memref.load %x[%i] : memref<?xf32>
      memref.store %a, %y[%i] : memref<?xf32>
      %q = arith.addf %a, %v : f32
      scf.yield %q : f32
    }
    memref.store %s, %out[] : memref<f32>
    gpu.terminator
  }
  return
}
