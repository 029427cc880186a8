// RUN: unroll-opt %s -split-input-file --unroll-differentiate --convert-unroll-to-entry-points | FileCheck %s

// A loop with input injection gets the two fixed-point entry points beside
// @m_forward and @m_loss_grad.
//
// @m_solve(Z, theta, max, tol, preds[B, n], loops[B]): a while loop that
// runs while t < max and some prompt still moves; halted prompts keep their
// iterate (a select on the halted flag), a prompt halts when
// ‖ΔY‖² <= tol² ‖Y‖².
// CHECK-LABEL: func.func @m_solve(
// CHECK-SAME: memref<?x?x?xf64>, %{{.*}}: memref<?xf64>, %[[MAX:.*]]: i64, %[[TOL:.*]]: f64, %{{.*}}: memref<?x?xf64>, %{{.*}}: memref<?xf64>)
// CHECK: %[[TOL2:.*]] = arith.mulf %[[TOL]], %[[TOL]]
// CHECK: scf.while
// CHECK: arith.cmpi ult
// CHECK: arith.cmpf ogt
// CHECK: scf.condition
// CHECK: unroll.layer_norm
// CHECK: arith.select
// CHECK: arith.mulf %[[TOL2]]
// CHECK: arith.cmpf ole
// CHECK: unroll.linear %{{.*}} -> tensor<?x?x1xf64>
// CHECK: tensor.collapse_shape
//
// @m_loss_grad_fixed(Z, ys, theta, b, steps, tol, damping, losses, grad,
// stats): b - 1 iterations without gradient, one more whose activations the
// reverse region reads, then g <- v + λ gJ + (1 - λ) g in a while loop in
// which no parameter gradient is accumulated (the flat gradient is not
// touched between the while and its end), then the parameters' VJP once.
// CHECK-LABEL: func.func @m_loss_grad_fixed(
// CHECK-SAME: %[[STEPS:[a-z0-9]+]]: i64, %[[GTOL:[a-z0-9]+]]: f64, %[[LAMBDA:[a-z0-9]+]]: f64, %{{.*}}: memref<?xf64>, %{{.*}}: memref<?xf64>, %{{.*}}: memref<?xf64>)
// CHECK: scf.for
// CHECK: unroll.gelu
// CHECK: scf.yield
// CHECK: unroll.gelu %
// CHECK: memref.store
// CHECK: scf.while
// CHECK: arith.cmpf ogt, %{{.*}}, %[[GTOL]]
// CHECK: scf.condition
// CHECK: unroll.gelu_vjp
// CHECK-NOT: tensor.insert_slice
// CHECK: unroll.layer_norm_vjp
// CHECK-NOT: tensor.insert_slice
// CHECK: arith.mulf %[[LAMBDA]]
// CHECK: math.sqrt
// CHECK: scf.yield
// CHECK: unroll.gelu_vjp
// CHECK: unroll.linear_vjp
// CHECK: tensor.insert_slice
// CHECK: memref.store
// CHECK: return
// CHECK-LABEL: func.func @m_forward(
unroll.model @m {
^bb0(%Z: tensor<?x?x2xf64>):
  %wi = unroll.param "in.weight" : tensor<4x2xf64>
  %bi = unroll.param "in.bias" init(zeros) : tensor<4xf64>
  %g = unroll.param "ln.weight" init(ones) : tensor<4xf64>
  %b = unroll.param "ln.bias" init(zeros) : tensor<4xf64>
  %w = unroll.param "fc.weight" : tensor<4x4xf64>
  %wb = unroll.param "fc.bias" : tensor<4xf64>
  %wo = unroll.param "out.weight" : tensor<1x4xf64>
  %bo = unroll.param "out.bias" : tensor<1xf64>
  %P = unroll.linear %Z, %wi, %bi : (tensor<?x?x2xf64>, tensor<4x2xf64>, tensor<4xf64>) -> tensor<?x?x4xf64>
  %Y = unroll.loop %P iterations(3) window(1) injection(add) until(tol = 1.0e-4, max = 50) gradient(phantom, steps = 4, damping = 0.5) : tensor<?x?x4xf64> {
  ^bb0(%u: tensor<?x?x4xf64>):
    %a = unroll.layer_norm %u, %g, %b : tensor<?x?x4xf64>, tensor<4xf64>
    %f = unroll.linear %a, %w, %wb : (tensor<?x?x4xf64>, tensor<4x4xf64>, tensor<4xf64>) -> tensor<?x?x4xf64>
    %ge = unroll.gelu %f : tensor<?x?x4xf64>
    unroll.yield %ge : tensor<?x?x4xf64>
  }
  %p = unroll.linear %Y, %wo, %bo : (tensor<?x?x4xf64>, tensor<1x4xf64>, tensor<1xf64>) -> tensor<?x?x1xf64>
  unroll.output %p : tensor<?x?x1xf64>
}

// -----

// Weight tying (no input injection, a body without P): halting, but no
// fixed-point gradient (its fixed point would not depend on the prompt).
// CHECK-LABEL: func.func @tied_solve(
// CHECK-NOT: func.func @tied_loss_grad_fixed(
// CHECK-LABEL: func.func @tied_forward(
unroll.model @tied {
^bb0(%Z: tensor<?x?x2xf64>):
  %w = unroll.param "fc.weight" : tensor<2x2xf64>
  %wb = unroll.param "fc.bias" : tensor<2xf64>
  %wo = unroll.param "out.weight" : tensor<1x2xf64>
  %bo = unroll.param "out.bias" : tensor<1xf64>
  %Y = unroll.loop %Z iterations(3) window(1) injection(none) : tensor<?x?x2xf64> {
  ^bb0(%u: tensor<?x?x2xf64>):
    %f = unroll.linear %u, %w, %wb : (tensor<?x?x2xf64>, tensor<2x2xf64>, tensor<2xf64>) -> tensor<?x?x2xf64>
    %ge = unroll.gelu %f : tensor<?x?x2xf64>
    unroll.yield %ge : tensor<?x?x2xf64>
  }
  %p = unroll.linear %Y, %wo, %bo : (tensor<?x?x2xf64>, tensor<1x2xf64>, tensor<1xf64>) -> tensor<?x?x1xf64>
  unroll.output %p : tensor<?x?x1xf64>
}
