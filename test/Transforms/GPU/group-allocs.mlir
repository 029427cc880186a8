// RUN: unroll-opt %s --unroll-gpu-group-allocs | FileCheck %s
//
// Allocations move up to just after their operands, deallocations (plain or
// ownership-conditional) down to the end of the block, and dims of views
// become the sizes they stand for, so that the two nests are adjacent and
// have the same bounds for scf-parallel-loop-fusion.

// CHECK-LABEL: func @f
// CHECK-SAME:  (%[[X:.*]]: memref<?x4xf32>, %[[N:.*]]: index, %[[C:.*]]: i1)
// CHECK:       %[[A:.*]] = memref.alloc(%[[N]])
// CHECK-NEXT:  %[[B:.*]] = memref.alloc(%[[N]])
// CHECK:       scf.parallel (%{{.*}}, %{{.*}}) = (%c0, %c0) to (%[[N]], %c4)
// CHECK:         memref.store %{{.*}}, %[[A]]
// CHECK:       memref.expand_shape %[[A]]
// CHECK-NOT:   memref.dim
// CHECK:       scf.parallel (%{{.*}}, %{{.*}}) = (%c0, %c0) to (%[[N]], %c4)
// CHECK:       memref.dealloc %[[A]]
// CHECK-NEXT:  scf.if %[[C]] {
// CHECK-NEXT:    memref.dealloc %[[B]]
// CHECK:       return
func.func @f(%x: memref<?x4xf32>, %n: index, %c: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %a = memref.alloc(%n) : memref<?x4xf32>
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %c4) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<?x4xf32>
    memref.store %v, %a[%i, %j] : memref<?x4xf32>
    scf.reduce
  }
  %b = memref.alloc(%n) : memref<?x4xf32>
  %e = memref.expand_shape %a [[0], [1, 2]] output_shape [%n, 2, 2] : memref<?x4xf32> into memref<?x2x2xf32>
  %d = memref.dim %e, %c0 : memref<?x2x2xf32>
  scf.parallel (%i, %j) = (%c0, %c0) to (%d, %c4) step (%c1, %c1) {
    %v = memref.load %a[%i, %j] : memref<?x4xf32>
    memref.store %v, %b[%i, %j] : memref<?x4xf32>
    scf.reduce
  }
  memref.dealloc %a : memref<?x4xf32>
  scf.if %c {
    memref.dealloc %b : memref<?x4xf32>
  }
  return
}
