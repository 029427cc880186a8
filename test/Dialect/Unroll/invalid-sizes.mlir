// RUN: unroll-opt %s -split-input-file -verify-diagnostics
//
// Static sizes past 2^40 bytes, or whose size overflows 64 bits, are located
// errors (issue 20, item 1): before, a 2^62 x 2^62 parameter passed the
// verifiers and unroll-run died of SIGSEGV on the library.

unroll.energy @huge_param {
^bb0(%Y: tensor<?x4xf32>, %X: tensor<?x4xf32>):
  // expected-error@+1 {{expected a parameter of at most 2^40 bytes (1 TiB), got 'tensor<4611686018427387904x4611686018427387904xf32>' (its size overflows 64 bits)}}
  %W = unroll.param "W" : tensor<4611686018427387904x4611686018427387904xf32>
  %a = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf32>
  %e = unroll.sqnorm %Y : tensor<?x4xf32>
  unroll.minimize %a, %e schedule(single) iterations(1)
}

// -----

unroll.energy @tib_param {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  // expected-error@+1 {{expected a parameter of at most 2^40 bytes (1 TiB), got 'tensor<131073x1048576xf64>' (1099520016384 bytes)}}
  %W = unroll.param "W" : tensor<131073x1048576xf64>
  %a = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  %e = unroll.sqnorm %Y : tensor<?x4xf64>
  unroll.minimize %a, %e schedule(single) iterations(1)
}

// -----

// Each parameter fits (2^39 bytes and a little more), all together do not.
// expected-error@+1 {{'unroll.energy' op expected parameters of at most 2^40 bytes (1 TiB) in all, got 1099515822080 bytes}}
unroll.energy @params_in_all {
^bb0(%Y: tensor<?x4xf32>, %X: tensor<?x4xf32>):
  %A = unroll.param "A" : tensor<131072x1048576xf32>
  %B = unroll.param "B" : tensor<131073x1048576xf32>
  %a = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf32>
  %e = unroll.sqnorm %Y : tensor<?x4xf32>
  unroll.minimize %a, %e schedule(single) iterations(1)
}

// -----

// expected-error@+1 {{'unroll.energy' op expected tokens Y of at most 2^40 bytes (1 TiB), got 'tensor<9223372036854775807x4xf32>' (its size overflows 64 bits)}}
unroll.energy @huge_tokens {
^bb0(%Y: tensor<9223372036854775807x4xf32>, %X: tensor<9223372036854775807x4xf32>):
  %a = unroll.pairwise %Y rho(neg_exp) : tensor<9223372036854775807x4xf32>
  %e = unroll.sqnorm %Y : tensor<9223372036854775807x4xf32>
  unroll.minimize %a, %e schedule(single) iterations(1)
}

// -----

// expected-error@+1 {{'unroll.model' op expected prompt tokens Z of at most 2^40 bytes (1 TiB), got 'tensor<?x?x4611686018427387904xf32>' (its size overflows 64 bits)}}
unroll.model @huge_prompt {
^bb0(%Z: tensor<?x?x4611686018427387904xf32>):
  unroll.output %Z : tensor<?x?x4611686018427387904xf32>
}
