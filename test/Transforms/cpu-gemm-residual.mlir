// RUN: unroll-opt %s --unroll-cpu-gemm --split-input-file | FileCheck %s
//
// A linear layer followed by a residual sum, r = x + (a·wᵀ + b), as
// bufferization leaves it: the product in a fresh buffer %c that only the
// sum reads. unroll-cpu-gemm writes the product straight into r and adds x
// in the call's epilogue (flags 18 = BIAS | ADD_D, x the last argument):
// one call and no pass over three matrices.

#x = affine_map<(b, i, o, k) -> (b, i, k)>
#w = affine_map<(b, i, o, k) -> (o, k)>
#y = affine_map<(b, i, o, k) -> (b, i, o)>
#bias = affine_map<(b, i, o) -> (o)>
#id = affine_map<(b, i, o) -> (b, i, o)>

// CHECK-LABEL: func.func @residual
// CHECK-SAME:    (%[[A:.*]]: memref<?x?x8xf32>, %[[W:.*]]: memref<8x8xf32>, %[[B:.*]]: memref<8xf32>, %[[X:.*]]: memref<?x?x8xf32>)
// CHECK:         %[[R:.*]] = memref.alloc
// CHECK:         memref.extract_aligned_pointer_as_index %[[R]]
// CHECK:         %[[XP:.*]] = memref.extract_aligned_pointer_as_index %[[X]]
// CHECK-NEXT:    %[[XA:.*]] = arith.addi %[[XP]],
// CHECK:         call @unroll_gemm_ex_f32({{.*}}, %c18, %{{.*}}, %[[XA]]) :
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[R]]
func.func @residual(%a: memref<?x?x8xf32>, %w: memref<8x8xf32>, %bv: memref<8xf32>,
                    %x: memref<?x?x8xf32>) -> memref<?x?x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d0 = memref.dim %a, %c0 : memref<?x?x8xf32>
  %d1 = memref.dim %a, %c1 : memref<?x?x8xf32>
  %c = memref.alloc(%d0, %d1) : memref<?x?x8xf32>
  linalg.generic {indexing_maps = [#bias, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%bv : memref<8xf32>) outs(%c : memref<?x?x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#x, #w, #y],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %w : memref<?x?x8xf32>, memref<8x8xf32>) outs(%c : memref<?x?x8xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  %r = memref.alloc(%d0, %d1) : memref<?x?x8xf32>
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %c : memref<?x?x8xf32>, memref<?x?x8xf32>) outs(%r : memref<?x?x8xf32>) {
  ^bb0(%p: f32, %q: f32, %out: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  }
  memref.dealloc %c : memref<?x?x8xf32>
  return %r : memref<?x?x8xf32>
}

// -----

// The sum into a slice of the window's tape (strides known when it runs):
// the call when x's strides equal the slice's, else the loop nests, sum
// included, after the bias broadcast into the slice.

#x = affine_map<(b, i, o, k) -> (b, i, k)>
#w = affine_map<(b, i, o, k) -> (o, k)>
#y = affine_map<(b, i, o, k) -> (b, i, o)>
#bias = affine_map<(b, i, o) -> (o)>
#id = affine_map<(b, i, o) -> (b, i, o)>

// CHECK-LABEL: func.func @residual_into_tape
// CHECK-SAME:    %[[T:[a-z0-9]+]]: memref<?x?x8xf32, strided<[?, 8, 1], offset: ?>>)
// CHECK:         scf.if
// CHECK:           call @unroll_gemm_ex_f32({{.*}}, %c18, {{.*}}) :
// CHECK:         } else {
// CHECK:           linalg.generic {{.*}} outs(%[[T]] :
// CHECK:           linalg.generic {{.*}} outs(%[[T]] :
// CHECK:           linalg.generic {{.*}} outs(%[[T]] :
// CHECK:         }
// CHECK-NOT:     linalg.generic
func.func @residual_into_tape(%a: memref<?x?x8xf32>, %w: memref<8x8xf32>, %bv: memref<8xf32>,
                              %x: memref<?x?x8xf32>,
                              %t: memref<?x?x8xf32, strided<[?, 8, 1], offset: ?>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d0 = memref.dim %a, %c0 : memref<?x?x8xf32>
  %d1 = memref.dim %a, %c1 : memref<?x?x8xf32>
  %c = memref.alloc(%d0, %d1) : memref<?x?x8xf32>
  linalg.generic {indexing_maps = [#bias, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%bv : memref<8xf32>) outs(%c : memref<?x?x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#x, #w, #y],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %w : memref<?x?x8xf32>, memref<8x8xf32>) outs(%c : memref<?x?x8xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%c, %x : memref<?x?x8xf32>, memref<?x?x8xf32>)
      outs(%t : memref<?x?x8xf32, strided<[?, 8, 1], offset: ?>>) {
  ^bb0(%p: f32, %q: f32, %out: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  }
  memref.dealloc %c : memref<?x?x8xf32>
  return
}

// -----

// Not folded: the product is read again after the sum (the call keeps its
// bias only, flags 2, and the sum stays a loop nest), and a sum whose
// output is the product's input (r would be written while the call reads
// it).

#x = affine_map<(b, i, o, k) -> (b, i, k)>
#w = affine_map<(b, i, o, k) -> (o, k)>
#y = affine_map<(b, i, o, k) -> (b, i, o)>
#bias = affine_map<(b, i, o) -> (o)>
#id = affine_map<(b, i, o) -> (b, i, o)>

// CHECK-LABEL: func.func @product_read_later
// CHECK:         call @unroll_gemm_ex_f32({{.*}}, %c2{{(_[0-9]+)?}}, {{.*}}) :
// CHECK:         linalg.generic
// CHECK:         linalg.copy
func.func @product_read_later(%a: memref<?x?x8xf32>, %w: memref<8x8xf32>, %bv: memref<8xf32>,
                              %x: memref<?x?x8xf32>, %r: memref<?x?x8xf32>,
                              %keep: memref<?x?x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d0 = memref.dim %a, %c0 : memref<?x?x8xf32>
  %d1 = memref.dim %a, %c1 : memref<?x?x8xf32>
  %c = memref.alloc(%d0, %d1) : memref<?x?x8xf32>
  linalg.generic {indexing_maps = [#bias, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%bv : memref<8xf32>) outs(%c : memref<?x?x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#x, #w, #y],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %w : memref<?x?x8xf32>, memref<8x8xf32>) outs(%c : memref<?x?x8xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %c : memref<?x?x8xf32>, memref<?x?x8xf32>) outs(%r : memref<?x?x8xf32>) {
  ^bb0(%p: f32, %q: f32, %out: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  }
  linalg.copy ins(%c : memref<?x?x8xf32>) outs(%keep : memref<?x?x8xf32>)
  return
}

// CHECK-LABEL: func.func @sum_into_input
// CHECK:         call @unroll_gemm_ex_f32({{.*}}, %c2{{(_[0-9]+)?}}, {{.*}}) :
// CHECK:         linalg.generic
func.func @sum_into_input(%w: memref<8x8xf32>, %bv: memref<8xf32>, %x: memref<?x?x8xf32>,
                          %a: memref<?x?x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d0 = memref.dim %a, %c0 : memref<?x?x8xf32>
  %d1 = memref.dim %a, %c1 : memref<?x?x8xf32>
  %c = memref.alloc(%d0, %d1) : memref<?x?x8xf32>
  linalg.generic {indexing_maps = [#bias, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%bv : memref<8xf32>) outs(%c : memref<?x?x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#x, #w, #y],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %w : memref<?x?x8xf32>, memref<8x8xf32>) outs(%c : memref<?x?x8xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %c : memref<?x?x8xf32>, memref<?x?x8xf32>) outs(%a : memref<?x?x8xf32>) {
  ^bb0(%p: f32, %q: f32, %out: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  }
  memref.dealloc %c : memref<?x?x8xf32>
  return
}
