// The descent study can fail: a gradient step of size 1 on a quadratic with
// large weights overshoots, so E increases, and --expect-no-increase must
// report FAIL and exit non-zero (the compiled step still matches the
// reference, so the failure is the energy's, not a mismatch).
// RUN: unroll-opt %s --lower-to-cpu -o %t.mlir
// RUN: unroll-translate %t.mlir -o %t.so
// RUN: not unroll-energy-check --study %t.so --cases 200 --expect-no-increase | FileCheck %s
// CHECK: steps that increased E: {{[1-9][0-9]*}} (beyond 1e-12 relative: {{[1-9][0-9]*}};
// CHECK: mismatches 0
// CHECK: FAIL
unroll.energy @overshoot {
^bb0(%Y: tensor<?x3xf64>, %X: tensor<?x3xf64>):
  %Wf = unroll.param "W_f" {std = 3.0 : f64} : tensor<3x3xf64>
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x3xf64>
  %q = unroll.quadratic %Y, %Wf : tensor<?x3xf64>, tensor<3x3xf64>
  %r = unroll.sqnorm %Y : tensor<?x3xf64>
  unroll.minimize %p, %q, %r schedule(aim) iterations(1) alpha(1.0)
}
