// RUN: unroll-opt %s --unroll-cpu-gemm | FileCheck %s
//
// unroll-cpu-gemm collapses the (b, i) rows of a token batch into one GEMM
// dimension. With the identity layout that is known to be dense; a slice of
// the window's tape (strides [?, F, 1], offset ?) is checked when it runs,
// and the loop nest stays behind as the fallback, after the zero fill the
// call would have replaced.

#x = affine_map<(b, i, o, k) -> (b, i, k)>
#w = affine_map<(b, i, o, k) -> (o, k)>
#y = affine_map<(b, i, o, k) -> (b, i, o)>

// CHECK-LABEL: func.func @strided_rows
// CHECK-SAME:    (%[[X:.*]]: memref<?x?x8xf32, strided<[?, 8, 1], offset: ?>>, %[[W:.*]]: memref<4x8xf32>, %[[Y:.*]]: memref<?x?x4xf32>)
// CHECK:         %[[BASE:.*]], %[[OFF:.*]], %[[SIZES:.*]]:3, %[[STRIDES:.*]]:3 = memref.extract_strided_metadata %[[X]]
// CHECK:         %[[ROW:.*]] = arith.muli %[[STRIDES]]#1, %[[SIZES]]#1 : index
// CHECK:         %[[DENSE:.*]] = arith.cmpi eq, %[[STRIDES]]#0, %[[ROW]] : index
// CHECK:         scf.if %[[DENSE]] {
// CHECK:           func.call @unroll_gemm_ex_f32(
// CHECK:         } else {
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      linalg.fill ins(%[[ZERO]] : f32) outs(%[[Y]] : memref<?x?x4xf32>)
// CHECK-NEXT:      linalg.generic
// CHECK-SAME:        ins(%[[X]], %[[W]] :
// CHECK-SAME:        outs(%[[Y]] :
// CHECK:         }
// CHECK-NOT:     linalg.fill
func.func @strided_rows(%x: memref<?x?x8xf32, strided<[?, 8, 1], offset: ?>>,
                        %w: memref<4x8xf32>, %y: memref<?x?x4xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<?x?x4xf32>)
  linalg.generic {indexing_maps = [#x, #w, #y],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x?x8xf32, strided<[?, 8, 1], offset: ?>>, memref<4x8xf32>)
      outs(%y : memref<?x?x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// The identity layout needs no check, and the zero fill right before
// becomes the call's overwrite flag (0, before the epilogue's flags, bias
// and GELU output: 0, none, none).
// CHECK-LABEL: func.func @dense_rows
// CHECK-NOT:     linalg.fill
// CHECK-NOT:     scf.if
// CHECK:         call @unroll_gemm_ex_f32({{.*}}, %c0{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}}) :
// CHECK-NOT:     linalg.generic
func.func @dense_rows(%x: memref<?x?x8xf32>, %w: memref<4x8xf32>, %y: memref<?x?x4xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<?x?x4xf32>)
  linalg.generic {indexing_maps = [#x, #w, #y],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x?x8xf32>, memref<4x8xf32>)
      outs(%y : memref<?x?x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}
