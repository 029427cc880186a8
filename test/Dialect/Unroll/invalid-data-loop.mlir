// RUN: unroll-opt %s -split-input-file -verify-diagnostics
//
// A loop whose state has another type than its input (a learned unrolling:
// codes as the state, measurements as data), and the dense predictions of
// its model.

unroll.energy @sc {
^bb0(%Y: tensor<?x4xf32>, %X: tensor<?x3xf32>):
  %A = unroll.param "A" fixed : tensor<3x4xf32>
  %fit = unroll.lsq %Y, %X, %A : tensor<?x4xf32>, tensor<?x3xf32>, tensor<3x4xf32>
  %l1 = unroll.l1 %Y lambda(0.1) : tensor<?x4xf32>
  unroll.minimize %fit, %l1 schedule(ista) iterations(4)
}

// Injection adds P to the state, so both need one type.
unroll.model @data_add encoding(dense) {
^bb0(%B: tensor<?x?x3xf32>):
  // expected-error@+1 {{expected injection(none) for a state 'tensor<?x?x4xf32>' of another type than its input 'tensor<?x?x3xf32>' (injection(add) needs one type)}}
  %X = unroll.loop %B iterations(4) window(4) injection(add) : tensor<?x?x3xf32> -> tensor<?x?x4xf32> {
  ^bb0(%x: tensor<?x?x4xf32>, %b: tensor<?x?x3xf32>):
    %n = unroll.descend @sc(%x, %b) : tensor<?x?x4xf32>, tensor<?x?x3xf32>
    unroll.yield %n : tensor<?x?x4xf32>
  }
  unroll.output %X : tensor<?x?x4xf32>
}

// -----

unroll.energy @sc {
^bb0(%Y: tensor<?x4xf32>, %X: tensor<?x3xf32>):
  %A = unroll.param "A" fixed : tensor<3x4xf32>
  %fit = unroll.lsq %Y, %X, %A : tensor<?x4xf32>, tensor<?x3xf32>, tensor<3x4xf32>
  %l1 = unroll.l1 %Y lambda(0.1) : tensor<?x4xf32>
  unroll.minimize %fit, %l1 schedule(ista) iterations(4)
}

// A state of another type starts at 0: without P the loop would ignore its
// input.
unroll.model @data_unread encoding(dense) {
^bb0(%B: tensor<?x?x3xf32>):
  // expected-error@+1 {{expected the body to take the input P (its second argument): a state of another type starts at 0 and reads P as data}}
  %X = unroll.loop %B iterations(4) window(4) injection(none) : tensor<?x?x3xf32> -> tensor<?x?x4xf32> {
  ^bb0(%x: tensor<?x?x4xf32>):
    unroll.yield %x : tensor<?x?x4xf32>
  }
  unroll.output %X : tensor<?x?x4xf32>
}

// -----

unroll.model @data_body_types encoding(dense) {
^bb0(%B: tensor<?x?x3xf32>):
  // expected-error@+1 {{expected the body to take the state 'tensor<?x?x4xf32>', optionally then the loop's input P 'tensor<?x?x3xf32>', the iteration index (index) and the previous iteration's input u_prev}}
  %X = unroll.loop %B iterations(4) window(4) injection(none) : tensor<?x?x3xf32> -> tensor<?x?x4xf32> {
  ^bb0(%x: tensor<?x?x4xf32>, %b: tensor<?x?x4xf32>):
    unroll.yield %x : tensor<?x?x4xf32>
  }
  unroll.output %X : tensor<?x?x4xf32>
}

// -----

unroll.model @data_dtype encoding(dense) {
^bb0(%B: tensor<?x?x3xf32>):
  // expected-error@+1 {{expected a state with the input's element type, batch and token sizes, got 'tensor<?x?x4xf64>' for 'tensor<?x?x3xf32>'}}
  %X = unroll.loop %B iterations(4) window(4) injection(none) : tensor<?x?x3xf32> -> tensor<?x?x4xf64> {
  ^bb0(%x: tensor<?x?x4xf64>, %b: tensor<?x?x3xf32>):
    unroll.yield %x : tensor<?x?x4xf64>
  }
  unroll.output %X : tensor<?x?x4xf64>
}

// -----

unroll.model @data_until encoding(dense) {
^bb0(%B: tensor<?x?x3xf32>):
  // expected-error@+1 {{expected no until(...) and gradient(bptt) for a loop that reads its input as data (its fixed-point entry points take one type)}}
  %X = unroll.loop %B iterations(4) window(1) injection(none) until(tol = 1.0e-4, max = 50) : tensor<?x?x3xf32> -> tensor<?x?x4xf32> {
  ^bb0(%x: tensor<?x?x4xf32>, %b: tensor<?x?x3xf32>):
    unroll.yield %x : tensor<?x?x4xf32>
  }
  unroll.output %X : tensor<?x?x4xf32>
}

// -----

unroll.energy @sc {
^bb0(%Y: tensor<?x4xf32>, %X: tensor<?x3xf32>):
  %A = unroll.param "A" fixed : tensor<3x4xf32>
  %fit = unroll.lsq %Y, %X, %A : tensor<?x4xf32>, tensor<?x3xf32>, tensor<3x4xf32>
  %l1 = unroll.l1 %Y lambda(0.1) : tensor<?x4xf32>
  unroll.minimize %fit, %l1 schedule(ista) iterations(4)
}

// The data a loop descends with has the energy input's features.
unroll.model @descend_data_width encoding(dense) {
^bb0(%B: tensor<?x?x2xf32>):
  %X = unroll.loop %B iterations(4) window(4) injection(none) : tensor<?x?x2xf32> -> tensor<?x?x4xf32> {
  ^bb0(%x: tensor<?x?x4xf32>, %b: tensor<?x?x2xf32>):
    // expected-error@+1 {{'unroll.descend' op expected X to be Y's 'tensor<?x?x4xf32>' or the batch of @sc's input 'tensor<?x3xf32>' (with Y's batch and token sizes), got 'tensor<?x?x2xf32>'}}
    %n = unroll.descend @sc(%x, %b) : tensor<?x?x4xf32>, tensor<?x?x2xf32>
    unroll.yield %n : tensor<?x?x4xf32>
  }
  unroll.output %X : tensor<?x?x4xf32>
}

// -----

// Predictions of several features are targets only with encoding(dense).
// expected-error@+1 {{expected predictions [B, n, 1], got 'tensor<?x?x3xf32>'}}
unroll.model @wide_predictions {
^bb0(%Z: tensor<?x?x3xf32>):
  %Y = unroll.loop %Z iterations(2) window(1) injection(add) : tensor<?x?x3xf32> {
  ^bb0(%u: tensor<?x?x3xf32>):
    unroll.yield %u : tensor<?x?x3xf32>
  }
  unroll.output %Y : tensor<?x?x3xf32>
}
