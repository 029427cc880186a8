// RUN: unroll-opt %s --unroll-outline-ops="min-ops=2" | FileCheck %s
// RUN: unroll-opt %s --unroll-outline-ops="min-ops=3" | FileCheck %s --check-prefix=BELOW
//
// Each linalg op of a function with at least min-ops of them moves into a
// private noinline function: operands and captured values become arguments,
// constants are cloned.

// CHECK-LABEL: func.func @f
// CHECK-SAME:  (%[[A:.*]]: memref<4xf32>, %[[B:.*]]: memref<4xf32>, %[[S:.*]]: f32)
// CHECK:       call @f__op0(%[[A]]) : (memref<4xf32>) -> ()
// CHECK-NEXT:  call @f__op1(%[[A]], %[[B]], %[[S]]) : (memref<4xf32>, memref<4xf32>, f32) -> ()
// CHECK-NEXT:  return
// CHECK:       func.func private @f__op0(%{{.*}}: memref<4xf32>) attributes {passthrough = ["noinline"]}
// CHECK-NEXT:    arith.constant 1.0
// CHECK-NEXT:    linalg.fill
// CHECK:       func.func private @f__op1(%{{.*}}: memref<4xf32>, %{{.*}}: memref<4xf32>, %[[S2:.*]]: f32) attributes {passthrough = ["noinline"]}
// CHECK:         linalg.generic
// CHECK:           arith.mulf %{{.*}}, %[[S2]]
// BELOW-NOT:   call
func.func @f(%a: memref<4xf32>, %b: memref<4xf32>, %s: f32) {
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%one : f32) outs(%a : memref<4xf32>)
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%a : memref<4xf32>) outs(%b : memref<4xf32>) {
  ^bb0(%x: f32, %y: f32):
    %m = arith.mulf %x, %s : f32
    linalg.yield %m : f32
  }
  return
}
