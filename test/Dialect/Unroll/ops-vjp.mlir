// Every vector-Jacobian product op and unroll.accumulate_grad, as
// --unroll-differentiate writes them, printed and parsed back (custom and
// generic forms): the GPT-2 pieces' VJPs, the MM step's (paper; certified
// with a center and the quadratic weight), the gradient step's with a
// learnable step size, ReLU's, and the loop's input P as a gradient sink.
// RUN: unroll-opt %s --unroll-derive-steps --unroll-inline-descent --unroll-differentiate | unroll-opt | FileCheck %s
// RUN: unroll-opt %s --unroll-derive-steps --unroll-inline-descent --unroll-differentiate --mlir-print-op-generic | unroll-opt | FileCheck %s

// CHECK-LABEL: unroll.energy @paper
// CHECK: } reverse {
// CHECK: ^bb0(%{{.*}}: tensor<?x4xf64>, %[[X:.*]]: tensor<?x4xf64>, %{{.*}}: tensor<?x4xf64>):
// CHECK-DAG: unroll.prox_nonneg_vjp %{{.*}}, %{{.*}} : tensor<?x4xf64>
// CHECK-DAG: unroll.grad_step_vjp %{{.*}}, %{{.*}}, %{{.*}} center %[[X]] : tensor<?x4xf64> step %{{.*}} : tensor<1xf64> alpha(5.000000e-01) {coeff = 1.000000e+00 : f64} : tensor<?x4xf64>, tensor<4x4xf64> -> tensor<4x4xf64>, tensor<1xf64>
// CHECK-DAG: unroll.mm_step_vjp %{{.*}} proj %{{.*}} : tensor<4x4xf64>, %{{.*}} form(reweighted_softmax) mask(causal) : tensor<?x4xf64> -> tensor<4x4xf64>
// CHECK-DAG: unroll.accumulate_grad %[[X]], %{{.*}} : tensor<?x4xf64>
unroll.energy @paper {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %Wa = unroll.param "W_a" : tensor<4x4xf64>
  %Wf = unroll.param "W_f" : tensor<4x4xf64>
  %p = unroll.pairwise %Y proj %Wa : tensor<4x4xf64> rho(neg_exp) mask(causal) : tensor<?x4xf64>
  %q = unroll.quadratic %Y, %Wf : tensor<?x4xf64>, tensor<4x4xf64>
  %r = unroll.sqnorm %Y center %X : tensor<?x4xf64> : tensor<?x4xf64>
  %n = unroll.nonneg %Y : tensor<?x4xf64>
  unroll.minimize %p, %q, %r, %n schedule(proximal_aim) iterations(2) alpha(0.5) learnable
}

// CHECK-LABEL: unroll.energy @certified
// CHECK: } reverse {
// CHECK: unroll.mm_step_vjp %{{.*}}, %{{.*}} center %{{.*}} : tensor<?x4xf64> quad %{{.*}} : tensor<4x4xf64> form(general) {
// CHECK: unroll.yield %{{.*}}, %{{.*}} : f64, f64
// CHECK: } variant(certified) {coeff = 1.000000e+00 : f64} : tensor<?x4xf64> center_grad tensor<?x4xf64> quad_grad tensor<4x4xf64>
unroll.energy @certified {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %Wf = unroll.param "W_f" : tensor<4x4xf64>
  %p = unroll.pairwise %Y rho(log_plus_one) : tensor<?x4xf64>
  %q = unroll.quadratic %Y, %Wf : tensor<?x4xf64>, tensor<4x4xf64>
  %r = unroll.sqnorm %Y center %X : tensor<?x4xf64> : tensor<?x4xf64>
  unroll.minimize %p, %q, %r schedule(aim) iterations(2) attention(certified)
}

