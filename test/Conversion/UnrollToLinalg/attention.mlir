// RUN: unroll-opt %s --convert-unroll-to-linalg --split-input-file | FileCheck %s
// RUN: unroll-opt %s --convert-unroll-to-linalg=cpu-kernels=1 --split-input-file | FileCheck %s --check-prefix=KERNEL

// unroll.attention as linalg (the GPU pipeline's and the emulator's form):
// qkv [B, n, 3D] is viewed as [B, n, 3, H, hd]; scores over (b, h, i, j);
// the row maximum and the exponentials skip j > i (causal); then the
// normalization and the weighted sum of v, viewed back as [B, n, D].
// CHECK-LABEL: func.func @attention(
// CHECK-SAME: %[[QKV:.*]]: tensor<?x?x24xf32>)
// CHECK: %[[Q5:.*]] = tensor.expand_shape %[[QKV]] {{\[}}[0], [1], [2, 3, 4]] output_shape [%{{.*}}, %{{.*}}, 3, 2, 4]
// CHECK: %[[S:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%[[Q5]], %[[Q5]] : {{.*}}) outs(%{{.*}} : tensor<?x2x?x?xf32>)
// CHECK: %[[MAX:.*]] = linalg.generic {{.*}} ins(%[[S]] :
// CHECK: arith.maximumf
// CHECK: arith.cmpi ule
// CHECK: %[[EX:.*]] = linalg.generic {{.*}} ins(%[[S]], %[[MAX]] :
// CHECK: math.exp
// CHECK: arith.cmpi ule
// CHECK: %[[O:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]} ins(%{{.*}}, %[[Q5]] :
// CHECK: %[[OUT:.*]] = tensor.collapse_shape %[[O]] {{\[}}[0], [1], [2, 3]] : tensor<?x?x2x4xf32> into tensor<?x?x8xf32>
// CHECK: return %[[OUT]]
// CHECK-NOT: call

// With cpu-kernels (--lower-to-cpu) it is one call of the kernel
// (unroll.kernel_call: B, n, H, hd, the input's address and strides, the
// output's), its output in destination style: a tensor.empty that
// bufferization makes a buffer, or the tape slot the result goes into
// (--unroll-cpu-kernel-calls makes it the func.call; cpu-kernel-calls.mlir).
// KERNEL-DAG: func.func private @unroll_attention_f32(index, index, index, index, index, index, index, index, index, index)
// KERNEL-LABEL: func.func @attention(
// KERNEL-SAME: %[[QKV:.*]]: tensor<?x?x24xf32>)
// KERNEL: %[[B:.*]] = tensor.dim %[[QKV]], %c0
// KERNEL: %[[N:.*]] = tensor.dim %[[QKV]], %c1
// KERNEL: %[[INIT:.*]] = tensor.empty(%[[B]], %[[N]]) : tensor<?x?x8xf32>
// KERNEL: %[[T:.*]] = unroll.kernel_call @unroll_attention_f32(%[[B]], %[[N]], %c2, %c4) ins(%[[QKV]] : tensor<?x?x24xf32>) outs(%[[INIT]] : tensor<?x?x8xf32>) abi [0, 0, 0, 0, 1, 2] : tensor<?x?x8xf32>
// KERNEL: return %[[T]]
// KERNEL-NOT: linalg.generic
func.func @attention(%qkv: tensor<?x?x24xf32>) -> tensor<?x?x8xf32> {
  %a = unroll.attention %qkv heads(2) : tensor<?x?x24xf32> -> tensor<?x?x8xf32>
  return %a : tensor<?x?x8xf32>
}

// -----

// unroll.attention_vjp recomputes the probabilities P, then dP = dO vᵀ,
// dV = Pᵀ dO, dS = P (dP − Σ P dP) / √hd, dQ = dS k, dK = dSᵀ q, and
// interleaves them into dqkv [B, n, 3, H, hd] (selected by the index of the
// q | k | v dimension).
// CHECK-LABEL: func.func @attention_vjp(
// CHECK-SAME: %[[QKV:.*]]: tensor<?x?x24xf32>, %[[DY:.*]]: tensor<?x?x8xf32>)
// CHECK: math.exp
// CHECK: %[[D4:.*]] = tensor.expand_shape %[[DY]] {{\[}}[0], [1], [2, 3]]
// CHECK: %[[DA:.*]] = linalg.generic {{.*}} ins(%[[D4]], %{{.*}} :
// CHECK: %[[DV:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[D4]] :
// CHECK: %[[D5:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}}, %[[DV]] : {{.*}}) outs(%{{.*}} : tensor<?x?x3x2x4xf32>)
// CHECK: linalg.index 2
// CHECK: %[[OUT:.*]] = tensor.collapse_shape %[[D5]] {{\[}}[0], [1], [2, 3, 4]] : tensor<?x?x3x2x4xf32> into tensor<?x?x24xf32>
// CHECK: return %[[OUT]]

// KERNEL-DAG: func.func private @unroll_attention_vjp_f32(index, index, index, index, index, index, index, index, index, index, index, index, index)
// KERNEL-LABEL: func.func @attention_vjp(
// KERNEL: %[[INIT:.*]] = tensor.empty(%{{.*}}, %{{.*}}) : tensor<?x?x24xf32>
// KERNEL: unroll.kernel_call @unroll_attention_vjp_f32({{.*}}) ins({{.*}} : tensor<?x?x24xf32>, tensor<?x?x8xf32>) outs(%[[INIT]] : tensor<?x?x24xf32>) abi [0, 0, 0, 0, 1, 1, 2]
func.func @attention_vjp(%qkv: tensor<?x?x24xf32>, %dy: tensor<?x?x8xf32>) -> tensor<?x?x24xf32> {
  %d = unroll.attention_vjp %qkv, %dy heads(2) : (tensor<?x?x24xf32>, tensor<?x?x8xf32>) -> tensor<?x?x24xf32>
  return %d : tensor<?x?x24xf32>
}
