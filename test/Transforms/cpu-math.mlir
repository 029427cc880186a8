// RUN: unroll-opt %s --unroll-cpu-math | FileCheck %s

// f32 transcendentals become polynomials of arith ops (which LLVM's loop
// vectorizer can vectorize); f64 ones stay libm calls.
// CHECK-LABEL: func.func @f32_math(
// CHECK-NOT: math.exp
// CHECK-NOT: math.tanh
// CHECK: math.fma
// CHECK: arith.bitcast %{{.*}} : i32 to f32
// CHECK: return
func.func @f32_math(%x: f32) -> (f32, f32) {
  %e = math.exp %x : f32
  %t = math.tanh %x : f32
  return %e, %t : f32, f32
}

// CHECK-LABEL: func.func @f64_math(
// CHECK: math.exp %{{.*}} : f64
// CHECK: math.tanh %{{.*}} : f64
func.func @f64_math(%x: f64) -> (f64, f64) {
  %e = math.exp %x : f64
  %t = math.tanh %x : f64
  return %e, %t : f64, f64
}
