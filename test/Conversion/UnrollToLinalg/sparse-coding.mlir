// RUN: unroll-opt %s --convert-unroll-to-linalg --split-input-file | FileCheck %s

// Sparse coding's terms, steps and VJPs (SparseCoding.cpp). X holds the
// measurements (rows), Y the codes, A [m, n] the dictionary.
//
// unroll.lsq ½‖X − Y Aᵀ‖²: one product Y Aᵀ, then a full reduction of
// ½ r² with r = x − (Y Aᵀ).
// CHECK-LABEL: func.func @lsq(
// CHECK-SAME: %[[Y:.*]]: tensor<?x6xf64>, %[[X:.*]]: tensor<?x4xf64>, %[[A:.*]]: tensor<4x6xf64>) -> f64
// CHECK: %[[YA:.*]] = linalg.matmul_transpose_b ins(%{{.*}}, %{{.*}} :
// CHECK: %[[HALF:.*]] = arith.constant 5.000000e-01 : f64
// CHECK: %[[E:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]} ins(%{{.*}}, %[[YA]] :
// CHECK: ^bb0(%[[XI:.*]]: f64, %[[YAI:.*]]: f64, %[[ACC:.*]]: f64):
// CHECK: %[[R:.*]] = arith.subf %[[XI]], %[[YAI]] : f64
// CHECK: %[[R2:.*]] = arith.mulf %[[R]], %[[R]] : f64
// CHECK: %[[T:.*]] = arith.mulf %[[HALF]], %[[R2]] : f64
// CHECK: arith.addf %[[ACC]], %[[T]] : f64
// CHECK: tensor.extract %[[E]][] : tensor<f64>
// CHECK-NOT: unrealized_conversion_cast
func.func @lsq(%y: tensor<?x6xf64>, %x: tensor<?x4xf64>, %a: tensor<4x6xf64>) -> f64 {
  %t = unroll.lsq %y, %x, %a : tensor<?x6xf64>, tensor<?x4xf64>, tensor<4x6xf64>
  %v = builtin.unrealized_conversion_cast %t : !unroll.energy to f64
  return %v : f64
}

// -----

// unroll.l1 λ‖Y‖₁ + ι(Y ≥ 0): λ|y| summed, +inf where y < 0.
// CHECK-LABEL: func.func @l1(
// CHECK: %[[LAM:.*]] = arith.constant 2.500000e-01 : f64
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK: %[[INF:.*]] = arith.constant 0x7FF0000000000000 : f64
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]}
// CHECK: ^bb0(%[[V:.*]]: f64, %[[ACC:.*]]: f64):
// CHECK: %[[ABS:.*]] = math.absf %[[V]] : f64
// CHECK: %[[T:.*]] = arith.mulf %[[LAM]], %[[ABS]] : f64
// CHECK: %[[NEG:.*]] = arith.cmpf olt, %[[V]], %[[ZERO]] : f64
// CHECK: %[[S:.*]] = arith.select %[[NEG]], %[[INF]], %[[T]] : f64
// CHECK: arith.addf %[[ACC]], %[[S]] : f64
func.func @l1(%y: tensor<?x6xf64>) -> f64 {
  %t = unroll.l1 %y lambda(0.25) nonneg : tensor<?x6xf64>
  %v = builtin.unrealized_conversion_cast %t : !unroll.energy to f64
  return %v : f64
}

// -----

// unroll.ista_step: L = ‖A v‖² with v from 100 power iterations on AᵀA
// (A v, then Aᵀ(A v), normalized), the threshold λ/L, the residual X − Y Aᵀ,
// the step Y + (X − Y Aᵀ) A / L and the soft threshold: sign(v)(|v| − λ/L)
// where |v| > λ/L, else 0.
// CHECK-LABEL: func.func @ista_step(
// CHECK-SAME: %[[Y:.*]]: tensor<?x6xf64>, %[[X:.*]]: tensor<?x4xf64>, %[[A:.*]]: tensor<4x6xf64>)
// CHECK: %[[C100:.*]] = arith.constant 100 : index
// CHECK: %[[V:.*]] = scf.for %{{.*}} = %{{.*}} to %[[C100]]
// CHECK: %[[AV:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} :
// CHECK: linalg.matmul_transpose_a ins(%{{.*}}, %[[AV]] :
// CHECK: scf.yield
// CHECK: %[[AVF:.*]] = linalg.matmul ins(%{{.*}}, %[[V]] :
// CHECK: %[[NORM:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]} ins(%[[AVF]] :
// CHECK: %[[L:.*]] = tensor.extract %[[NORM]][] : tensor<f64>
// CHECK: %[[INVL:.*]] = arith.divf %{{.*}}, %[[L]] : f64
// CHECK: %[[THR:.*]] = arith.mulf %{{.*}}, %[[INVL]] : f64
// CHECK: %[[YA:.*]] = linalg.matmul_transpose_b ins(
// CHECK: %[[RES:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[YA]] :
// CHECK: arith.subf
// CHECK: %[[G:.*]] = linalg.matmul ins(%[[RES]], %{{.*}} :
// CHECK: %[[STEP:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[G]] :
// CHECK: arith.mulf %[[INVL]],
// CHECK: linalg.generic {{.*}} ins(%[[STEP]] :
// CHECK: arith.subf %{{.*}}, %[[THR]] : f64
// CHECK: math.absf
// CHECK: arith.cmpf ogt, %{{.*}}, %[[THR]] : f64
// CHECK: arith.select
// CHECK: return %{{.*}} : tensor<?x6xf64>
func.func @ista_step(%y: tensor<?x6xf64>, %x: tensor<?x4xf64>, %a: tensor<4x6xf64>) -> tensor<?x6xf64> {
  %r = unroll.ista_step %y, %x, %a lambda(0.1) : tensor<?x6xf64>, tensor<?x4xf64>, tensor<4x6xf64>
  return %r : tensor<?x6xf64>
}

