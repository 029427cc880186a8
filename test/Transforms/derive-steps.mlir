// RUN: unroll-opt %s --unroll-derive-steps --split-input-file | FileCheck %s
// RUN: unroll-opt %s --unroll-derive-steps=assume-unit-norm --split-input-file | FileCheck %s --check-prefix=UNIT

// P1 eq. (20): proximal AIM = MM attention (Thm 3.1, reweighted softmax),
// then the FFN gradient step (eq. 16, coeff from ½‖Y‖²), then ReLU.
// CHECK-LABEL: unroll.energy @transformer
// CHECK: } steps {
// CHECK-NEXT: ^bb0(%[[Y:.*]]: tensor<?x4xf64>, %[[X:.*]]: tensor<?x4xf64>):
// CHECK-NEXT: %[[WA:.*]] = unroll.param "W_a"
// CHECK-NEXT: %[[U:.*]] = unroll.mm_step %[[Y]] proj %[[WA]] : tensor<4x4xf64> form(reweighted_softmax) mask(causal) : tensor<?x4xf64>
// CHECK-NEXT: %[[WF:.*]] = unroll.param "W_f"
// CHECK-NEXT: %[[V:.*]] = unroll.grad_step %[[U]], %[[WF]] alpha(5.000000e-01) {coeff = 1.000000e+00 : f64}
// CHECK-NEXT: %[[R:.*]] = unroll.prox_nonneg %[[V]]
// CHECK-NEXT: unroll.yield %[[R]] : tensor<?x4xf64>
// With rows of constant norm (LayerNorm), β is constant: the canonical softmax.
// UNIT-LABEL: unroll.energy @transformer
// UNIT: unroll.mm_step %{{.*}} form(softmax) mask(causal)
unroll.energy @transformer {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %Wa = unroll.param "W_a" : tensor<4x4xf64>
  %Wf = unroll.param "W_f" : tensor<4x4xf64>
  %p = unroll.pairwise %Y proj %Wa : tensor<4x4xf64> rho(neg_exp) mask(causal) : tensor<?x4xf64>
  %q = unroll.quadratic %Y, %Wf : tensor<?x4xf64>, tensor<4x4xf64>
  %r = unroll.sqnorm %Y : tensor<?x4xf64>
  %n = unroll.nonneg %Y : tensor<?x4xf64>
  unroll.minimize %p, %q, %r, %n schedule(proximal_aim) iterations(12) alpha(0.5)
}

// -----

// ρ(z) = log(z + 2): weights ρ'(z) = 1/(z + 2), derived by differentiating
// the built-in ρ's region. The residual R = ½‖Y − X‖² gives the grad step a
// center (its +αX term).
// CHECK-LABEL: unroll.energy @log2_residual
// CHECK: } steps {
// CHECK-NEXT: ^bb0(%[[Y:.*]]: tensor<?x3xf64>, %[[X:.*]]: tensor<?x3xf64>):
// CHECK: unroll.mm_step %[[Y]] form(general) {
// CHECK-NEXT: ^bb0(%[[Z:.*]]: f64):
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f64
// CHECK-DAG: %[[TWO:.*]] = arith.constant 2.000000e+00 : f64
// CHECK: %[[S:.*]] = arith.addf %[[Z]], %[[TWO]] : f64
// CHECK: %[[W:.*]] = arith.divf %[[ONE]], %[[S]] : f64
// CHECK-NEXT: unroll.yield %[[W]] : f64
// CHECK: unroll.grad_step %{{.*}}, %{{.*}} center %[[X]] : tensor<?x3xf64> alpha(2.500000e-01) {coeff = 1.000000e+00 : f64}
// CHECK-NOT: unroll.prox_nonneg
unroll.energy @log2_residual {
^bb0(%Y: tensor<?x3xf64>, %X: tensor<?x3xf64>):
  %Wf = unroll.param "W_f" : tensor<3x3xf64>
  %p = unroll.pairwise %Y rho(log_plus_two) : tensor<?x3xf64>
  %q = unroll.quadratic %Y, %Wf : tensor<?x3xf64>, tensor<3x3xf64>
  %r = unroll.sqnorm %Y center %X : tensor<?x3xf64> : tensor<?x3xf64>
  unroll.minimize %p, %q, %r schedule(aim) iterations(4) alpha(0.25)
}

// -----

// A user ρ(z) = sqrt(z + 1)·3: ρ'(z) = 3/(2 sqrt(z + 1)), by the chain and
// product rules; primal values the derivative does not need are dropped.
// CHECK-LABEL: unroll.energy @custom
// CHECK: unroll.mm_step %{{.*}} form(general) {
// CHECK-NEXT: ^bb0(%[[Z:.*]]: f64):
// CHECK: %[[S:.*]] = arith.addf %[[Z]], %{{.*}} : f64
// CHECK: %[[R:.*]] = math.sqrt %[[S]] : f64
// CHECK: %[[D:.*]] = arith.mulf %{{.*}}, %[[R]] : f64
// CHECK: %[[Q:.*]] = arith.divf %{{.*}}, %[[D]] : f64
// CHECK: %[[W:.*]] = arith.mulf %[[Q]], %{{.*}} : f64
// CHECK-NEXT: unroll.yield %[[W]] : f64
// CHECK-NOT: arith.mulf %[[R]]
unroll.energy @custom {
^bb0(%Y: tensor<?x2xf64>, %X: tensor<?x2xf64>):
  %p = unroll.pairwise %Y rho(custom) {
  ^bb0(%z: f64):
    %one = arith.constant 1.0 : f64
    %three = arith.constant 3.0 : f64
    %s = arith.addf %z, %one : f64
    %r = math.sqrt %s : f64
    %t = arith.mulf %r, %three : f64
    unroll.yield %t : f64
  } : tensor<?x2xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

// The certified variant keeps R's center and coefficient on the MM step
// (they enter its majorizer's gradient) and always uses explicit weights:
// for ρ = −exp(−z), ρ'(z) = exp(−z).
// CHECK-LABEL: unroll.energy @certified
// CHECK: unroll.mm_step %[[Y:.*]] center %[[X:.*]] : tensor<?x2xf64> form(general) {
// CHECK-NEXT: ^bb0(%[[Z:.*]]: f64):
// CHECK-NEXT: %[[N:.*]] = arith.negf %[[Z]] : f64
// CHECK-NEXT: %[[E:.*]] = math.exp %[[N]] : f64
// CHECK: } variant(certified) {coeff = 2.000000e+00 : f64}
unroll.energy @certified {
^bb0(%Y: tensor<?x2xf64>, %X: tensor<?x2xf64>):
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x2xf64>
  %r = unroll.sqnorm %Y center %X : tensor<?x2xf64> {coeff = 2.0 : f64} : tensor<?x2xf64>
  unroll.minimize %p, %r schedule(single) iterations(1) attention(certified)
}

// -----

// Energies whose steps are already derived are left alone.
// CHECK-LABEL: unroll.energy @already
// CHECK: } steps {
// CHECK-NEXT: ^bb0(%[[Y:.*]]: tensor<?x2xf64>, %{{.*}}: tensor<?x2xf64>):
// CHECK-NEXT: unroll.yield %[[Y]] : tensor<?x2xf64>
unroll.energy @already {
^bb0(%Y: tensor<?x2xf64>, %X: tensor<?x2xf64>):
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x2xf64>
  unroll.minimize %p schedule(single) iterations(1)
} steps {
^bb0(%Y: tensor<?x2xf64>, %X: tensor<?x2xf64>):
  unroll.yield %Y : tensor<?x2xf64>
}
