// P1's Transformer energy (eq. 20 form):
//   E(Y) = Σ_ij ρ(½‖(y_i − y_j) W_a‖²) + ½ Tr(Y W_f Yᵀ) + ½‖Y‖² + ι[Y ≥ 0]
// with ρ(z) = −exp(−z). Proximal AIM gives, per iteration,
//   Y ← ReLU[softmax_β(Y W_aˢ Yᵀ) Y W_fˢ],  W_fˢ = (1−α)I − α(W_f + W_fᵀ)/2.
//
//   unroll-opt transformer_energy.mlir --unroll-derive-steps   (see the steps)
//   unroll-opt transformer_energy.mlir --lower-to-cpu -o lowered.mlir
//   unroll-translate lowered.mlir -o compiled.so
//   unroll-run compiled.so --task energy --iterations 12 --seed 0
unroll.energy @transformer_energy {
^bb0(%Y: tensor<?x16xf64>, %X: tensor<?x16xf64>):
  %Wa = unroll.param "W_a" {std = 0.25 : f64} : tensor<16x16xf64>
  %Wf = unroll.param "W_f" {std = 0.1 : f64} : tensor<16x16xf64>
  %attn = unroll.pairwise %Y proj %Wa : tensor<16x16xf64> rho(neg_exp) : tensor<?x16xf64>
  %ffn = unroll.quadratic %Y, %Wf : tensor<?x16xf64>, tensor<16x16xf64>
  %reg = unroll.sqnorm %Y : tensor<?x16xf64>
  %relu = unroll.nonneg %Y : tensor<?x16xf64>
  unroll.minimize %attn, %ffn, %reg, %relu schedule(proximal_aim) iterations(12) alpha(0.5)
}
