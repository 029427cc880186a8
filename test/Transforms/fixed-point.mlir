// RUN: unroll-opt %s | FileCheck %s --check-prefix=ROUND
// RUN: unroll-opt %s --unroll-fixed-point="gradient=phantom:7:0.25 until=1e-3:40" | FileCheck %s --check-prefix=SET
// RUN: unroll-opt %s --unroll-fixed-point="gradient=implicit:1e-6:80" | FileCheck %s --check-prefix=IMPLICIT
// RUN: unroll-opt %s --unroll-fixed-point="gradient=bptt until=none" | FileCheck %s --check-prefix=DROP
// RUN: not unroll-opt %s --unroll-fixed-point="gradient=newton" 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not unroll-opt %s --unroll-fixed-point="gradient=jfb:3" 2>&1 | FileCheck %s --check-prefix=PARAMS
// RUN: not unroll-opt %s --unroll-fixed-point="until=1e-3" 2>&1 | FileCheck %s --check-prefix=UNTIL
// RUN: not unroll-opt %s --unroll-fixed-point="until=0:10" 2>&1 | FileCheck %s --check-prefix=HALT0
// RUN: unroll-opt %s --unroll-fixed-point="gradient=implicit" 2>&1 >/dev/null | FileCheck %s --check-prefix=TIED

// The clauses print as they parse.
// ROUND-LABEL: unroll.model @looped
// ROUND: unroll.loop %{{.*}} iterations(4) window(1) injection(add) until(tol = 1.000000e-04, max = 500) gradient(implicit, tol = 1.000000e-05, max = 60)
// ROUND-LABEL: unroll.model @tied
// ROUND: unroll.loop %{{.*}} iterations(4) window(2) injection(none) : tensor

// unroll-fixed-point overrides what the IR chose, on every loop it can.
// SET-LABEL: unroll.model @looped
// SET: injection(add) until(tol = 1.000000e-03, max = 40) gradient(phantom, steps = 7, damping = 2.500000e-01)
// SET-LABEL: unroll.model @tied
// SET: injection(none) until(tol = 1.000000e-03, max = 40) : tensor
// IMPLICIT-LABEL: unroll.model @looped
// IMPLICIT: injection(add) until(tol = 1.000000e-04, max = 500) gradient(implicit, tol = {{1.000000e-06|9.9999999999999995E-7}}, max = 80)
// DROP-LABEL: unroll.model @looped
// DROP: injection(add) gradient(bptt) : tensor
// DROP-LABEL: unroll.model @tied
// DROP: injection(none) gradient(bptt) : tensor
// MODE: error: unroll-fixed-point: gradient=newton: unknown mode 'newton' (expected bptt, implicit[:TOL[:MAX]], jfb or phantom[:K[:TAU]])
// PARAMS: error: unroll-fixed-point: gradient=jfb:3: jfb takes no parameters (expected bptt, implicit[:TOL[:MAX]], jfb or phantom[:K[:TAU]])
// UNTIL: error: unroll-fixed-point: expected until=TOL:MAX (e.g. 1e-4:500) or until=none, got '1e-3'
// HALT0: fixed-point.mlir:[[@LINE+10]]:8: error: 'unroll.loop' op expected until(tol) > 0, got 0
// The weight-tied loop below keeps its gradient: a located warning.
// TIED: fixed-point.mlir:[[@LINE+23]]:8: warning: keeps gradient(bptt): gradient=implicit needs input injection

unroll.model @looped {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<2x2xf32>
  %b = unroll.param "b" : tensor<2xf32>
  %wo = unroll.param "wo" : tensor<1x2xf32>
  %bo = unroll.param "bo" : tensor<1xf32>
  %Y = unroll.loop %Z iterations(4) window(1) injection(add) until(tol = 1.0e-4, max = 500) gradient(implicit, tol = 1.0e-5, max = 60) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    %f = unroll.linear %u, %w, %b : (tensor<?x?x2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> tensor<?x?x2xf32>
    unroll.yield %f : tensor<?x?x2xf32>
  }
  %p = unroll.linear %Y, %wo, %bo : (tensor<?x?x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %p : tensor<?x?x1xf32>
}

unroll.model @tied {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w2" : tensor<2x2xf32>
  %b = unroll.param "b2" : tensor<2xf32>
  %wo = unroll.param "wo2" : tensor<1x2xf32>
  %bo = unroll.param "bo2" : tensor<1xf32>
  %Y = unroll.loop %Z iterations(4) window(2) injection(none) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    %f = unroll.linear %u, %w, %b : (tensor<?x?x2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> tensor<?x?x2xf32>
    unroll.yield %f : tensor<?x?x2xf32>
  }
  %p = unroll.linear %Y, %wo, %bo : (tensor<?x?x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %p : tensor<?x?x1xf32>
}
