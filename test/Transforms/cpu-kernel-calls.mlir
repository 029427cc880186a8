// RUN: unroll-opt %s -split-input-file --one-shot-bufferize=bufferize-function-boundaries --unroll-cpu-kernel-calls | FileCheck %s
// RUN: unroll-opt %s -split-input-file --one-shot-bufferize=bufferize-function-boundaries --cse --canonicalize --unroll-cpu-kernel-calls | FileCheck %s --check-prefix=TAPE
//
// unroll-cpu-kernel-calls: an unroll.kernel_call on buffers becomes the
// func.call of its kernel, each buffer passed as its address (aligned
// pointer + offset x element size) and the strides of its outer dimensions,
// in the abi order (0: an index argument, 1: an input, 2: an output).

func.func private @unroll_attention_f32(index, index, index, index, index, index, index, index, index, index)

// CHECK-LABEL: func.func @slot
// CHECK-SAME:    (%[[QKV:.*]]: memref<?x?x24xf32>, %[[TP:.*]]: memref<?x?x?x8xf32>, %[[T:.*]]: index, %[[B:.*]]: index, %[[N:.*]]: index)
// CHECK:         %[[SLOT:.*]] = memref.subview %[[TP]][%[[T]], 0, 0, 0]
// CHECK:         %{{.*}}, %[[QOFF:.*]], %{{.*}}:3, %[[QST:.*]]:3 = memref.extract_strided_metadata %[[QKV]]
// CHECK:         %[[QP:.*]] = memref.extract_aligned_pointer_as_index %[[QKV]]
// CHECK:         %[[QB:.*]] = arith.muli %[[QOFF]], %c4
// CHECK:         %[[QA:.*]] = arith.addi %[[QP]], %[[QB]]
// CHECK:         %{{.*}}, %[[SOFF:.*]], %{{.*}}:3, %[[SST:.*]]:3 = memref.extract_strided_metadata %[[SLOT]]
// CHECK:         %[[SP:.*]] = memref.extract_aligned_pointer_as_index %[[SLOT]]
// CHECK:         %[[SB:.*]] = arith.muli %[[SOFF]], %c4
// CHECK:         %[[SA:.*]] = arith.addi %[[SP]], %[[SB]]
// CHECK:         call @unroll_attention_f32(%[[B]], %[[N]], %c2, %c4{{.*}}, %[[QA]], %[[QST]]#0, %[[QST]]#1, %[[SA]], %[[SST]]#0, %[[SST]]#1)
// CHECK-NOT:     unroll.kernel_call
func.func @slot(%qkv: memref<?x?x24xf32>, %tape: memref<?x?x?x8xf32>, %t: index, %b: index, %n: index) {
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %slot = memref.subview %tape[%t, 0, 0, 0] [1, %b, %n, 8] [1, 1, 1, 1]
      : memref<?x?x?x8xf32> to memref<?x?x8xf32, strided<[?, 8, 1], offset: ?>>
  unroll.kernel_call @unroll_attention_f32(%b, %n, %c2, %c4) ins(%qkv : memref<?x?x24xf32>)
      outs(%slot : memref<?x?x8xf32, strided<[?, 8, 1], offset: ?>>) abi [0, 0, 0, 0, 1, 2]
  return
}

// -----

// On tensors, bufferization writes the output into its destination's
// buffer: here a slice of a tape that the result is inserted into, so the
// kernel writes the slot and nothing is copied (the insert's copy of the
// slot onto itself folds away, as in --lower-to-cpu). An input of unknown
// layout is cast to contiguous rows, as the kernels read them.
func.func private @unroll_attention_f32(index, index, index, index, index, index, index, index, index, index)

// TAPE-LABEL: func.func @in_place
// TAPE:         %[[SLOT:.*]] = memref.subview
// TAPE:         %[[ROWS:.*]] = memref.cast %[[SLOT]] : memref<?x?x8xf32, strided<[?, ?, ?], offset: ?>> to memref<?x?x8xf32, strided<[?, ?, 1], offset: ?>>
// TAPE:         memref.extract_aligned_pointer_as_index %[[ROWS]]
// TAPE:         call @unroll_attention_f32(
// TAPE-NOT:     memref.copy
// TAPE-NOT:     linalg.copy
// TAPE:         return
func.func @in_place(%qkv: tensor<?x?x24xf32>, %tape: tensor<4x?x?x8xf32>, %t: index) -> tensor<4x?x?x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %b = tensor.dim %qkv, %c0 : tensor<?x?x24xf32>
  %n = tensor.dim %qkv, %c1 : tensor<?x?x24xf32>
  %slot = tensor.extract_slice %tape[%t, 0, 0, 0] [1, %b, %n, 8] [1, 1, 1, 1]
      : tensor<4x?x?x8xf32> to tensor<?x?x8xf32>
  %y = unroll.kernel_call @unroll_attention_f32(%b, %n, %c2, %c4) ins(%qkv : tensor<?x?x24xf32>)
      outs(%slot : tensor<?x?x8xf32>) abi [0, 0, 0, 0, 1, 2] : tensor<?x?x8xf32>
  %r = tensor.insert_slice %y into %tape[%t, 0, 0, 0] [1, %b, %n, 8] [1, 1, 1, 1]
      : tensor<?x?x8xf32> into tensor<4x?x?x8xf32>
  return %r : tensor<4x?x?x8xf32>
}

// -----

// Before bufferization the pass refuses, saying why.
// RUN: not unroll-opt %s -split-input-file --unroll-cpu-kernel-calls 2>&1 | FileCheck %s --check-prefix=EARLY
// EARLY: error: 'unroll.kernel_call' op on tensors: run --unroll-cpu-kernel-calls after bufferization
func.func private @unroll_attention_f32(index, index, index, index, index, index, index, index, index, index)
func.func @early(%qkv: tensor<2x3x24xf32>, %init: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %y = unroll.kernel_call @unroll_attention_f32(%c2, %c3, %c2, %c4) ins(%qkv : tensor<2x3x24xf32>)
      outs(%init : tensor<2x3x8xf32>) abi [0, 0, 0, 0, 1, 2] : tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}
