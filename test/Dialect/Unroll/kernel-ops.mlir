// RUN: unroll-opt %s | FileCheck %s
// RUN: unroll-opt %s | unroll-opt | FileCheck %s
// RUN: unroll-opt %s --mlir-print-op-generic | unroll-opt | FileCheck %s

// A kernel energy and every piece of its steps, printed back in their
// custom forms.
// CHECK-LABEL: unroll.energy @kernel
// CHECK: unroll.kernel_pairwise %{{.*}} kernel(linear) of %{{.*}} : tensor<?x6xf64> features [0, 5] query %{{.*}} : tensor<5x4xf64> value %{{.*}} : tensor<6x2xf64> heads(2) mask(context) mean : tensor<?x6xf64>
// CHECK: unroll.minimize %{{.*}} schedule(cg) iterations(5) eps(1.000000e-08)
// CHECK: } steps {
// CHECK: unroll.kernel_matrix %{{.*}} features [0, 5] query %{{.*}} : tensor<5x4xf64> kernel(linear) heads(2) mask(context) mean : tensor<?x6xf64> -> tensor<2x?x?xf64>
// CHECK: unroll.kernel_apply %{{.*}}, %{{.*}} value %{{.*}} : tensor<6x2xf64> : tensor<2x?x?xf64>, tensor<?x6xf64>
// CHECK: unroll.inner %{{.*}}, %{{.*}} context : tensor<?x6xf64> -> tensor<f64>
// CHECK: unroll.normalize %{{.*}} context : tensor<?x6xf64>
// CHECK: unroll.kernel_trace %{{.*}} value %{{.*}} : tensor<6x2xf64> context : tensor<2x?x?xf64> -> tensor<f64>
// CHECK: unroll.ratio %{{.*}}, %{{.*}} scale %{{.*}} : tensor<f64> converged(%{{.*}}, %{{.*}}) : tensor<f64>, tensor<f64> {eps = 1.000000e-08 : f64} : tensor<f64>
// CHECK: unroll.pick %{{.*}}[%{{.*}}] : tensor<5xf64> -> tensor<1xf64>
// CHECK: unroll.axpy %{{.*}} times %{{.*}} : tensor<f64> plus %{{.*}} : tensor<?x6xf64> {scale = -1.000000e+00 : f64} : tensor<?x6xf64>
unroll.energy @kernel {
^bb0(%Y: tensor<?x6xf64>, %X: tensor<?x6xf64>):
  %Wq = unroll.param "W_q" : tensor<5x4xf64>
  %Wv = unroll.param "W_v" : tensor<6x2xf64>
  %e = unroll.kernel_pairwise %Y kernel(linear) of %X : tensor<?x6xf64> features [0, 5] query %Wq : tensor<5x4xf64> value %Wv : tensor<6x2xf64> heads(2) mask(context) mean : tensor<?x6xf64>
  unroll.minimize %e schedule(cg) iterations(5) eps(1.0e-8)
} steps {
^bb0(%y: tensor<?x6xf64>, %x: tensor<?x6xf64>, %k: index, %yp: tensor<?x6xf64>):
  %Wq = unroll.param "W_q" : tensor<5x4xf64>
  %Wv = unroll.param "W_v" : tensor<6x2xf64>
  %a = unroll.param "alpha" : tensor<5xf64>
  %K = unroll.kernel_matrix %x features [0, 5] query %Wq : tensor<5x4xf64> kernel(linear) heads(2) mask(context) mean : tensor<?x6xf64> -> tensor<2x?x?xf64>
  %g = unroll.kernel_apply %K, %y value %Wv : tensor<6x2xf64> : tensor<2x?x?xf64>, tensor<?x6xf64>
  %gg = unroll.inner %g, %g context : tensor<?x6xf64> -> tensor<f64>
  %yy = unroll.inner %y, %y context : tensor<?x6xf64> -> tensor<f64>
  %u = unroll.normalize %g context : tensor<?x6xf64>
  %tr = unroll.kernel_trace %K value %Wv : tensor<6x2xf64> context : tensor<2x?x?xf64> -> tensor<f64>
  %t = unroll.ratio %gg, %yy scale %tr : tensor<f64> converged(%gg, %yy) : tensor<f64>, tensor<f64> {eps = 1.0e-8 : f64} : tensor<f64>
  %ak = unroll.pick %a[%k] : tensor<5xf64> -> tensor<1xf64>
  %s = unroll.axpy %u times %t : tensor<f64> plus %y : tensor<?x6xf64> {scale = -1.0 : f64} : tensor<?x6xf64>
  %n = unroll.axpy %yp times %ak : tensor<1xf64> plus %s : tensor<?x6xf64> : tensor<?x6xf64>
  unroll.yield %n : tensor<?x6xf64>
}

// A loop whose body takes the iteration index and the previous input, and
// a descent that passes them on.
// CHECK-LABEL: unroll.model @second_state encoding(concat)
// CHECK: ^bb0(%{{.*}}: tensor<?x?x6xf64>, %{{.*}}: tensor<?x?x6xf64>, %[[K:.*]]: index, %[[V:.*]]: tensor<?x?x6xf64>):
// CHECK: unroll.descend @kernel(%{{.*}}, %{{.*}}) iteration %[[K]] prev %[[V]] : tensor<?x?x6xf64> : tensor<?x?x6xf64>
unroll.model @second_state encoding(concat) {
^bb0(%Z: tensor<?x?x6xf64>):
  %Wo = unroll.param "_read_out.weight" : tensor<1x6xf64>
  %bo = unroll.param "_read_out.bias" init(zeros) : tensor<1xf64>
  %Y = unroll.loop %Z iterations(5) window(5) injection(none) : tensor<?x?x6xf64> {
  ^bb0(%u: tensor<?x?x6xf64>, %p: tensor<?x?x6xf64>, %k: index, %v: tensor<?x?x6xf64>):
    %n = unroll.descend @kernel(%u, %p) iteration %k prev %v : tensor<?x?x6xf64> : tensor<?x?x6xf64>
    unroll.yield %n : tensor<?x?x6xf64>
  }
  %pred = unroll.linear %Y, %Wo, %bo : (tensor<?x?x6xf64>, tensor<1x6xf64>, tensor<1xf64>) -> tensor<?x?x1xf64>
  unroll.output %pred : tensor<?x?x1xf64>
}
