// RUN: unroll-opt %s --pass-pipeline='builtin.module(func.func(unroll-gpu-map-ctas))' --split-input-file --verify-diagnostics | FileCheck %s
// RUN: unroll-opt %s --pass-pipeline='builtin.module(func.func(unroll-gpu-map-ctas{emulate-on-host=1}))' --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=EMU
// RUN: unroll-opt %s --pass-pipeline='builtin.module(func.func(unroll-gpu-map-ctas{emulate-on-host=1 reverse-threads=1}))' --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=REV
//
// A kernel in phase form (include/unroll/Utils/CtaKernel.h): per CTA,
// the threads stage a row into shared memory, then each thread reads its
// neighbour's element. On the GPU: one block per CTA (none when the grid is
// empty), the shared buffer a workgroup attribution, each phase its body at
// threadIdx.x and a barrier; the name rides on the first barrier.
// CHECK-LABEL: func.func @rotate(
// CHECK-SAME:    %[[X:.*]]: memref<?x4xf32>, %[[Y:.*]]: memref<?x4xf32>, %[[N:.*]]: index)
// CHECK:         %[[NONEMPTY:.*]] = arith.cmpi sgt, %[[N]], %{{.*}}
// CHECK:         scf.if %[[NONEMPTY]] {
// CHECK:           gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[N]], %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C4:.*]], %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) workgroup(%[[SH:.*]] : memref<4xf32, #gpu.address_space<workgroup>>)
// CHECK:             %[[V:.*]] = memref.load %[[X]][%[[BX]], %[[TX]]] : memref<?x4xf32>
// CHECK:             memref.store %[[V]], %[[SH]][%[[TX]]] : memref<4xf32, #gpu.address_space<workgroup>>
// CHECK:             gpu.barrier {unroll.cta.name = "rotate"}
// CHECK:             %[[NEXT:.*]] = arith.remui
// CHECK:             %[[W:.*]] = memref.load %[[SH]][%[[NEXT]]]
// CHECK:             memref.store %[[W]], %[[Y]][%[[BX]], %[[TX]]]
// CHECK:             gpu.barrier
// CHECK-NEXT:        gpu.terminator
// CHECK-NOT:     memref.alloc
// CHECK-NOT:     memref.dealloc
//
// Emulated: the loops as they were, without the markers; reversed, each
// phase runs thread 3 - t at iteration t.
// EMU-LABEL: func.func @rotate(
// EMU:         %[[SH:.*]] = memref.alloc() : memref<4xf32>
// EMU:         scf.for %[[C:.*]] = %{{.*}} to %{{.*}} step
// EMU:           scf.for %[[T:.*]] = %{{.*}} to %{{.*}} step
// EMU:             memref.load %{{.*}}[%[[C]], %[[T]]]
// EMU-NOT:     unroll.cta
// EMU:         memref.dealloc %[[SH]]
// REV-LABEL: func.func @rotate(
// REV:         scf.for %[[T:.*]] = %{{.*}} to %c4 step
// REV-NEXT:      %[[C3:.*]] = arith.constant 3 : index
// REV-NEXT:      %[[R:.*]] = arith.subi %[[C3]], %[[T]]
// REV-NEXT:      memref.load %{{.*}}[%{{.*}}, %[[R]]]
func.func @rotate(%x: memref<?x4xf32>, %y: memref<?x4xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %sh = memref.alloc() {unroll.cta.shared} : memref<4xf32>
  scf.for %cta = %c0 to %n step %c1 {
    scf.for %t = %c0 to %c4 step %c1 {
      %v = memref.load %x[%cta, %t] : memref<?x4xf32>
      memref.store %v, %sh[%t] : memref<4xf32>
    } {unroll.cta.phase}
    scf.for %t = %c0 to %c4 step %c1 {
      %t1 = arith.addi %t, %c1 : index
      %next = arith.remui %t1, %c4 : index
      %w = memref.load %sh[%next] : memref<4xf32>
      memref.store %w, %y[%cta, %t] : memref<?x4xf32>
    } {unroll.cta.phase}
  } {unroll.cta.grid = 4 : i64, unroll.cta.name = "rotate"}
  memref.dealloc %sh : memref<4xf32>
  return
}

// -----

// The contract's violations are located errors.
func.func @phase_bounds(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %cta = %c0 to %n step %c1 {
    // expected-error @below {{unroll-gpu-map-ctas: a phase runs over the 4 threads of its grid}}
    scf.for %t = %c0 to %c8 step %c1 {
    } {unroll.cta.phase}
  } {unroll.cta.grid = 4 : i64}
  return
}

// -----

func.func @too_many_threads(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @below {{unroll-gpu-map-ctas: the grid's thread count must be in 1..1024}}
  scf.for %cta = %c0 to %n step %c1 {
  } {unroll.cta.grid = 2048 : i64}
  return
}

// -----

func.func @shared_escapes(%n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %cst = arith.constant 0.0 : f32
  %sh = memref.alloc() {unroll.cta.shared} : memref<4xf32>
  scf.for %cta = %c0 to %n step %c1 {
    scf.for %t = %c0 to %c4 step %c1 {
      memref.store %cst, %sh[%t] : memref<4xf32>
    } {unroll.cta.phase}
  } {unroll.cta.grid = 4 : i64}
  // expected-error @below {{unroll-gpu-map-ctas: a shared buffer is only loaded and stored in its grid (and deallocated after)}}
  %v = memref.load %sh[%c0] : memref<4xf32>
  return %v : f32
}

// -----

func.func @nested_phases(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %cta = %c0 to %n step %c1 {
    scf.for %t = %c0 to %c4 step %c1 {
      // expected-error @below {{unroll-gpu-map-ctas: phases do not nest}}
      scf.for %u = %c0 to %c4 step %c1 {
      } {unroll.cta.phase}
    } {unroll.cta.phase}
  } {unroll.cta.grid = 4 : i64}
  return
}
