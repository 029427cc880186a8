// LISTA (Gregor & LeCun 2010): untied layers x ← η_{θ_k}(W1_k b + W2_k x), W1_k [250, 500] (here W, scaled by γ_k) and W2_k [500, 500] per layer (the task starts at ISTA: W = A/L, W2 = I − AᵀA/L).
//
// A learned unrolling of examples/sparse_coding.mlir's energy, 16 layers
// written as the energy's steps (which take the layer index k).
//
//   unroll-opt lista.mlir --lower-to-cpu -o lista.lowered.mlir
//   unroll-translate lista.lowered.mlir -o lista.so
//   unroll-run lista.so --task sparse_coding --out out/lista
//
// @lista_model is the same unrolling as a model: a loop whose state is the
// code x [B, 1, 500] (x_0 = 0) and whose input, the measurement b
// [B, 1, 250], it reads as data; iteration k descends the energy with its
// layer-k step. With encoding(dense) the predictions are the codes and the
// loss is their mean squared error over the last `window` layers.
// `--task sparse_coding` trains the model form (one forward and one backward
// pass a step); `--energy lista` trains the energy form. They share checkpoints.
unroll.energy @lista {
^bb0(%Y: tensor<?x500xf32>, %X: tensor<?x250xf32>):
  %A = unroll.param "A" fixed : tensor<250x500xf32>
  %fit = unroll.lsq %Y, %X, %A : tensor<?x500xf32>, tensor<?x250xf32>, tensor<250x500xf32>
  %l1 = unroll.l1 %Y lambda(0.1) : tensor<?x500xf32>
  unroll.minimize %fit, %l1 schedule(ista) iterations(16)
} steps {
^bb0(%Y: tensor<?x500xf32>, %X: tensor<?x250xf32>, %k: index):
  %A = unroll.param "A" fixed : tensor<250x500xf32>
  %W = unroll.param "W" : tensor<16x250x500xf32>
  %W2 = unroll.param "W2" : tensor<16x500x500xf32>
  %g = unroll.param "gamma" init(ones) : tensor<16xf32>
  %t = unroll.param "theta" init(zeros) : tensor<16xf32>
  %x = unroll.lista_step %Y, %X, %A, %W w2 %W2 : tensor<16x500x500xf32> gamma %g theta %t layer %k
         : tensor<?x500xf32>, tensor<?x250xf32>, tensor<250x500xf32>, tensor<16x250x500xf32>, tensor<16xf32>
  unroll.yield %x : tensor<?x500xf32>
}

unroll.model @lista_model encoding(dense) {
^bb0(%B: tensor<?x?x250xf32>):
  %X = unroll.loop %B iterations(16) window(16) injection(none)
         : tensor<?x?x250xf32> -> tensor<?x?x500xf32> {
  ^bb0(%x: tensor<?x?x500xf32>, %b: tensor<?x?x250xf32>, %k: index):
    %next = unroll.descend @lista(%x, %b) iteration %k : tensor<?x?x500xf32>, tensor<?x?x250xf32>
    unroll.yield %next : tensor<?x?x500xf32>
  }
  unroll.output %X : tensor<?x?x500xf32>
}
