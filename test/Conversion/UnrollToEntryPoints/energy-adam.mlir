// RUN: unroll-opt %s --unroll-derive-steps --unroll-differentiate --convert-unroll-to-entry-points | FileCheck %s
//
// A differentiated energy with trained parameters (a learned unrolling) gets
// @E_adam, the optimizer step models have (Adam.cpp), and the model info
// names it; an energy whose only parameter is fixed (the task's dictionary)
// gets none.

// CHECK-LABEL: func.func @lista_adam(
// CHECK-SAME: %{{.*}}: memref<?xf64>, %{{.*}}: memref<?xf64>, %{{.*}}: memref<?xf64>, %{{.*}}: memref<?xf64>, %{{.*}}: memref<?xf64>, %{{.*}}: memref<?xf64>)
// CHECK-SAME: attributes {llvm.emit_c_interface}
// CHECK: scf.parallel
// CHECK: math.sqrt
// CHECK-NOT: func.func @ista_adam
// CHECK: \22adam\22:\22lista_adam\22
// CHECK: \22adam\22:null
unroll.energy @lista {
^bb0(%Y: tensor<?x12xf64>, %X: tensor<?x8xf64>):
  %A = unroll.param "A" fixed : tensor<8x12xf64>
  %fit = unroll.lsq %Y, %X, %A : tensor<?x12xf64>, tensor<?x8xf64>, tensor<8x12xf64>
  %l1 = unroll.l1 %Y lambda(0.05) : tensor<?x12xf64>
  unroll.minimize %fit, %l1 schedule(ista) iterations(2)
} steps {
^bb0(%Y: tensor<?x12xf64>, %X: tensor<?x8xf64>, %k: index):
  %A = unroll.param "A" fixed : tensor<8x12xf64>
  %W = unroll.param "W" fixed : tensor<8x12xf64>
  %g = unroll.param "gamma" init(ones) : tensor<2xf64>
  %t = unroll.param "theta" init(zeros) : tensor<2xf64>
  %x = unroll.lista_step %Y, %X, %A, %W gamma %g theta %t layer %k
         : tensor<?x12xf64>, tensor<?x8xf64>, tensor<8x12xf64>, tensor<8x12xf64>, tensor<2xf64>
  unroll.yield %x : tensor<?x12xf64>
}

unroll.energy @ista {
^bb0(%Y: tensor<?x12xf64>, %X: tensor<?x8xf64>):
  %A = unroll.param "A" fixed : tensor<8x12xf64>
  %fit = unroll.lsq %Y, %X, %A : tensor<?x12xf64>, tensor<?x8xf64>, tensor<8x12xf64>
  %l1 = unroll.l1 %Y lambda(0.05) : tensor<?x12xf64>
  unroll.minimize %fit, %l1 schedule(ista) iterations(2)
}