// -----

// In a loop that A is defined outside of (a descent), the power method and
// L go before the outermost such loop: computed once, not once per step.
// Inside the steps' loops only the step itself remains (its two products).
// CHECK-LABEL: func.func @ista_descent(
// CHECK-SAME: %[[A:.*]]: tensor<4x6xf64>
// CHECK: %[[POWER:.*]] = scf.for {{.*}} -> (tensor<?x?xf64>) {
// CHECK: linalg.matmul_transpose_a
// CHECK: }
// CHECK: %[[AV:.*]] = linalg.matmul ins(%{{.*}}, %[[POWER]] :
// CHECK: scf.for
// CHECK: scf.for
// CHECK-NOT: scf.for
// CHECK-NOT: linalg.matmul_transpose_a
// CHECK: linalg.matmul_transpose_b
// CHECK-NOT: scf.for
// CHECK: return
func.func @ista_descent(%y0: tensor<?x6xf64>, %x: tensor<?x4xf64>, %a: tensor<4x6xf64>) -> tensor<?x6xf64> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%y = %y0) -> (tensor<?x6xf64>) {
    %inner = scf.for %j = %c0 to %c3 step %c1 iter_args(%z = %y) -> (tensor<?x6xf64>) {
      %n = unroll.ista_step %z, %x, %a lambda(0.1) : tensor<?x6xf64>, tensor<?x4xf64>, tensor<4x6xf64>
      scf.yield %n : tensor<?x6xf64>
    }
    scf.yield %inner : tensor<?x6xf64>
  }
  return %r : tensor<?x6xf64>
}

// -----

// A dictionary defined inside the loop keeps the power method in it.
// CHECK-LABEL: func.func @ista_varying_dictionary(
// CHECK: scf.for
// CHECK: tensor.insert
// CHECK: scf.for {{.*}} -> (tensor<?x?xf64>) {
// CHECK: linalg.matmul_transpose_a
func.func @ista_varying_dictionary(%y0: tensor<?x6xf64>, %x: tensor<?x4xf64>, %a0: tensor<4x6xf64>) -> tensor<?x6xf64> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%y = %y0) -> (tensor<?x6xf64>) {
    %s = arith.constant 2.0 : f64
    %a = tensor.insert %s into %a0[%c0, %c0] : tensor<4x6xf64>
    %n = unroll.ista_step %y, %x, %a lambda(0.1) : tensor<?x6xf64>, tensor<?x4xf64>, tensor<4x6xf64>
    scf.yield %n : tensor<?x6xf64>
  }
  return %r : tensor<?x6xf64>
}

// -----

// unroll.ista_step_vjp: the forward recomputed (power iterations as given),
// the cotangent passed where |v| > λ/L, and three cotangents: the codes, the
// measurements and the dictionary (through the residual and through L's
// eigenvector v: the products with v on the way out).
// CHECK-LABEL: func.func @ista_step_vjp(
// CHECK: %[[C20:.*]] = arith.constant 20 : index
// CHECK: %[[V:.*]] = scf.for %{{.*}} = %{{.*}} to %[[C20]]
// CHECK: math.absf
// CHECK: arith.cmpf ogt
// CHECK: %[[AV:.*]] = linalg.matmul ins(%{{.*}}, %[[V]] :
// CHECK: linalg.matmul_transpose_b ins(%[[AV]], %[[V]] :
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x6xf64>, tensor<?x4xf64>, tensor<4x6xf64>
func.func @ista_step_vjp(%y: tensor<?x6xf64>, %x: tensor<?x4xf64>, %a: tensor<4x6xf64>, %dy: tensor<?x6xf64>) -> (tensor<?x6xf64>, tensor<?x4xf64>, tensor<4x6xf64>) {
  %dx, %di, %da = unroll.ista_step_vjp %y, %x, %a, %dy lambda(0.1) {power_iterations = 20 : i64} : tensor<?x6xf64>, tensor<?x4xf64>, tensor<4x6xf64>
  return %dx, %di, %da : tensor<?x6xf64>, tensor<?x4xf64>, tensor<4x6xf64>
}

