// ALISTA (examples/alista.mlir) as a model: the 16 layers are the
// iterations of a loop whose state is the code x [B, 1, 500] and whose
// input is the measurement b [B, 1, 250], read as data. The state starts at
// x_0 = 0 (a state of another type than the input), and iteration k descends
// the energy with its layer-k step. With encoding(dense) the predictions are
// the codes themselves and the loss is their mean squared error against
// the true codes [B, 500], over the last `window` layers.
//
//   unroll-opt alista_model.mlir --lower-to-cpu -o m.mlir
//   unroll-translate m.mlir -o alista_model.so
//
// The library has the model entry points (@alista_model_forward: the code
// after every layer; @alista_model_loss_grad: the windowed loss and its
// gradient; @alista_model_adam); test/Integration/CPU/alista-model.test
// checks them against ALISTA's layers in NumPy.
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
