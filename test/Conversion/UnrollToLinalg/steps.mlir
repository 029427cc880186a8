// RUN: unroll-opt %s --convert-unroll-to-linalg --split-input-file | FileCheck %s

// unroll.mm_step, form(reweighted_softmax) (P1 Thm 3.1): U = Y W_a, logits
// u_i·u_j − ½|u_j|², masked to −inf for j > i, max-subtracted softmax,
// rows normalized (a row of zeros would keep its token), then A Y.
// CHECK-LABEL: func.func @mm_step_softmax(
// CHECK-SAME: %[[Y:.*]]: tensor<?x4xf64>, %[[WA:.*]]: tensor<4x4xf64>)
// CHECK: %[[U:.*]] = linalg.matmul
// CHECK: %[[G:.*]] = linalg.matmul_transpose_b ins(%[[U]], %[[U]] :
// CHECK: %[[SQ:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[U]] :
// CHECK: %[[L:.*]] = linalg.generic {{.*}} ins(%[[G]], %[[SQ]] :
// CHECK: %[[M:.*]] = linalg.generic {{.*}} ins(%[[L]] :
// CHECK: arith.cmpi ule
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: arith.divf
// CHECK: %[[NEXT:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<?x?xf64>, tensor<?x?xf64>)
// CHECK: %[[R:.*]] = tensor.cast %[[NEXT]] : tensor<?x?xf64> to tensor<?x4xf64>
// CHECK: return %[[R]]
func.func @mm_step_softmax(%y: tensor<?x4xf64>, %wa: tensor<4x4xf64>) -> tensor<?x4xf64> {
  %r = unroll.mm_step %y proj %wa : tensor<4x4xf64> form(reweighted_softmax) mask(causal) : tensor<?x4xf64>
  return %r : tensor<?x4xf64>
}

// -----

// form(general): the weights are the step's rho'(z) region (here
// 1/(z + 1)) inlined on the pair distances, then row-normalized.
// CHECK-LABEL: func.func @mm_step_general(
// CHECK: linalg.matmul_transpose_b
// CHECK: arith.maximumf
// CHECK: %[[W:.*]] = linalg.generic
// CHECK-NEXT: ^bb0(%[[Z:[a-z0-9_]+]]: f64, %{{[a-z0-9_]+}}: f64):
// CHECK-NEXT: arith.constant 1.000000e+00 : f64
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[Z]], %{{.*}} : f64
// CHECK: arith.divf %{{.*}}, %[[S]] : f64
// CHECK: linalg.generic {{.*}} ins(%[[W]] :
// CHECK: linalg.matmul
// CHECK-NOT: unroll.yield
func.func @mm_step_general(%y: tensor<?x4xf64>) -> tensor<?x4xf64> {
  %r = unroll.mm_step %y form(general) {
  ^bb0(%z: f64):
    %one = arith.constant 1.0 : f64
    %s = arith.addf %z, %one : f64
    %w = arith.divf %one, %s : f64
    unroll.yield %w : f64
  } : tensor<?x4xf64>
  return %r : tensor<?x4xf64>
}

// -----

// variant(certified): a gradient step on the majorizer with step 1/L,
// L = 2 max_i deg_i ‖W_a‖_F² + c: degrees of w + wᵀ, their maximum (a full
// reduction), S = W_a W_aᵀ, then Y − (deg∘YS − w̃ YS + c(Y − C)) / L.
// CHECK-LABEL: func.func @mm_step_certified(
// CHECK: math.exp
// CHECK: %[[DEG:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]}
// CHECK: %[[MAX:.*]] = linalg.generic {{.*}}iterator_types = ["reduction"]} ins(%[[DEG]] :
// CHECK: arith.maximumf
// CHECK: %[[S:.*]] = linalg.matmul_transpose_b
// CHECK: %[[YS:.*]] = linalg.matmul ins(%{{.*}}, %[[S]] :
// CHECK: %[[WYS:.*]] = linalg.matmul ins(%{{.*}}, %[[YS]] :
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[YS]], %[[WYS]], %[[DEG]], %{{.*}} :
// CHECK: arith.divf
func.func @mm_step_certified(%y: tensor<?x4xf64>, %wa: tensor<4x4xf64>, %x: tensor<?x4xf64>) -> tensor<?x4xf64> {
  %r = unroll.mm_step %y proj %wa : tensor<4x4xf64> center %x : tensor<?x4xf64> form(general) {
  ^bb0(%z: f64):
    %n = arith.negf %z : f64
    %e = math.exp %n : f64
    unroll.yield %e : f64
  } variant(certified) {coeff = 1.0 : f64} : tensor<?x4xf64>
  return %r : tensor<?x4xf64>
}

// -----

