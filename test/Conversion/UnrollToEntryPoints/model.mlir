// RUN: unroll-opt %s --unroll-differentiate --convert-unroll-to-entry-points | FileCheck %s
// RUN: not unroll-opt %s --unroll-differentiate --convert-unroll-to-linalg 2>&1 | FileCheck %s --check-prefix=ORDER

// A differentiated model becomes @m_forward, @m_loss_grad and @m_adam over
// memrefs. Parameters are views of theta at their offsets; the model's ops
// are copied into the loops unchanged (convert-unroll-to-linalg lowers them).
//
// @m_adam: one Adam step in place on theta and the moments.
// CHECK-LABEL: func.func @m_adam(
// CHECK: scf.parallel
//
// @m_forward: P = read_in(Z) once, then one scf.for over the run-time loop
// count b: Y_t = body(Y_{t-1} + P) (injection add), the head applied to every
// iterate and its predictions inserted at row t.
// CHECK-LABEL: func.func @m_forward(
// CHECK-SAME: %[[Z:.*]]: memref<?x?x?xf64>, %[[THETA:.*]]: memref<?xf64>, %[[B:.*]]: i64, %[[PREDS:.*]]: memref<?x?x?xf64>)
// CHECK-SAME: attributes {llvm.emit_c_interface}
// CHECK: memref.reinterpret_cast %[[THETA]] to offset: [0], sizes: [4, 2], strides: [2, 1]
// CHECK: memref.reinterpret_cast %[[THETA]] to offset: [12], sizes: [6, 4], strides: [4, 1]
// CHECK: %[[P:.*]] = unroll.linear %{{.*}} : (tensor<?x?x2xf64>, tensor<4x2xf64>, tensor<4xf64>) -> tensor<?x?x4xf64>
// CHECK: %[[NB:.*]] = arith.index_cast %[[B]]
// CHECK: scf.for %[[T:.*]] = %{{.*}} to %[[NB]] step %{{.*}} iter_args(%[[Y:.*]] = %{{.*}}, %{{.*}} = %{{.*}})
// CHECK: linalg.generic {{.*}} ins(%[[Y]], %[[P]] :
// CHECK: unroll.position_embed
// CHECK: unroll.layer_norm
// CHECK: unroll.gelu
// CHECK: unroll.linear %{{.*}} -> tensor<?x?x1xf64>
// CHECK: tensor.insert_slice %{{.*}}[%[[T]], 0, 0]
// CHECK: bufferization.materialize_in_destination %{{.*}} in restrict writable %[[PREDS]]
//
// @m_loss_grad: b − T iterations without gradient, the window's T
// iterations recorded (states and the activations the VJPs read, each
// insert marked to be computed in place), then the backward loop over the
// window with the VJP ops, the gradient accumulated into slices of one flat
// tensor, and the read-in's VJP once at the end.
// CHECK-LABEL: func.func @m_loss_grad(
// CHECK-SAME: %[[GRAD:[a-z0-9]+]]: memref<?xf64>) attributes {llvm.emit_c_interface}
// CHECK: scf.for {{.*}} -> (tensor<?x?x4xf64>) {
// CHECK: scf.for {{.*}} -> (tensor<?x?x4xf64>, tensor<?x?x?x4xf64>, tensor<?x?x?x4xf64>
// CHECK: tensor.insert_slice {{.*}} {unroll.in_place}
// CHECK: scf.for {{.*}} -> (tensor<69xf64>, tensor<?x?x4xf64>, tensor<?x?x4xf64>) {
// CHECK: unroll.linear_vjp
// CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[64] [4] [1] : tensor<4xf64> into tensor<69xf64>
// CHECK: unroll.gelu_vjp
// CHECK: unroll.layer_norm_vjp
// CHECK: unroll.position_embed_vjp
// CHECK: unroll.linear_vjp %{{.*}} -> (tensor<?x?x2xf64>, tensor<4x2xf64>, tensor<4xf64>)
// CHECK: bufferization.materialize_in_destination %{{.*}} in restrict writable %[[GRAD]]
//
//
// The model info records the loop's settings.
// CHECK: llvm.mlir.global internal constant @__unroll_model_info(
// CHECK-SAME: \22injection\22:\22add\22,\22iterations\22:3
// CHECK-SAME: \22window\22:2,\22window_activations\22:\22stored\22
// CHECK-NOT: unroll.model
// CHECK-NOT: unroll.loop

// The patterns need the entry points first.
// ORDER: error: 'unroll.model' op must be turned into entry points first: run --convert-unroll-to-entry-points
unroll.model @m {
^bb0(%Z: tensor<?x?x2xf64>):
  %wi = unroll.param "in.weight" : tensor<4x2xf64>
  %bi = unroll.param "in.bias" init(zeros) : tensor<4xf64>
  %wpe = unroll.param "wpe" : tensor<6x4xf64>
  %g = unroll.param "ln.weight" init(ones) : tensor<4xf64>
  %b = unroll.param "ln.bias" init(zeros) : tensor<4xf64>
  %w = unroll.param "fc.weight" : tensor<4x4xf64>
  %wb = unroll.param "fc.bias" : tensor<4xf64>
  %wo = unroll.param "out.weight" : tensor<1x4xf64>
  %bo = unroll.param "out.bias" : tensor<1xf64>
  %P = unroll.linear %Z, %wi, %bi : (tensor<?x?x2xf64>, tensor<4x2xf64>, tensor<4xf64>) -> tensor<?x?x4xf64>
  %Y = unroll.loop %P iterations(3) window(2) injection(add) : tensor<?x?x4xf64> {
  ^bb0(%u: tensor<?x?x4xf64>):
    %x = unroll.position_embed %u, %wpe : tensor<?x?x4xf64>, tensor<6x4xf64>
    %a = unroll.layer_norm %x, %g, %b : tensor<?x?x4xf64>, tensor<4xf64>
    %f = unroll.linear %a, %w, %wb : (tensor<?x?x4xf64>, tensor<4x4xf64>, tensor<4xf64>) -> tensor<?x?x4xf64>
    %ge = unroll.gelu %f : tensor<?x?x4xf64>
    %r = unroll.add %x, %ge : tensor<?x?x4xf64>
    unroll.yield %r : tensor<?x?x4xf64>
  }
  %p = unroll.linear %Y, %wo, %bo : (tensor<?x?x4xf64>, tensor<1x4xf64>, tensor<1xf64>) -> tensor<?x?x1xf64>
  unroll.output %p : tensor<?x?x1xf64>
}
