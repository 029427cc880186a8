// RUN: unroll-opt %s -split-input-file -verify-diagnostics
//
// The fixed-point clauses of unroll.loop (until, gradient): each bad value
// is an error located at the loop.
unroll.model @halt_tol_zero {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<1x2xf32>
  %b = unroll.param "b" : tensor<1xf32>
  // expected-error@+1 {{expected until(tol) > 0, got 0}}
  %Y = unroll.loop %Z iterations(3) window(1) injection(add) until(tol = 0.0, max = 10) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    unroll.yield %u : tensor<?x?x2xf32>
  }
  %p = unroll.linear %Y, %w, %b : (tensor<?x?x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %p : tensor<?x?x1xf32>
}

// -----

unroll.model @halt_tol_negative {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<1x2xf32>
  %b = unroll.param "b" : tensor<1xf32>
  // expected-error@+1 {{expected until(tol) > 0, got -0.001}}
  %Y = unroll.loop %Z iterations(3) window(1) injection(add) until(tol = -1.0e-3, max = 10) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    unroll.yield %u : tensor<?x?x2xf32>
  }
  %p = unroll.linear %Y, %w, %b : (tensor<?x?x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %p : tensor<?x?x1xf32>
}

// -----

unroll.model @halt_max_zero {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<1x2xf32>
  %b = unroll.param "b" : tensor<1xf32>
  // expected-error@+1 {{expected until(max) >= 1, got 0}}
  %Y = unroll.loop %Z iterations(3) window(1) injection(add) until(tol = 1.0e-4, max = 0) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    unroll.yield %u : tensor<?x?x2xf32>
  }
  %p = unroll.linear %Y, %w, %b : (tensor<?x?x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %p : tensor<?x?x1xf32>
}

// -----

unroll.model @implicit_without_injection {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<1x2xf32>
  %b = unroll.param "b" : tensor<1xf32>
  // expected-error@+1 {{gradient(implicit) differentiates a fixed point Y* = M(Y*), which does not depend on the prompt without input injection}}
  %Y = unroll.loop %Z iterations(3) window(1) injection(none) gradient(implicit) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    unroll.yield %u : tensor<?x?x2xf32>
  }
  %p = unroll.linear %Y, %w, %b : (tensor<?x?x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %p : tensor<?x?x1xf32>
}

// -----

unroll.model @jfb_without_injection {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<1x2xf32>
  %b = unroll.param "b" : tensor<1xf32>
  // expected-error@+1 {{gradient(jfb) differentiates a fixed point}}
  %Y = unroll.loop %Z iterations(3) window(1) injection(none) gradient(jfb) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    unroll.yield %u : tensor<?x?x2xf32>
  }
  %p = unroll.linear %Y, %w, %b : (tensor<?x?x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %p : tensor<?x?x1xf32>
}

// -----

unroll.model @implicit_tol_zero {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<1x2xf32>
  %b = unroll.param "b" : tensor<1xf32>
  // expected-error@+1 {{expected gradient(tol) > 0, got 0}}
  %Y = unroll.loop %Z iterations(3) window(1) injection(add) gradient(implicit, tol = 0.0) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    unroll.yield %u : tensor<?x?x2xf32>
  }
  %p = unroll.linear %Y, %w, %b : (tensor<?x?x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %p : tensor<?x?x1xf32>
}

// -----

unroll.model @implicit_max_zero {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<1x2xf32>
  %b = unroll.param "b" : tensor<1xf32>
  // expected-error@+1 {{expected gradient(max) >= 1, got 0}}
  %Y = unroll.loop %Z iterations(3) window(1) injection(add) gradient(implicit, max = 0) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    unroll.yield %u : tensor<?x?x2xf32>
  }
  %p = unroll.linear %Y, %w, %b : (tensor<?x?x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %p : tensor<?x?x1xf32>
}

// -----

unroll.model @phantom_steps_zero {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<1x2xf32>
  %b = unroll.param "b" : tensor<1xf32>
  // expected-error@+1 {{expected gradient(steps) >= 1, got 0}}
  %Y = unroll.loop %Z iterations(3) window(1) injection(add) gradient(phantom, steps = 0) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    unroll.yield %u : tensor<?x?x2xf32>
  }
  %p = unroll.linear %Y, %w, %b : (tensor<?x?x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %p : tensor<?x?x1xf32>
}

// -----

unroll.model @phantom_damping {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<1x2xf32>
  %b = unroll.param "b" : tensor<1xf32>
  // expected-error@+1 {{expected gradient(damping) in (0, 1], got 1.5}}
  %Y = unroll.loop %Z iterations(3) window(1) injection(add) gradient(phantom, steps = 3, damping = 1.5) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    unroll.yield %u : tensor<?x?x2xf32>
  }
  %p = unroll.linear %Y, %w, %b : (tensor<?x?x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %p : tensor<?x?x1xf32>
}

// -----

unroll.model @jfb_steps {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<1x2xf32>
  %b = unroll.param "b" : tensor<1xf32>
  // expected-error@+1 {{gradient(jfb) takes no 'steps'}}
  %Y = unroll.loop %Z iterations(3) window(1) injection(add) gradient(jfb, steps = 2) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    unroll.yield %u : tensor<?x?x2xf32>
  }
  %p = unroll.linear %Y, %w, %b : (tensor<?x?x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %p : tensor<?x?x1xf32>
}

// -----

unroll.model @phantom_tol {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<1x2xf32>
  %b = unroll.param "b" : tensor<1xf32>
  // expected-error@+1 {{gradient(phantom) takes no 'tol'}}
  %Y = unroll.loop %Z iterations(3) window(1) injection(add) gradient(phantom, tol = 1.0e-3) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    unroll.yield %u : tensor<?x?x2xf32>
  }
  %p = unroll.linear %Y, %w, %b : (tensor<?x?x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %p : tensor<?x?x1xf32>
}

// -----

unroll.model @unknown_mode {
^bb0(%Z: tensor<?x?x2xf32>):
  // expected-error@+1 {{expected a gradient mode (bptt, implicit, jfb, phantom), got 'newton'}}
  %Y = unroll.loop %Z iterations(3) window(1) injection(add) gradient(newton) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    unroll.yield %u : tensor<?x?x2xf32>
  }
  unroll.output %Y : tensor<?x?x2xf32>
}

// -----

unroll.model @unknown_key {
^bb0(%Z: tensor<?x?x2xf32>):
  // expected-error@+1 {{expected one of tol, max, steps, damping in gradient(...), got 'rate'}}
  %Y = unroll.loop %Z iterations(3) window(1) injection(add) gradient(implicit, rate = 2.0) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    unroll.yield %u : tensor<?x?x2xf32>
  }
  unroll.output %Y : tensor<?x?x2xf32>
}
