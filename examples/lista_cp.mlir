// LISTA-CP (Chen et al. 2018): one weight W_k [250, 500] per layer, per-layer thresholds θ_k (γ_k too; the task starts every layer at ISTA: W_k = A/L, γ_k = 1, θ_k = λ/L).
//
// A learned unrolling of examples/sparse_coding.mlir's energy
// ½‖b − A x‖² + λ‖x‖₁: 16 layers x ← η_{θ_k}(x + γ_k W_kᵀ(b − A x))
// written as the energy's steps, which take the layer index k. The energy
// stays the one reported per layer; the compiler differentiates the steps.
//
//   unroll-opt lista_cp.mlir --lower-to-cpu -o lista_cp.lowered.mlir
//   unroll-translate lista_cp.lowered.mlir -o lista_cp.so
//   unroll-run lista_cp.so --task sparse_coding --out out/lista_cp
//
// @lista_cp_model is the same unrolling as a model: a loop whose state is the
// code x [B, 1, 500] (x_0 = 0) and whose input, the measurement b
// [B, 1, 250], it reads as data; iteration k descends the energy with its
// layer-k step. With encoding(dense) the predictions are the codes and the
// loss is their mean squared error over the last `window` layers.
// `--task sparse_coding` trains the model form (one forward and one backward
// pass a step); `--energy lista_cp` trains the energy form. They share checkpoints.
unroll.energy @lista_cp {
^bb0(%Y: tensor<?x500xf32>, %X: tensor<?x250xf32>):
  %A = unroll.param "A" fixed : tensor<250x500xf32>
  %fit = unroll.lsq %Y, %X, %A : tensor<?x500xf32>, tensor<?x250xf32>, tensor<250x500xf32>
  %l1 = unroll.l1 %Y lambda(0.1) : tensor<?x500xf32>
  unroll.minimize %fit, %l1 schedule(ista) iterations(16)
} steps {
^bb0(%Y: tensor<?x500xf32>, %X: tensor<?x250xf32>, %k: index):
  %A = unroll.param "A" fixed : tensor<250x500xf32>
  %W = unroll.param "W" : tensor<16x250x500xf32>
  %g = unroll.param "gamma" init(ones) : tensor<16xf32>
  %t = unroll.param "theta" init(zeros) : tensor<16xf32>
  %x = unroll.lista_step %Y, %X, %A, %W gamma %g theta %t layer %k
         : tensor<?x500xf32>, tensor<?x250xf32>, tensor<250x500xf32>, tensor<16x250x500xf32>, tensor<16xf32>
  unroll.yield %x : tensor<?x500xf32>
}

unroll.model @lista_cp_model encoding(dense) {
^bb0(%B: tensor<?x?x250xf32>):
  %X = unroll.loop %B iterations(16) window(16) injection(none)
         : tensor<?x?x250xf32> -> tensor<?x?x500xf32> {
  ^bb0(%x: tensor<?x?x500xf32>, %b: tensor<?x?x250xf32>, %k: index):
    %next = unroll.descend @lista_cp(%x, %b) iteration %k : tensor<?x?x500xf32>, tensor<?x?x250xf32>
    unroll.yield %next : tensor<?x?x500xf32>
  }
  unroll.output %X : tensor<?x?x500xf32>
}
