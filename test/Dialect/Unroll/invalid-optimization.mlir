// RUN: unroll-opt %s -split-input-file -verify-diagnostics
//
// Sparse-coding and Hopfield energies: located errors for a dictionary that
// does not map the codes to the measurements, lambda < 0, beta <= 0, and a
// schedule without the terms it steps on.

unroll.energy @a_wrong_codes {
^bb0(%Y: tensor<?x12xf64>, %X: tensor<?x8xf64>):
  %A = unroll.param "A" : tensor<8x10xf64>
  // expected-error@+1 {{expected A [m, n] with n = the codes' size (Y is 'tensor<?x12xf64>'), got A 'tensor<8x10xf64>'}}
  %f = unroll.lsq %Y, %X, %A : tensor<?x12xf64>, tensor<?x8xf64>, tensor<8x10xf64>
  %r = unroll.l1 %Y lambda(0.1) : tensor<?x12xf64>
  unroll.minimize %f, %r schedule(ista) iterations(4)
}

// -----

unroll.energy @a_wrong_measurements {
^bb0(%Y: tensor<?x12xf64>, %X: tensor<?x8xf64>):
  %A = unroll.param "A" : tensor<9x12xf64>
  // expected-error@+1 {{expected A [m, n] with m = the measurements' size (X is 'tensor<?x8xf64>'), got A 'tensor<9x12xf64>'}}
  %f = unroll.lsq %Y, %X, %A : tensor<?x12xf64>, tensor<?x8xf64>, tensor<9x12xf64>
  %r = unroll.l1 %Y lambda(0.1) : tensor<?x12xf64>
  unroll.minimize %f, %r schedule(ista) iterations(4)
}

// -----

unroll.energy @rows_differ {
^bb0(%Y: tensor<5x12xf64>, %X: tensor<4x8xf64>):
  %A = unroll.param "A" : tensor<8x12xf64>
  // expected-error@+1 {{expected one measurement per code: Y 'tensor<5x12xf64>' and X 'tensor<4x8xf64>' differ in dimension 0}}
  %f = unroll.lsq %Y, %X, %A : tensor<5x12xf64>, tensor<4x8xf64>, tensor<8x12xf64>
  %r = unroll.l1 %Y lambda(0.1) : tensor<5x12xf64>
  unroll.minimize %f, %r schedule(ista) iterations(4)
}

// -----

unroll.energy @negative_lambda {
^bb0(%Y: tensor<?x12xf64>, %X: tensor<?x8xf64>):
  %A = unroll.param "A" : tensor<8x12xf64>
  %f = unroll.lsq %Y, %X, %A : tensor<?x12xf64>, tensor<?x8xf64>, tensor<8x12xf64>
  // expected-error@+1 {{expected a finite lambda >= 0, got -0.1}}
  %r = unroll.l1 %Y lambda(-0.1) : tensor<?x12xf64>
  unroll.minimize %f, %r schedule(ista) iterations(4)
}

// -----

unroll.energy @ista_without_l1 {
^bb0(%Y: tensor<?x12xf64>, %X: tensor<?x8xf64>):
  %A = unroll.param "A" : tensor<8x12xf64>
  %f = unroll.lsq %Y, %X, %A : tensor<?x12xf64>, tensor<?x8xf64>, tensor<8x12xf64>
  // expected-error@+1 {{schedule 'ista' expected exactly one 'unroll.lsq' and one 'unroll.l1' term, got 1 terms}}
  unroll.minimize %f schedule(ista) iterations(4)
}

// -----

unroll.energy @ista_with_alpha {
^bb0(%Y: tensor<?x12xf64>, %X: tensor<?x8xf64>):
  %A = unroll.param "A" : tensor<8x12xf64>
  %f = unroll.lsq %Y, %X, %A : tensor<?x12xf64>, tensor<?x8xf64>, tensor<8x12xf64>
  %r = unroll.l1 %Y lambda(0.1) : tensor<?x12xf64>
  // expected-error@+1 {{schedule 'ista' takes no alpha, learnable or attention: its step size follows from the energy}}
  unroll.minimize %f, %r schedule(ista) iterations(4) alpha(0.5)
}

// -----

unroll.energy @lsq_in_a_transformer {
^bb0(%Y: tensor<?x12xf64>, %X: tensor<?x8xf64>):
  %A = unroll.param "A" : tensor<8x12xf64>
  %f = unroll.lsq %Y, %X, %A : tensor<?x12xf64>, tensor<?x8xf64>, tensor<8x12xf64>
  %a = unroll.pairwise %Y rho(neg_exp) : tensor<?x12xf64>
  // expected-error@+1 {{schedule 'single' has no step for 'unroll.lsq'; use 'ista' (lsq + l1) or 'cccp' (lse + sqnorm)}}
  unroll.minimize %a, %f schedule(single) iterations(4)
}

// -----

unroll.energy @zero_beta {
^bb0(%Y: tensor<?x6xf64>, %X: tensor<?x6xf64>):
  // expected-error@+1 {{expected a finite beta > 0, got 0}}
  %e = unroll.lse %Y, %X beta(0.0) : tensor<?x6xf64>, tensor<?x6xf64>
  %r = unroll.sqnorm %Y : tensor<?x6xf64>
  unroll.minimize %e, %r schedule(cccp) iterations(4)
}

// -----

unroll.energy @pattern_size {
^bb0(%Y: tensor<?x6xf64>, %X: tensor<?x5xf64>):
  // expected-error@+1 {{expected stored patterns (rows of X) of the queries' static size 6, got X 'tensor<?x5xf64>'}}
  %e = unroll.lse %Y, %X beta(1.0) : tensor<?x6xf64>, tensor<?x5xf64>
  %r = unroll.sqnorm %Y : tensor<?x6xf64>
  unroll.minimize %e, %r schedule(cccp) iterations(4)
}

// -----

unroll.energy @cccp_with_center {
^bb0(%Y: tensor<?x6xf64>, %X: tensor<?x6xf64>):
  %e = unroll.lse %Y, %X beta(1.0) : tensor<?x6xf64>, tensor<?x6xf64>
  // expected-error@+1 {{schedule 'cccp' needs the regularizer without a center}}
  %r = unroll.sqnorm %Y center %X : tensor<?x6xf64> : tensor<?x6xf64>
  unroll.minimize %e, %r schedule(cccp) iterations(4)
}

// -----

// expected-error@+1 {{expected X to be a 2-d tensor of 'f64' (Y's element type), got 'tensor<?x8xf32>'}}
unroll.energy @input_type {
^bb0(%Y: tensor<?x12xf64>, %X: tensor<?x8xf32>):
  %a = unroll.pairwise %Y rho(neg_exp) : tensor<?x12xf64>
  unroll.minimize %a schedule(single) iterations(4)
}