// CHECK-LABEL: unroll.model @gpt
// CHECK: } reverse {
// CHECK: ^bb0(%{{.*}}: tensor<?x?x4xf64>, %[[P:.*]]: tensor<?x?x4xf64>, %{{.*}}: tensor<?x?x4xf64>):
// CHECK-DAG: unroll.gelu_vjp %{{.*}}, %{{.*}} : (tensor<?x?x4xf64>, tensor<?x?x4xf64>) -> tensor<?x?x4xf64>
// CHECK-DAG: unroll.attention_vjp %{{.*}}, %{{.*}} heads(2) : (tensor<?x?x12xf64>, tensor<?x?x4xf64>) -> tensor<?x?x12xf64>
// CHECK-DAG: unroll.linear_vjp %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x?x4xf64>, tensor<12x4xf64>, tensor<?x?x12xf64>) -> (tensor<?x?x4xf64>, tensor<12x4xf64>, tensor<12xf64>)
// CHECK-DAG: unroll.layer_norm_vjp %{{.*}}, %{{.*}}, %{{.*}} plus %{{.*}} : (tensor<?x?x4xf64>, tensor<4xf64>, tensor<?x?x4xf64>, tensor<?x?x4xf64>) -> (tensor<?x?x4xf64>, tensor<4xf64>, tensor<4xf64>)
// CHECK-DAG: unroll.position_embed_vjp %{{.*}}, %{{.*}} : (tensor<?x?x4xf64>, tensor<6x4xf64>) -> tensor<6x4xf64>
// CHECK-DAG: unroll.accumulate_grad %[[P]], %{{.*}} : tensor<?x?x4xf64>
// CHECK: } head_reverse {
// CHECK: } embed_reverse {
unroll.model @gpt {
^bb0(%Z: tensor<?x?x2xf64>):
  %wi = unroll.param "_read_in.weight" : tensor<4x2xf64>
  %bi = unroll.param "_read_in.bias" init(zeros) : tensor<4xf64>
  %wpe = unroll.param "wpe" : tensor<6x4xf64>
  %g = unroll.param "ln.weight" init(ones) : tensor<4xf64>
  %b = unroll.param "ln.bias" init(zeros) : tensor<4xf64>
  %wq = unroll.param "qkv.weight" : tensor<12x4xf64>
  %bq = unroll.param "qkv.bias" : tensor<12xf64>
  %wo = unroll.param "_read_out.weight" : tensor<1x4xf64>
  %bo = unroll.param "_read_out.bias" : tensor<1xf64>
  %P = unroll.linear %Z, %wi, %bi : (tensor<?x?x2xf64>, tensor<4x2xf64>, tensor<4xf64>) -> tensor<?x?x4xf64>
  %Y = unroll.loop %P iterations(3) window(2) injection(none) : tensor<?x?x4xf64> {
  ^bb0(%y: tensor<?x?x4xf64>, %p: tensor<?x?x4xf64>):
    %x = unroll.position_embed %y, %wpe : tensor<?x?x4xf64>, tensor<6x4xf64>
    %a = unroll.layer_norm %x, %g, %b : tensor<?x?x4xf64>, tensor<4xf64>
    %qkv = unroll.linear %a, %wq, %bq : (tensor<?x?x4xf64>, tensor<12x4xf64>, tensor<12xf64>) -> tensor<?x?x12xf64>
    %at = unroll.attention %qkv heads(2) : tensor<?x?x12xf64> -> tensor<?x?x4xf64>
    %ge = unroll.gelu %at : tensor<?x?x4xf64>
    %r = unroll.add %x, %ge : tensor<?x?x4xf64>
    %d = unroll.descend @paper(%r, %p) : tensor<?x?x4xf64>
    unroll.yield %d : tensor<?x?x4xf64>
  }
  %pred = unroll.linear %Y, %wo, %bo : (tensor<?x?x4xf64>, tensor<1x4xf64>, tensor<1xf64>) -> tensor<?x?x1xf64>
  unroll.output %pred : tensor<?x?x1xf64>
}

// Sparse coding's and Hopfield's step VJPs: FISTA's (ISTA step and the
// extrapolation), a learned ISTA layer's, CCCP's.
// CHECK-LABEL: unroll.energy @fista
// CHECK: } reverse {
// CHECK-DAG: unroll.ista_step_vjp %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} lambda(1.000000e-01) {power_iterations = 100 : i64} : tensor<?x6xf64>, tensor<?x4xf64>, tensor<4x6xf64>
// CHECK-DAG: unroll.extrapolate_vjp %{{.*}} layer %{{.*}} : tensor<?x6xf64>
unroll.energy @fista {
^bb0(%Y: tensor<?x6xf64>, %X: tensor<?x4xf64>):
  %A = unroll.param "A" fixed : tensor<4x6xf64>
  %f = unroll.lsq %Y, %X, %A : tensor<?x6xf64>, tensor<?x4xf64>, tensor<4x6xf64>
  %l = unroll.l1 %Y lambda(0.1) : tensor<?x6xf64>
  unroll.minimize %f, %l schedule(fista) iterations(3)
}

// CHECK-LABEL: unroll.energy @lista
// CHECK: } reverse {
// CHECK: unroll.lista_step_vjp %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x6xf64>, tensor<?x4xf64>, tensor<4x6xf64>, tensor<4x6xf64>, tensor<3xf64>
unroll.energy @lista {
^bb0(%Y: tensor<?x6xf64>, %X: tensor<?x4xf64>):
  %A = unroll.param "A" fixed : tensor<4x6xf64>
  %f = unroll.lsq %Y, %X, %A : tensor<?x6xf64>, tensor<?x4xf64>, tensor<4x6xf64>
  %l = unroll.l1 %Y lambda(0.1) : tensor<?x6xf64>
  unroll.minimize %f, %l schedule(ista) iterations(3)
} steps {
^bb0(%Y: tensor<?x6xf64>, %X: tensor<?x4xf64>, %k: index):
  %A = unroll.param "A" fixed : tensor<4x6xf64>
  %W = unroll.param "W" : tensor<4x6xf64>
  %g = unroll.param "gamma" init(ones) : tensor<3xf64>
  %t = unroll.param "theta" init(zeros) : tensor<3xf64>
  %x = unroll.lista_step %Y, %X, %A, %W gamma %g theta %t layer %k
         : tensor<?x6xf64>, tensor<?x4xf64>, tensor<4x6xf64>, tensor<4x6xf64>, tensor<3xf64>
  unroll.yield %x : tensor<?x6xf64>
}

// CHECK-LABEL: unroll.energy @hopfield
// CHECK: } reverse {
// CHECK: unroll.cccp_step_vjp %{{.*}}, %{{.*}}, %{{.*}} beta(4.000000e+00) {coeff = 1.000000e+00 : f64} : tensor<?x4xf64>, tensor<?x4xf64>
unroll.energy @hopfield {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %e = unroll.lse %Y, %X beta(4.0) : tensor<?x4xf64>, tensor<?x4xf64>
  %r = unroll.sqnorm %Y : tensor<?x4xf64>
  unroll.minimize %e, %r schedule(cccp) iterations(2)
}
