// RUN: unroll-opt %s --unroll-derive-steps --unroll-inline-descent | FileCheck %s
// RUN: not unroll-opt %s --unroll-inline-descent 2>&1 | FileCheck %s --check-prefix=UNDERIVED

// unroll.descend @e(Y, X) steps(2) becomes two chained copies of @e's
// derived steps on the token batch: X is the loop's input P, the center of
// the gradient step; the parameters are re-declared by name in the body
// (W_a, W_f and the learnable step size), and the loop records @e.
// CHECK-LABEL: unroll.model @m
// CHECK: unroll.loop %{{.*}} iterations(3) window(2) injection(none) energy(@e) : tensor<?x?x4xf64> {
// CHECK: ^bb0(%[[Y:.*]]: tensor<?x?x4xf64>, %[[P:.*]]: tensor<?x?x4xf64>):
// CHECK: %[[WA:.*]] = unroll.param "W_a"
// CHECK: %[[M1:.*]] = unroll.mm_step %[[Y]] proj %[[WA]] : tensor<4x4xf64> form(reweighted_softmax) mask(causal) : tensor<?x?x4xf64>
// CHECK: %[[A1:.*]] = unroll.param "alpha" init(constant) {value = 5.000000e-01 : f64} : tensor<1xf64>
// CHECK: %[[G1:.*]] = unroll.grad_step %[[M1]], %{{.*}} center %[[P]] : tensor<?x?x4xf64> step %[[A1]] : tensor<1xf64>
// CHECK: %[[R1:.*]] = unroll.prox_nonneg %[[G1]] : tensor<?x?x4xf64>
// CHECK: %[[M2:.*]] = unroll.mm_step %[[R1]] proj
// CHECK: %[[G2:.*]] = unroll.grad_step %[[M2]], %{{.*}} center %[[P]]
// CHECK: %[[R2:.*]] = unroll.prox_nonneg %[[G2]] : tensor<?x?x4xf64>
// CHECK: unroll.yield %[[R2]] : tensor<?x?x4xf64>
// CHECK-NOT: unroll.descend

// UNDERIVED: error: 'unroll.descend' op @e has no derived steps; run --unroll-derive-steps first
unroll.energy @e {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %Wa = unroll.param "W_a" : tensor<4x4xf64>
  %Wf = unroll.param "W_f" : tensor<4x4xf64>
  %p = unroll.pairwise %Y proj %Wa : tensor<4x4xf64> rho(neg_exp) mask(causal) : tensor<?x4xf64>
  %q = unroll.quadratic %Y, %Wf : tensor<?x4xf64>, tensor<4x4xf64>
  %r = unroll.sqnorm %Y center %X : tensor<?x4xf64> : tensor<?x4xf64>
  %n = unroll.nonneg %Y : tensor<?x4xf64>
  unroll.minimize %p, %q, %r, %n schedule(proximal_aim) iterations(1) alpha(0.5) learnable
}
unroll.model @m {
^bb0(%Z: tensor<?x?x2xf64>):
  %wi = unroll.param "_read_in.weight" : tensor<4x2xf64>
  %bi = unroll.param "_read_in.bias" : tensor<4xf64>
  %wo = unroll.param "_read_out.weight" : tensor<1x4xf64>
  %bo = unroll.param "_read_out.bias" : tensor<1xf64>
  %P = unroll.linear %Z, %wi, %bi : (tensor<?x?x2xf64>, tensor<4x2xf64>, tensor<4xf64>) -> tensor<?x?x4xf64>
  %Y = unroll.loop %P iterations(3) window(2) injection(none) : tensor<?x?x4xf64> {
  ^bb0(%y: tensor<?x?x4xf64>, %p: tensor<?x?x4xf64>):
    %d = unroll.descend @e(%y, %p) steps(2) : tensor<?x?x4xf64>
    unroll.yield %d : tensor<?x?x4xf64>
  }
  %pred = unroll.linear %Y, %wo, %bo : (tensor<?x?x4xf64>, tensor<1x4xf64>, tensor<1xf64>) -> tensor<?x?x1xf64>
  unroll.output %pred : tensor<?x?x1xf64>
}
