// RUN: unroll-opt %s --pass-pipeline='builtin.module(func.func(unroll-gpu-column-reductions))' --split-input-file | FileCheck %s
//
// A bias gradient accumulated in place, g[j] += Σ_{b,i} dy[b, i, j]: a CTA
// kernel of 512 threads per 8 outputs (64 outputs: 32 per CTA would leave 2
// CTAs; 8 outputs, one 32-byte sector of a row, is the floor). Phase 1:
// thread t takes output t mod 8 of its CTA and rows t / 8, t / 8 + 64, ...
// into four registers in turn (four loads in flight; the rows past a
// multiple of four into the first), adds them, and stores the sum in
// shared memory [64, 8]; phase 2: one thread per output adds the old value
// and the 64 partial sums.
// CHECK-LABEL: func.func @bias_gradient(
// CHECK-SAME:    %[[DY:.*]]: memref<?x?x64xf32>, %[[G:.*]]: memref<64xf32, strided<[1], offset: 8>>)
// CHECK:         %[[P:.*]] = memref.alloc() {unroll.cta.shared} : memref<1x64x8xf32>
// CHECK:         scf.for %[[CTA:.*]] = %{{.*}} to %{{.*}} step
// CHECK:           scf.for %[[T:.*]] = %{{.*}} to %c512{{.*}} step
// CHECK:             %[[C:.*]] = arith.remui %[[T]], %c8
// CHECK:             %[[GR:.*]] = arith.divui %[[T]], %c8
// CHECK:             %[[S:.*]]:4 = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c4{{.*}} iter_args(%[[A:[^ ]*]] = %{{.*}}, %{{.*}}) -> (f32, f32, f32, f32) {
// CHECK:               memref.load %[[DY]]
// CHECK:               arith.addf %[[A]]
// CHECK-COUNT-3:       memref.load %[[DY]]
// CHECK:             %[[TAIL:.*]] = scf.for {{.*}} iter_args(%{{.*}} = %[[S]]#0) -> (f32)
// CHECK:             arith.addf %[[TAIL]], %[[S]]#1
// CHECK:             arith.addf %{{.*}}, %[[S]]#2
// CHECK:             %[[SUM4:.*]] = arith.addf %{{.*}}, %[[S]]#3
// CHECK:             memref.store %[[SUM4]], %[[P]][%{{.*}}, %[[GR]], %[[C]]]
// CHECK:           } {unroll.cta.phase}
// CHECK:           scf.for %[[T2:.*]] = %{{.*}} to %c512{{.*}} step
// CHECK:             scf.if
// CHECK:               %[[OLD:.*]] = memref.load %[[G]]
// CHECK:               %[[SUM:.*]] = scf.for {{.*}} iter_args(%{{.*}} = %[[OLD]])
// CHECK:               memref.store %[[SUM]], %[[G]]
// CHECK:           } {unroll.cta.phase}
// CHECK:         } {unroll.cta.grid = 512 : i64, unroll.cta.name = "column_reduction"}
// CHECK:         memref.dealloc %[[P]]
// CHECK-NOT:     linalg.generic
func.func @bias_gradient(%dy: memref<?x?x64xf32>, %g: memref<64xf32, strided<[1], offset: 8>>) {
  linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (j)>], iterator_types = ["reduction", "reduction", "parallel"]} ins(%dy : memref<?x?x64xf32>) outs(%g : memref<64xf32, strided<[1], offset: 8>>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A layer norm's gain and bias gradients, Σ dy·x̂ and Σ dy, next to each
// other over the same rows (dy read with the same map) into disjoint
// slices of the flat gradient: one kernel, two accumulators, two partial
// sums per thread.
// CHECK-LABEL: func.func @gain_and_bias(
// CHECK:         %[[P:.*]] = memref.alloc() {unroll.cta.shared} : memref<2x64x8xf32>
// CHECK:         scf.for
// CHECK:           scf.for
// CHECK:             %[[S:.*]]:2 = scf.for {{.*}} -> (f32, f32) {
// CHECK:               arith.mulf
// CHECK:           } {unroll.cta.phase}
// CHECK:         } {unroll.cta.grid = 512 : i64, unroll.cta.name = "column_reduction"}
// CHECK-NOT:     linalg.generic
// CHECK-NOT:     unroll.cta.grid
#rows = affine_map<(b, i, j) -> (b, i, j)>
#col = affine_map<(b, i, j) -> (j)>
func.func @gain_and_bias(%dy: memref<?x?x64xf32>, %xhat: memref<?x?x64xf32>, %grad: memref<200xf32>) {
  %g = memref.subview %grad[0] [64] [1] : memref<200xf32> to memref<64xf32, strided<[1]>>
  %b = memref.subview %grad[64] [64] [1] : memref<200xf32> to memref<64xf32, strided<[1], offset: 64>>
  linalg.generic {indexing_maps = [#rows, #rows, #col], iterator_types = ["reduction", "reduction", "parallel"]} ins(%dy, %xhat : memref<?x?x64xf32>, memref<?x?x64xf32>) outs(%g : memref<64xf32, strided<[1]>>) {
  ^bb0(%d: f32, %x: f32, %acc: f32):
    %m = arith.mulf %d, %x : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#rows, #col], iterator_types = ["reduction", "reduction", "parallel"]} ins(%dy : memref<?x?x64xf32>) outs(%b : memref<64xf32, strided<[1], offset: 64>>) {
  ^bb0(%d: f32, %acc: f32):
    %s = arith.addf %acc, %d : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Two kernels: the outputs overlap.
// CHECK-LABEL: func.func @overlapping(
// CHECK-COUNT-2: unroll.cta.grid
#rows = affine_map<(b, i, j) -> (b, i, j)>
#col = affine_map<(b, i, j) -> (j)>
func.func @overlapping(%dy: memref<?x?x64xf32>, %grad: memref<200xf32>) {
  %g = memref.subview %grad[0] [64] [1] : memref<200xf32> to memref<64xf32, strided<[1]>>
  %b = memref.subview %grad[32] [64] [1] : memref<200xf32> to memref<64xf32, strided<[1], offset: 32>>
  linalg.generic {indexing_maps = [#rows, #col], iterator_types = ["reduction", "reduction", "parallel"]} ins(%dy : memref<?x?x64xf32>) outs(%g : memref<64xf32, strided<[1]>>) {
  ^bb0(%d: f32, %acc: f32):
    %s = arith.addf %acc, %d : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#rows, #col], iterator_types = ["reduction", "reduction", "parallel"]} ins(%dy : memref<?x?x64xf32>) outs(%b : memref<64xf32, strided<[1], offset: 32>>) {
  ^bb0(%d: f32, %acc: f32):
    %s = arith.addf %acc, %d : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Left alone: a row reduction (the outputs' count is dynamic), a reduction
// over few static rows, and a body that does not only add to the
// accumulator.
// CHECK-LABEL: func.func @kept(
// CHECK-NOT:     unroll.cta
// CHECK-COUNT-3: linalg.generic
func.func @kept(%x: memref<?x64xf32>, %y: memref<?xf32>, %s: memref<8x64xf32>, %z: memref<64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%x : memref<?x64xf32>) outs(%y : memref<?xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %acc, %in : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>], iterator_types = ["reduction", "parallel"]} ins(%s : memref<8x64xf32>) outs(%z : memref<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %acc, %in : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>], iterator_types = ["reduction", "parallel"]} ins(%x : memref<?x64xf32>) outs(%z : memref<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.maximumf %acc, %in : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// One output (the read-out bias of a model with one prediction per token):
// one CTA whose 512 threads all split the rows, in a grid of two (the second
// idle), since a grid loop of one iteration would be folded away.
// CHECK-LABEL: func.func @one_output(
// CHECK:         memref.alloc() {unroll.cta.shared} : memref<1x512x1xf32>
// CHECK:         arith.maxui %{{.*}}, %c2
// CHECK:         arith.ceildivui %{{.*}}, %c512
// CHECK:         scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c4{{.*}} iter_args
// CHECK:         unroll.cta.grid = 512 : i64
func.func @one_output(%dy: memref<?x?x1xf32>, %g: memref<1xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (j)>], iterator_types = ["reduction", "reduction", "parallel"]} ins(%dy : memref<?x?x1xf32>) outs(%g : memref<1xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %acc, %x : f32
    linalg.yield %s : f32
  }
  return
}
