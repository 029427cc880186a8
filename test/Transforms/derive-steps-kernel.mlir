// RUN: unroll-opt %s --unroll-derive-steps --split-input-file | FileCheck %s

// Conjugate gradients on a kernel energy: the gradient G = A Y, the last
// step's direction D̂ = (Y − Y_prev)/‖·‖, β = ⟨G, A D̂⟩/⟨D̂, A D̂⟩, the new
// direction (G − β D̂)/‖·‖ and its exact step length, each ratio gated by
// the curvature scale tr A and the convergence test ‖G‖² vs ‖Y‖².
// CHECK-LABEL: unroll.energy @cg
// CHECK: } steps {
// CHECK-NEXT: ^bb0(%[[Y:.*]]: tensor<?x4xf32>, %[[X:.*]]: tensor<?x4xf32>, %[[K:.*]]: index, %[[YP:.*]]: tensor<?x4xf32>):
// CHECK-DAG: %[[WQ:.*]] = unroll.param "W_q"
// CHECK-DAG: %[[WV:.*]] = unroll.param "W_v"
// CHECK: %[[KM:.*]] = unroll.kernel_matrix %[[X]] features [0, 3] query %[[WQ]] : tensor<3x3xf32> kernel(linear) mask(context) : tensor<?x4xf32> -> tensor<1x?x?xf32>
// CHECK: %[[G:.*]] = unroll.kernel_apply %[[KM]], %[[Y]] value %[[WV]]
// CHECK: %[[D:.*]] = unroll.axpy %[[YP]] plus %[[Y]] : tensor<?x4xf32> {scale = -1.000000e+00 : f64}
// CHECK: %[[DH:.*]] = unroll.normalize %[[D]] context
// CHECK: %[[AD:.*]] = unroll.kernel_apply %[[KM]], %[[DH]] value %[[WV]]
// CHECK: %[[TR:.*]] = unroll.kernel_trace %[[KM]] value %[[WV]] : tensor<4x1xf32> context
// CHECK: %[[BETA:.*]] = unroll.ratio %{{.*}}, %{{.*}} scale %[[TR]] : tensor<f32> converged(%{{.*}}, %{{.*}}) : tensor<f32>, tensor<f32> : tensor<f32>
// CHECK: %[[P:.*]] = unroll.axpy %[[DH]] times %[[BETA]] : tensor<f32> plus %[[G]] : tensor<?x4xf32> {scale = -1.000000e+00 : f64}
// CHECK: %[[PH:.*]] = unroll.normalize %[[P]] context
// CHECK: %[[T:.*]] = unroll.ratio
// CHECK: %[[NEXT:.*]] = unroll.axpy %[[PH]] times %[[T]] : tensor<f32> plus %[[Y]] : tensor<?x4xf32> {scale = -1.000000e+00 : f64}
// CHECK: unroll.yield %[[NEXT]] : tensor<?x4xf32>
unroll.energy @cg {
^bb0(%Y: tensor<?x4xf32>, %X: tensor<?x4xf32>):
  %Wq = unroll.param "W_q" : tensor<3x3xf32>
  %Wv = unroll.param "W_v" : tensor<4x1xf32>
  %e = unroll.kernel_pairwise %Y kernel(linear) of %X : tensor<?x4xf32> features [0, 3] query %Wq : tensor<3x3xf32> value %Wv : tensor<4x1xf32> mask(context) : tensor<?x4xf32>
  unroll.minimize %e schedule(cg) iterations(3)
}

// -----

// Gradient descent with one learned step size per iteration: the parameter
// "alpha" [iterations] read at the steps' iteration index.
// CHECK-LABEL: unroll.energy @gd
// CHECK: ^bb0(%[[Y:.*]]: tensor<?x4xf32>, %[[X:.*]]: tensor<?x4xf32>, %[[K:.*]]: index):
// CHECK: %[[KM:.*]] = unroll.kernel_matrix %[[Y]] query %{{.*}} : tensor<4x2xf32> kernel(log_plus_two) {
// CHECK: } heads(2) mask(causal) mean : tensor<?x4xf32> -> tensor<2x?x?xf32>
// CHECK: %[[G:.*]] = unroll.kernel_apply %[[KM]], %[[Y]]
// CHECK: %[[A:.*]] = unroll.param "alpha" init(constant) {value = 5.000000e-02 : f64} : tensor<3xf32>
// CHECK: %[[AK:.*]] = unroll.pick %[[A]][%[[K]]] : tensor<3xf32> -> tensor<1xf32>
// CHECK: unroll.axpy %[[G]] times %[[AK]] : tensor<1xf32> plus %[[Y]] : tensor<?x4xf32> {scale = -1.000000e+00 : f64}
unroll.energy @gd {
^bb0(%Y: tensor<?x4xf32>, %X: tensor<?x4xf32>):
  %Wq = unroll.param "W_q" : tensor<4x2xf32>
  %Wv = unroll.param "W_v" : tensor<4x2xf32>
  %e = unroll.kernel_pairwise %Y kernel(log_plus_two) of %Y : tensor<?x4xf32> query %Wq : tensor<4x2xf32> value %Wv : tensor<4x2xf32> heads(2) mask(causal) mean : tensor<?x4xf32>
  unroll.minimize %e schedule(gd) iterations(3) alpha(0.05) learnable per_iteration
}

// -----

// Nesterov: Z = Y + μ (Y − Y_prev), then a gradient step from Z; fixed
// step and momentum are constants.
// CHECK-LABEL: unroll.energy @nesterov
// CHECK: %[[D:.*]] = unroll.axpy %[[YP:.*]] plus %[[Y:.*]] : tensor<?x4xf32> {scale = -1.000000e+00 : f64}
// CHECK: %[[Z:.*]] = unroll.axpy %[[D]] plus %[[Y]] : tensor<?x4xf32> {scale = 5.000000e-01 : f64}
// CHECK: %[[G:.*]] = unroll.kernel_apply %{{.*}}, %[[Z]]
// CHECK: unroll.axpy %[[G]] plus %[[Z]] : tensor<?x4xf32> {scale = -1.000000e-01 : f64}
unroll.energy @nesterov {
^bb0(%Y: tensor<?x4xf32>, %X: tensor<?x4xf32>):
  %Wq = unroll.param "W_q" : tensor<4x4xf32>
  %Wv = unroll.param "W_v" : tensor<4x1xf32>
  %e = unroll.kernel_pairwise %Y kernel(linear) of %X : tensor<?x4xf32> query %Wq : tensor<4x4xf32> value %Wv : tensor<4x1xf32> : tensor<?x4xf32>
  unroll.minimize %e schedule(nesterov) iterations(3) alpha(0.1) momentum(0.5)
}

// -----

// Exact line search along the gradient: no previous iterate, no index.
// CHECK-LABEL: unroll.energy @line_search
// CHECK: ^bb0(%{{.*}}: tensor<?x4xf32>, %{{.*}}: tensor<?x4xf32>):
// CHECK: %[[GH:.*]] = unroll.normalize
// CHECK: unroll.ratio
// CHECK: unroll.axpy %[[GH]] times
unroll.energy @line_search {
^bb0(%Y: tensor<?x4xf32>, %X: tensor<?x4xf32>):
  %Wq = unroll.param "W_q" : tensor<4x4xf32>
  %Wv = unroll.param "W_v" : tensor<4x1xf32>
  %e = unroll.kernel_pairwise %Y kernel(linear) of %X : tensor<?x4xf32> query %Wq : tensor<4x4xf32> value %Wv : tensor<4x1xf32> : tensor<?x4xf32>
  unroll.minimize %e schedule(line_search) iterations(3)
}
