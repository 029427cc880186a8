// RUN: unroll-opt %s -split-input-file -verify-diagnostics

// The kernel's projection must match the features it reads.
unroll.energy @rows {
^bb0(%Y: tensor<?x6xf64>, %X: tensor<?x6xf64>):
  %Wq = unroll.param "W_q" : tensor<6x4xf64>
  %Wv = unroll.param "W_v" : tensor<6x1xf64>
  // expected-error@+1 {{expected query with 5 rows (features [0, 5]) of 'f64', got 'tensor<6x4xf64>'}}
  %e = unroll.kernel_pairwise %Y kernel(linear) of %X : tensor<?x6xf64> features [0, 5] query %Wq : tensor<6x4xf64> value %Wv : tensor<6x1xf64> : tensor<?x6xf64>
  unroll.minimize %e schedule(cg) iterations(2)
}

// -----

unroll.energy @features_range {
^bb0(%Y: tensor<?x6xf64>, %X: tensor<?x6xf64>):
  %Wq = unroll.param "W_q" : tensor<3x4xf64>
  %Wv = unroll.param "W_v" : tensor<6x1xf64>
  // expected-error@+1 {{expected features [lo, hi] with 0 <= lo < hi <= 6 (the source's features), got [4, 7]}}
  %e = unroll.kernel_pairwise %Y kernel(linear) of %X : tensor<?x6xf64> features [4, 7] query %Wq : tensor<3x4xf64> value %Wv : tensor<6x1xf64> : tensor<?x6xf64>
  unroll.minimize %e schedule(cg) iterations(2)
}

// -----

unroll.energy @heads {
^bb0(%Y: tensor<?x6xf64>, %X: tensor<?x6xf64>):
  %Wq = unroll.param "W_q" : tensor<6x4xf64>
  %Wv = unroll.param "W_v" : tensor<6x3xf64>
  // expected-error@+1 {{expected value's 3 columns to split into heads(2) equal blocks}}
  %e = unroll.kernel_pairwise %Y kernel(linear) of %X : tensor<?x6xf64> query %Wq : tensor<6x4xf64> value %Wv : tensor<6x3xf64> heads(2) : tensor<?x6xf64>
  unroll.minimize %e schedule(cg) iterations(2)
}

// -----

unroll.energy @mean_graph {
^bb0(%Y: tensor<?x2xf64>, %X: tensor<?x2xf64>):
  %Wq = unroll.param "W_q" : tensor<2x2xf64>
  %Wv = unroll.param "W_v" : tensor<2x1xf64>
  // expected-error@+1 {{'mean' divides each row by its number of keys, which mask(graph) does not fix}}
  %e = unroll.kernel_pairwise %Y kernel(linear) of %X : tensor<?x2xf64> query %Wq : tensor<2x2xf64> value %Wv : tensor<2x1xf64> mask(graph) mean {graph = dense<[[1, 1], [1, 1]]> : tensor<2x2xi8>} : tensor<?x2xf64>
  unroll.minimize %e schedule(cg) iterations(2)
}

// -----

