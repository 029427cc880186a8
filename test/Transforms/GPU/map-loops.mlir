// RUN: unroll-opt %s --unroll-gpu-map-loops=block-size=128 --split-input-file --verify-diagnostics | FileCheck %s
// RUN: unroll-opt %s --unroll-gpu-map-loops=emulate-on-host --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=EMU
// RUN: not unroll-opt %s --unroll-gpu-map-loops=block-size=2048 2>&1 | FileCheck %s --check-prefix=BLOCK
// BLOCK: error: unroll-gpu-map-loops: block-size must be in 1..1024, got 2048
//
// One launch per outermost scf.parallel: the iteration space is linearized
// (last dimension fastest), split into blocks, the ragged last block guarded,
// empty spaces skipped; inner parallel loops run serially in the thread.

// CHECK-LABEL: func @two_d
// CHECK:       %[[TOTAL:.*]] = arith.muli %[[M:.*]], %[[N:.*]] : index
// CHECK:       %[[BS:.*]] = arith.constant 128 : index
// CHECK:       %[[BLOCKS:.*]] = arith.ceildivsi %[[TOTAL]], %[[BS]]
// CHECK:       %[[NONEMPTY:.*]] = arith.cmpi sgt, %[[TOTAL]]
// CHECK:       scf.if %[[NONEMPTY]] {
// CHECK:         gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[BLOCKS]], %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[BS]],
// CHECK:           %[[MUL:.*]] = arith.muli %[[BX]], %[[BS]]
// CHECK:           %[[LIN:.*]] = arith.addi %[[MUL]], %[[TX]]
// CHECK:           %[[IN:.*]] = arith.cmpi slt, %[[LIN]], %[[TOTAL]]
// CHECK:           scf.if %[[IN]] {
// CHECK:             %[[J:.*]] = arith.remsi %[[LIN]], %[[N]]
// CHECK:             %[[I:.*]] = arith.divsi %[[LIN]], %[[N]]
// CHECK:             memref.load %{{.*}}[%[[I]], %[[J]]]
// CHECK:           gpu.terminator
// CHECK-NOT:   scf.parallel
// EMU-LABEL: func @two_d
// EMU-NOT:     gpu.launch
// EMU:         scf.for %[[B:.*]] = %c0{{.*}} to %{{.*}} step %c1{{.*}}
// EMU:           scf.for %[[T:.*]] = %c0{{.*}} to %c256 step %c1{{.*}}
func.func @two_d(%a: memref<?x?xf32>, %b: memref<?x?xf32>, %m: index, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%m, %n) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<?x?xf32>
    %y = arith.addf %x, %x : f32
    memref.store %y, %b[%i, %j] : memref<?x?xf32>
    scf.reduce
  }
  return
}

// -----

// Nested parallel loops become serial loops inside the kernel.
// CHECK-LABEL: func @nested
// CHECK:       gpu.launch
// CHECK:         scf.for
// CHECK-NOT:     scf.parallel
// CHECK:       gpu.terminator
func.func @nested(%a: memref<8x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    scf.parallel (%j) = (%c0) to (%c16) step (%c1) {
      %z = arith.constant 0.0 : f32
      memref.store %z, %a[%i, %j] : memref<8x16xf32>
      scf.reduce
    }
    scf.reduce
  }
  return
}

// -----

// Non-unit steps and offsets: iv = lb + index * step.
// CHECK-LABEL: func @strided
// CHECK:       %[[SPAN:.*]] = arith.subi %[[UB:.*]], %[[LB:.*]] : index
// CHECK:       %[[COUNT:.*]] = arith.ceildivsi %[[SPAN]], %c3
// CHECK:       gpu.launch
// CHECK:         %[[OFF:.*]] = arith.muli %{{.*}}, %c3
// CHECK:         %[[IV:.*]] = arith.addi %[[LB]], %[[OFF]]
// CHECK:         memref.store %{{.*}}, %{{.*}}[%[[IV]]]
func.func @strided(%a: memref<?xf32>, %lb: index, %ub: index) {
  %c3 = arith.constant 3 : index
  scf.parallel (%i) = (%lb) to (%ub) step (%c3) {
    %z = arith.constant 1.0 : f32
    memref.store %z, %a[%i] : memref<?xf32>
    scf.reduce
  }
  return
}

// -----

func.func @reduction(%a: memref<?xf32>, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  // expected-error @+1 {{with reductions is not supported by the GPU lowering}}
  %r = scf.parallel (%i) = (%c0) to (%n) step (%c1) init (%zero) -> f32 {
    %x = memref.load %a[%i] : memref<?xf32>
    scf.reduce(%x : f32) {
    ^bb0(%l: f32, %r: f32):
      %s = arith.addf %l, %r : f32
      scf.reduce.return %s : f32
    }
  }
  return %r : f32
}
