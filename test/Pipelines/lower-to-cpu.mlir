// Pins the --lower-to-cpu pipeline: derive, lower to linalg, bufferize with
// deallocation, contractions to the GEMM kernel, loops, f32 math as
// polynomials, LLVM with allocations from unroll's pool.
// RUN: unroll-opt %s --lower-to-cpu --dump-pass-pipeline 2>&1 >/dev/null | FileCheck %s --check-prefix=PIPE
// RUN: unroll-opt %s --lower-to-cpu | FileCheck %s
// RUN: unroll-opt %s --lower-to-cpu=recompute-window=1 --dump-pass-pipeline 2>&1 >/dev/null | FileCheck %s --check-prefix=RECOMPUTE

// PIPE: unroll-derive-steps
// PIPE-SAME: unroll-inline-descent
// PIPE-SAME: unroll-differentiate
// PIPE-SAME: convert-unroll-to-entry-points{chip= model-vjp=true recompute-window=false target=cpu}
// PIPE-SAME: convert-unroll-to-linalg{cpu-kernels=true}
// PIPE-SAME: one-shot-bufferize
// PIPE-SAME: ownership-based-buffer-deallocation
// PIPE-SAME: cse
// PIPE-SAME: unroll-cpu-gemm
// PIPE-SAME: convert-linalg-to-loops
// PIPE-SAME: unroll-cpu-math
// PIPE-SAME: convert-math-to-llvm
// PIPE-SAME: finalize-memref-to-llvm{{.*}}use-generic-functions=true
// PIPE-SAME: convert-func-to-llvm
// PIPE-SAME: reconcile-unrealized-casts

// The pipeline's options reach its passes.
// RECOMPUTE: convert-unroll-to-entry-points{chip= model-vjp=true recompute-window=true target=cpu}

// Only the LLVM dialect is left, with the C-interface wrappers the runtime calls.
// CHECK-DAG: llvm.func @_mlir_ciface_e_trace(
// CHECK-DAG: llvm.func @_mlir_ciface_e_weights(
// CHECK-DAG: llvm.func @unroll_model_info()
// CHECK-DAG: llvm.func @unroll_abi_version()
// CHECK-DAG: llvm.call @_mlir_memref_to_llvm_free
// CHECK-NOT: linalg.
// CHECK-NOT: unroll.
unroll.energy @e {
^bb0(%Y: tensor<?x2xf32>, %X: tensor<?x2xf32>):
  %p = unroll.pairwise %Y rho(log_plus_one) : tensor<?x2xf32>
  %r = unroll.sqnorm %Y : tensor<?x2xf32>
  unroll.minimize %p, %r schedule(single) iterations(3)
}
