// RUN: unroll-opt %s --unroll-differentiate | FileCheck %s

// One VJP per step op, in reverse order, after the recomputed forward; the
// residual's adjoints are summed; parameters get accumulate_grad.
// CHECK-LABEL: unroll.model @m
// CHECK: unroll.loop
// CHECK: } reverse {
// CHECK-NEXT: ^bb0(%[[U:.*]]: tensor<?x?x4xf64>, %[[DY:.*]]: tensor<?x?x4xf64>):
// CHECK-NEXT: %[[X:.*]] = unroll.position_embed %[[U]], %[[WPE:.*]] :
// CHECK-NEXT: %[[A:.*]] = unroll.layer_norm %[[X]], %[[G:.*]], %[[B:.*]] :
// CHECK-NEXT: %[[F:.*]] = unroll.linear %[[A]], %[[W:.*]], %[[WB:.*]] :
// CHECK-NEXT: %[[GE:.*]] = unroll.gelu %[[F]] :
// CHECK-NEXT: %[[R:.*]] = unroll.add %[[X]], %[[GE]] :
// CHECK-NEXT: %[[DG:.*]] = unroll.gelu_vjp %[[F]], %[[DY]] :
// CHECK-NEXT: %[[DA:.*]], %[[DW:.*]], %[[DB:.*]] = unroll.linear_vjp %[[A]], %[[W]], %[[DG]] :
// CHECK-NEXT: unroll.accumulate_grad %[[W]], %[[DW]] : tensor<4x4xf64>
// CHECK-NEXT: unroll.accumulate_grad %[[WB]], %[[DB]] : tensor<4xf64>
// The residual's cotangent DY is summed into the layer norm's dx by its VJP
// (`plus`), not by a separate unroll.add.
// CHECK-NEXT: %[[SUM:.*]], %[[DGAIN:.*]], %[[DBIAS:.*]] = unroll.layer_norm_vjp %[[X]], %[[G]], %[[DA]] plus %[[DY]] :
// CHECK-NEXT: unroll.accumulate_grad %[[G]], %[[DGAIN]]
// CHECK-NEXT: unroll.accumulate_grad %[[B]], %[[DBIAS]]
// CHECK-NEXT: %[[DT:.*]] = unroll.position_embed_vjp %[[SUM]], %[[WPE]]
// CHECK-NEXT: unroll.accumulate_grad %[[WPE]], %[[DT]] : tensor<6x4xf64>
// CHECK-NEXT: unroll.yield %[[SUM]] : tensor<?x?x4xf64>
// The read-out and read-in get their own regions; parameters are re-declared.
// CHECK: } head_reverse {
// CHECK-NEXT: ^bb0(%[[Y:.*]]: tensor<?x?x4xf64>, %[[DP:.*]]: tensor<?x?x1xf64>):
// CHECK-DAG: %[[WO:.*]] = unroll.param "out.weight"
// CHECK-DAG: %[[BO:.*]] = unroll.param "out.bias"
// CHECK: %[[DY2:.*]], %[[DWO:.*]], %[[DBO:.*]] = unroll.linear_vjp %[[Y]], %[[WO]], %[[DP]]
// CHECK: unroll.yield %[[DY2]]
// CHECK: } embed_reverse {
// CHECK-NEXT: ^bb0(%[[Z:.*]]: tensor<?x?x2xf64>, %[[DPP:.*]]: tensor<?x?x4xf64>):
// CHECK: unroll.linear_vjp %[[Z]], %{{.*}}, %[[DPP]]
// CHECK: unroll.yield
// CHECK-NOT: unroll.yield %
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
