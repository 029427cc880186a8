// RUN: unroll-opt %s --convert-unroll-to-linalg --split-input-file | FileCheck %s

// unroll.linear: the accumulator starts at the bias broadcast over (b, i),
// then y[b,i,o] += x[b,i,k] W[o,k] in one generic whose only reduction is k
// (unroll-cpu-gemm later collapses (b, i) into the GEMM's M).
// CHECK-DAG: #[[$BIAS:.*]] = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-DAG: #[[$X:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-DAG: #[[$W:.*]] = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
// CHECK-DAG: #[[$Y:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @linear(
// CHECK-SAME: %[[XV:.*]]: tensor<?x?x4xf32>, %[[WV:.*]]: tensor<8x4xf32>, %[[BV:.*]]: tensor<8xf32>)
// CHECK: %[[INIT:.*]] = linalg.generic {indexing_maps = [#[[$BIAS]], {{.*}}], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[BV]] : tensor<8xf32>)
// CHECK: %[[OUT:.*]] = linalg.generic {indexing_maps = [#[[$X]], #[[$W]], #[[$Y]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[XV]], %[[WV]] : {{.*}}) outs(%[[INIT]] : tensor<?x?x8xf32>)
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: return %[[OUT]]
// CHECK-NOT: unroll.
func.func @linear(%x: tensor<?x?x4xf32>, %w: tensor<8x4xf32>, %b: tensor<8xf32>) -> tensor<?x?x8xf32> {
  %y = unroll.linear %x, %w, %b : (tensor<?x?x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  return %y : tensor<?x?x8xf32>
}

// -----

// unroll.linear_vjp: three contractions, each with its inner loop along the
// last (contiguous) dimension of every operand: dx = dy W (reduction over
// o), dW = Σ_{b,i} dyᵀ x, db = Σ_{b,i} dy.
// CHECK-LABEL: func.func @linear_vjp(
// CHECK: %[[DX:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction", "parallel"]
// CHECK: %[[DW:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "reduction", "parallel", "parallel"]} ins({{.*}}) outs(%{{.*}} : tensor<8x4xf32>)
// CHECK: %[[DB:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "reduction", "parallel"]} ins({{.*}}) outs(%{{.*}} : tensor<8xf32>)
// CHECK: return %[[DX]], %[[DW]], %[[DB]]
func.func @linear_vjp(%x: tensor<?x?x4xf32>, %w: tensor<8x4xf32>, %dy: tensor<?x?x8xf32>) -> (tensor<?x?x4xf32>, tensor<8x4xf32>, tensor<8xf32>) {
  %dx, %dw, %db = unroll.linear_vjp %x, %w, %dy : (tensor<?x?x4xf32>, tensor<8x4xf32>, tensor<?x?x8xf32>) -> (tensor<?x?x4xf32>, tensor<8x4xf32>, tensor<8xf32>)
  return %dx, %dw, %db : tensor<?x?x4xf32>, tensor<8x4xf32>, tensor<8xf32>
}
