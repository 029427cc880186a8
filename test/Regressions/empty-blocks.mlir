// Empty blocks where the verifiers expect a terminator: a diagnostic each,
// never a read past the end of the block.
// RUN: unroll-opt %s -split-input-file -verify-diagnostics

// expected-error@+1 {{'unroll.energy' op expected the body to end with 'unroll.minimize'}}
unroll.energy @empty_body {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
}

// -----

unroll.energy @empty_rho {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  // expected-error@+1 {{expected the rho region to yield one 'f64'}}
  %p = unroll.pairwise %Y rho(custom) {
  ^bb0(%z: f64):
  } : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
}

// -----

// expected-error@+1 {{'unroll.model' op expected the body to end with 'unroll.output'}}
unroll.model @empty_model {
^bb0(%Z: tensor<?x?x2xf32>):
}

// -----

unroll.model @empty_loop_body {
^bb0(%Z: tensor<?x?x2xf32>):
  // expected-error@+1 {{empty block: expect at least a terminator}}
  %Y = unroll.loop %Z iterations(2) window(1) injection(add) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
  }
  unroll.output %Y : tensor<?x?x2xf32>
}
