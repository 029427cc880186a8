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

// -----

// A gradient that covers only the first n rows of a table (position
// embeddings: the prompt's n of 23), padded with zeros and added to the
// whole slice: only the n rows are added, and the sum over the batch goes
// straight into them.
// CHECK-LABEL: func.func @padded(
// CHECK-SAME:    %[[G:.*]]: tensor<92xf32>, %[[DY:.*]]: tensor<?x?x4xf32>)
// CHECK-NOT:     linalg.fill
// CHECK:         %[[E:.*]] = tensor.expand_shape
// CHECK:         %[[ROWS:.*]] = tensor.extract_slice %[[E]][0, 0] [%{{.*}}, 4] [1, 1]
// CHECK:         %[[R:.*]] = linalg.generic {{.*}} ins(%[[DY]] : tensor<?x?x4xf32>) outs(%[[ROWS]] : tensor<?x4xf32>)
// CHECK:         tensor.insert_slice %[[R]] into %[[E]][0, 0] [%{{.*}}, 4] [1, 1]
#sum_b = affine_map<(b, i, j) -> (b, i, j)>
#out_ij = affine_map<(b, i, j) -> (i, j)>
#id2 = affine_map<(i, j) -> (i, j)>
func.func @padded(%g: tensor<92xf32>, %dy: tensor<?x?x4xf32>) -> tensor<92xf32> {
  %zero = arith.constant 0.0 : f32
  %c1 = arith.constant 1 : index
  %n = tensor.dim %dy, %c1 : tensor<?x?x4xf32>
  %e = tensor.empty(%n) : tensor<?x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  %r = linalg.generic {indexing_maps = [#sum_b, #out_ij], iterator_types = ["reduction", "parallel", "parallel"]} ins(%dy : tensor<?x?x4xf32>) outs(%z : tensor<?x4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  } -> tensor<?x4xf32>
  %t0 = tensor.empty() : tensor<23x4xf32>
  %tz = linalg.fill ins(%zero : f32) outs(%t0 : tensor<23x4xf32>) -> tensor<23x4xf32>
  %pad = tensor.insert_slice %r into %tz[0, 0] [%n, 4] [1, 1] : tensor<?x4xf32> into tensor<23x4xf32>
  %old = tensor.expand_shape %g [[0, 1]] output_shape [23, 4] : tensor<92xf32> into tensor<23x4xf32>
  %e2 = tensor.empty() : tensor<23x4xf32>
  %sum = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%old, %pad : tensor<23x4xf32>, tensor<23x4xf32>) outs(%e2 : tensor<23x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<23x4xf32>
  %flat = tensor.collapse_shape %sum [[0, 1]] : tensor<23x4xf32> into tensor<92xf32>
  return %flat : tensor<92xf32>
}
