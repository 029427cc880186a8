// P1 Theorem 3.1 alone: E1(Y) = Σ_ij −exp(−½‖y_i − y_j‖²) + ½‖Y‖², one
// majorize–minimize step per iteration: Y ← softmax_β(Y Yᵀ) Y (eq. 11).
// Any d: the feature size is a run-time size here (no parameters).
unroll.energy @softmax_attention {
^bb0(%Y: tensor<?x?xf64>, %X: tensor<?x?xf64>):
  %attn = unroll.pairwise %Y rho(neg_exp) : tensor<?x?xf64>
  %reg = unroll.sqnorm %Y : tensor<?x?xf64>
  unroll.minimize %attn, %reg schedule(single) iterations(12)
}
