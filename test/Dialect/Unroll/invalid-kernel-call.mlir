// RUN: unroll-opt %s -split-input-file -verify-diagnostics

// unroll.kernel_call: its abi must account for every operand.
func.func @abi_count(%x: tensor<2x8xf32>, %init: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %c2 = arith.constant 2 : index
  // expected-error@+1 {{'unroll.kernel_call' op abi takes 1 index arguments, 0 inputs and 1 outputs, but the op has 1, 1 and 1}}
  %y = unroll.kernel_call @k(%c2) ins(%x : tensor<2x8xf32>) outs(%init : tensor<2x8xf32>) abi [0, 2] : tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @abi_entry(%init: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error@+1 {{'unroll.kernel_call' op abi entries are 0 (an index argument), 1 (an input) or 2 (an output), got 3}}
  %y = unroll.kernel_call @k() outs(%init : tensor<2x8xf32>) abi [3] : tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @mixed(%x: memref<2x8xf32>, %init: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error@+1 {{'unroll.kernel_call' op expected its inputs and outputs to be all tensors or all buffers}}
  %y = unroll.kernel_call @k() ins(%x : memref<2x8xf32>) outs(%init : tensor<2x8xf32>) abi [1, 2] : tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @scalar(%x: tensor<f32>, %init: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error@+1 {{'unroll.kernel_call' op expected operands of rank >= 1, got 'tensor<f32>'}}
  %y = unroll.kernel_call @k() ins(%x : tensor<f32>) outs(%init : tensor<2x8xf32>) abi [1, 2] : tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}
