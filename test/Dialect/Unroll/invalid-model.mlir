// RUN: unroll-opt %s -split-input-file -verify-diagnostics

// The loss window T cannot exceed the loop count b.
unroll.model @t_gt_b {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<1x2xf32>
  %b = unroll.param "b" : tensor<1xf32>
  // expected-error@+1 {{expected window T <= iterations b, got T = 5 > b = 3}}
  %Y = unroll.loop %Z iterations(3) window(5) injection(add) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    unroll.yield %u : tensor<?x?x2xf32>
  }
  %p = unroll.linear %Y, %w, %b : (tensor<?x?x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %p : tensor<?x?x1xf32>
}

// -----

unroll.model @zero_loops {
^bb0(%Z: tensor<?x?x2xf32>):
  // expected-error@+1 {{'unroll.loop' op attribute 'iterations' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 1}}
  %Y = unroll.loop %Z iterations(0) window(1) injection(add) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    unroll.yield %u : tensor<?x?x2xf32>
  }
  unroll.output %Y : tensor<?x?x2xf32>
}

// -----

unroll.model @linear_shape {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<4x3xf32>
  %b = unroll.param "b" : tensor<4xf32>
  // expected-error@+1 {{expected x with 3 features to match weight 'tensor<4x3xf32>', got 'tensor<?x?x2xf32>'}}
  %P = unroll.linear %Z, %w, %b : (tensor<?x?x2xf32>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
  unroll.output %P : tensor<?x?x4xf32>
}

// -----

unroll.model @bias_shape {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<4x2xf32>
  %b = unroll.param "b" : tensor<3xf32>
  // expected-error@+1 {{expected a bias of 4 entries, got 'tensor<3xf32>'}}
  %P = unroll.linear %Z, %w, %b : (tensor<?x?x2xf32>, tensor<4x2xf32>, tensor<3xf32>) -> tensor<?x?x4xf32>
  unroll.output %P : tensor<?x?x4xf32>
}

// -----

unroll.model @heads {
^bb0(%Z: tensor<?x?x12xf32>):
  // expected-error@+1 {{expected 3 heads to divide D = 4}}
  %a = unroll.attention %Z heads(3) : tensor<?x?x12xf32> -> tensor<?x?x4xf32>
  unroll.output %a : tensor<?x?x4xf32>
}

// -----

unroll.model @layer_norm_shape {
^bb0(%Z: tensor<?x?x4xf32>):
  %g = unroll.param "g" : tensor<3xf32>
  // expected-error@+1 {{expected gain and bias of type 'tensor<4xf32>', got 'tensor<3xf32>'}}
  %y = unroll.layer_norm %Z, %g, %g : tensor<?x?x4xf32>, tensor<3xf32>
  unroll.output %y : tensor<?x?x4xf32>
}

// -----

// expected-error@+1 {{'unroll.model' op expected exactly one 'unroll.loop', got 0}}
unroll.model @no_loop {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<1x2xf32>
  %b = unroll.param "b" : tensor<1xf32>
  %p = unroll.linear %Z, %w, %b : (tensor<?x?x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %p : tensor<?x?x1xf32>
}

// -----

unroll.model @unsupported_in_body {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<1x2xf32>
  %b = unroll.param "b" : tensor<1xf32>
  // expected-error@+1 {{'unroll.loop' op expected the body to yield the next state of type 'tensor<?x?x2xf32>'}}
  %Y = unroll.loop %Z iterations(2) window(1) injection(add) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    %c = arith.constant 1.0 : f32
    unroll.yield %c : f32
  }
  %p = unroll.linear %Y, %w, %b : (tensor<?x?x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %p : tensor<?x?x1xf32>
}

// -----

unroll.model @head_uses_prompt {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<1x2xf32>
  %b = unroll.param "b" : tensor<1xf32>
  %Y = unroll.loop %Z iterations(2) window(1) injection(add) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    unroll.yield %u : tensor<?x?x2xf32>
  }
  // expected-error@+1 {{expected the read-out to use only the loop's result, parameters and read-out values}}
  %s = unroll.add %Y, %Z : tensor<?x?x2xf32>
  %p = unroll.linear %s, %w, %b : (tensor<?x?x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %p : tensor<?x?x1xf32>
}

// -----

unroll.model @positions {
^bb0(%Z: tensor<?x9x2xf32>):
  %t = unroll.param "wpe" : tensor<5x2xf32>
  // expected-error@+1 {{expected at most 5 tokens for the table, got 9}}
  %x = unroll.position_embed %Z, %t : tensor<?x9x2xf32>, tensor<5x2xf32>
  unroll.output %x : tensor<?x9x2xf32>
}

// -----

// A loop body takes the state, or the state and the loop's input P.
unroll.model @body_args {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<1x2xf32>
  %b = unroll.param "b" : tensor<1xf32>
  // expected-error@+1 {{'unroll.loop' op expected the body to take the state 'tensor<?x?x2xf32>', optionally then the loop's input P 'tensor<?x?x2xf32>', the iteration index (index) and the previous iteration's input u_prev}}
  %Y = unroll.loop %Z iterations(2) window(1) injection(add) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>, %p: tensor<?x?x2xf32>, %q: tensor<?x?x2xf32>):
    unroll.yield %u : tensor<?x?x2xf32>
  }
  %p = unroll.linear %Y, %w, %b : (tensor<?x?x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %p : tensor<?x?x1xf32>
}

// -----

// unroll.descend names an energy of the module.
unroll.model @descend_unknown {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<1x2xf32>
  %b = unroll.param "b" : tensor<1xf32>
  %Y = unroll.loop %Z iterations(2) window(1) injection(add) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    // expected-error@+1 {{'unroll.descend' op expected 'nowhere' to name an 'unroll.energy'}}
    %d = unroll.descend @nowhere(%u, %u) : tensor<?x?x2xf32>
    unroll.yield %d : tensor<?x?x2xf32>
  }
  %p = unroll.linear %Y, %w, %b : (tensor<?x?x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %p : tensor<?x?x1xf32>
}

// -----

// The tokens a loop descends have the energy's features.
unroll.energy @e3 {
^bb0(%Y: tensor<?x3xf32>, %X: tensor<?x3xf32>):
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x3xf32>
  %r = unroll.sqnorm %Y : tensor<?x3xf32>
  unroll.minimize %p, %r schedule(single) iterations(1)
}
unroll.model @descend_features {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<1x2xf32>
  %b = unroll.param "b" : tensor<1xf32>
  %Y = unroll.loop %Z iterations(2) window(1) injection(add) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    // expected-error@+1 {{'unroll.descend' op expected tokens with the 3 features and 'f32' of @e3's 'tensor<?x3xf32>', got 'tensor<?x?x2xf32>'}}
    %d = unroll.descend @e3(%u, %u) : tensor<?x?x2xf32>
    unroll.yield %d : tensor<?x?x2xf32>
  }
  %p = unroll.linear %Y, %w, %b : (tensor<?x?x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %p : tensor<?x?x1xf32>
}

// -----

// The energy of a loop must take any number of tokens (prompts vary).
unroll.energy @fixed_n {
^bb0(%Y: tensor<4x2xf32>, %X: tensor<4x2xf32>):
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<4x2xf32>
  %r = unroll.sqnorm %Y : tensor<4x2xf32>
  unroll.minimize %p, %r schedule(single) iterations(1)
}
unroll.model @descend_fixed_n {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<1x2xf32>
  %b = unroll.param "b" : tensor<1xf32>
  %Y = unroll.loop %Z iterations(2) window(1) injection(add) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    // expected-error@+1 {{'unroll.descend' op expected @fixed_n to take any number of tokens (its Y is 'tensor<4x2xf32>')}}
    %d = unroll.descend @fixed_n(%u, %u) : tensor<?x?x2xf32>
    unroll.yield %d : tensor<?x?x2xf32>
  }
  %p = unroll.linear %Y, %w, %b : (tensor<?x?x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %p : tensor<?x?x1xf32>
}

// -----

// A loop's `energy` names an energy.
unroll.model @energy_attr {
^bb0(%Z: tensor<?x?x2xf32>):
  %w = unroll.param "w" : tensor<1x2xf32>
  %b = unroll.param "b" : tensor<1xf32>
  // expected-error@+1 {{'unroll.loop' op expected 'nowhere' to name an 'unroll.energy'}}
  %Y = unroll.loop %Z iterations(2) window(1) injection(add) energy(@nowhere) : tensor<?x?x2xf32> {
  ^bb0(%u: tensor<?x?x2xf32>):
    unroll.yield %u : tensor<?x?x2xf32>
  }
  %p = unroll.linear %Y, %w, %b : (tensor<?x?x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %p : tensor<?x?x1xf32>
}

// -----

// A layer-norm VJP's addend is summed into dx: it must have dx's type.
func.func @layer_norm_vjp_addend(%x: tensor<?x?x4xf32>, %g: tensor<4xf32>, %dy: tensor<?x?x4xf32>,
                                 %a: tensor<?x?x8xf32>) {
  // expected-error@+1 {{'unroll.layer_norm_vjp' op expected the addend to have dx's type 'tensor<?x?x4xf32>', got 'tensor<?x?x8xf32>'}}
  %dx, %dg, %db = unroll.layer_norm_vjp %x, %g, %dy plus %a : (tensor<?x?x4xf32>, tensor<4xf32>, tensor<?x?x4xf32>, tensor<?x?x8xf32>) -> (tensor<?x?x4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}