// unroll.grad_step: Y W_s + αc C with W_s = (1 − αc) I − α (W + Wᵀ)/2
// (here 1 − αc = 0.5 on the diagonal, α/2 = 0.25).
// CHECK-LABEL: func.func @grad_step(
// CHECK-DAG: %[[DIAG:.*]] = arith.constant 5.000000e-01 : f64
// CHECK-DAG: %[[HA:.*]] = arith.constant 2.500000e-01 : f64
// CHECK: %[[WS:.*]] = linalg.generic
// CHECK: arith.cmpi eq
// CHECK: %[[YW:.*]] = linalg.matmul ins(%{{.*}}, %[[WS]] :
// CHECK: linalg.generic {{.*}} ins(%[[YW]], %{{.*}} :
func.func @grad_step(%y: tensor<?x4xf64>, %w: tensor<4x4xf64>, %x: tensor<?x4xf64>) -> tensor<?x4xf64> {
  %r = unroll.grad_step %y, %w center %x : tensor<?x4xf64> alpha(0.5) {coeff = 1.0 : f64} : tensor<?x4xf64>, tensor<4x4xf64>
  return %r : tensor<?x4xf64>
}

// unroll.prox_nonneg is ReLU.
// CHECK-LABEL: func.func @prox_nonneg(
// CHECK: linalg.generic
// CHECK: arith.maximumf %{{.*}}, %{{.*}} : f64
func.func @prox_nonneg(%y: tensor<?x4xf64>) -> tensor<?x4xf64> {
  %r = unroll.prox_nonneg %y : tensor<?x4xf64>
  return %r : tensor<?x4xf64>
}

// -----

// unroll.mm_step_vjp (reweighted softmax): recomputes A, then dY = Aᵀ dY' +
// dU W_aᵀ and dW_a = Yᵀ dU, with dU from dA = dY' Yᵀ through the softmax.
// CHECK-LABEL: func.func @mm_step_vjp(
// CHECK: math.exp
// CHECK: %[[ATDY:.*]] = linalg.matmul_transpose_a
// CHECK: %[[DA:.*]] = linalg.matmul_transpose_b
// CHECK: arith.negf
// CHECK: %[[DYU:.*]] = linalg.matmul_transpose_b
// CHECK: %[[DX:.*]] = linalg.generic {{.*}} ins(%[[ATDY]], %[[DYU]] :
// CHECK: %[[DWA:.*]] = linalg.matmul_transpose_a
// CHECK: return
func.func @mm_step_vjp(%y: tensor<?x4xf64>, %wa: tensor<4x4xf64>, %dy: tensor<?x4xf64>) -> (tensor<?x4xf64>, tensor<4x4xf64>) {
  %dx, %dwa = unroll.mm_step_vjp %y proj %wa : tensor<4x4xf64>, %dy form(reweighted_softmax) mask(causal) : tensor<?x4xf64> -> tensor<4x4xf64>
  return %dx, %dwa : tensor<?x4xf64>, tensor<4x4xf64>
}

// unroll.grad_step_vjp: dY = dY' W_s, dW = −α/2 (Yᵀ dY' + (Yᵀ dY')ᵀ),
// dC = αc dY'.
// CHECK-LABEL: func.func @grad_step_vjp(
// CHECK: %[[DX:.*]] = linalg.matmul
// CHECK: %[[DWS:.*]] = linalg.matmul_transpose_a
// CHECK: %[[NHA:.*]] = arith.constant -2.500000e-01 : f64
// CHECK: linalg.generic {{.*}} ins(%[[DWS]], %[[DWS]] :
// CHECK: arith.mulf %[[NHA]],
func.func @grad_step_vjp(%y: tensor<?x4xf64>, %w: tensor<4x4xf64>, %dy: tensor<?x4xf64>) -> (tensor<?x4xf64>, tensor<4x4xf64>, tensor<?x4xf64>) {
  %dx, %dw, %dc = unroll.grad_step_vjp %y, %w, %dy alpha(0.5) {coeff = 1.0 : f64} : tensor<?x4xf64>, tensor<4x4xf64> -> tensor<4x4xf64>
  return %dx, %dw, %dc : tensor<?x4xf64>, tensor<4x4xf64>, tensor<?x4xf64>
}

// unroll.prox_nonneg_vjp passes dY' where y > 0.
// CHECK-LABEL: func.func @prox_nonneg_vjp(
// CHECK: arith.cmpf ogt
// CHECK: arith.select
func.func @prox_nonneg_vjp(%y: tensor<?x4xf64>, %dy: tensor<?x4xf64>) -> tensor<?x4xf64> {
  %d = unroll.prox_nonneg_vjp %y, %dy : tensor<?x4xf64>
  return %d : tensor<?x4xf64>
}
