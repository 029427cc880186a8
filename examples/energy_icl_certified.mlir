// The certified variant of examples/energy_icl.mlir: the same energy, but
// each loop iteration takes one gradient step of size 1/L on the majorizer
// of the whole smooth part (attention majorizer + FFN + residual term; L a
// bound of its curvature: 2 max_i deg_i ‖W_a‖_F² + ‖(W_f + W_fᵀ)/2‖_F + 1)
// and then the prox of ι[Y ≥ 0] (ReLU). No iteration of the trained model
// can increase E(·; P): every loop is a provable descent step
// (docs/experiments/energy-icl/).
//
//   E(Y; X) = Σ_{j≤i} ρ(½‖(y_i − y_j) W_a‖²) + ½ Tr(Y W_f Yᵀ) + ½‖Y − X‖² + ι[Y ≥ 0]
//
// with ρ(z) = −exp(−z), ρ' its weights.
//
//   unroll-opt examples/energy_icl_certified.mlir --lower-to-cpu -o e.mlir
//   unroll-translate e.mlir -o e.so
//   unroll-run e.so --task icl_linear
unroll.energy @icl_energy_certified {
^bb0(%Y: tensor<?x64xf32>, %X: tensor<?x64xf32>):
  %Wa = unroll.param "W_a" {std = 0.125 : f64} : tensor<64x64xf32>
  %Wf = unroll.param "W_f" {std = 0.05 : f64} : tensor<64x64xf32>
  %attn = unroll.pairwise %Y proj %Wa : tensor<64x64xf32> rho(neg_exp) mask(causal) : tensor<?x64xf32>
  %ffn = unroll.quadratic %Y, %Wf : tensor<?x64xf32>, tensor<64x64xf32>
  %res = unroll.sqnorm %Y center %X : tensor<?x64xf32> : tensor<?x64xf32>
  %relu = unroll.nonneg %Y : tensor<?x64xf32>
  unroll.minimize %attn, %ffn, %res, %relu schedule(proximal_aim) iterations(10) attention(certified)
}

unroll.model @energy_icl_certified {
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
    %next = unroll.descend @icl_energy_certified(%y, %p) steps(1) : tensor<?x?x64xf32>
    unroll.yield %next : tensor<?x?x64xf32>
  }
  %pred = unroll.linear %Y, %Wo, %bo : (tensor<?x?x64xf32>, tensor<1x64xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %pred : tensor<?x?x1xf32>
}
