// Kernel energies (unroll.kernel_pairwise) under every schedule, kernel,
// mask and source, for test/Integration/CPU/kernel-energy.test (f64).

// Conjugate gradients, the linear kernel on the x features of X, the
// query reading the context (three steps stay short of convergence, where
// steps of rounding size would make central differences meaningless).
unroll.energy @cg_context {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %Wq = unroll.param "W_q" {std = 0.5 : f64} : tensor<3x3xf64>
  %Wv = unroll.param "W_v" {std = 0.5 : f64} : tensor<4x2xf64>
  %e = unroll.kernel_pairwise %Y kernel(linear) of %X : tensor<?x4xf64> features [0, 3] query %Wq : tensor<3x3xf64> value %Wv : tensor<4x2xf64> mask(context) : tensor<?x4xf64>
  unroll.minimize %e schedule(cg) iterations(3) eps(1.0e-12)
}

// Exact line search; the kernel exp(-z) of P1's -exp(-z) read from Y
// itself (held during the step), with a separate key projection.
unroll.energy @line_search_rho {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %Wq = unroll.param "W_q" {std = 0.5 : f64} : tensor<4x2xf64>
  %Wk = unroll.param "W_k" {std = 0.5 : f64} : tensor<4x2xf64>
  %Wv = unroll.param "W_v" {std = 0.5 : f64} : tensor<4x2xf64>
  %e = unroll.kernel_pairwise %Y kernel(neg_exp) of %Y : tensor<?x4xf64> query %Wq : tensor<4x2xf64> key %Wk : tensor<4x2xf64> value %Wv : tensor<4x2xf64> : tensor<?x4xf64>
  unroll.minimize %e schedule(line_search) iterations(3)
}

// A learned step size per iteration, two heads, the causal mask, 1/(z + 2),
// each row divided by its number of keys (mean).
unroll.energy @gd_heads {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %Wq = unroll.param "W_q" {std = 0.5 : f64} : tensor<4x4xf64>
  %Wv = unroll.param "W_v" {std = 0.5 : f64} : tensor<4x2xf64>
  %e = unroll.kernel_pairwise %Y kernel(log_plus_two) of %X : tensor<?x4xf64> query %Wq : tensor<4x4xf64> value %Wv : tensor<4x2xf64> heads(2) mask(causal) mean : tensor<?x4xf64>
  unroll.minimize %e schedule(gd) iterations(3) alpha(0.1) learnable per_iteration
}

// Nesterov's momentum with a learned step and momentum per iteration, a
// user's rho (2 sqrt(1 + z)), no mask.
unroll.energy @nesterov_custom {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %Wq = unroll.param "W_q" {std = 0.5 : f64} : tensor<4x2xf64>
  %Wv = unroll.param "W_v" {std = 0.5 : f64} : tensor<4x1xf64>
  %e = unroll.kernel_pairwise %Y kernel(custom) {
  ^bb0(%z: f64):
    %one = arith.constant 1.0 : f64
    %two = arith.constant 2.0 : f64
    %s = arith.addf %z, %one : f64
    %r = math.sqrt %s : f64
    %v = arith.mulf %two, %r : f64
    unroll.yield %v : f64
  } of %X : tensor<?x4xf64> query %Wq : tensor<4x2xf64> value %Wv : tensor<4x1xf64> : tensor<?x4xf64>
  unroll.minimize %e schedule(nesterov) iterations(3) alpha(0.1) momentum(0.5) learnable per_iteration
}
