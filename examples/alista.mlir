// ALISTA (Liu et al. 2019): W fixed in advance, the minimizer of ‖WᵀA‖_F subject to diag(WᵀA) = 1 (the task computes it, column by column, from a Cholesky factor of AAᵀ); only γ_k and θ_k are learned, with support selection as published (the largest min(1.2 (k + 1), 13)% magnitudes past θ_k skip the shrinkage).
//
// A learned unrolling of examples/sparse_coding.mlir's energy
// ½‖b − A x‖² + λ‖x‖₁: 16 layers x ← η_{θ_k}(x + γ_k W_kᵀ(b − A x))
// written as the energy's steps, which take the layer index k. The energy
// stays the one reported per layer; the compiler differentiates the steps.
//
//   unroll-opt alista.mlir --lower-to-cpu -o alista.lowered.mlir
//   unroll-translate alista.lowered.mlir -o alista.so
//   unroll-run alista.so --task sparse_coding --out out/alista
//
// @alista_model is the same unrolling as a model: a loop whose state is the
// code x [B, 1, 500] (x_0 = 0) and whose input, the measurement b
// [B, 1, 250], it reads as data; iteration k descends the energy with its
// layer-k step. With encoding(dense) the predictions are the codes and the
// loss is their mean squared error over the last `window` layers.
// `--task sparse_coding` trains the model form (one forward and one backward
// pass a step); `--energy alista` trains the energy form. They share checkpoints.
unroll.energy @alista {
^bb0(%Y: tensor<?x500xf32>, %X: tensor<?x250xf32>):
  %A = unroll.param "A" fixed : tensor<250x500xf32>
  %fit = unroll.lsq %Y, %X, %A : tensor<?x500xf32>, tensor<?x250xf32>, tensor<250x500xf32>
  %l1 = unroll.l1 %Y lambda(0.1) : tensor<?x500xf32>
  unroll.minimize %fit, %l1 schedule(ista) iterations(16)
} steps {
^bb0(%Y: tensor<?x500xf32>, %X: tensor<?x250xf32>, %k: index):
  %A = unroll.param "A" fixed : tensor<250x500xf32>
  %W = unroll.param "W" fixed : tensor<250x500xf32>
  %g = unroll.param "gamma" init(ones) : tensor<16xf32>
  %t = unroll.param "theta" init(zeros) : tensor<16xf32>
  %x = unroll.lista_step %Y, %X, %A, %W gamma %g theta %t layer %k support
         : tensor<?x500xf32>, tensor<?x250xf32>, tensor<250x500xf32>, tensor<250x500xf32>, tensor<16xf32>
  unroll.yield %x : tensor<?x500xf32>
}

unroll.model @alista_model encoding(dense) {
^bb0(%B: tensor<?x?x250xf32>):
  %X = unroll.loop %B iterations(16) window(16) injection(none)
         : tensor<?x?x250xf32> -> tensor<?x?x500xf32> {
  ^bb0(%x: tensor<?x?x500xf32>, %b: tensor<?x?x250xf32>, %k: index):
    %next = unroll.descend @alista(%x, %b) iteration %k : tensor<?x?x500xf32>, tensor<?x?x250xf32>
    unroll.yield %next : tensor<?x?x500xf32>
  }
  unroll.output %X : tensor<?x?x500xf32>
}
