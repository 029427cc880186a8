// RUN: unroll-opt %s -split-input-file -verify-diagnostics

// A user ρ that is convex, not concave: ρ(z) = z².
unroll.energy @convex_rho {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  // expected-error@+1 {{expected rho to be concave on z >= 0, got rho''(0) = 2}}
  %p = unroll.pairwise %Y rho(custom) {
  ^bb0(%z: f64):
    %s = arith.mulf %z, %z : f64
    unroll.yield %s : f64
  } : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

// A user ρ that decreases: ρ(z) = −z.
unroll.energy @decreasing_rho {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  // expected-error@+1 {{expected rho to be non-decreasing on z >= 0, got rho'(0) = -1}}
  %p = unroll.pairwise %Y rho(custom) {
  ^bb0(%z: f64):
    %s = arith.negf %z : f64
    unroll.yield %s : f64
  } : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

// Concave on most of z ≥ 0 but not everywhere: ρ(z) = min(z, 1) + 0.001·z²
// bends up past z = 1; the dense sampling finds it.
unroll.energy @late_convexity {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  // expected-error@+1 {{expected rho to be concave on z >= 0, got rho''(0) = 0.002}}
  %p = unroll.pairwise %Y rho(custom) {
  ^bb0(%z: f64):
    %one = arith.constant 1.0 : f64
    %c = arith.constant 0.001 : f64
    %m = arith.minimumf %z, %one : f64
    %q = arith.mulf %z, %z : f64
    %cq = arith.mulf %c, %q : f64
    %r = arith.addf %m, %cq : f64
    unroll.yield %r : f64
  } : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

// ρ(z) = log(z) is −∞ at z = 0.
unroll.energy @log_at_zero {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  // expected-error@+1 {{expected rho to be finite on z >= 0, got rho(0) = -inf}}
  %p = unroll.pairwise %Y rho(custom) {
  ^bb0(%z: f64):
    %l = math.log %z : f64
    unroll.yield %l : f64
  } : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

// Ops outside the supported arith/math subset cannot be differentiated.
unroll.energy @unsupported_op {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %p = unroll.pairwise %Y rho(custom) {
  ^bb0(%z: f64):
    // expected-error@+1 {{is not supported in a rho region}}
    %s = math.sin %z : f64
    unroll.yield %s : f64
  } : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

// The region must take and yield the token element type.
unroll.energy @region_type {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  // expected-error@+1 {{expected the rho region to take one 'f64' argument z}}
  %p = unroll.pairwise %Y rho(custom) {
  ^bb0(%z: f32):
    unroll.yield %z : f32
  } : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

unroll.energy @custom_without_region {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  // expected-error@+1 {{rho(custom) requires a region computing rho(z)}}
  %p = unroll.pairwise %Y rho(custom) : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

unroll.energy @region_without_custom {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  // expected-error@+1 {{a rho region requires rho(custom)}}
  %p = unroll.pairwise %Y rho(neg_exp) {
  ^bb0(%z: f64):
    unroll.yield %z : f64
  } : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

// R must be convex.
unroll.energy @nonconvex_r {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  // expected-error@+1 {{expected a convex regularizer: coeff must be positive and finite, got -1}}
  %r = unroll.sqnorm %Y {coeff = -1.0 : f64} : tensor<?x4xf64>
  unroll.minimize %p, %r schedule(single) iterations(1)
}

// -----

unroll.energy @proj_rows {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %W = unroll.param "W_a" : tensor<3x4xf64>
  // expected-error@+1 {{expected proj with 4 rows to match the tokens' feature dimension, got 'tensor<3x4xf64>'}}
  %p = unroll.pairwise %Y proj %W : tensor<3x4xf64> rho(neg_exp) : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

unroll.energy @proj_dynamic_d {
^bb0(%Y: tensor<?x?xf64>, %X: tensor<?x?xf64>):
  %W = unroll.param "W_a" : tensor<4x4xf64>
  // expected-error@+1 {{expected a static feature dimension d when proj is given, got 'tensor<?x?xf64>'}}
  %p = unroll.pairwise %Y proj %W : tensor<4x4xf64> rho(neg_exp) : tensor<?x?xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

unroll.energy @proj_elem {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %W = unroll.param "W_a" : tensor<4x4xf32>
  // expected-error@+1 {{expected proj element type 'f64', got 'f32'}}
  %p = unroll.pairwise %Y proj %W : tensor<4x4xf32> rho(neg_exp) : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

unroll.energy @quadratic_not_square {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %W = unroll.param "W_f" : tensor<4x2xf64>
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  // expected-error@+1 {{expected a square weight, got 'tensor<4x2xf64>'}}
  %q = unroll.quadratic %Y, %W : tensor<?x4xf64>, tensor<4x2xf64>
  unroll.minimize %p, %q schedule(aim) iterations(1) alpha(0.5)
}

// -----

unroll.energy @graph_missing {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  // expected-error@+1 {{mask(graph) requires a 'graph' attribute}}
  %p = unroll.pairwise %Y rho(neg_exp) mask(graph) : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

unroll.energy @graph_not_binary {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  // expected-error@+1 {{expected graph entries to be 0 or 1}}
  %p = unroll.pairwise %Y rho(neg_exp) mask(graph) {graph = dense<[[1, 2], [0, 1]]> : tensor<2x2xi8>} : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

unroll.energy @graph_size {
^bb0(%Y: tensor<3x4xf64>, %X: tensor<3x4xf64>):
  // expected-error@+1 {{expected a graph over 3 tokens, got 'tensor<2x2xi8>'}}
  %p = unroll.pairwise %Y rho(neg_exp) mask(graph) {graph = dense<[[1, 0], [0, 1]]> : tensor<2x2xi8>} : tensor<3x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

unroll.energy @graph_not_square {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  // expected-error@+1 {{expected a square graph matrix, got 'tensor<2x3xi8>'}}
  %p = unroll.pairwise %Y rho(neg_exp) mask(graph) {graph = dense<1> : tensor<2x3xi8>} : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

unroll.energy @graph_without_mask {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  // (Generic form: in the custom form a '{' after rho(...) opens a rho region.)
  // expected-error@+1 {{'graph' attribute requires mask(graph)}}
  %p = "unroll.pairwise"(%Y) <{graph = dense<1> : tensor<2x2xi8>, rho = 0 : i32}> ({}) : (tensor<?x4xf64>) -> !unroll.energy
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

unroll.energy @center_type {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %C = unroll.param "C" : tensor<2x4xf64>
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  // expected-error@+1 {{expected center of type 'tensor<?x4xf64>', got 'tensor<2x4xf64>'}}
  %r = unroll.sqnorm %Y center %C : tensor<2x4xf64> : tensor<?x4xf64>
  unroll.minimize %p, %r schedule(single) iterations(1)
}

// -----

unroll.energy @two_pairwise {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  %q = unroll.pairwise %Y rho(log_plus_one) : tensor<?x4xf64>
  // expected-error@+1 {{expected exactly one 'unroll.pairwise' term, got 2}}
  unroll.minimize %p, %q schedule(single) iterations(1)
}

// -----

unroll.energy @single_with_quadratic {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %W = unroll.param "W_f" : tensor<4x4xf64>
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  %q = unroll.quadratic %Y, %W : tensor<?x4xf64>, tensor<4x4xf64>
  // expected-error@+1 {{schedule 'single' has no step for 'unroll.quadratic'; use 'aim' or 'proximal_aim'}}
  unroll.minimize %p, %q schedule(single) iterations(1)
}

// -----

unroll.energy @aim_without_quadratic {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  // expected-error@+1 {{schedule 'aim' expected an 'unroll.quadratic' term}}
  unroll.minimize %p schedule(aim) iterations(1) alpha(0.5)
}

// -----

unroll.energy @aim_with_nonneg {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %W = unroll.param "W_f" : tensor<4x4xf64>
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  %q = unroll.quadratic %Y, %W : tensor<?x4xf64>, tensor<4x4xf64>
  %n = unroll.nonneg %Y : tensor<?x4xf64>
  // expected-error@+1 {{schedule 'aim' has no step for 'unroll.nonneg'; use 'proximal_aim'}}
  unroll.minimize %p, %q, %n schedule(aim) iterations(1) alpha(0.5)
}

// -----

unroll.energy @proximal_without_nonneg {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %W = unroll.param "W_f" : tensor<4x4xf64>
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  %q = unroll.quadratic %Y, %W : tensor<?x4xf64>, tensor<4x4xf64>
  // expected-error@+1 {{schedule 'proximal_aim' expected an 'unroll.nonneg' term}}
  unroll.minimize %p, %q schedule(proximal_aim) iterations(1) alpha(0.5)
}

// -----

unroll.energy @aim_without_alpha {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %W = unroll.param "W_f" : tensor<4x4xf64>
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  %q = unroll.quadratic %Y, %W : tensor<?x4xf64>, tensor<4x4xf64>
  // expected-error@+1 {{schedule 'aim' expected a step size alpha(...)}}
  unroll.minimize %p, %q schedule(aim) iterations(1)
}

// -----

unroll.energy @alpha_range {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %W = unroll.param "W_f" : tensor<4x4xf64>
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  %q = unroll.quadratic %Y, %W : tensor<?x4xf64>, tensor<4x4xf64>
  // expected-error@+1 {{expected step size alpha in (0, 1], got 1.5}}
  unroll.minimize %p, %q schedule(aim) iterations(1) alpha(1.5)
}

// -----

unroll.energy @single_with_alpha {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  // expected-error@+1 {{schedule 'single' takes no alpha}}
  unroll.minimize %p schedule(single) iterations(1) alpha(0.5)
}

// -----

unroll.energy @zero_iterations {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  // expected-error@+1 {{'unroll.minimize' op attribute 'iterations' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 1}}
  unroll.minimize %p schedule(single) iterations(0)
}

// -----

unroll.energy @rank1 {
^bb0(%Y: tensor<4xf64>, %X: tensor<4xf64>):
  // expected-error@+1 {{'unroll.nonneg' op operand #0 must be token matrix [n, d] (an energy's Y) or token batch [B, n, d] (a loop body's) of 32-bit float or 64-bit float values, but got 'tensor<4xf64>'}}
  %p = unroll.nonneg %Y : tensor<4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

// expected-error@+1 {{'unroll.energy' op expected X of type 'tensor<?x4xf64>', got 'tensor<?x3xf64>'}}
unroll.energy @x_type {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x3xf64>):
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

// expected-error@+1 {{'unroll.energy' op expected the body to take (Y, X), got 1 arguments}}
unroll.energy @one_arg {
^bb0(%Y: tensor<?x4xf64>):
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

// expected-error@+1 {{'unroll.energy' op expected the body to end with 'unroll.minimize'}}
unroll.energy @no_minimize {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
}

// -----

unroll.energy @term_of_x {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  // expected-error@+1 {{expected an energy term of the energy's variable Y (the body's first argument)}}
  %p = unroll.pairwise %X rho(neg_exp) : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

unroll.energy @param_types {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %W = unroll.param "W" : tensor<4x4xf64>
  // expected-error@+1 {{parameter 'W' has type 'tensor<4x2xf64>' here but 'tensor<4x4xf64>' elsewhere}}
  %V = unroll.param "W" : tensor<4x2xf64>
  %p = unroll.pairwise %Y proj %V : tensor<4x2xf64> rho(neg_exp) : tensor<?x4xf64>
  %q = unroll.quadratic %Y, %W : tensor<?x4xf64>, tensor<4x4xf64>
  unroll.minimize %p, %q schedule(aim) iterations(1) alpha(0.5)
}

// -----

unroll.energy @param_dynamic {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  // expected-error@+1 {{expected a static shape, got 'tensor<?x4xf64>'}}
  %W = unroll.param "W" : tensor<?x4xf64>
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

unroll.energy @param_name {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  // expected-error@+1 {{expected a non-empty parameter name}}
  %W = unroll.param "" : tensor<4x4xf64>
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

unroll.energy @param_std {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  // expected-error@+1 {{expected a finite std >= 0, got -1}}
  %W = unroll.param "W" {std = -1.0 : f64} : tensor<4x4xf64>
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

// Step-level verifiers.
unroll.energy @certified_softmax {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
} steps {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  // expected-error@+1 {{variant(certified) requires form(general)}}
  %u = unroll.mm_step %Y form(reweighted_softmax) variant(certified) : tensor<?x4xf64>
  unroll.yield %u : tensor<?x4xf64>
}

// -----

unroll.energy @general_without_region {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
} steps {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  // expected-error@+1 {{form(general) requires a region computing rho'(z)}}
  %u = unroll.mm_step %Y form(general) : tensor<?x4xf64>
  unroll.yield %u : tensor<?x4xf64>
}

// -----

unroll.energy @grad_step_alpha {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
} steps {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %W = unroll.param "W_f" : tensor<4x4xf64>
  // expected-error@+1 {{expected step size alpha in (0, 1], got 0}}
  %u = unroll.grad_step %Y, %W alpha(0.0) : tensor<?x4xf64>, tensor<4x4xf64>
  unroll.yield %u : tensor<?x4xf64>
}

// -----

// expected-error@+1 {{'unroll.energy' op expected the steps region to yield the next Y of type 'tensor<?x4xf64>'}}
unroll.energy @steps_yield {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
} steps {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  unroll.yield
}

// -----

// Unknown ops and malformed syntax get located parser errors.
unroll.energy @unknown {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  // expected-error@+1 {{custom op 'unroll.frobnicate' is unknown}}
  %p = unroll.frobnicate %Y : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

unroll.energy @bad_rho {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  // expected-error@+1 {{expected string or keyword containing one of the following enum values for attribute 'rho' [neg_exp, log_plus_two, log_plus_one, custom]}}
  %p = unroll.pairwise %Y rho(cosine) : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

// A learnable step size needs an initial alpha.
unroll.energy @learnable_without_alpha {
^bb0(%Y: tensor<?x2xf64>, %X: tensor<?x2xf64>):
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x2xf64>
  // expected-error@+1 {{'unroll.minimize' op 'learnable' needs a step size alpha(...) to start from}}
  unroll.minimize %p schedule(single) iterations(1) learnable
}

// -----

// The certified schedule has no step size to learn or to set.
unroll.energy @certified_learnable {
^bb0(%Y: tensor<?x2xf64>, %X: tensor<?x2xf64>):
  %Wf = unroll.param "W_f" : tensor<2x2xf64>
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x2xf64>
  %q = unroll.quadratic %Y, %Wf : tensor<?x2xf64>, tensor<2x2xf64>
  // expected-error@+1 {{'unroll.minimize' op attention(certified) takes one step of size 1/L (a bound of the whole energy's curvature) on all its terms: remove alpha(...)}}
  unroll.minimize %p, %q schedule(aim) iterations(1) alpha(0.5) attention(certified)
}

// -----

unroll.energy @constant_without_value {
^bb0(%Y: tensor<?x2xf64>, %X: tensor<?x2xf64>):
  // expected-error@+1 {{'unroll.param' op init(constant) requires a 'value' attribute}}
  %a = unroll.param "alpha" init(constant) : tensor<1xf64>
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x2xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

unroll.energy @value_without_constant {
^bb0(%Y: tensor<?x2xf64>, %X: tensor<?x2xf64>):
  // expected-error@+1 {{'unroll.param' op a 'value' attribute requires init(constant)}}
  %a = unroll.param "alpha" {value = 0.5 : f64} : tensor<1xf64>
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x2xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

unroll.energy @step_shape {
^bb0(%Y: tensor<?x2xf64>, %X: tensor<?x2xf64>):
  %Wf = unroll.param "W_f" : tensor<2x2xf64>
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x2xf64>
  %q = unroll.quadratic %Y, %Wf : tensor<?x2xf64>, tensor<2x2xf64>
  unroll.minimize %p, %q schedule(aim) iterations(1) alpha(0.5)
} steps {
^bb0(%Y: tensor<?x2xf64>, %X: tensor<?x2xf64>):
  %Wf = unroll.param "W_f" : tensor<2x2xf64>
  %a = unroll.param "alpha" init(constant) {value = 0.5 : f64} : tensor<2xf64>
  // expected-error@+1 {{'unroll.grad_step' op expected a step size of type 'tensor<1xf64>', got 'tensor<2xf64>'}}
  %v = unroll.grad_step %Y, %Wf step %a : tensor<2xf64> alpha(0.5) : tensor<?x2xf64>, tensor<2x2xf64>
  unroll.yield %v : tensor<?x2xf64>
}

// -----

unroll.energy @quad_paper {
^bb0(%Y: tensor<?x2xf64>, %X: tensor<?x2xf64>):
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x2xf64>
  unroll.minimize %p schedule(single) iterations(1)
} steps {
^bb0(%Y: tensor<?x2xf64>, %X: tensor<?x2xf64>):
  %Wf = unroll.param "W_f" : tensor<2x2xf64>
  // expected-error@+1 {{'unroll.mm_step' op a 'quad' weight requires variant(certified)}}
  %u = unroll.mm_step %Y quad %Wf : tensor<2x2xf64> form(reweighted_softmax) : tensor<?x2xf64>
  unroll.yield %u : tensor<?x2xf64>
}
