// RUN: unroll-opt %s --unroll-gpu-gemm --split-input-file | FileCheck %s
// Contractions become calls of unroll_gpu_gemm_f32 (GpuKernels.h: 12 sizes
// and strides, accumulate, flags, bias address). A broadcast of a bias into
// a row-major C right before the contraction folds into the call: no
// broadcast left, accumulate 0, flags UNROLL_GEMM_BIAS (2), the bias's
// address last.

// CHECK-LABEL: func.func @folded
// CHECK-NOT:     linalg.generic
// CHECK:         %[[B:.*]] = arith.addi %{{.*}}, %{{.*}} : index
// CHECK-NOT:     linalg.generic
// CHECK:         call @unroll_gpu_gemm_f32({{.*}}, %c0{{(_[0-9]+)?}}, %c2, %[[B]])
func.func @folded(%x: memref<8x4xf32>, %w: memref<4x6xf32>, %b: memref<6xf32>, %y: memref<8x6xf32>) {
  %c = memref.alloc() : memref<8x6xf32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%b : memref<6xf32>) outs(%c : memref<8x6xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.matmul ins(%x, %w : memref<8x4xf32>, memref<4x6xf32>) outs(%c : memref<8x6xf32>)
  memref.copy %c, %y : memref<8x6xf32> to memref<8x6xf32>
  memref.dealloc %c : memref<8x6xf32>
  return
}

// -----

// Not folded: C is read between the broadcast and the contraction (the
// broadcast must stay), so the call accumulates onto it without a bias.
// CHECK-LABEL: func.func @read_between
// CHECK:         linalg.generic
// CHECK:         memref.copy
// CHECK:         call @unroll_gpu_gemm_f32({{.*}}, %c1{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}})
func.func @read_between(%x: memref<8x4xf32>, %w: memref<4x6xf32>, %b: memref<6xf32>, %y: memref<8x6xf32>, %z: memref<8x6xf32>) {
  %c = memref.alloc() : memref<8x6xf32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%b : memref<6xf32>) outs(%c : memref<8x6xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  memref.copy %c, %z : memref<8x6xf32> to memref<8x6xf32>
  linalg.matmul ins(%x, %w : memref<8x4xf32>, memref<4x6xf32>) outs(%c : memref<8x6xf32>)
  memref.copy %c, %y : memref<8x6xf32> to memref<8x6xf32>
  memref.dealloc %c : memref<8x6xf32>
  return
}

// -----

// Not folded: the broadcast is along the rows (b[i]), not the columns.
// CHECK-LABEL: func.func @row_bias
// CHECK:         linalg.generic
// CHECK:         call @unroll_gpu_gemm_f32({{.*}}, %c1{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}})
func.func @row_bias(%x: memref<8x4xf32>, %w: memref<4x6xf32>, %b: memref<8xf32>, %y: memref<8x6xf32>) {
  %c = memref.alloc() : memref<8x6xf32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%b : memref<8xf32>) outs(%c : memref<8x6xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.matmul ins(%x, %w : memref<8x4xf32>, memref<4x6xf32>) outs(%c : memref<8x6xf32>)
  memref.copy %c, %y : memref<8x6xf32> to memref<8x6xf32>
  memref.dealloc %c : memref<8x6xf32>
  return
}

// -----

// A zero fill right before: overwritten (accumulate 0), no bias.
// CHECK-LABEL: func.func @zero_fill
// CHECK-NOT:     linalg.fill
// CHECK:         call @unroll_gpu_gemm_f32({{.*}}, %c0{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}})
func.func @zero_fill(%x: memref<8x4xf32>, %w: memref<4x6xf32>, %y: memref<8x6xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<8x6xf32>)
  linalg.matmul ins(%x, %w : memref<8x4xf32>, memref<4x6xf32>) outs(%y : memref<8x6xf32>)
  return
}
