// An energy that learns in context: P1's eq. 20 energy with a causal mask
// and the residual term ½‖Y − X‖², descended once per iteration of a loop
// that P2 trains on in-context regression (d = 5, D = 64, b = 10, T = 5).
//
//   E(Y; X) = Σ_{j≤i} ρ(½‖(y_i − y_j) W_a‖²) + ½ Tr(Y W_f Yᵀ) + ½‖Y − X‖² + ι[Y ≥ 0]
//
// with ρ(z) = −exp(−z). Its derived step (--unroll-derive-steps) is
//   Y ← ReLU[ softmax_β(Y W_a W_aᵀ Yᵀ) Y W_fˢ + α X ],  W_fˢ = (1 − α) I − α (W_f + W_fᵀ)/2,
// a causal attention, a linear FFN, a residual to X and a ReLU. The model's
// loop body is that step with X = P, the read-in of the prompt: the energy's
// center term is the input injection (injection(none): nothing is added
// outside the energy). α is learned (`learnable`), starting at 0.5. W_a,
// W_f, α, the read-in and the read-out are the trainable parameters.
//
//   unroll-opt examples/energy_icl.mlir --lower-to-cpu -o e.mlir
//   unroll-translate e.mlir -o e.so
//   unroll-run e.so --task icl_linear
unroll.energy @icl_energy {
^bb0(%Y: tensor<?x64xf32>, %X: tensor<?x64xf32>):
  %Wa = unroll.param "W_a" {std = 0.125 : f64} : tensor<64x64xf32>
  %Wf = unroll.param "W_f" {std = 0.05 : f64} : tensor<64x64xf32>
  %attn = unroll.pairwise %Y proj %Wa : tensor<64x64xf32> rho(neg_exp) mask(causal) : tensor<?x64xf32>
  %ffn = unroll.quadratic %Y, %Wf : tensor<?x64xf32>, tensor<64x64xf32>
  %res = unroll.sqnorm %Y center %X : tensor<?x64xf32> : tensor<?x64xf32>
  %relu = unroll.nonneg %Y : tensor<?x64xf32>
  unroll.minimize %attn, %ffn, %res, %relu schedule(proximal_aim) iterations(10) alpha(0.5) learnable
}

unroll.model @energy_icl {
^bb0(%Z: tensor<?x?x5xf32>):
  %Wi = unroll.param "_read_in.weight" {std = 0.258199 : f64} : tensor<64x5xf32>
  %bi = unroll.param "_read_in.bias" init(zeros) : tensor<64xf32>
  %Wo = unroll.param "_read_out.weight" {std = 0.072169 : f64} : tensor<1x64xf32>
  %bo = unroll.param "_read_out.bias" init(zeros) : tensor<1xf32>
  // P = read_in(Z)
  %P = unroll.linear %Z, %Wi, %bi : (tensor<?x?x5xf32>, tensor<64x5xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  // Y_0 = P; Y_t = one descent step on E(·; P) from Y_{t-1}.
  %Y = unroll.loop %P iterations(10) window(5) injection(none) : tensor<?x?x64xf32> {
  ^bb0(%y: tensor<?x?x64xf32>, %p: tensor<?x?x64xf32>):
    %next = unroll.descend @icl_energy(%y, %p) steps(1) : tensor<?x?x64xf32>
    unroll.yield %next : tensor<?x?x64xf32>
  }
  %pred = unroll.linear %Y, %Wo, %bo : (tensor<?x?x64xf32>, tensor<1x64xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %pred : tensor<?x?x1xf32>
}
