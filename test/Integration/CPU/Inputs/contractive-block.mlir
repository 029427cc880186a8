// A transformer block without its residual connections, so that with small
// weights the loop Y <- M(Y + P) is a contraction with a unique fixed point
// (fixed-point.test checks the implicit gradient through layer norm,
// attention, linear layers and GELU with it).
unroll.model @contractive {
^bb0(%Z: tensor<?x?x3xf64>):
  %wi = unroll.param "in.weight" {std = 0.5 : f64} : tensor<8x3xf64>
  %bi = unroll.param "in.bias" init(zeros) : tensor<8xf64>
  %wo = unroll.param "out.weight" {std = 0.3 : f64} : tensor<1x8xf64>
  %bo = unroll.param "out.bias" init(zeros) : tensor<1xf64>
  %P = unroll.linear %Z, %wi, %bi : (tensor<?x?x3xf64>, tensor<8x3xf64>, tensor<8xf64>) -> tensor<?x?x8xf64>
  %Y = unroll.loop %P iterations(6) window(1) injection(add) gradient(implicit) : tensor<?x?x8xf64> {
  ^bb0(%u: tensor<?x?x8xf64>):
    %g = unroll.param "ln.weight" init(ones) : tensor<8xf64>
    %b = unroll.param "ln.bias" init(zeros) : tensor<8xf64>
    %wq = unroll.param "attn.weight" {std = 0.3 : f64} : tensor<24x8xf64>
    %bq = unroll.param "attn.bias" init(zeros) : tensor<24xf64>
    %wp = unroll.param "proj.weight" {std = 0.15 : f64} : tensor<8x8xf64>
    %bp = unroll.param "proj.bias" init(zeros) : tensor<8xf64>
    %a = unroll.layer_norm %u, %g, %b : tensor<?x?x8xf64>, tensor<8xf64>
    %qkv = unroll.linear %a, %wq, %bq : (tensor<?x?x8xf64>, tensor<24x8xf64>, tensor<24xf64>) -> tensor<?x?x24xf64>
    %att = unroll.attention %qkv heads(2) : tensor<?x?x24xf64> -> tensor<?x?x8xf64>
    %h = unroll.linear %att, %wp, %bp : (tensor<?x?x8xf64>, tensor<8x8xf64>, tensor<8xf64>) -> tensor<?x?x8xf64>
    %y = unroll.gelu %h : tensor<?x?x8xf64>
    unroll.yield %y : tensor<?x?x8xf64>
  }
  %p = unroll.linear %Y, %wo, %bo : (tensor<?x?x8xf64>, tensor<1x8xf64>, tensor<1xf64>) -> tensor<?x?x1xf64>
  unroll.output %p : tensor<?x?x1xf64>
}