// -----

// unroll.lista_step with a weight per layer [K, m, n]: layer k's W_k is a
// slice at k, then Y + γ_k (X − Y Aᵀ) W_k and the soft threshold at θ_k
// (read from theta at k).
// CHECK-LABEL: func.func @lista_step(
// CHECK-SAME: %[[W:[^:]*]]: tensor<3x4x6xf64>, %[[G:[^:]*]]: tensor<3xf64>, %[[TH:[^:]*]]: tensor<3xf64>, %[[K:[^:]*]]: index)
// CHECK-DAG: %[[THK:.*]] = tensor.extract %[[TH]][
// CHECK-DAG: %[[WK:.*]] = tensor.extract_slice %[[W]][%{{.*}}, 0, 0] [1, 4, 6] [1, 1, 1] : tensor<3x4x6xf64> to tensor<4x6xf64>
// CHECK: %[[YA:.*]] = linalg.matmul_transpose_b
// CHECK: %[[RES:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[YA]] :
// CHECK: linalg.matmul ins(%[[RES]], %{{.*}} :
// CHECK: math.absf
// CHECK: arith.cmpf ogt, %{{.*}}, %[[THK]] : f64
// CHECK: return %{{.*}} : tensor<?x6xf64>
func.func @lista_step(%y: tensor<?x6xf64>, %x: tensor<?x4xf64>, %a: tensor<4x6xf64>, %w: tensor<3x4x6xf64>, %g: tensor<3xf64>, %th: tensor<3xf64>, %k: index) -> tensor<?x6xf64> {
  %r = unroll.lista_step %y, %x, %a, %w gamma %g theta %th layer %k : tensor<?x6xf64>, tensor<?x4xf64>, tensor<4x6xf64>, tensor<3x4x6xf64>, tensor<3xf64>
  return %r : tensor<?x6xf64>
}

// -----

// unroll.extrapolate Z = Y + μ_k (Y − Y_prev), FISTA's μ_k = (t_k − 1) /
// t_{k+1} from k steps of t ← (1 + √(1 + 4t²)) / 2.
// CHECK-LABEL: func.func @extrapolate(
// CHECK-SAME: %[[Y:.*]]: tensor<?x6xf64>, %[[P:.*]]: tensor<?x6xf64>, %[[K:.*]]: index)
// CHECK: %[[T:.*]] = scf.for %{{.*}} = %{{.*}} to %[[K]] step %{{.*}} iter_args(%[[TI:.*]] = %{{.*}}) -> (f64)
// CHECK: arith.mulf %[[TI]], %[[TI]] : f64
// CHECK: math.sqrt
// CHECK: %[[TM1:.*]] = arith.subf %[[T]], %{{.*}} : f64
// CHECK: %[[MU:.*]] = arith.divf %[[TM1]], %{{.*}} : f64
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} :
// CHECK: ^bb0(%[[YI:.*]]: f64, %[[PI:.*]]: f64, %{{.*}}: f64):
// CHECK: %[[D:.*]] = arith.subf %[[YI]], %[[PI]] : f64
// CHECK: %[[MD:.*]] = arith.mulf %[[MU]], %[[D]] : f64
// CHECK: arith.addf %[[YI]], %[[MD]] : f64
func.func @extrapolate(%y: tensor<?x6xf64>, %p: tensor<?x6xf64>, %k: index) -> tensor<?x6xf64> {
  %r = unroll.extrapolate %y, %p layer %k : tensor<?x6xf64>
  return %r : tensor<?x6xf64>
}

// -----

// unroll.extrapolate_vjp: dY = (1 + μ_k) dZ, dY_prev = −μ_k dZ.
// CHECK-LABEL: func.func @extrapolate_vjp(
// CHECK: scf.for
// CHECK: %[[MU:.*]] = arith.divf
// CHECK: %[[ONEMU:.*]] = arith.addf %{{.*}}, %[[MU]] : f64
// CHECK: linalg.generic
// CHECK: arith.mulf %[[ONEMU]], %{{.*}} : f64
// CHECK: %[[NMU:.*]] = arith.negf %[[MU]] : f64
// CHECK: linalg.generic
// CHECK: arith.mulf %[[NMU]], %{{.*}} : f64
// CHECK: return %{{.*}}, %{{.*}} : tensor<?x6xf64>, tensor<?x6xf64>
func.func @extrapolate_vjp(%dz: tensor<?x6xf64>, %k: index) -> (tensor<?x6xf64>, tensor<?x6xf64>) {
  %dy, %dp = unroll.extrapolate_vjp %dz layer %k : tensor<?x6xf64>
  return %dy, %dp : tensor<?x6xf64>, tensor<?x6xf64>
}
