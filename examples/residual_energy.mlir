// The residual variant of P1 §6: ½‖Y − X‖² in place of ½‖Y‖², so the FFN
// step gains a +αX term (a residual connection to the input), with a causal
// mask (P1 Remark 3.2: the graph j ≤ i).
unroll.energy @residual_energy {
^bb0(%Y: tensor<?x16xf64>, %X: tensor<?x16xf64>):
  %Wa = unroll.param "W_a" {std = 0.25 : f64} : tensor<16x16xf64>
  %Wf = unroll.param "W_f" {std = 0.1 : f64} : tensor<16x16xf64>
  %attn = unroll.pairwise %Y proj %Wa : tensor<16x16xf64> rho(neg_exp) mask(causal) : tensor<?x16xf64>
  %ffn = unroll.quadratic %Y, %Wf : tensor<?x16xf64>, tensor<16x16xf64>
  %reg = unroll.sqnorm %Y center %X : tensor<?x16xf64> : tensor<?x16xf64>
  %relu = unroll.nonneg %Y : tensor<?x16xf64>
  unroll.minimize %attn, %ffn, %reg, %relu schedule(proximal_aim) iterations(12) alpha(0.5)
}
