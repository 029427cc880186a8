// RUN: unroll-opt %s --unroll-gpu-gemm --split-input-file | FileCheck %s
// Contractions become calls of unroll_gpu_gemm_f32 (GpuKernels.h: 12 sizes
// and strides, accumulate, flags, bias address, GELU output). A broadcast of a bias into
// a row-major C right before the contraction folds into the call: no
// broadcast left, accumulate 0, flags UNROLL_GEMM_BIAS (2), the bias's
// address last.

// CHECK-LABEL: func.func @folded
// CHECK-NOT:     linalg.generic
// CHECK:         %[[B:.*]] = arith.addi %{{.*}}, %{{.*}} : index
// CHECK-NOT:     linalg.generic
// CHECK:         call @unroll_gpu_gemm_f32({{.*}}, %c0{{(_[0-9]+)?}}, %c2, %[[B]], %c0{{(_[0-9]+)?}})
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
// CHECK:         call @unroll_gpu_gemm_f32({{.*}}, %c1{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}})
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
// CHECK:         call @unroll_gpu_gemm_f32({{.*}}, %c1{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}})
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
// CHECK:         call @unroll_gpu_gemm_f32({{.*}}, %c0{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}})
func.func @zero_fill(%x: memref<8x4xf32>, %w: memref<4x6xf32>, %y: memref<8x6xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<8x6xf32>)
  linalg.matmul ins(%x, %w : memref<8x4xf32>, memref<4x6xf32>) outs(%y : memref<8x6xf32>)
  return
}

// -----

// Folded into a slot of a bigger buffer (a recorded activation written into
// the tape): the broadcast writes C itself, n its last dim. The batch and
// token dims collapse only if the slot is dense, which is checked when the
// call runs: the call with the bias, or else the broadcast and the loop
// nest.
// CHECK-LABEL: func.func @tape_slot
// CHECK:         %[[SLOT:.*]] = memref.subview
// CHECK-NOT:     linalg.generic
// CHECK:         scf.if
// CHECK:           call @unroll_gpu_gemm_f32({{.*}}, %c0{{(_[0-9]+)?}}, %c2{{(_[0-9]+)?}}, %{{.*}})
// CHECK:         } else {
// CHECK:           linalg.generic {{.*}} ins(%{{.*}} : memref<6xf32>) outs(%[[SLOT]]
// CHECK:           linalg.generic {{.*}} outs(%[[SLOT]]
// CHECK:         }
func.func @tape_slot(%x: memref<2x3x4xf32>, %w: memref<4x6xf32>, %b: memref<6xf32>, %tape: memref<5x2x3x6xf32>, %t: index) {
  %slot = memref.subview %tape[%t, 0, 0, 0] [1, 2, 3, 6] [1, 1, 1, 1] : memref<5x2x3x6xf32> to memref<2x3x6xf32, strided<[18, 6, 1], offset: ?>>
  linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (k)>, affine_map<(i, j, k) -> (i, j, k)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%b : memref<6xf32>) outs(%slot : memref<2x3x6xf32, strided<[18, 6, 1], offset: ?>>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j, n, k) -> (i, j, k)>, affine_map<(i, j, n, k) -> (k, n)>, affine_map<(i, j, n, k) -> (i, j, n)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x, %w : memref<2x3x4xf32>, memref<4x6xf32>) outs(%slot : memref<2x3x6xf32, strided<[18, 6, 1], offset: ?>>) {
  ^bb0(%a: f32, %bb: f32, %acc: f32):
    %m = arith.mulf %a, %bb : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// With gelu-epilogue: the GELU (marked unroll.gelu) of C right after the
// product moves into the call: flags BIAS | GELU_AUX (6), the GELU's output
// last; its allocation moves before the call; C keeps the pre-activation.
// RUN: unroll-opt %s --unroll-gpu-gemm=gelu-epilogue=1 --split-input-file | FileCheck %s --check-prefix=GELU
// GELU-LABEL: func.func @gelu_epilogue
// GELU:         %[[C:.*]] = memref.alloc() : memref<8x16xf32>
// GELU:         %[[D:.*]] = memref.alloc() : memref<8x16xf32>
// GELU-NOT:     linalg.generic
// GELU:         memref.extract_aligned_pointer_as_index %[[D]]
// GELU:         call @unroll_gpu_gemm_f32({{.*}}, %c0{{(_[0-9]+)?}}, %c6{{(_[0-9]+)?}}, %{{.*}}, %{{.*}})
// GELU-NOT:     linalg.generic
// GELU:         memref.copy %[[D]]
// GELU:         memref.copy %[[C]]
// Without the option the GELU stays a loop nest:
// CHECK-LABEL: func.func @gelu_epilogue
// CHECK:         call @unroll_gpu_gemm_f32({{.*}}, %c0{{(_[0-9]+)?}}, %c2{{(_[0-9]+)?}}, %{{.*}}, %c0{{(_[0-9]+)?}})
// CHECK:         linalg.generic {{.*}}unroll.gelu
func.func @gelu_epilogue(%x: memref<8x4xf32>, %w: memref<4x16xf32>, %b: memref<16xf32>, %y: memref<8x16xf32>) {
  %c = memref.alloc() : memref<8x16xf32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%b : memref<16xf32>) outs(%c : memref<8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.matmul ins(%x, %w : memref<8x4xf32>, memref<4x16xf32>) outs(%c : memref<8x16xf32>)
  %d = memref.alloc() : memref<8x16xf32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%c : memref<8x16xf32>) outs(%d : memref<8x16xf32>) attrs = {unroll.gelu} {
  ^bb0(%in: f32, %out: f32):
    %t = math.tanh %in : f32
    linalg.yield %t : f32
  }
  memref.copy %d, %y : memref<8x16xf32> to memref<8x16xf32>
  memref.copy %c, %y : memref<8x16xf32> to memref<8x16xf32>
  memref.dealloc %d : memref<8x16xf32>
  memref.dealloc %c : memref<8x16xf32>
  return
}

