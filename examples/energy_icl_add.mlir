// The loop-injection variant of examples/energy_icl.mlir: P1's eq. 20 energy
// with a causal mask and the plain regularizer ½‖Y‖², descended once per
// iteration of a loop with P2's input injection Y_t = step(Y_{t-1} + P)
// (injection(add)), trained on in-context regression (d = 5, D = 64,
// b = 10, T = 5).
//
//   E(Y) = Σ_{j≤i} ρ(½‖(y_i − y_j) W_a‖²) + ½ Tr(Y W_f Yᵀ) + ½‖Y‖² + ι[Y ≥ 0]
//
// Its step: Y ← ReLU[ softmax_β(Y W_a W_aᵀ Yᵀ) Y W_fˢ ], W_fˢ = (1 − α) I − α (W_f + W_fᵀ)/2,
// with the learnable step size α. The loop adds P before every step.
unroll.energy @icl_energy_add {
^bb0(%Y: tensor<?x64xf32>, %X: tensor<?x64xf32>):
  %Wa = unroll.param "W_a" {std = 0.125 : f64} : tensor<64x64xf32>
  %Wf = unroll.param "W_f" {std = 0.05 : f64} : tensor<64x64xf32>
  %attn = unroll.pairwise %Y proj %Wa : tensor<64x64xf32> rho(neg_exp) mask(causal) : tensor<?x64xf32>
  %ffn = unroll.quadratic %Y, %Wf : tensor<?x64xf32>, tensor<64x64xf32>
  %reg = unroll.sqnorm %Y : tensor<?x64xf32>
  %relu = unroll.nonneg %Y : tensor<?x64xf32>
  unroll.minimize %attn, %ffn, %reg, %relu schedule(proximal_aim) iterations(10) alpha(0.5) learnable
}

unroll.model @energy_icl_add {
^bb0(%Z: tensor<?x?x5xf32>):
  %Wi = unroll.param "_read_in.weight" {std = 0.258199 : f64} : tensor<64x5xf32>
  %bi = unroll.param "_read_in.bias" init(zeros) : tensor<64xf32>
  %Wo = unroll.param "_read_out.weight" {std = 0.072169 : f64} : tensor<1x64xf32>
  %bo = unroll.param "_read_out.bias" init(zeros) : tensor<1xf32>
  // P = read_in(Z)
  %P = unroll.linear %Z, %Wi, %bi : (tensor<?x?x5xf32>, tensor<64x5xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  // Y_0 = 0; Y_t = one descent step on E from Y_{t-1} + P.
  %Y = unroll.loop %P iterations(10) window(5) injection(add) : tensor<?x?x64xf32> {
  ^bb0(%u: tensor<?x?x64xf32>):
    %next = unroll.descend @icl_energy_add(%u, %u) steps(1) : tensor<?x?x64xf32>
    unroll.yield %next : tensor<?x?x64xf32>
  }
  %pred = unroll.linear %Y, %Wo, %bo : (tensor<?x?x64xf32>, tensor<1x64xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %pred : tensor<?x?x1xf32>
}
