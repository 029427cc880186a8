// RUN: unroll-opt %s | FileCheck %s
// RUN: unroll-opt %s | unroll-opt | FileCheck %s
// RUN: unroll-opt %s --mlir-print-op-generic | unroll-opt | FileCheck %s

// Every energy-level op, printed back in its custom form.
// CHECK-LABEL: unroll.energy @all_terms
// CHECK: ^bb0(%[[Y:.*]]: tensor<?x4xf64>, %[[X:.*]]: tensor<?x4xf64>):
// CHECK: %[[WA:.*]] = unroll.param "W_a" {std = 3.000000e-01 : f64} : tensor<4x2xf64>
// CHECK: %[[WF:.*]] = unroll.param "W_f" : tensor<4x4xf64>
// CHECK: %[[P:.*]] = unroll.pairwise %[[Y]] proj %[[WA]] : tensor<4x2xf64> rho(log_plus_two) mask(causal) : tensor<?x4xf64>
// CHECK: %[[Q:.*]] = unroll.quadratic %[[Y]], %[[WF]] : tensor<?x4xf64>, tensor<4x4xf64>
// CHECK: %[[R:.*]] = unroll.sqnorm %[[Y]] center %[[X]] : tensor<?x4xf64> {coeff = 2.000000e+00 : f64} : tensor<?x4xf64>
// CHECK: %[[N:.*]] = unroll.nonneg %[[Y]] : tensor<?x4xf64>
// CHECK: unroll.minimize %[[P]], %[[Q]], %[[R]], %[[N]] schedule(proximal_aim) iterations(3) alpha(5.000000e-01) attention(certified)
unroll.energy @all_terms {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %Wa = unroll.param "W_a" {std = 0.3 : f64} : tensor<4x2xf64>
  %Wf = unroll.param "W_f" : tensor<4x4xf64>
  %p = unroll.pairwise %Y proj %Wa : tensor<4x2xf64> rho(log_plus_two) mask(causal) : tensor<?x4xf64>
  %q = unroll.quadratic %Y, %Wf : tensor<?x4xf64>, tensor<4x4xf64>
  %r = unroll.sqnorm %Y center %X : tensor<?x4xf64> {coeff = 2.0 : f64} : tensor<?x4xf64>
  %n = unroll.nonneg %Y : tensor<?x4xf64>
  unroll.minimize %p, %q, %r, %n schedule(proximal_aim) iterations(3) alpha(0.5) attention(certified)
}

// A user-written ρ region and a graph mask.
// CHECK-LABEL: unroll.energy @custom_graph
// CHECK: unroll.pairwise %{{.*}} rho(custom) {
// CHECK: ^bb0(%[[Z:.*]]: f32):
// CHECK: math.log1p %[[Z]] : f32
// CHECK: unroll.yield %{{.*}} : f32
// CHECK: } mask(graph) {graph = dense<{{\[\[}}1, 0], [1, 1]]> : tensor<2x2xi8>} : tensor<2x3xf32>
// CHECK: unroll.minimize %{{.*}} schedule(single) iterations(1)
unroll.energy @custom_graph {
^bb0(%Y: tensor<2x3xf32>, %X: tensor<2x3xf32>):
  %p = unroll.pairwise %Y rho(custom) {
  ^bb0(%z: f32):
    %l = math.log1p %z : f32
    unroll.yield %l : f32
  } mask(graph) {graph = dense<[[1, 0], [1, 1]]> : tensor<2x2xi8>} : tensor<2x3xf32>
  unroll.minimize %p schedule(single) iterations(1)
}

// Step-level ops, as --unroll-derive-steps writes them.
// CHECK-LABEL: unroll.energy @steps
// CHECK: } steps {
// CHECK: %[[U:.*]] = unroll.mm_step %{{.*}} form(reweighted_softmax) mask(causal) : tensor<?x4xf64>
// CHECK: %[[G:.*]] = unroll.mm_step %[[U]] center %{{.*}} : tensor<?x4xf64> form(general) {
// CHECK: } variant(certified) {coeff = 1.000000e+00 : f64} : tensor<?x4xf64>
// CHECK: %[[V:.*]] = unroll.grad_step %[[G]], %{{.*}} alpha(2.500000e-01) : tensor<?x4xf64>, tensor<4x4xf64>
// CHECK: %[[W:.*]] = unroll.prox_nonneg %[[V]] : tensor<?x4xf64>
// CHECK: unroll.yield %[[W]] : tensor<?x4xf64>
unroll.energy @steps {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %Wf = unroll.param "W_f" : tensor<4x4xf64>
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  %q = unroll.quadratic %Y, %Wf : tensor<?x4xf64>, tensor<4x4xf64>
  %n = unroll.nonneg %Y : tensor<?x4xf64>
  unroll.minimize %p, %q, %n schedule(proximal_aim) iterations(1) alpha(0.25)
} steps {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %Wf = unroll.param "W_f" : tensor<4x4xf64>
  %u = unroll.mm_step %Y form(reweighted_softmax) mask(causal) : tensor<?x4xf64>
  %g = unroll.mm_step %u center %X : tensor<?x4xf64> form(general) {
  ^bb0(%z: f64):
    %e = arith.negf %z : f64
    %w = math.exp %e : f64
    unroll.yield %w : f64
  } variant(certified) {coeff = 1.0 : f64} : tensor<?x4xf64>
  %v = unroll.grad_step %g, %Wf alpha(0.25) : tensor<?x4xf64>, tensor<4x4xf64>
  %w = unroll.prox_nonneg %v : tensor<?x4xf64>
  unroll.yield %w : tensor<?x4xf64>
}