// -----

// Not folded: C's row stride (6) is not a multiple of 8, which cuBLASLt
// requires of the aux matrix.
// GELU-LABEL: func.func @gelu_row_stride
// GELU:         call @unroll_gpu_gemm_f32({{.*}}, %c2{{(_[0-9]+)?}}, %{{.*}}, %c0{{(_[0-9]+)?}})
// GELU:         linalg.generic {{.*}}unroll.gelu
func.func @gelu_row_stride(%x: memref<8x4xf32>, %w: memref<4x6xf32>, %b: memref<6xf32>, %y: memref<8x6xf32>) {
  %c = memref.alloc() : memref<8x6xf32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%b : memref<6xf32>) outs(%c : memref<8x6xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.matmul ins(%x, %w : memref<8x4xf32>, memref<4x6xf32>) outs(%c : memref<8x6xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%c : memref<8x6xf32>) outs(%y : memref<8x6xf32>) attrs = {unroll.gelu} {
  ^bb0(%in: f32, %out: f32):
    %t = math.tanh %in : f32
    linalg.yield %t : f32
  }
  memref.dealloc %c : memref<8x6xf32>
  return
}

// -----

// The GELU gradient dx = dy·GELU'(x) of a fresh, zero-filled dy = A·B used
// nowhere else: the call writes dx itself with flags DGELU (8), x in the
// GELU argument; past an unrelated product in between. x is a strided
// slice, so its strides are compared with dx's when the call runs (the
// fallback: the fill, the product, the gradient).
// GELU-LABEL: func.func @gelu_gradient
// GELU:         %[[DX:.*]] = memref.alloc() : memref<8x16xf32>
// GELU:         scf.if
// GELU:           call @unroll_gpu_gemm_f32({{.*}}, %c0{{(_[0-9]+)?}}, %c8{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}}, %{{.*}})
// GELU:         } else {
// GELU:           linalg.fill
// GELU:           linalg.generic
// GELU:           linalg.generic {{.*}}unroll.gelu_vjp
// GELU:         }
func.func @gelu_gradient(%dy: memref<8x4xf32>, %w: memref<16x4xf32>, %tape: memref<2x8x16xf32>, %t: index, %o: memref<4x4xf32>, %out: memref<8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %x = memref.subview %tape[%t, 0, 0] [1, 8, 16] [1, 1, 1] : memref<2x8x16xf32> to memref<8x16xf32, strided<[16, 1], offset: ?>>
  %c = memref.alloc() : memref<8x16xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x16xf32>)
  linalg.matmul_transpose_b ins(%dy, %w : memref<8x4xf32>, memref<16x4xf32>) outs(%c : memref<8x16xf32>)
  linalg.matmul ins(%o, %o : memref<4x4xf32>, memref<4x4xf32>) outs(%o : memref<4x4xf32>)
  %dx = memref.alloc() : memref<8x16xf32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%x, %c : memref<8x16xf32, strided<[16, 1], offset: ?>>, memref<8x16xf32>) outs(%dx : memref<8x16xf32>) attrs = {unroll.gelu_vjp} {
  ^bb0(%xi: f32, %g: f32, %r: f32):
    %m = arith.mulf %xi, %g : f32
    linalg.yield %m : f32
  }
  memref.copy %dx, %out : memref<8x16xf32> to memref<8x16xf32>
  memref.dealloc %dx : memref<8x16xf32>
  memref.dealloc %c : memref<8x16xf32>
  return
}
