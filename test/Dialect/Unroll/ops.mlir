// RUN: unroll-opt %s | FileCheck %s
// RUN: unroll-opt %s | unroll-opt | FileCheck %s
// RUN: unroll-opt %s --mlir-print-op-generic | unroll-opt | FileCheck %s

// Every energy-level op, printed back in its custom form.
// CHECK-LABEL: unroll.energy @all_terms
// CHECK: ^bb0(%[[Y:.*]]: tensor<?x4xf64>, %[[X:.*]]: tensor<?x4xf64>):
// CHECK: %[[WA:.*]] = unroll.param "W_a" {std = 3.000000e-01 : f64} : tensor<4x2xf64>
// CHECK: %[[WF:.*]] = unroll.param "W_f" : tensor<4x4xf64>
// CHECK: %[[P:.*]] = unroll.pairwise %[[Y]] proj %[[WA]] : tensor<4x2xf64> rho(log_plus_two) mask(causal) : tensor<?x4xf64>
// CHECK: %[[Q:.*]] = unroll.quadratic %[[Y]], %[[WF]] : tensor<?x4xf64>, tensor<4x4xf64>
// CHECK: %[[R:.*]] = unroll.sqnorm %[[Y]] center %[[X]] : tensor<?x4xf64> {coeff = 2.000000e+00 : f64} : tensor<?x4xf64>
// CHECK: %[[N:.*]] = unroll.nonneg %[[Y]] : tensor<?x4xf64>
// CHECK: unroll.minimize %[[P]], %[[Q]], %[[R]], %[[N]] schedule(proximal_aim) iterations(3) alpha(5.000000e-01) learnable
unroll.energy @all_terms {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %Wa = unroll.param "W_a" {std = 0.3 : f64} : tensor<4x2xf64>
  %Wf = unroll.param "W_f" : tensor<4x4xf64>
  %p = unroll.pairwise %Y proj %Wa : tensor<4x2xf64> rho(log_plus_two) mask(causal) : tensor<?x4xf64>
  %q = unroll.quadratic %Y, %Wf : tensor<?x4xf64>, tensor<4x4xf64>
  %r = unroll.sqnorm %Y center %X : tensor<?x4xf64> {coeff = 2.0 : f64} : tensor<?x4xf64>
  %n = unroll.nonneg %Y : tensor<?x4xf64>
  unroll.minimize %p, %q, %r, %n schedule(proximal_aim) iterations(3) alpha(0.5) learnable
}

// A user-written ρ region and a graph mask.
// CHECK-LABEL: unroll.energy @custom_graph
// CHECK: unroll.pairwise %{{.*}} rho(custom) {
// CHECK: ^bb0(%[[Z:.*]]: f32):
// CHECK: math.log1p %[[Z]] : f32
// CHECK: unroll.yield %{{.*}} : f32
// CHECK: } mask(graph) {graph = dense<{{\[\[}}1, 0], [1, 1]]> : tensor<2x2xi8>} : tensor<2x3xf32>
// CHECK: unroll.minimize %{{.*}} schedule(single) iterations(1)
unroll.energy @custom_graph {
^bb0(%Y: tensor<2x3xf32>, %X: tensor<2x3xf32>):
  %p = unroll.pairwise %Y rho(custom) {
  ^bb0(%z: f32):
    %l = math.log1p %z : f32
    unroll.yield %l : f32
  } mask(graph) {graph = dense<[[1, 0], [1, 1]]> : tensor<2x2xi8>} : tensor<2x3xf32>
  unroll.minimize %p schedule(single) iterations(1)
}

