// RUN: unroll-opt %s --convert-unroll-to-linalg --split-input-file | FileCheck %s

// An energy term becomes its value at Y, a scalar of the element type; the
// entry points read it back through an unrealized cast, which the pass
// folds away (no cast and no !unroll.energy is left).
//
// unroll.pairwise Σ_ij m_ij rho(½‖(y_i − y_j) W_a‖²): U = Y W_a, the
// distances from one Gram matrix ½|u_i|² + ½|u_j|² − u_i·u_j, then a full
// reduction of the masked rho (here log(z + 1), causal: j ≤ i).
// CHECK-LABEL: func.func @pairwise(
// CHECK-SAME: %[[Y:.*]]: tensor<?x4xf64>, %[[WA:.*]]: tensor<4x4xf64>) -> f64
// CHECK: %[[U:.*]] = linalg.matmul
// CHECK: %[[G:.*]] = linalg.matmul_transpose_b ins(%[[U]], %[[U]] :
// CHECK: %[[Z:.*]] = linalg.generic {{.*}} ins(%[[G]], %{{.*}}, %{{.*}} :
// CHECK: arith.maximumf
// CHECK: %[[E:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]} ins(%[[Z]] :
// CHECK: math.log
// CHECK: arith.cmpi ule
// CHECK: arith.select
// CHECK: %[[V:.*]] = tensor.extract %[[E]][] : tensor<f64>
// CHECK: return %[[V]] : f64
// CHECK-NOT: unrealized_conversion_cast
func.func @pairwise(%y: tensor<?x4xf64>, %wa: tensor<4x4xf64>) -> f64 {
  %t = unroll.pairwise %y proj %wa : tensor<4x4xf64> rho(log_plus_one) mask(causal) : tensor<?x4xf64>
  %v = builtin.unrealized_conversion_cast %t : !unroll.energy to f64
  return %v : f64
}

// -----

// A user-written rho region is inlined into the reduction's body.
// CHECK-LABEL: func.func @custom_rho(
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]}
// CHECK: ^bb0(%[[Z:.*]]: f64, %{{.*}}: f64):
// CHECK: %[[S:.*]] = arith.addf %[[Z]], %{{.*}} : f64
// CHECK: math.sqrt %[[S]] : f64
// CHECK-NOT: unroll.yield
func.func @custom_rho(%y: tensor<?x4xf64>) -> f64 {
  %t = unroll.pairwise %y rho(custom) {
  ^bb0(%z: f64):
    %one = arith.constant 1.0 : f64
    %s = arith.addf %z, %one : f64
    %r = math.sqrt %s : f64
    unroll.yield %r : f64
  } : tensor<?x4xf64>
  %v = builtin.unrealized_conversion_cast %t : !unroll.energy to f64
  return %v : f64
}

// -----

// unroll.quadratic ½ Tr(Y W Yᵀ) = ½ Σ (Y W) ∘ Y; unroll.sqnorm
// coeff/2 ‖Y − C‖² (here coeff 2: the factor is 1); unroll.nonneg is 0 or
// +inf (0x7FF0000000000000) where an entry is negative.
// CHECK-LABEL: func.func @quadratic_sqnorm_nonneg(
// CHECK-SAME: %[[Y:.*]]: tensor<?x4xf64>, %[[X:.*]]: tensor<?x4xf64>, %[[W:.*]]: tensor<4x4xf64>)
// CHECK: %[[YW:.*]] = linalg.matmul
// CHECK: %[[Q:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]} ins(%[[YW]], %{{.*}} :
// CHECK: %[[QV:.*]] = tensor.extract %[[Q]][]
// CHECK: %[[HALFC:.*]] = arith.constant 1.000000e+00 : f64
// CHECK: %[[R:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]}
// CHECK: arith.subf
// CHECK: arith.mulf %[[HALFC]],
// CHECK: %[[RV:.*]] = tensor.extract %[[R]][]
// CHECK: %[[INF:.*]] = arith.constant 0x7FF0000000000000 : f64
// CHECK: %[[N:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]}
// CHECK: arith.cmpf olt
// CHECK: arith.select %{{.*}}, %[[INF]],
// CHECK: %[[NV:.*]] = tensor.extract %[[N]][]
// CHECK: return %[[QV]], %[[RV]], %[[NV]] : f64, f64, f64
func.func @quadratic_sqnorm_nonneg(%y: tensor<?x4xf64>, %x: tensor<?x4xf64>, %w: tensor<4x4xf64>) -> (f64, f64, f64) {
  %q = unroll.quadratic %y, %w : tensor<?x4xf64>, tensor<4x4xf64>
  %r = unroll.sqnorm %y center %x : tensor<?x4xf64> {coeff = 2.0 : f64} : tensor<?x4xf64>
  %n = unroll.nonneg %y : tensor<?x4xf64>
  %a = builtin.unrealized_conversion_cast %q : !unroll.energy to f64
  %b = builtin.unrealized_conversion_cast %r : !unroll.energy to f64
  %c = builtin.unrealized_conversion_cast %n : !unroll.energy to f64
  return %a, %b, %c : f64, f64, f64
}
