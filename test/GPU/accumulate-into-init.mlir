// RUN: unroll-opt %s --unroll-gpu-fuse-elementwise --split-input-file | FileCheck %s
//
// A gradient accumulation g[W] + Xᵀ·dY, the product into a zero fill, becomes
// the product into g[W]'s slice (a GEMM with accumulate once bufferized in
// place); the same for a column sum (a bias gradient). The fill is gone.
// CHECK-LABEL: func.func @weight_gradient(
// CHECK-SAME:    %[[G:.*]]: tensor<48xf32>, %[[X:.*]]: tensor<5x4xf32>, %[[DY:.*]]: tensor<5x6xf32>)
// CHECK-NOT:     linalg.fill
// CHECK:         %[[S:.*]] = tensor.extract_slice %[[G]][8] [24] [1]
// CHECK:         %[[E:.*]] = tensor.expand_shape %[[S]]
// CHECK:         %[[P:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[DY]] : tensor<5x4xf32>, tensor<5x6xf32>) outs(%[[E]] : tensor<4x6xf32>)
// CHECK:           arith.mulf
// CHECK:           arith.addf
// CHECK:         %[[C:.*]] = tensor.collapse_shape %[[P]]
// CHECK:         tensor.insert_slice %[[C]] into %[[G]][8] [24] [1]
#xw = affine_map<(i, j, k) -> (k, i)>
#dyw = affine_map<(i, j, k) -> (k, j)>
#ow = affine_map<(i, j, k) -> (i, j)>
#id = affine_map<(i, j) -> (i, j)>
func.func @weight_gradient(%g: tensor<48xf32>, %x: tensor<5x4xf32>, %dy: tensor<5x6xf32>) -> tensor<48xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p = linalg.generic {indexing_maps = [#xw, #dyw, #ow], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %dy : tensor<5x4xf32>, tensor<5x6xf32>) outs(%z : tensor<4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x6xf32>
  %slice = tensor.extract_slice %g[8] [24] [1] : tensor<48xf32> to tensor<24xf32>
  %old = tensor.expand_shape %slice [[0, 1]] output_shape [4, 6] : tensor<24xf32> into tensor<4x6xf32>
  %e2 = tensor.empty() : tensor<4x6xf32>
  %sum = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%old, %p : tensor<4x6xf32>, tensor<4x6xf32>) outs(%e2 : tensor<4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x6xf32>
  %flat = tensor.collapse_shape %sum [[0, 1]] : tensor<4x6xf32> into tensor<24xf32>
  %r = tensor.insert_slice %flat into %g[8] [24] [1] : tensor<24xf32> into tensor<48xf32>
  return %r : tensor<48xf32>
}

// -----

// Left alone: the accumulator has another use (it would have to be copied),
// the reduction's init is not zero, and the body reads the accumulator twice
// (the last two adds become one elementwise op).
// CHECK-LABEL: func.func @kept(
// CHECK-COUNT-3: linalg.fill
// CHECK-COUNT-5: linalg.generic
#r = affine_map<(i, k) -> (k, i)>
#o = affine_map<(i, k) -> (i)>
#v = affine_map<(i) -> (i)>
func.func @kept(%a: tensor<4xf32>, %x: tensor<5x4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %o = linalg.fill ins(%one : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %z2 = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %c1 = linalg.generic {indexing_maps = [#r, #o], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<5x4xf32>) outs(%z : tensor<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %s1 = linalg.generic {indexing_maps = [#v, #v, #v], iterator_types = ["parallel"]} ins(%a, %c1 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%p: f32, %q: f32, %w: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %c2 = linalg.generic {indexing_maps = [#r, #o], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<5x4xf32>) outs(%o : tensor<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %s2 = linalg.generic {indexing_maps = [#v, #v, #v], iterator_types = ["parallel"]} ins(%c1, %c2 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%p: f32, %q: f32, %w: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %c3 = linalg.generic {indexing_maps = [#r, #o], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<5x4xf32>) outs(%z2 : tensor<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.mulf %acc, %acc : f32
    %s = arith.addf %acc, %in : f32
    %t = arith.addf %s, %m : f32
    linalg.yield %t : f32
  } -> tensor<4xf32>
  %s3 = linalg.generic {indexing_maps = [#v, #v, #v], iterator_types = ["parallel"]} ins(%s2, %c3 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%p: f32, %q: f32, %w: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %s1, %s3, %a, %c1 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
