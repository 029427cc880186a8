// RUN: unroll-opt %s --convert-unroll-to-linalg --split-input-file | FileCheck %s

// Modern Hopfield retrieval's term, step and VJP (Hopfield.cpp). X is the
// memory (one pattern per row), Y the queries.
//
// unroll.lse −β⁻¹ Σ_q log Σ_i exp(β x_i·y_q): the logits S = β Y Xᵀ, each
// row's max m_q, Σ_i exp(s_qi − m_q), then Σ_q −β⁻¹ (m_q + log Σ).
// CHECK-LABEL: func.func @lse(
// CHECK: %[[BETA:.*]] = arith.constant 2.000000e+00 : f64
// CHECK: %[[G:.*]] = linalg.matmul_transpose_b
// CHECK: %[[S:.*]] = linalg.generic {{.*}} ins(%[[G]] :
// CHECK: arith.mulf %[[BETA]], %{{.*}} : f64
// CHECK: %[[NEGINF:.*]] = arith.constant 0xFFF0000000000000 : f64
// CHECK: %[[MX:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[S]] :
// CHECK: arith.maximumf
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[S]], %[[MX]] :
// CHECK: arith.subf
// CHECK: math.exp
// CHECK: %[[NIB:.*]] = arith.constant -5.000000e-01 : f64
// CHECK: %[[E:.*]] = linalg.generic {{.*}}iterator_types = ["reduction"]} ins(%[[MX]], %[[SUM]] :
// CHECK: ^bb0(%[[M:.*]]: f64, %[[Z:.*]]: f64, %[[ACC:.*]]: f64):
// CHECK: %[[LOG:.*]] = math.log %[[Z]] : f64
// CHECK: %[[LSE:.*]] = arith.addf %[[M]], %[[LOG]] : f64
// CHECK: %[[T:.*]] = arith.mulf %[[NIB]], %[[LSE]] : f64
// CHECK: arith.addf %[[ACC]], %[[T]] : f64
// CHECK: tensor.extract %[[E]][] : tensor<f64>
func.func @lse(%y: tensor<?x4xf64>, %x: tensor<?x4xf64>) -> f64 {
  %t = unroll.lse %y, %x beta(2.0) : tensor<?x4xf64>, tensor<?x4xf64>
  %v = builtin.unrealized_conversion_cast %t : !unroll.energy to f64
  return %v : f64
}

// -----

// unroll.cccp_step Y' = softmax(β Y Xᵀ) X / c: the same logits, the
// normalized softmax rows P, the product P X and the scaling by 1/c = 0.5.
// CHECK-LABEL: func.func @cccp_step(
// CHECK-SAME: %[[Y:.*]]: tensor<?x4xf64>, %[[X:.*]]: tensor<?x4xf64>)
// CHECK: %[[G:.*]] = linalg.matmul_transpose_b
// CHECK: %[[S:.*]] = linalg.generic {{.*}} ins(%[[G]] :
// CHECK: %[[MX:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[S]] :
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[S]], %[[MX]] :
// CHECK: %[[P:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]} ins(%[[S]], %[[MX]], %[[SUM]] :
// CHECK: math.exp
// CHECK: arith.divf
// CHECK: %[[PX:.*]] = linalg.matmul ins(%[[P]], %{{.*}} :
// CHECK: %[[INVC:.*]] = arith.constant 5.000000e-01 : f64
// CHECK: linalg.generic {{.*}} ins(%[[PX]] :
// CHECK: arith.mulf %[[INVC]], %{{.*}} : f64
// CHECK: return %{{.*}} : tensor<?x4xf64>
func.func @cccp_step(%y: tensor<?x4xf64>, %x: tensor<?x4xf64>) -> tensor<?x4xf64> {
  %r = unroll.cccp_step %y, %x beta(2.0) {coeff = 2.0 : f64} : tensor<?x4xf64>, tensor<?x4xf64>
  return %r : tensor<?x4xf64>
}

// -----

// unroll.cccp_step_vjp: P recomputed, dP = dY' Xᵀ / c, each row's Σ_i P dP,
// dS = P ∘ (dP − Σ), dY = β dS X and dX = Pᵀ dY' / c + β dSᵀ Y.
// CHECK-LABEL: func.func @cccp_step_vjp(
// CHECK-SAME: %[[Y:.*]]: tensor<?x4xf64>, %[[X:.*]]: tensor<?x4xf64>, %[[DY:.*]]: tensor<?x4xf64>)
// CHECK: %[[P:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]} ins(%{{.*}}, %{{.*}}, %{{.*}} :
// CHECK: %[[DP:.*]] = linalg.matmul_transpose_b
// CHECK: %[[R:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[P]], %[[DP]] :
// CHECK: %[[DS:.*]] = linalg.generic {{.*}} ins(%[[P]], %[[DP]], %[[R]] :
// CHECK: ^bb0(%[[PI:.*]]: f64, %[[DPI:.*]]: f64, %[[RI:.*]]: f64, %{{.*}}: f64):
// CHECK: %[[D:.*]] = arith.subf %[[DPI]], %[[RI]] : f64
// CHECK: arith.mulf %[[PI]], %[[D]] : f64
// CHECK: linalg.matmul ins(%[[DS]], %{{.*}} :
// CHECK: linalg.matmul_transpose_a ins(%[[P]], %{{.*}} :
// CHECK: linalg.matmul_transpose_a ins(%[[DS]], %{{.*}} :
// CHECK: return %{{.*}}, %{{.*}} : tensor<?x4xf64>, tensor<?x4xf64>
func.func @cccp_step_vjp(%y: tensor<?x4xf64>, %x: tensor<?x4xf64>, %dy: tensor<?x4xf64>) -> (tensor<?x4xf64>, tensor<?x4xf64>) {
  %dx, %di = unroll.cccp_step_vjp %y, %x, %dy beta(2.0) {coeff = 1.0 : f64} : tensor<?x4xf64>, tensor<?x4xf64>
  return %dx, %di : tensor<?x4xf64>, tensor<?x4xf64>
}