// mask(context) needs a query: the kernel energies'.
unroll.energy @context_pairwise {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  // expected-error@+1 {{mask(context) is for kernel energies (unroll.kernel_pairwise and its steps), whose query reads the context}}
  %p = unroll.pairwise %Y rho(neg_exp) mask(context) : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

// A user rho must be concave, for a kernel energy too.
unroll.energy @convex {
^bb0(%Y: tensor<?x2xf64>, %X: tensor<?x2xf64>):
  %Wq = unroll.param "W_q" : tensor<2x2xf64>
  %Wv = unroll.param "W_v" : tensor<2x1xf64>
  // expected-error@+1 {{expected rho to be concave on z >= 0, got rho''(0) = 2}}
  %e = unroll.kernel_pairwise %Y kernel(custom) {
  ^bb0(%z: f64):
    %s = arith.mulf %z, %z : f64
    unroll.yield %s : f64
  } of %X : tensor<?x2xf64> query %Wq : tensor<2x2xf64> value %Wv : tensor<2x1xf64> : tensor<?x2xf64>
  unroll.minimize %e schedule(gd) iterations(2) alpha(0.1)
}

// -----

// Exact line searches find their own step lengths.
unroll.energy @cg_alpha {
^bb0(%Y: tensor<?x2xf64>, %X: tensor<?x2xf64>):
  %Wq = unroll.param "W_q" : tensor<2x2xf64>
  %Wv = unroll.param "W_v" : tensor<2x1xf64>
  %e = unroll.kernel_pairwise %Y kernel(linear) of %X : tensor<?x2xf64> query %Wq : tensor<2x2xf64> value %Wv : tensor<2x1xf64> : tensor<?x2xf64>
  // expected-error@+1 {{schedule 'cg' finds each prompt's step length by exact line search: it takes no alpha, momentum, learnable or per_iteration}}
  unroll.minimize %e schedule(cg) iterations(2) alpha(0.1)
}

// -----

unroll.energy @gd_no_alpha {
^bb0(%Y: tensor<?x2xf64>, %X: tensor<?x2xf64>):
  %Wq = unroll.param "W_q" : tensor<2x2xf64>
  %Wv = unroll.param "W_v" : tensor<2x1xf64>
  %e = unroll.kernel_pairwise %Y kernel(linear) of %X : tensor<?x2xf64> query %Wq : tensor<2x2xf64> value %Wv : tensor<2x1xf64> : tensor<?x2xf64>
  // expected-error@+1 {{schedule 'gd' expected a step size alpha(...)}}
  unroll.minimize %e schedule(gd) iterations(2)
}

// -----

unroll.energy @per_iteration_fixed {
^bb0(%Y: tensor<?x2xf64>, %X: tensor<?x2xf64>):
  %Wq = unroll.param "W_q" : tensor<2x2xf64>
  %Wv = unroll.param "W_v" : tensor<2x1xf64>
  %e = unroll.kernel_pairwise %Y kernel(linear) of %X : tensor<?x2xf64> query %Wq : tensor<2x2xf64> value %Wv : tensor<2x1xf64> : tensor<?x2xf64>
  // expected-error@+1 {{'per_iteration' learns one step size per iteration: it needs 'learnable'}}
  unroll.minimize %e schedule(gd) iterations(2) alpha(0.1) per_iteration
}

// -----

unroll.energy @nesterov_momentum {
^bb0(%Y: tensor<?x2xf64>, %X: tensor<?x2xf64>):
  %Wq = unroll.param "W_q" : tensor<2x2xf64>
  %Wv = unroll.param "W_v" : tensor<2x1xf64>
  %e = unroll.kernel_pairwise %Y kernel(linear) of %X : tensor<?x2xf64> query %Wq : tensor<2x2xf64> value %Wv : tensor<2x1xf64> : tensor<?x2xf64>
  // expected-error@+1 {{expected momentum in [0, 1), got 1.5}}
  unroll.minimize %e schedule(nesterov) iterations(2) alpha(0.1) momentum(1.5)
}

// -----

// A kernel term has no step in P1's schedules.
unroll.energy @p1_schedule {
^bb0(%Y: tensor<?x2xf64>, %X: tensor<?x2xf64>):
  %Wq = unroll.param "W_q" : tensor<2x2xf64>
  %Wv = unroll.param "W_v" : tensor<2x1xf64>
  %e = unroll.kernel_pairwise %Y kernel(linear) of %X : tensor<?x2xf64> query %Wq : tensor<2x2xf64> value %Wv : tensor<2x1xf64> : tensor<?x2xf64>
  // expected-error@+1 {{schedule 'single' has no step for 'unroll.kernel_pairwise'; use 'gd', 'line_search', 'cg' or 'nesterov'}}
  unroll.minimize %e schedule(single) iterations(2)
}

// -----

unroll.energy @steps {
^bb0(%y: tensor<?x2xf64>, %x: tensor<?x2xf64>):
  %Wq = unroll.param "W_q" : tensor<2x2xf64>
  %Wv = unroll.param "W_v" : tensor<2x1xf64>
  %e = unroll.kernel_pairwise %y kernel(linear) of %x : tensor<?x2xf64> query %Wq : tensor<2x2xf64> value %Wv : tensor<2x1xf64> : tensor<?x2xf64>
  unroll.minimize %e schedule(cg) iterations(2)
} steps {
^bb0(%y: tensor<?x2xf64>, %x: tensor<?x2xf64>, %k: index, %yp: tensor<?x2xf64>):
  %Wq = unroll.param "W_q" : tensor<2x2xf64>
  %a = unroll.param "alpha" : tensor<3xf64>
  // expected-error@+1 {{expected kernel matrices [2, n, n] of 'f64', got 'tensor<1x?x?xf64>'}}
  %K = unroll.kernel_matrix %x query %Wq : tensor<2x2xf64> kernel(linear) heads(2) : tensor<?x2xf64> -> tensor<1x?x?xf64>
  unroll.yield %y : tensor<?x2xf64>
}

// -----

unroll.energy @ratio {
^bb0(%y: tensor<?x2xf64>, %x: tensor<?x2xf64>):
  %Wq = unroll.param "W_q" : tensor<2x2xf64>
  %Wv = unroll.param "W_v" : tensor<2x1xf64>
  %e = unroll.kernel_pairwise %y kernel(linear) of %x : tensor<?x2xf64> query %Wq : tensor<2x2xf64> value %Wv : tensor<2x1xf64> : tensor<?x2xf64>
  unroll.minimize %e schedule(cg) iterations(2)
} steps {
^bb0(%y: tensor<?x2xf64>, %x: tensor<?x2xf64>, %k: index, %yp: tensor<?x2xf64>):
  %g = unroll.inner %y, %y : tensor<?x2xf64> -> tensor<f64>
  // expected-error@+1 {{converged(...) compares against the scale: it needs 'scale'}}
  %t = unroll.ratio %g, %g converged(%g, %g) : tensor<f64>, tensor<f64> : tensor<f64>
  unroll.yield %y : tensor<?x2xf64>
}

// -----

// A descent whose steps take the previous iterate must be given it.
unroll.energy @cg {
^bb0(%Y: tensor<?x3xf32>, %X: tensor<?x3xf32>):
  %Wq = unroll.param "W_q" : tensor<2x2xf32>
  %Wv = unroll.param "W_v" : tensor<3x1xf32>
  %e = unroll.kernel_pairwise %Y kernel(linear) of %X : tensor<?x3xf32> features [0, 2] query %Wq : tensor<2x2xf32> value %Wv : tensor<3x1xf32> mask(context) : tensor<?x3xf32>
  unroll.minimize %e schedule(cg) iterations(2)
} steps {
^bb0(%y: tensor<?x3xf32>, %x: tensor<?x3xf32>, %k: index, %yp: tensor<?x3xf32>):
  unroll.yield %y : tensor<?x3xf32>
}
unroll.model @m encoding(concat) {
^bb0(%Z: tensor<?x?x3xf32>):
  %Wo = unroll.param "_read_out.weight" : tensor<1x3xf32>
  %bo = unroll.param "_read_out.bias" : tensor<1xf32>
  %Y = unroll.loop %Z iterations(2) window(2) injection(none) : tensor<?x?x3xf32> {
  ^bb0(%u: tensor<?x?x3xf32>, %p: tensor<?x?x3xf32>, %k: index):
    // expected-error@+1 {{@cg's steps take the previous iterate: pass `prev %u_prev` (a loop body's fourth argument)}}
    %n = unroll.descend @cg(%u, %p) iteration %k : tensor<?x?x3xf32>
    unroll.yield %n : tensor<?x?x3xf32>
  }
  %pred = unroll.linear %Y, %Wo, %bo : (tensor<?x?x3xf32>, tensor<1x3xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %pred : tensor<?x?x1xf32>
}

// -----

// Concat tokens hold x and y.
// expected-error@+1 {{'unroll.model' op expected concat tokens (x, y) of at least 2 features, got 'tensor<?x?x1xf32>'}}
unroll.model @tiny encoding(concat) {
^bb0(%Z: tensor<?x?x1xf32>):
  %Wo = unroll.param "_read_out.weight" : tensor<1x1xf32>
  %bo = unroll.param "_read_out.bias" : tensor<1xf32>
  %Y = unroll.loop %Z iterations(1) window(1) injection(add) : tensor<?x?x1xf32> {
  ^bb0(%u: tensor<?x?x1xf32>):
    unroll.yield %u : tensor<?x?x1xf32>
  }
  %pred = unroll.linear %Y, %Wo, %bo : (tensor<?x?x1xf32>, tensor<1x1xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %pred : tensor<?x?x1xf32>
}
