// RUN: unroll-opt %s --unroll-cpu-gemm --split-input-file | FileCheck %s
//
// A weight gradient dW += dyᵀ·x followed by its bias gradient db += Σ_{b,i}
// dy[b, i, .], both slices of the flat gradient vector (as the training
// entry point lays them out): one call that sums dy's rows while it packs
// dy (flags 32 = ROWSUM_A, db's address the last argument), and no loop
// nest. The view of db made after the product moves up to the call.

#dy = affine_map<(b, i, o, k) -> (b, i, o)>
#x = affine_map<(b, i, o, k) -> (b, i, k)>
#dw = affine_map<(b, i, o, k) -> (o, k)>
#id = affine_map<(b, i, o) -> (b, i, o)>
#col = affine_map<(b, i, o) -> (o)>

// CHECK-LABEL: func.func @bias_gradient
// CHECK-SAME:    (%[[DY:.*]]: memref<?x?x8xf32>, %[[X:.*]]: memref<?x?x16xf32>, %[[G:.*]]: memref<136xf32>)
// CHECK:         %[[DB:.*]] = memref.subview %[[G]][128] [8] [1]
// CHECK:         %[[DBP:.*]] = memref.extract_aligned_pointer_as_index %[[DB]]
// CHECK-NEXT:    %[[DBA:.*]] = arith.addi %[[DBP]],
// CHECK:         call @unroll_gemm_ex_f32({{.*}}, %c32, %{{.*}}, %[[DBA]]) :
// CHECK-NOT:     linalg.generic
func.func @bias_gradient(%dy: memref<?x?x8xf32>, %x: memref<?x?x16xf32>, %g: memref<136xf32>) {
  %wv = memref.subview %g[0] [128] [1] : memref<136xf32> to memref<128xf32, strided<[1]>>
  %w = memref.expand_shape %wv [[0, 1]] output_shape [8, 16]
      : memref<128xf32, strided<[1]>> into memref<8x16xf32>
  linalg.generic {indexing_maps = [#dy, #x, #dw],
                  iterator_types = ["reduction", "reduction", "parallel", "parallel"]}
      ins(%dy, %x : memref<?x?x8xf32>, memref<?x?x16xf32>)
      outs(%w : memref<8x16xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  %db = memref.subview %g[128] [8] [1] : memref<136xf32> to memref<8xf32, strided<[1], offset: 128>>
  linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "reduction", "parallel"]}
      ins(%dy : memref<?x?x8xf32>) outs(%db : memref<8xf32, strided<[1], offset: 128>>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Not folded: a sum into a slice that overlaps the weight gradient's (the
// call would add to what it writes), and a sum over the other operand.

#dy = affine_map<(b, i, o, k) -> (b, i, o)>
#x = affine_map<(b, i, o, k) -> (b, i, k)>
#dw = affine_map<(b, i, o, k) -> (o, k)>
#id = affine_map<(b, i, o) -> (b, i, o)>
#col = affine_map<(b, i, o) -> (o)>

// CHECK-LABEL: func.func @overlapping
// CHECK:         call @unroll_gemm_ex_f32({{.*}}, %c0{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}}) :
// CHECK:         linalg.generic
func.func @overlapping(%dy: memref<?x?x8xf32>, %x: memref<?x?x16xf32>, %g: memref<136xf32>) {
  %wv = memref.subview %g[0] [128] [1] : memref<136xf32> to memref<128xf32, strided<[1]>>
  %w = memref.expand_shape %wv [[0, 1]] output_shape [8, 16]
      : memref<128xf32, strided<[1]>> into memref<8x16xf32>
  linalg.generic {indexing_maps = [#dy, #x, #dw],
                  iterator_types = ["reduction", "reduction", "parallel", "parallel"]}
      ins(%dy, %x : memref<?x?x8xf32>, memref<?x?x16xf32>)
      outs(%w : memref<8x16xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  %db = memref.subview %g[124] [8] [1] : memref<136xf32> to memref<8xf32, strided<[1], offset: 124>>
  linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "reduction", "parallel"]}
      ins(%dy : memref<?x?x8xf32>) outs(%db : memref<8xf32, strided<[1], offset: 124>>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  return
}

#colx = affine_map<(b, i, k) -> (k)>

// CHECK-LABEL: func.func @other_operand
// CHECK:         call @unroll_gemm_ex_f32({{.*}}, %c0{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}}) :
// CHECK:         linalg.generic
func.func @other_operand(%dy: memref<?x?x8xf32>, %x: memref<?x?x16xf32>, %w: memref<8x16xf32>,
                         %s: memref<16xf32>) {
  linalg.generic {indexing_maps = [#dy, #x, #dw],
                  iterator_types = ["reduction", "reduction", "parallel", "parallel"]}
      ins(%dy, %x : memref<?x?x8xf32>, memref<?x?x16xf32>) outs(%w : memref<8x16xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %t = arith.addf %acc, %m : f32
    linalg.yield %t : f32
  }
  linalg.generic {indexing_maps = [#id, #colx], iterator_types = ["reduction", "reduction", "parallel"]}
      ins(%x : memref<?x?x16xf32>) outs(%s : memref<16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.addf %out, %in : f32
    linalg.yield %t : f32
  }
  return
}