// Step-level ops, as --unroll-derive-steps writes them.
// CHECK-LABEL: unroll.energy @steps
// CHECK: } steps {
// CHECK: %[[U:.*]] = unroll.mm_step %{{.*}} form(reweighted_softmax) mask(causal) : tensor<?x4xf64>
// CHECK: %[[G:.*]] = unroll.mm_step %[[U]] center %{{.*}} : tensor<?x4xf64> form(general) {
// CHECK: } variant(certified) {coeff = 1.000000e+00 : f64} : tensor<?x4xf64>
// CHECK: %[[V:.*]] = unroll.grad_step %[[G]], %{{.*}} alpha(2.500000e-01) : tensor<?x4xf64>, tensor<4x4xf64>
// CHECK: %[[W:.*]] = unroll.prox_nonneg %[[V]] : tensor<?x4xf64>
// CHECK: unroll.yield %[[W]] : tensor<?x4xf64>
unroll.energy @steps {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %Wf = unroll.param "W_f" : tensor<4x4xf64>
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  %q = unroll.quadratic %Y, %Wf : tensor<?x4xf64>, tensor<4x4xf64>
  %n = unroll.nonneg %Y : tensor<?x4xf64>
  unroll.minimize %p, %q, %n schedule(proximal_aim) iterations(1) alpha(0.25)
} steps {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %Wf = unroll.param "W_f" : tensor<4x4xf64>
  %u = unroll.mm_step %Y form(reweighted_softmax) mask(causal) : tensor<?x4xf64>
  %g = unroll.mm_step %u center %X : tensor<?x4xf64> form(general) {
  ^bb0(%z: f64):
    %e = arith.negf %z : f64
    %w = math.exp %e : f64
    unroll.yield %w : f64
  } variant(certified) {coeff = 1.0 : f64} : tensor<?x4xf64>
  %v = unroll.grad_step %g, %Wf alpha(0.25) : tensor<?x4xf64>, tensor<4x4xf64>
  %w = unroll.prox_nonneg %v : tensor<?x4xf64>
  unroll.yield %w : tensor<?x4xf64>
}

// Sparse coding: the data-fit and ℓ1 terms, FISTA's steps (extrapolation,
// then an ISTA step; the body takes the iteration and the previous iterate).
// CHECK-LABEL: unroll.energy @fista
// CHECK: ^bb0(%[[Y:.*]]: tensor<?x6xf32>, %[[X:.*]]: tensor<?x4xf32>):
// CHECK: %[[A:.*]] = unroll.param "A" fixed : tensor<4x6xf32>
// CHECK: %[[F:.*]] = unroll.lsq %[[Y]], %[[X]], %[[A]] : tensor<?x6xf32>, tensor<?x4xf32>, tensor<4x6xf32>
// CHECK: %[[L:.*]] = unroll.l1 %[[Y]] lambda(2.500000e-01) nonneg : tensor<?x6xf32>
// CHECK: unroll.minimize %[[F]], %[[L]] schedule(fista) iterations(4)
// CHECK: } steps {
// CHECK: ^bb0(%[[SY:.*]]: tensor<?x6xf32>, %[[SX:.*]]: tensor<?x4xf32>, %[[K:.*]]: index, %[[PREV:.*]]: tensor<?x6xf32>):
// CHECK: %[[Z:.*]] = unroll.extrapolate %[[SY]], %[[PREV]] layer %[[K]] : tensor<?x6xf32>
// CHECK: %[[N:.*]] = unroll.ista_step %[[Z]], %[[SX]], %{{.*}} lambda(2.500000e-01) nonneg {power_iterations = 30 : i64} : tensor<?x6xf32>, tensor<?x4xf32>, tensor<4x6xf32>
// CHECK: unroll.yield %[[N]] : tensor<?x6xf32>
unroll.energy @fista {
^bb0(%Y: tensor<?x6xf32>, %X: tensor<?x4xf32>):
  %A = unroll.param "A" fixed : tensor<4x6xf32>
  %f = unroll.lsq %Y, %X, %A : tensor<?x6xf32>, tensor<?x4xf32>, tensor<4x6xf32>
  %l = unroll.l1 %Y lambda(0.25) nonneg : tensor<?x6xf32>
  unroll.minimize %f, %l schedule(fista) iterations(4)
} steps {
^bb0(%Y: tensor<?x6xf32>, %X: tensor<?x4xf32>, %k: index, %prev: tensor<?x6xf32>):
  %A = unroll.param "A" fixed : tensor<4x6xf32>
  %z = unroll.extrapolate %Y, %prev layer %k : tensor<?x6xf32>
  %n = unroll.ista_step %z, %X, %A lambda(0.25) nonneg {power_iterations = 30 : i64} : tensor<?x6xf32>, tensor<?x4xf32>, tensor<4x6xf32>
  unroll.yield %n : tensor<?x6xf32>
}

