// The f32 path matches the double-precision reference within f32 tolerance.
// RUN: unroll-opt %s --lower-to-cpu -o %t.mlir
// RUN: unroll-translate %t.mlir -o %t.so
// RUN: unroll-energy-check --compare %t.so --cases 50 | FileCheck %s
// RUN: unroll-run %t.so --info | FileCheck %s --check-prefix=INFO
// CHECK: (tolerance 1e-04)
// CHECK-NEXT: PASS
// INFO: "element_type": "f32"
unroll.energy @f32_transformer {
^bb0(%Y: tensor<?x6xf32>, %X: tensor<?x6xf32>):
  %Wa = unroll.param "W_a" {std = 0.3 : f64} : tensor<6x6xf32>
  %Wf = unroll.param "W_f" {std = 0.1 : f64} : tensor<6x6xf32>
  %p = unroll.pairwise %Y proj %Wa : tensor<6x6xf32> rho(neg_exp) mask(causal) : tensor<?x6xf32>
  %q = unroll.quadratic %Y, %Wf : tensor<?x6xf32>, tensor<6x6xf32>
  %r = unroll.sqnorm %Y : tensor<?x6xf32>
  %n = unroll.nonneg %Y : tensor<?x6xf32>
  unroll.minimize %p, %q, %r, %n schedule(proximal_aim) iterations(8) alpha(0.5)
}
