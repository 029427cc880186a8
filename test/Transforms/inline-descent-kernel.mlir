// RUN: unroll-opt %s --unroll-derive-steps --unroll-inline-descent | FileCheck %s

// Steps that take the iteration index and the previous iterate, inlined
// twice per loop iteration (steps(2)): copy j of iteration k has index
// 2k + j, and takes the copy before it as its previous iterate (the first
// takes the loop's u_prev). Values per prompt get the batch dimension:
// kernel matrices [B, H, n, n], inner products and step lengths [B].
// CHECK-LABEL: unroll.model @m
// CHECK: unroll.loop {{.*}} energy(@cg)
// CHECK: ^bb0(%[[U:.*]]: tensor<?x?x4xf32>, %[[P:.*]]: tensor<?x?x4xf32>, %[[K:.*]]: index, %[[V:.*]]: tensor<?x?x4xf32>):
// CHECK: %[[C2:.*]] = arith.constant 2 : index
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: %[[M0:.*]] = arith.muli %[[K]], %[[C2]] : index
// CHECK: %{{.*}} = arith.addi %[[M0]], %[[C0]] : index
// CHECK: %[[KM:.*]] = unroll.kernel_matrix %[[P]] features [0, 3] query %{{.*}} : tensor<3x3xf32> kernel(linear) mask(context) : tensor<?x?x4xf32> -> tensor<?x1x?x?xf32>
// CHECK: unroll.axpy %[[V]] plus %[[U]] : tensor<?x?x4xf32>
// CHECK: unroll.inner %{{.*}}, %{{.*}} context : tensor<?x?x4xf32> -> tensor<?xf32>
// CHECK: %[[Y1:.*]] = unroll.axpy %{{.*}} times %{{.*}} : tensor<?xf32> plus %[[U]] : tensor<?x?x4xf32> {scale = -1.000000e+00 : f64} : tensor<?x?x4xf32>
// CHECK: arith.constant 1 : index
// CHECK: unroll.axpy %[[U]] plus %[[Y1]] : tensor<?x?x4xf32> {scale = -1.000000e+00 : f64}
unroll.energy @cg {
^bb0(%Y: tensor<?x4xf32>, %X: tensor<?x4xf32>):
  %Wq = unroll.param "W_q" : tensor<3x3xf32>
  %Wv = unroll.param "W_v" : tensor<4x1xf32>
  %e = unroll.kernel_pairwise %Y kernel(linear) of %X : tensor<?x4xf32> features [0, 3] query %Wq : tensor<3x3xf32> value %Wv : tensor<4x1xf32> mask(context) : tensor<?x4xf32>
  unroll.minimize %e schedule(cg) iterations(3)
}
unroll.model @m encoding(concat) {
^bb0(%Z: tensor<?x?x4xf32>):
  %Wo = unroll.param "_read_out.weight" : tensor<1x4xf32>
  %bo = unroll.param "_read_out.bias" init(zeros) : tensor<1xf32>
  %Y = unroll.loop %Z iterations(3) window(3) injection(none) : tensor<?x?x4xf32> {
  ^bb0(%u: tensor<?x?x4xf32>, %p: tensor<?x?x4xf32>, %k: index, %v: tensor<?x?x4xf32>):
    %n = unroll.descend @cg(%u, %p) steps(2) iteration %k prev %v : tensor<?x?x4xf32> : tensor<?x?x4xf32>
    unroll.yield %n : tensor<?x?x4xf32>
  }
  %pred = unroll.linear %Y, %Wo, %bo : (tensor<?x?x4xf32>, tensor<1x4xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  unroll.output %pred : tensor<?x?x1xf32>
}
