// RUN: unroll-opt %s --unroll-gpu-fuse-rows --split-input-file | FileCheck %s
//
// A row reduction and the elementwise nest after it over the same rows
// become one nest over the rows; the elementwise body loops over the columns.

// CHECK-LABEL: func @center
// CHECK:       scf.parallel (%[[I:.*]]) = (%c0) to (%arg2) step (%c1) {
// CHECK:         memref.store %{{.*}}, %[[S:.*]][%[[I]]]
// CHECK:         scf.for %[[J:.*]] = %c0 to %c8 step %c1 {
// CHECK:           arith.addf
// CHECK:         scf.for %[[K:.*]] = %c0 to %c8 step %c1 {
// CHECK:           memref.load %arg0[%[[I]], %[[K]]]
// CHECK:           memref.load %[[S]][%[[I]]]
// CHECK:           arith.subf
// CHECK:           memref.store %{{.*}}, %arg1[%[[I]], %[[K]]]
// CHECK-NOT:   scf.parallel
func.func @center(%x: memref<?x8xf32>, %y: memref<?x8xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %z = arith.constant 0.0 : f32
  %s = memref.alloc(%n) : memref<?xf32>
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %z, %s[%i] : memref<?xf32>
    scf.for %j = %c0 to %c8 step %c1 {
      %v = memref.load %x[%i, %j] : memref<?x8xf32>
      %a = memref.load %s[%i] : memref<?xf32>
      %b = arith.addf %a, %v : f32
      memref.store %b, %s[%i] : memref<?xf32>
    }
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %c8) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<?x8xf32>
    %m = memref.load %s[%i] : memref<?xf32>
    %d = arith.subf %v, %m : f32
    memref.store %d, %y[%i, %j] : memref<?x8xf32>
    scf.reduce
  }
  memref.dealloc %s : memref<?xf32>
  return
}

// -----

// The other order (elementwise, then the reduction over its rows), and two
// row nests over the same rows whose inner loops share a buffer.
// CHECK-LABEL: func @add_then_sum
// CHECK:       scf.parallel
// CHECK:         scf.for
// CHECK:           arith.mulf
// CHECK:         scf.for
// CHECK:           arith.addf
// CHECK:         scf.for
// CHECK:           arith.maximumf
// CHECK-NOT:   scf.parallel
func.func @add_then_sum(%x: memref<?x8xf32>, %t: memref<?x8xf32>, %s: memref<?xf32>, %m: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %c8) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<?x8xf32>
    %w = arith.mulf %v, %v : f32
    memref.store %w, %t[%i, %j] : memref<?x8xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    scf.for %j = %c0 to %c8 step %c1 {
      %v = memref.load %t[%i, %j] : memref<?x8xf32>
      %a = memref.load %s[%i] : memref<?xf32>
      %b = arith.addf %a, %v : f32
      memref.store %b, %s[%i] : memref<?xf32>
    }
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    scf.for %j = %c0 to %c8 step %c1 {
      %v = memref.load %t[%i, %j] : memref<?x8xf32>
      %a = memref.load %m[%i] : memref<?xf32>
      %b = arith.maximumf %a, %v : f32
      memref.store %b, %m[%i] : memref<?xf32>
    }
    scf.reduce
  }
  return
}

// -----

// Not fused: the second nest reads the first's output across rows (a
// transpose), so a row's thread would need other rows' results.
// CHECK-LABEL: func @transposed
// CHECK:       scf.parallel (%{{.*}}, %{{.*}}) =
// CHECK:       scf.parallel (%{{.*}}) =
func.func @transposed(%x: memref<8x8xf32>, %t: memref<8x8xf32>, %s: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c8) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<8x8xf32>
    memref.store %v, %t[%i, %j] : memref<8x8xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    scf.for %j = %c0 to %c8 step %c1 {
      %v = memref.load %t[%j, %i] : memref<8x8xf32>
      %a = memref.load %s[%i] : memref<8xf32>
      %b = arith.addf %a, %v : f32
      memref.store %b, %s[%i] : memref<8xf32>
    }
    scf.reduce
  }
  return
}

// -----

// Not fused: the wider nest has a loop inside (a matmul: a thread per row
// would do a whole row of dot products), or something with a memory effect
// lies between the nests.
// CHECK-LABEL: func @matmul_after
// CHECK-COUNT-2: scf.parallel
// CHECK-LABEL: func @store_between
// CHECK-COUNT-2: scf.parallel
func.func @matmul_after(%x: memref<?x8xf32>, %w: memref<8x8xf32>, %s: memref<?xf32>, %y: memref<?x8xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %v = memref.load %x[%i, %c0] : memref<?x8xf32>
    memref.store %v, %s[%i] : memref<?xf32>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %c8) step (%c1, %c1) {
    scf.for %k = %c0 to %c8 step %c1 {
      %a = memref.load %x[%i, %k] : memref<?x8xf32>
      %b = memref.load %w[%k, %j] : memref<8x8xf32>
      %c = memref.load %y[%i, %j] : memref<?x8xf32>
      %p = arith.mulf %a, %b : f32
      %q = arith.addf %c, %p : f32
      memref.store %q, %y[%i, %j] : memref<?x8xf32>
    }
    scf.reduce
  }
  return
}
func.func @store_between(%x: memref<?x8xf32>, %s: memref<?xf32>, %y: memref<?x8xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %z = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %v = memref.load %x[%i, %c0] : memref<?x8xf32>
    memref.store %v, %s[%i] : memref<?xf32>
    scf.reduce
  }
  memref.store %z, %s[%c0] : memref<?xf32>
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %c8) step (%c1, %c1) {
    %m = memref.load %s[%i] : memref<?xf32>
    memref.store %m, %y[%i, %j] : memref<?x8xf32>
    scf.reduce
  }
  return
}
