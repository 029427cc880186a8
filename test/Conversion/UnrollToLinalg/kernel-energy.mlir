// RUN: unroll-opt %s --convert-unroll-to-linalg --split-input-file | FileCheck %s

// unroll.kernel_matrix on a token batch: the x features sliced out, q = X W_q
// split into heads by expand_shape, one contraction q_i·q_j per (b, h, i, j),
// then the mask (context: j < n − 1) and the mean's 1/(n − 1).
// CHECK-LABEL: func.func @kernel_matrix(
// CHECK: tensor.extract_slice %{{.*}}[0, 0, 0] [%{{.*}}, %{{.*}}, 3] [1, 1, 1] : tensor<?x?x4xf32> to tensor<?x?x3xf32>
// CHECK: tensor.expand_shape {{.*}} into tensor<?x?x2x2xf32>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK: arith.cmpi ult
// CHECK: arith.divf
// CHECK: arith.select
func.func @kernel_matrix(%x: tensor<?x?x4xf32>, %wq: tensor<3x4xf32>) -> tensor<?x2x?x?xf32> {
  %k = unroll.kernel_matrix %x features [0, 3] query %wq : tensor<3x4xf32> kernel(linear) heads(2) mask(context) mean : tensor<?x?x4xf32> -> tensor<?x2x?x?xf32>
  return %k : tensor<?x2x?x?xf32>
}

// -----

// unroll.ratio per prompt: the quotient where the curvature exceeds
// eps · scale and the gradient has not converged, else 0.
// CHECK-LABEL: func.func @ratio(
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel"]
// CHECK: arith.divf
// CHECK: arith.cmpf ogt
// CHECK: arith.cmpf ogt
// CHECK: arith.andi
// CHECK: arith.select
func.func @ratio(%n: tensor<?xf32>, %d: tensor<?xf32>, %s: tensor<?xf32>, %g: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
  %r = unroll.ratio %n, %d scale %s : tensor<?xf32> converged(%g, %y) : tensor<?xf32>, tensor<?xf32> : tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

// unroll.pick: entry min(k, K − 1) of the learned vector.
// CHECK-LABEL: func.func @pick(
// CHECK: %[[L:.*]] = arith.constant 9 : index
// CHECK: %[[I:.*]] = arith.minui %{{.*}}, %[[L]] : index
// CHECK: tensor.extract %{{.*}}[%[[I]]] : tensor<10xf32>
// CHECK: tensor.from_elements
func.func @pick(%a: tensor<10xf32>, %k: index) -> tensor<1xf32> {
  %r = unroll.pick %a[%k] : tensor<10xf32> -> tensor<1xf32>
  return %r : tensor<1xf32>
}
