// RUN: unroll-opt %s --convert-unroll-to-linalg --split-input-file | FileCheck %s

// unroll.layer_norm over the last dimension: per-token sum and mean
// (1/F = 0.25), sum of squared deviations, rsqrt(var + eps), then one
// elementwise generic reading x, mean, rstd, gain and bias.
// CHECK-LABEL: func.func @layer_norm(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x4xf64>, %[[G:.*]]: tensor<4xf64>, %[[B:.*]]: tensor<4xf64>)
// CHECK-DAG: %[[INVF:.*]] = arith.constant 2.500000e-01 : f64
// CHECK-DAG: %[[EPS:.*]] = arith.constant 1.000000e-05 : f64
// CHECK: %[[S:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]] : tensor<?x?x4xf64>)
// CHECK: %[[MEAN:.*]] = linalg.generic {{.*}} ins(%[[S]] : tensor<?x?xf64>)
// CHECK: arith.mulf %{{.*}}, %[[INVF]]
// CHECK: %[[SSQ:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]], %[[MEAN]] :
// CHECK: %[[RSTD:.*]] = linalg.generic {{.*}} ins(%[[SSQ]] : tensor<?x?xf64>)
// CHECK: arith.addf %{{.*}}, %[[EPS]]
// CHECK: math.rsqrt
// CHECK: %[[Y:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[MEAN]], %[[RSTD]], %[[G]], %[[B]] :
// CHECK: return %[[Y]]
// CHECK-NOT: unroll.
func.func @layer_norm(%x: tensor<?x?x4xf64>, %g: tensor<4xf64>, %b: tensor<4xf64>) -> tensor<?x?x4xf64> {
  %y = unroll.layer_norm %x, %g, %b {eps = 1.0e-5 : f64} : tensor<?x?x4xf64>, tensor<4xf64>
  return %y : tensor<?x?x4xf64>
}

// -----

// unroll.layer_norm_vjp recomputes the moments and x̂, forms ĝ = dy·g, its
// row means, dx = rstd (ĝ − mean ĝ − x̂ mean(ĝ x̂)), and reduces dy·x̂ and dy
// over the tokens for the gain and bias gradients.
// CHECK-LABEL: func.func @layer_norm_vjp(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x4xf64>, %[[G:.*]]: tensor<4xf64>, %[[DY:.*]]: tensor<?x?x4xf64>)
// CHECK: math.rsqrt
// CHECK: %[[XHAT:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[X]], {{.*}}) outs(
// CHECK: %[[GH:.*]] = linalg.generic {{.*}} ins(%[[DY]], %[[G]] : tensor<?x?x4xf64>, tensor<4xf64>)
// CHECK: %[[S1:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[GH]] :
// CHECK: %[[S2:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[GH]], %[[XHAT]] :
// CHECK: %[[DX:.*]] = linalg.generic {{.*}} ins(%[[GH]], %[[XHAT]], %[[S1]], %[[S2]], {{.*}})
// CHECK: %[[DG:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "reduction", "parallel"]} ins(%[[DY]], %[[XHAT]] :
// CHECK: %[[DB:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "reduction", "parallel"]} ins(%[[DY]] :
// CHECK: return %[[DX]], %[[DG]], %[[DB]]
func.func @layer_norm_vjp(%x: tensor<?x?x4xf64>, %g: tensor<4xf64>, %dy: tensor<?x?x4xf64>) -> (tensor<?x?x4xf64>, tensor<4xf64>, tensor<4xf64>) {
  %dx, %dg, %db = unroll.layer_norm_vjp %x, %g, %dy : (tensor<?x?x4xf64>, tensor<4xf64>, tensor<?x?x4xf64>) -> (tensor<?x?x4xf64>, tensor<4xf64>, tensor<4xf64>)
  return %dx, %dg, %db : tensor<?x?x4xf64>, tensor<4xf64>, tensor<4xf64>
}
