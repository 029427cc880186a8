// Gradients of energy-derived models: --unroll-differentiate writes the VJP of
// one descent iteration (attention through rho' and rho'', the FFN step, ReLU),
// the lowering runs it backwards through all iterations (@E_vjp). Checked by
// central differences of <C, Y_T> (random cotangent C) for entries of every
// parameter tensor and of the input X, f64: max relative error <= 1e-6.
//
// RUN: unroll-opt %s --lower-to-cpu -o %t.mlir
// RUN: unroll-translate -O1 %t.mlir -o %t.so
// RUN: unroll-energy-check --gradcheck %t.so --energy custom_causal --cases 3 | FileCheck %s
// RUN: unroll-energy-check --gradcheck %t.so --energy transformer --cases 3 | FileCheck %s
// RUN: unroll-energy-check --gradcheck %t.so --energy log2_graph --cases 3 | FileCheck %s
// RUN: unroll-energy-check --gradcheck %t.so --energy log1_residual --cases 3 | FileCheck %s
// RUN: unroll-energy-check --gradcheck %t.so --energy certified_residual --cases 10 | FileCheck %s
// RUN: unroll-energy-check --compare %t.so --energy certified_residual --cases 20 | FileCheck %s --check-prefix=TRACE
// RUN: unroll-opt %s --unroll-derive-steps=assume-unit-norm --lower-to-cpu -o %t.unit.mlir
// RUN: unroll-translate -O1 %t.unit.mlir -o %t.unit.so
// RUN: unroll-energy-check --gradcheck %t.unit.so --energy transformer --cases 3 | FileCheck %s
// The compiled trace of each energy is still the reference's:
// RUN: unroll-energy-check --compare %t.so --energy custom_causal --cases 20 | FileCheck %s --check-prefix=TRACE
//
// CHECK: W_{{[af]}} max |fd - vjp| / max |vjp| =
// CHECK: X{{ +}}max |fd - vjp| / max |vjp| =
// CHECK: gradient check @{{.*}} max relative error {{.*}} (tolerance 1e-06)
// CHECK-NEXT: PASS
// TRACE: PASS

// A user rho, through its derived rho' and rho'': rho(z) = 2 sqrt(1 + z).
unroll.energy @custom_causal {
^bb0(%Y: tensor<?x3xf64>, %X: tensor<?x3xf64>):
  %Wa = unroll.param "W_a" {std = 0.5 : f64} : tensor<3x2xf64>
  %Wf = unroll.param "W_f" {std = 0.3 : f64} : tensor<3x3xf64>
  %p = unroll.pairwise %Y proj %Wa : tensor<3x2xf64> rho(custom) {
  ^bb0(%z: f64):
    %one = arith.constant 1.0 : f64
    %two = arith.constant 2.0 : f64
    %s = arith.addf %z, %one : f64
    %r = math.sqrt %s : f64
    %v = arith.mulf %two, %r : f64
    unroll.yield %v : f64
  } mask(causal) : tensor<?x3xf64>
  %q = unroll.quadratic %Y, %Wf : tensor<?x3xf64>, tensor<3x3xf64>
  %r = unroll.sqnorm %Y : tensor<?x3xf64>
  unroll.minimize %p, %q, %r schedule(aim) iterations(3) alpha(0.4)
}

// P1 eq. (20): reweighted softmax, FFN step, ReLU.
unroll.energy @transformer {
^bb0(%Y: tensor<?x3xf64>, %X: tensor<?x3xf64>):
  %Wa = unroll.param "W_a" {std = 0.5 : f64} : tensor<3x3xf64>
  %Wf = unroll.param "W_f" {std = 0.3 : f64} : tensor<3x3xf64>
  %p = unroll.pairwise %Y proj %Wa : tensor<3x3xf64> rho(neg_exp) : tensor<?x3xf64>
  %q = unroll.quadratic %Y, %Wf : tensor<?x3xf64>, tensor<3x3xf64>
  %r = unroll.sqnorm %Y : tensor<?x3xf64>
  %n = unroll.nonneg %Y : tensor<?x3xf64>
  unroll.minimize %p, %q, %r, %n schedule(proximal_aim) iterations(3) alpha(0.5)
}

unroll.energy @log2_graph {
^bb0(%Y: tensor<?x3xf64>, %X: tensor<?x3xf64>):
  %Wa = unroll.param "W_a" {std = 0.5 : f64} : tensor<3x3xf64>
  %p = unroll.pairwise %Y proj %Wa : tensor<3x3xf64> rho(log_plus_two) mask(graph) {graph = dense<[[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1]]> : tensor<4x4xi8>} : tensor<?x3xf64>
  %r = unroll.sqnorm %Y : tensor<?x3xf64>
  unroll.minimize %p, %r schedule(single) iterations(4)
}

// The residual variant: X enters every FFN step (its gradient too).
unroll.energy @log1_residual {
^bb0(%Y: tensor<?x3xf64>, %X: tensor<?x3xf64>):
  %Wf = unroll.param "W_f" {std = 0.3 : f64} : tensor<3x3xf64>
  %p = unroll.pairwise %Y rho(log_plus_one) mask(causal) : tensor<?x3xf64>
  %q = unroll.quadratic %Y, %Wf : tensor<?x3xf64>, tensor<3x3xf64>
  %r = unroll.sqnorm %Y center %X : tensor<?x3xf64> : tensor<?x3xf64>
  unroll.minimize %p, %q, %r schedule(aim) iterations(3) alpha(0.3)
}

// The certified step with a quadratic term: one gradient step on the
// majorizer of the whole smooth part, Y − (L_w̃ Y S + c (Y − C) + Y Wsym)/L,
// L = 2 max_i deg_i ‖W_a‖_F² + ‖Wsym‖_F + c. Its VJP passes the maximum's
// gradient to the row of largest degree (shared by rows that tie) and
// reaches W_a, W_f (through Y Wsym and L) and X.
unroll.energy @certified_residual {
^bb0(%Y: tensor<?x3xf64>, %X: tensor<?x3xf64>):
  %Wa = unroll.param "W_a" {std = 0.5 : f64} : tensor<3x2xf64>
  %Wf = unroll.param "W_f" {std = 0.3 : f64} : tensor<3x3xf64>
  %p = unroll.pairwise %Y proj %Wa : tensor<3x2xf64> rho(log_plus_two) mask(causal) : tensor<?x3xf64>
  %q = unroll.quadratic %Y, %Wf : tensor<?x3xf64>, tensor<3x3xf64>
  %r = unroll.sqnorm %Y center %X : tensor<?x3xf64> {coeff = 0.5 : f64} : tensor<?x3xf64>
  unroll.minimize %p, %q, %r schedule(aim) iterations(3) attention(certified)
}
