// RUN: unroll-opt %s --unroll-gpu-prepare-linalg | FileCheck %s
//
// Reductions move innermost (one thread per output element, a serial loop
// inside); a reduction without parallel dimensions gets a unit parallel loop
// so it runs on the device.

#in = affine_map<(i, k, j) -> (i, k)>
#w = affine_map<(i, k, j) -> (k, j)>
#out = affine_map<(i, k, j) -> (i, j)>

// CHECK-LABEL: func @interchange
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "reduction"]
func.func @interchange(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>) {
  linalg.generic {indexing_maps = [#in, #w, #out],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// CHECK-LABEL: func @full_reduction
// CHECK: scf.parallel (%{{.*}}) = (%c0) to (%c1) step (%c1)
// CHECK-NEXT: linalg.generic
// CHECK-SAME: iterator_types = ["reduction"]
func.func @full_reduction(%a: memref<?xf32>, %s: memref<f32>) {
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>],
                  iterator_types = ["reduction"]}
      ins(%a : memref<?xf32>) outs(%s : memref<f32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %acc, %x : f32
    linalg.yield %r : f32
  }
  return
}

// Already in order: untouched.
// CHECK-LABEL: func @elementwise
// CHECK-NOT: scf.parallel
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel"]
func.func @elementwise(%a: memref<4x8xf32>, %b: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x8xf32>) outs(%b : memref<4x8xf32>) {
  ^bb0(%x: f32, %y: f32):
    %e = math.exp %x : f32
    linalg.yield %e : f32
  }
  return
}
