// A user-written ρ: ρ(z) = 2·sqrt(1 + z), concave and non-decreasing on
// z ≥ 0 (the verifier samples ρ′ and ρ″ to check). --unroll-derive-steps
// differentiates the region, so the attention weights are the inverse
// multiquadric kernel ρ′(z) = 1/sqrt(1 + z) instead of a softmax.
unroll.energy @custom_rho_energy {
^bb0(%Y: tensor<?x8xf64>, %X: tensor<?x8xf64>):
  %Wf = unroll.param "W_f" {std = 0.1 : f64} : tensor<8x8xf64>
  %attn = unroll.pairwise %Y rho(custom) {
  ^bb0(%z: f64):
    %one = arith.constant 1.0 : f64
    %two = arith.constant 2.0 : f64
    %s = arith.addf %z, %one : f64
    %r = math.sqrt %s : f64
    %rho = arith.mulf %two, %r : f64
    unroll.yield %rho : f64
  } : tensor<?x8xf64>
  %ffn = unroll.quadratic %Y, %Wf : tensor<?x8xf64>, tensor<8x8xf64>
  %reg = unroll.sqnorm %Y center %X : tensor<?x8xf64> : tensor<?x8xf64>
  unroll.minimize %attn, %ffn, %reg schedule(aim) iterations(12) alpha(0.25)
}