// A learned unrolling: layer k of LISTA with W per layer, the uncoupled W2
// and the support selection.
// CHECK-LABEL: unroll.energy @lista
// CHECK: } steps {
// CHECK: unroll.lista_step %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} w2 %{{.*}} : tensor<4x6x6xf32> gamma %{{.*}} theta %{{.*}} layer %{{.*}} support : tensor<?x6xf32>, tensor<?x4xf32>, tensor<4x6xf32>, tensor<4x4x6xf32>, tensor<4xf32>
unroll.energy @lista {
^bb0(%Y: tensor<?x6xf32>, %X: tensor<?x4xf32>):
  %A = unroll.param "A" fixed : tensor<4x6xf32>
  %f = unroll.lsq %Y, %X, %A : tensor<?x6xf32>, tensor<?x4xf32>, tensor<4x6xf32>
  %l = unroll.l1 %Y lambda(0.1) : tensor<?x6xf32>
  unroll.minimize %f, %l schedule(ista) iterations(4)
} steps {
^bb0(%Y: tensor<?x6xf32>, %X: tensor<?x4xf32>, %k: index):
  %A = unroll.param "A" fixed : tensor<4x6xf32>
  %W = unroll.param "W" : tensor<4x4x6xf32>
  %W2 = unroll.param "W2" : tensor<4x6x6xf32>
  %g = unroll.param "gamma" init(ones) : tensor<4xf32>
  %t = unroll.param "theta" init(zeros) : tensor<4xf32>
  %x = unroll.lista_step %Y, %X, %A, %W w2 %W2 : tensor<4x6x6xf32> gamma %g theta %t layer %k support
         : tensor<?x6xf32>, tensor<?x4xf32>, tensor<4x6xf32>, tensor<4x4x6xf32>, tensor<4xf32>
  unroll.yield %x : tensor<?x6xf32>
}

// Modern Hopfield retrieval: the log-sum-exp term against a memory X and
// its CCCP step.
// CHECK-LABEL: unroll.energy @hopfield
// CHECK: %[[E:.*]] = unroll.lse %{{.*}}, %{{.*}} beta(8.000000e+00) : tensor<?x4xf64>, tensor<?x4xf64>
// CHECK: unroll.minimize %[[E]], %{{.*}} schedule(cccp) iterations(3)
// CHECK: } steps {
// CHECK: unroll.cccp_step %{{.*}}, %{{.*}} beta(8.000000e+00) {coeff = 2.000000e+00 : f64} : tensor<?x4xf64>, tensor<?x4xf64>
unroll.energy @hopfield {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %e = unroll.lse %Y, %X beta(8.0) : tensor<?x4xf64>, tensor<?x4xf64>
  %r = unroll.sqnorm %Y {coeff = 2.0 : f64} : tensor<?x4xf64>
  unroll.minimize %e, %r schedule(cccp) iterations(3)
} steps {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %n = unroll.cccp_step %Y, %X beta(8.0) {coeff = 2.0 : f64} : tensor<?x4xf64>, tensor<?x4xf64>
  unroll.yield %n : tensor<?x4xf64>
}

