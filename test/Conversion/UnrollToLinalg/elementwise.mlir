// RUN: unroll-opt %s --convert-unroll-to-linalg --split-input-file | FileCheck %s

// unroll.gelu: the tanh form 0.5 x (1 + tanh(√(2/π)(x + 0.044715 x³))), one
// elementwise generic.
// CHECK-LABEL: func.func @gelu(
// CHECK-DAG: %[[C:.*]] = arith.constant 0.797884583 : f32
// CHECK-DAG: %[[A:.*]] = arith.constant 4.471500e-02 : f32
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel"]
// CHECK: arith.mulf %[[A]],
// CHECK: arith.mulf %[[C]],
// CHECK: math.tanh
// CHECK-NOT: unroll.
func.func @gelu(%x: tensor<?x?x4xf32>) -> tensor<?x?x4xf32> {
  %y = unroll.gelu %x : tensor<?x?x4xf32>
  return %y : tensor<?x?x4xf32>
}

// -----

// unroll.gelu_vjp: dy · (½(1 + t) + ½x(1 − t²) c (1 + 3a x²)), with
// 3a = 0.134145, recomputing t = tanh(c(x + a x³)).
// CHECK-LABEL: func.func @gelu_vjp(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x4xf32>, %[[DY:.*]]: tensor<?x?x4xf32>)
// CHECK: %[[A3:.*]] = arith.constant 1.341450e-01 : f32
// CHECK: linalg.generic {{.*}} ins(%[[X]], %[[DY]] :
// CHECK: math.tanh
// CHECK: arith.mulf %[[A3]],
func.func @gelu_vjp(%x: tensor<?x?x4xf32>, %dy: tensor<?x?x4xf32>) -> tensor<?x?x4xf32> {
  %d = unroll.gelu_vjp %x, %dy : (tensor<?x?x4xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  return %d : tensor<?x?x4xf32>
}

// -----

// unroll.add of token batches (residuals) and of token matrices (an
// energy's summed cotangents): one elementwise addf generic of the same rank.
// CHECK-LABEL: func.func @add_batch(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x4xf32>, %[[Y:.*]]: tensor<?x?x4xf32>)
// CHECK: %[[S:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[X]], %[[Y]] :
// CHECK: arith.addf
// CHECK: return %[[S]]
func.func @add_batch(%x: tensor<?x?x4xf32>, %y: tensor<?x?x4xf32>) -> tensor<?x?x4xf32> {
  %s = unroll.add %x, %y : tensor<?x?x4xf32>
  return %s : tensor<?x?x4xf32>
}

// CHECK-LABEL: func.func @add_matrix(
// CHECK: %[[S:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]}
// CHECK: arith.addf
// CHECK: %[[C:.*]] = tensor.cast %[[S]] : tensor<?x?xf64> to tensor<?x4xf64>
// CHECK: return %[[C]]
func.func @add_matrix(%x: tensor<?x4xf64>, %y: tensor<?x4xf64>) -> tensor<?x4xf64> {
  %s = unroll.add %x, %y : tensor<?x4xf64>
  return %s : tensor<?x4xf64>
}

// -----

// unroll.position_embed adds the table's first n rows (n the run-time token
// count) to every prompt; its VJP sums dy over the batch into those rows of
// a zero table.
// CHECK-LABEL: func.func @position_embed(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x4xf32>, %[[T:.*]]: tensor<6x4xf32>)
// CHECK: %[[ROWS:.*]] = tensor.extract_slice %[[T]][0, 0] [%{{.*}}, 4] [1, 1] : tensor<6x4xf32> to tensor<?x4xf32>
// CHECK: linalg.generic {{.*}} ins(%[[X]], %[[ROWS]] : tensor<?x?x4xf32>, tensor<?x4xf32>)
func.func @position_embed(%x: tensor<?x?x4xf32>, %t: tensor<6x4xf32>) -> tensor<?x?x4xf32> {
  %y = unroll.position_embed %x, %t : tensor<?x?x4xf32>, tensor<6x4xf32>
  return %y : tensor<?x?x4xf32>
}

// CHECK-LABEL: func.func @position_embed_vjp(
// CHECK-SAME: %[[DY:.*]]: tensor<?x?x4xf32>, %{{.*}}: tensor<6x4xf32>)
// CHECK: %[[S:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "parallel", "parallel"]} ins(%[[DY]] :
// CHECK: %[[Z:.*]] = linalg.fill {{.*}} -> tensor<6x4xf32>
// CHECK: %[[D:.*]] = tensor.insert_slice %[[S]] into %[[Z]][0, 0] [%{{.*}}, 4] [1, 1]
// CHECK: return %[[D]]
func.func @position_embed_vjp(%dy: tensor<?x?x4xf32>, %t: tensor<6x4xf32>) -> tensor<6x4xf32> {
  %d = unroll.position_embed_vjp %dy, %t : (tensor<?x?x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  return %d : tensor<6x4xf32>
}
