// RUN: unroll-opt %s --unroll-cpu-gemm --split-input-file | FileCheck %s

// The MLP's up-projection with its bias and GELU (the forward): nothing
// reads the pre-activation after the GELU, so the GELU runs in place and
// the call's C and D are one buffer (flags BIAS | GELU_AUX = 6), the
// GELU's output buffer, allocated where C's was; C's allocation is gone.
// CHECK-LABEL: func.func @gelu_in_place
// CHECK:         %[[D:.*]] = memref.alloc() : memref<8x16xf32>
// CHECK-NOT:     memref.alloc
// CHECK:         %[[PC:.*]] = memref.extract_aligned_pointer_as_index %[[D]]
// CHECK:         %[[PD:.*]] = memref.extract_aligned_pointer_as_index %[[D]]
// CHECK-NOT:     linalg.generic
// CHECK:         call @unroll_gemm_ex_f32({{.*}}, %c0{{(_[0-9]+)?}}, %c6{{(_[0-9]+)?}}, %{{.*}}, %{{.*}})
// CHECK-NOT:     linalg.generic
// CHECK:         memref.copy %[[D]]
// CHECK-NEXT:    memref.dealloc %[[D]]
// CHECK-NEXT:    return
func.func @gelu_in_place(%x: memref<8x4xf32>, %w: memref<4x16xf32>, %b: memref<16xf32>, %y: memref<8x16xf32>) {
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
  memref.dealloc %c : memref<8x16xf32>
  memref.dealloc %d : memref<8x16xf32>
  return
}

// -----

// A training step's window: the backward reads the pre-activation after
// the GELU (here a copy to the tape), so C keeps it and D is a buffer of
// its own.
// CHECK-LABEL: func.func @gelu_kept
// CHECK:         %[[C:.*]] = memref.alloc() : memref<8x16xf32>
// CHECK:         %[[PC:.*]] = memref.extract_aligned_pointer_as_index %[[C]]
// CHECK:         %[[D:.*]] = memref.alloc() : memref<8x16xf32>
// CHECK:         %[[PD:.*]] = memref.extract_aligned_pointer_as_index %[[D]]
// CHECK:         call @unroll_gemm_ex_f32({{.*}}, %c0{{(_[0-9]+)?}}, %c6{{(_[0-9]+)?}}, %{{.*}}, %{{.*}})
// CHECK-NOT:     linalg.generic
// CHECK:         memref.copy %[[D]]
// CHECK:         memref.copy %[[C]]
func.func @gelu_kept(%x: memref<8x4xf32>, %w: memref<4x16xf32>, %b: memref<16xf32>, %y: memref<8x16xf32>, %tape: memref<8x16xf32>) {
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
  memref.copy %c, %tape : memref<8x16xf32> to memref<8x16xf32>
  memref.dealloc %c : memref<8x16xf32>
  memref.dealloc %d : memref<8x16xf32>
  return
}