// The certified step on the whole energy (`quad`), a learnable step size and
// a parameter with a constant initial value.
// CHECK-LABEL: unroll.energy @whole
// CHECK: unroll.param "alpha" init(constant) {value = 5.000000e-01 : f64} : tensor<1xf64>
// CHECK: unroll.mm_step %{{.*}} center %{{.*}} : tensor<?x4xf64> quad %{{.*}} : tensor<4x4xf64> form(general) {
// CHECK: unroll.grad_step %{{.*}}, %{{.*}} step %{{.*}} : tensor<1xf64> alpha(5.000000e-01) : tensor<?x4xf64>, tensor<4x4xf64>
unroll.energy @whole {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %Wf = unroll.param "W_f" : tensor<4x4xf64>
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  %q = unroll.quadratic %Y, %Wf : tensor<?x4xf64>, tensor<4x4xf64>
  unroll.minimize %p, %q schedule(aim) iterations(1) alpha(0.5)
} steps {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %Wf = unroll.param "W_f" : tensor<4x4xf64>
  %a = unroll.param "alpha" init(constant) {value = 0.5 : f64} : tensor<1xf64>
  %g = unroll.mm_step %Y center %X : tensor<?x4xf64> quad %Wf : tensor<4x4xf64> form(general) {
  ^bb0(%z: f64):
    %e = arith.negf %z : f64
    %w = math.exp %e : f64
    unroll.yield %w : f64
  } variant(certified) {coeff = 1.0 : f64} : tensor<?x4xf64>
  %v = unroll.grad_step %g, %Wf step %a : tensor<1xf64> alpha(0.5) : tensor<?x4xf64>, tensor<4x4xf64>
  unroll.yield %v : tensor<?x4xf64>
}

// A looped transformer: model, loop (its body taking the state and P),
// output and the GPT-2 pieces; a loop body that descends an energy.
// CHECK-LABEL: unroll.model @looped
// CHECK: %[[P:.*]] = unroll.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x?x2xf64>, tensor<4x2xf64>, tensor<4xf64>) -> tensor<?x?x4xf64>
// CHECK: unroll.loop %[[P]] iterations(3) window(2) injection(none) energy(@steps) : tensor<?x?x4xf64> {
// CHECK: ^bb0(%[[Y:.*]]: tensor<?x?x4xf64>, %[[IN:.*]]: tensor<?x?x4xf64>):
// CHECK: unroll.position_embed %[[Y]], %{{.*}} : tensor<?x?x4xf64>, tensor<6x4xf64>
// CHECK: unroll.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-03 : f64} : tensor<?x?x4xf64>, tensor<4xf64>
// CHECK: unroll.linear %{{.*}} -> tensor<?x?x12xf64>
// CHECK: unroll.attention %{{.*}} heads(2) : tensor<?x?x12xf64> -> tensor<?x?x4xf64>
// CHECK: unroll.gelu %{{.*}} : tensor<?x?x4xf64>
// CHECK: unroll.add %{{.*}}, %{{.*}} : tensor<?x?x4xf64>
// CHECK: unroll.descend @steps(%{{.*}}, %[[IN]]) steps(2) : tensor<?x?x4xf64>
// CHECK: unroll.output %{{.*}} : tensor<?x?x1xf64>
unroll.model @looped {
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
  %Y = unroll.loop %P iterations(3) window(2) injection(none) energy(@steps) : tensor<?x?x4xf64> {
  ^bb0(%y: tensor<?x?x4xf64>, %p: tensor<?x?x4xf64>):
    %x = unroll.position_embed %y, %wpe : tensor<?x?x4xf64>, tensor<6x4xf64>
    %a = unroll.layer_norm %x, %g, %b {eps = 1.0e-3 : f64} : tensor<?x?x4xf64>, tensor<4xf64>
    %qkv = unroll.linear %a, %wq, %bq : (tensor<?x?x4xf64>, tensor<12x4xf64>, tensor<12xf64>) -> tensor<?x?x12xf64>
    %at = unroll.attention %qkv heads(2) : tensor<?x?x12xf64> -> tensor<?x?x4xf64>
    %ge = unroll.gelu %at : tensor<?x?x4xf64>
    %r = unroll.add %x, %ge : tensor<?x?x4xf64>
    %d = unroll.descend @steps(%r, %p) steps(2) : tensor<?x?x4xf64>
    unroll.yield %d : tensor<?x?x4xf64>
  }
  %pred = unroll.linear %Y, %wo, %bo : (tensor<?x?x4xf64>, tensor<1x4xf64>, tensor<1xf64>) -> tensor<?x?x1xf64>
  unroll.output %pred : tensor<?x?x1xf64>
}
