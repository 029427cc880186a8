// P1 §6's experiment on real data: the energy of a 12-iteration
// symmetric-weight Transformer (eq. 20 form: Y <- ReLU[softmax_β(Y W_aˢ Yᵀ) Y W_fˢ])
// on 8x8 digit images read as n = 8 tokens (rows) of d = 8 pixels,
//   E(Y) = Σ_ij ρ(½‖(y_i − y_j) W_a‖²) + ½ Tr(Y W_f Yᵀ) + ½‖Y‖² + ι[Y ≥ 0],
// and its residual variant with ½‖Y − X‖² (P1 uses it for trained weights).
// Weights are drawn at random (std 1/√8 for W_a, 0.1 for W_f) per --seed.
//
//   scripts/p1-digits-energy.sh [BUILD] [OUT]   (200 digits, 5 weight draws)
unroll.energy @digits_energy {
^bb0(%Y: tensor<?x8xf64>, %X: tensor<?x8xf64>):
  %Wa = unroll.param "W_a" {std = 0.353553 : f64} : tensor<8x8xf64>
  %Wf = unroll.param "W_f" {std = 0.1 : f64} : tensor<8x8xf64>
  %attn = unroll.pairwise %Y proj %Wa : tensor<8x8xf64> rho(neg_exp) : tensor<?x8xf64>
  %ffn = unroll.quadratic %Y, %Wf : tensor<?x8xf64>, tensor<8x8xf64>
  %reg = unroll.sqnorm %Y : tensor<?x8xf64>
  %relu = unroll.nonneg %Y : tensor<?x8xf64>
  unroll.minimize %attn, %ffn, %reg, %relu schedule(proximal_aim) iterations(12) alpha(0.5)
}

unroll.energy @digits_energy_residual {
^bb0(%Y: tensor<?x8xf64>, %X: tensor<?x8xf64>):
  %Wa = unroll.param "W_a" {std = 0.353553 : f64} : tensor<8x8xf64>
  %Wf = unroll.param "W_f" {std = 0.1 : f64} : tensor<8x8xf64>
  %attn = unroll.pairwise %Y proj %Wa : tensor<8x8xf64> rho(neg_exp) : tensor<?x8xf64>
  %ffn = unroll.quadratic %Y, %Wf : tensor<?x8xf64>, tensor<8x8xf64>
  %reg = unroll.sqnorm %Y center %X : tensor<?x8xf64> : tensor<?x8xf64>
  %relu = unroll.nonneg %Y : tensor<?x8xf64>
  unroll.minimize %attn, %ffn, %reg, %relu schedule(proximal_aim) iterations(12) alpha(0.5)
}
