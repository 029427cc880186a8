// RUN: unroll-opt %s --unroll-derive-steps --convert-unroll-to-entry-points --convert-unroll-to-linalg | FileCheck %s
// RUN: not unroll-opt %s --convert-unroll-to-entry-points 2>&1 | FileCheck %s --check-prefix=UNDERIVED

// An energy becomes two C-interface functions over memrefs plus the ABI
// functions; parameters are views into one flat vector theta.
// CHECK-LABEL: func.func @attn_trace(
// CHECK-SAME: %[[X:.*]]: memref<?x?xf64>, %[[THETA:.*]]: memref<?xf64>, %[[YOUT:.*]]: memref<?x?xf64>, %[[E:.*]]: memref<?xf64>)
// CHECK-SAME: attributes {llvm.emit_c_interface}
// CHECK: %[[XT:.*]] = bufferization.to_tensor %[[X]] restrict
// CHECK: memref.reinterpret_cast %[[THETA]] to offset: [0], sizes: [3, 3], strides: [3, 1]
// The energy at Y_0 = X: the pairwise term is a masked full reduction ...
// CHECK: linalg.matmul_transpose_b
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]
// CHECK: linalg.index 0
// CHECK: linalg.index 1
// CHECK: arith.cmpi ule
// CHECK: memref.store %{{.*}}, %[[E]][%{{.*}}] : memref<?xf64>
// ... then one iteration of the steps per loop trip, E(Y_t) stored each time.
// CHECK: %[[N:.*]] = memref.dim %[[E]], %{{.*}} : memref<?xf64>
// CHECK: %[[LOOP:.*]] = scf.for %[[T:.*]] = %{{.*}} to %[[N]] step %{{.*}} iter_args(%[[Y:.*]] = %{{.*}})
// CHECK: math.exp
// CHECK: linalg.matmul
// CHECK: memref.store %{{.*}}, %[[E]][%[[T]]] : memref<?xf64>
// CHECK: scf.yield
// CHECK: bufferization.materialize_in_destination %{{.*}} in restrict writable %[[YOUT]]
// CHECK-LABEL: func.func @attn_weights(
// CHECK-SAME: %{{.*}}: memref<?x?xf64>, %{{.*}}: memref<?xf64>, %{{.*}}: memref<?x?xf64>)
// CHECK: llvm.mlir.global internal constant @__unroll_model_info("{\22abi_version\22:2,
// CHECK-SAME: \22schedule\22:\22aim\22
// CHECK-LABEL: llvm.func @unroll_model_info() -> !llvm.ptr
// CHECK: llvm.mlir.addressof @__unroll_model_info
// CHECK-LABEL: llvm.func @unroll_abi_version() -> i32
// CHECK: llvm.mlir.constant(2 : i32)
// CHECK-NOT: unroll.

// UNDERIVED: error: 'unroll.energy' op has no derived steps; run --unroll-derive-steps first
unroll.energy @attn {
^bb0(%Y: tensor<?x3xf64>, %X: tensor<?x3xf64>):
  %Wf = unroll.param "W_f" : tensor<3x3xf64>
  %p = unroll.pairwise %Y rho(neg_exp) mask(causal) : tensor<?x3xf64>
  %q = unroll.quadratic %Y, %Wf : tensor<?x3xf64>, tensor<3x3xf64>
  unroll.minimize %p, %q schedule(aim) iterations(2) alpha(0.5)
}
