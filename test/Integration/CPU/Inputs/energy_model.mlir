// A small f64 model whose loop descends P1's eq. 20 energy with the residual
// term (X = the loop's input P): d = 3, D = 8, b = 3, two steps per
// iteration, a learnable step size. energy-model.test derives variants with sed.
unroll.energy @e {
^bb0(%Y: tensor<?x8xf64>, %X: tensor<?x8xf64>):
  %Wa = unroll.param "W_a" {std = 0.4 : f64} : tensor<8x8xf64>
  %Wf = unroll.param "W_f" {std = 0.2 : f64} : tensor<8x8xf64>
  %attn = unroll.pairwise %Y proj %Wa : tensor<8x8xf64> rho(neg_exp) mask(causal) : tensor<?x8xf64>
  %ffn = unroll.quadratic %Y, %Wf : tensor<?x8xf64>, tensor<8x8xf64>
  %res = unroll.sqnorm %Y center %X : tensor<?x8xf64> : tensor<?x8xf64>
  %relu = unroll.nonneg %Y : tensor<?x8xf64>
  unroll.minimize %attn, %ffn, %res, %relu schedule(proximal_aim) iterations(3) alpha(0.5) learnable
}
unroll.model @m {
^bb0(%Z: tensor<?x?x3xf64>):
  %Wi = unroll.param "_read_in.weight" {std = 0.5 : f64} : tensor<8x3xf64>
  %bi = unroll.param "_read_in.bias" : tensor<8xf64>
  %Wo = unroll.param "_read_out.weight" {std = 0.3 : f64} : tensor<1x8xf64>
  %bo = unroll.param "_read_out.bias" : tensor<1xf64>
  %P = unroll.linear %Z, %Wi, %bi : (tensor<?x?x3xf64>, tensor<8x3xf64>, tensor<8xf64>) -> tensor<?x?x8xf64>
  %Y = unroll.loop %P iterations(3) window(3) injection(none) : tensor<?x?x8xf64> {
  ^bb0(%y: tensor<?x?x8xf64>, %p: tensor<?x?x8xf64>):
    %n = unroll.descend @e(%y, %p) steps(2) : tensor<?x?x8xf64>
    unroll.yield %n : tensor<?x?x8xf64>
  }
  %pred = unroll.linear %Y, %Wo, %bo : (tensor<?x?x8xf64>, tensor<1x8xf64>, tensor<1xf64>) -> tensor<?x?x1xf64>
  unroll.output %pred : tensor<?x?x1xf64>
}
